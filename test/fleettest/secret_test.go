package fleettest

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/fleet"
	"github.com/informerkit/informerkit/test/controlplane"
)

func putSecret(t *testing.T, ctx context.Context, ns, name string, labels map[string]string, kubeconfig []byte) {
	t.Helper()
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Data:       map[string][]byte{fleet.DefaultSecretKey: kubeconfig},
	}
	secrets := cp.Kube().CoreV1().Secrets(ns)
	old, err := secrets.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if _, err := secrets.Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return
	}
	s.ResourceVersion = old.ResourceVersion
	if _, err := secrets.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Clusters from kubeconfig Secrets in a hub: a forbidden cluster does not
// hold the others; rotating its Secret to working credentials rebuilds its
// clients and its objects arrive; rotating to equivalent credentials costs
// the handlers nothing (no event for unchanged objects); deleting the
// Secret makes the cluster leave with a delete per object.
func TestSecretSourceRotatesCredentials(t *testing.T) {
	snap := controlplane.Parallel(t)
	ctx := ctxT(t, 5*time.Minute)
	ps := planes()
	group := unique("g") + ".fleet.example.com"
	ns := unique("ns")
	secretsNS := unique("hub")
	gvr, crd := widgetCRD(group)
	install(t, ctx, crd, ps["b"], ps["c"])
	namespace(t, ctx, ns, ps["b"], ps["c"])
	namespace(t, ctx, secretsNS, cp)
	create(t, ctx, ps["b"], gvr, ns, nil, "b1", "b2")
	create(t, ctx, ps["c"], gvr, ns, nil, "c1")

	sel := map[string]string{"fleet.example.com/member": "yes"}
	user := unique("nobody")
	putSecret(t, ctx, secretsNS, "b", sel, kubeconfigOf(t, ps["b"].UserConfig(user)))
	putSecret(t, ctx, secretsNS, "c", sel, kubeconfigOf(t, ps["c"].Config()))
	putSecret(t, ctx, secretsNS, "not-selected", nil, kubeconfigOf(t, ps["c"].Config()))
	putSecret(t, ctx, secretsNS, "broken", sel, []byte("not a kubeconfig: ["))

	f := newFleet(t, &fleet.SecretSource{Hub: cp.Config(), Namespace: secretsNS, LabelSelector: "fleet.example.com/member=yes"})
	r := f.ForResource(gvr)
	rec := newRecorder()
	if _, err := r.AddEventHandler(rec); err != nil {
		t.Fatal(err)
	}
	st, err := r.WaitForSync(ctx, fleet.ReachableClusters)
	if err != nil {
		t.Fatalf("wait for the reachable clusters: %v (%s)", err, describe(r))
	}
	if got := len(st.Clusters); got != 3 {
		t.Fatalf("clusters: %s; want broken, b, c", describe(r))
	}
	if c, _ := st.Cluster("b"); c.State != dynamicinformer.Failed || !errors.Is(c.Err, dynamicinformer.ErrForbidden) {
		t.Errorf("b with a user without rights: %s %v, want Failed with ErrForbidden", c.State, c.Err)
	}
	if c, _ := st.Cluster("broken"); !errors.Is(c.Err, fleet.ErrClusterConfig) {
		t.Errorf("broken: %s %v, want ErrClusterConfig", c.State, c.Err)
	}
	if c, _ := st.Cluster("c"); !c.HasSynced {
		t.Errorf("c not synced beside a forbidden cluster: %s", describe(r))
	}
	rec.holds(t, "c", keys(ns, "c1")...)

	// Working credentials for b: its clients are rebuilt, its objects arrive.
	putSecret(t, ctx, secretsNS, "b", sel, kubeconfigOf(t, ps["b"].Config()))
	rec.holds(t, "b", keys(ns, "b1", "b2")...)
	waitFor(t, 60*time.Second, "b synced in its second generation", func() (bool, string) {
		for _, c := range f.Status().Clusters {
			if c.Name == "b" {
				cs := clusterStatus(r, "b")
				return c.Generation == 2 && cs.HasSynced && !cs.Rebuilding, describe(r)
			}
		}
		return false, describe(r)
	})

	// Equivalent credentials through another address: a third generation,
	// and nothing for the handlers (the objects did not change), except
	// what changed while it was rebuilt.
	pb := ps["b"].NewProxy(t)
	adds, updates, deletes := rec.counts("b")
	putSecret(t, ctx, secretsNS, "b", sel, kubeconfigOf(t, pb.Config()))
	waitFor(t, 60*time.Second, "b synced in its third generation", func() (bool, string) {
		for _, c := range f.Status().Clusters {
			if c.Name == "b" {
				cs := clusterStatus(r, "b")
				return c.Generation == 3 && cs.HasSynced && !cs.Rebuilding && cs.State == dynamicinformer.Synced, describe(r)
			}
		}
		return false, describe(r)
	})
	create(t, ctx, ps["b"], gvr, ns, nil, "b3")
	rec.holds(t, "b", keys(ns, "b1", "b2", "b3")...)
	if a2, u2, d2 := rec.counts("b"); a2 != adds+1 || u2 != updates || d2 != deletes {
		t.Errorf("b after an equivalent rotation and one create: %d adds, %d updates, %d deletes; want %d, %d, %d",
			a2, u2, d2, adds+1, updates, deletes)
	}
	if pb.Accepted() == 0 {
		t.Error("b's third generation did not connect through the new address")
	}

	// Credentials that are refused: b keeps its objects readable (from
	// the last complete cache) and says why; what changes meanwhile comes
	// as the difference once working credentials are back.
	putSecret(t, ctx, secretsNS, "b", sel, kubeconfigOf(t, ps["b"].UserConfig(user)))
	waitFor(t, 60*time.Second, "b forbidden in its fourth generation, rebuilding over its last cache", func() (bool, string) {
		cs := clusterStatus(r, "b")
		return cs.Rebuilding && cs.HasSynced && errors.Is(cs.Err, dynamicinformer.ErrForbidden), describe(r)
	})
	if items, _ := r.Lister().Namespace(ns).List(nil); len(itemKeys(items)) != 4 {
		t.Errorf("reads while b is forbidden: %v, want b1, b2, b3 of b and c1 of c", itemKeys(items))
	}
	adds, updates, deletes = rec.counts("b")
	dyn := ps["b"].Dynamic().Resource(gvr).Namespace(ns)
	b1, err := dyn.Get(ctx, "b1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b1.SetLabels(map[string]string{"changed": "yes"})
	if _, err := dyn.Update(ctx, b1, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := dyn.Delete(ctx, "b2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	create(t, ctx, ps["b"], gvr, ns, nil, "b4")
	putSecret(t, ctx, secretsNS, "b", sel, kubeconfigOf(t, ps["b"].Config()))
	rec.holds(t, "b", keys(ns, "b1", "b3", "b4")...)
	if a2, u2, d2 := rec.counts("b"); a2 != adds+1 || u2 != updates+1 || d2 != deletes+1 {
		t.Errorf("b after its rebuild over changes: %d adds, %d updates, %d deletes; want %d, %d, %d (b4 added, b1 updated, b2 deleted)",
			a2, u2, d2, adds+1, updates+1, deletes+1)
	}
	waitFor(t, 60*time.Second, "b synced in its fifth generation", func() (bool, string) {
		cs := clusterStatus(r, "b")
		return cs.HasSynced && !cs.Rebuilding && cs.State == dynamicinformer.Synced, describe(r)
	})

	// The Secret goes: b leaves.
	if err := cp.Kube().CoreV1().Secrets(secretsNS).Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	rec.holds(t, "b")
	rec.holds(t, "c", keys(ns, "c1")...)
	if overlap, bad := rec.violations(); overlap != 0 || len(bad) != 0 {
		t.Errorf("handler contract: %d overlapping calls for one cluster, violations %v", overlap, bad)
	}
	f.Shutdown()
	snap.VerifyNoLeaks(t)
}
