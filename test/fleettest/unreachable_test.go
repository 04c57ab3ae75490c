package fleettest

import (
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/fleet"
	"github.com/informerkit/informerkit/test/controlplane"
)

// A cluster black-holed from the start never holds the other: the other
// syncs and delivers, the wait for the reachable clusters returns once the
// black-holed one is known to be out of reach, and when its network comes
// back its objects arrive as adds.
func TestClusterBlackHoledFromTheStart(t *testing.T) {
	snap := controlplane.Parallel(t)
	ctx := ctxT(t, 5*time.Minute)
	ps := planes()
	ns := unique("ns")
	namespace(t, ctx, ns, ps["a"], ps["b"])
	for name, c := range map[string]*controlplane.ControlPlane{"a": ps["a"], "b": ps["b"]} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name + "1", Namespace: ns}}
		if _, err := c.Kube().CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pa := ps["a"].NewProxy(t)
	pa.SetStalled(true)
	t.Cleanup(func() { pa.SetStalled(false) })

	f := newFleet(t, fleet.NewStaticSource(map[string]*rest.Config{"a": pa.Config(), "b": ps["b"].Config()}))
	r := f.ForResource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, dynamicinformer.WithNamespaces(ns))
	rec := newRecorder()
	if _, err := r.AddEventHandler(rec); err != nil {
		t.Fatal(err)
	}
	rec.holds(t, "b", keys(ns, "b1")...)
	start := time.Now()
	st, err := r.WaitForSync(ctx, fleet.ReachableClusters)
	if err != nil {
		t.Fatalf("wait for the reachable clusters: %v (%s)", err, describe(r))
	}
	t.Logf("reachable clusters: wait returned in %v: %s", time.Since(start), describe(r))
	if b, _ := st.Cluster("b"); !b.HasSynced {
		t.Errorf("b not synced: %s", describe(r))
	}
	if a, _ := st.Cluster("a"); a.HasSynced || !errors.Is(a.ContactErr, dynamicinformer.ErrNoContact) {
		t.Errorf("a: synced=%v contact=%v, want a ContactErr", a.HasSynced, a.ContactErr)
	}
	if items, _ := r.Lister().List(nil); len(items) != 1 || items[0].Cluster != "b" {
		t.Errorf("List with a out of reach: %v", itemKeys(items))
	}

	pa.SetStalled(false)
	rec.holds(t, "a", keys(ns, "a1")...)
	if _, err := r.WaitForSync(ctx, fleet.AllClusters); err != nil {
		t.Fatalf("fleet-wide sync once a is reachable: %v (%s)", err, describe(r))
	}
	if overlap, bad := rec.violations(); overlap != 0 || len(bad) != 0 {
		t.Errorf("handler contract: %d overlapping calls for one cluster, violations %v", overlap, bad)
	}
	f.Shutdown()
	snap.VerifyNoLeaks(t)
}
