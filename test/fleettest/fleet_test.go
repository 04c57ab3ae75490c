package fleettest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/informerkit/informerkit/discoveryresolver"
	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/fleet"
	"github.com/informerkit/informerkit/test/controlplane"
)

// writeKubeconfig writes a kubeconfig with one context per config.
func writeKubeconfig(t *testing.T, cfgs map[string]*rest.Config) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	for name, cfg := range cfgs {
		kc.Clusters[name] = &clientcmdapi.Cluster{Server: cfg.Host, InsecureSkipTLSVerify: true}
		kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
		kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// A CRD served in two of three clusters: Synced in those, Pending (not
// served, or not found for a name) in the third, which starts when the CRD
// arrives there. Clusters come from a kubeconfig's named contexts. One
// handler gets every cluster's events; one lister reads across them.
func TestCRDServedInSomeClusters(t *testing.T) {
	snap := controlplane.Parallel(t)
	ctx := ctxT(t, 5*time.Minute)
	ps := planes()
	group := unique("g") + ".fleet.example.com"
	ns := unique("ns")
	gvr, crd := widgetCRD(group)
	install(t, ctx, crd, ps["a"], ps["b"])
	namespace(t, ctx, ns, ps["a"], ps["b"], ps["c"])
	create(t, ctx, ps["a"], gvr, ns, map[string]string{"tier": "web"}, "a1", "a2")
	create(t, ctx, ps["b"], gvr, ns, map[string]string{"tier": "db"}, "b1")

	// The file has a fourth context the source is not asked for.
	path := writeKubeconfig(t, map[string]*rest.Config{"a": ps["a"].Config(), "b": ps["b"].Config(), "c": ps["c"].Config(), "d": ps["a"].Config()})
	f := fleet.New(&fleet.KubeconfigSource{Path: path, Contexts: []string{"a", "b", "c"}}, fleet.Options{})
	f.Start(ctx)
	byGVR := f.ForResource(gvr)
	byName := f.ForName("widgets." + group)
	rec := newRecorder()
	if _, err := byGVR.AddEventHandler(rec); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	st, err := byGVR.WaitForSync(ctx, fleet.ReachableClusters)
	if err != nil {
		t.Fatalf("wait for the reachable clusters: %v (%s)", err, describe(byGVR))
	}
	t.Logf("reachable clusters synced in %v: %s", time.Since(start), describe(byGVR))
	if len(st.Clusters) != 3 {
		t.Fatalf("clusters %v, want a, b, c (not d)", st.Clusters)
	}
	for _, name := range []string{"a", "b"} {
		if c, _ := st.Cluster(name); !c.HasSynced || c.State != dynamicinformer.Synced {
			t.Errorf("cluster %s: %s synced=%v, want Synced", name, c.State, c.HasSynced)
		}
	}
	if c, _ := st.Cluster("c"); c.State != dynamicinformer.Pending || !errors.Is(c.Err, dynamicinformer.ErrNotServed) || c.HasSynced {
		t.Errorf("cluster c: %s err=%v synced=%v, want Pending with ErrNotServed", c.State, c.Err, c.HasSynced)
	}
	if st.Synced() {
		t.Error("the fleet is Synced while c does not serve the resource")
	}
	nst, err := byName.WaitForSync(ctx, fleet.ReachableClusters)
	if err != nil {
		t.Fatalf("wait for the name in reachable clusters: %v (%s)", err, describe(byName))
	}
	if c, _ := nst.Cluster("c"); c.State != dynamicinformer.Pending || !errors.Is(c.Err, discoveryresolver.ErrNotFound) {
		t.Errorf("name in cluster c: %s err=%v, want Pending with discoveryresolver.ErrNotFound", c.State, c.Err)
	}
	rec.holds(t, "a", keys(ns, "a1", "a2")...)
	rec.holds(t, "b", keys(ns, "b1")...)

	// Reads across clusters.
	l := byGVR.Lister()
	all, err := l.List(nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := itemKeys(all), []string{"a:" + ns + "/a1", "a:" + ns + "/a2", "b:" + ns + "/b1"}; !equal(got, want) {
		t.Errorf("List: %v, want %v", got, want)
	}
	web, _ := l.List(labels.SelectorFromSet(labels.Set{"tier": "web"}))
	if got, want := itemKeys(web), []string{"a:" + ns + "/a1", "a:" + ns + "/a2"}; !equal(got, want) {
		t.Errorf("List tier=web: %v, want %v", got, want)
	}
	db, _ := l.Namespace(ns).List(labels.SelectorFromSet(labels.Set{"tier": "db"}))
	if got, want := itemKeys(db), []string{"b:" + ns + "/b1"}; !equal(got, want) {
		t.Errorf("Namespace(%s).List tier=db: %v, want %v", ns, got, want)
	}
	if other, _ := l.Namespace("elsewhere").List(nil); len(other) != 0 {
		t.Errorf("Namespace(elsewhere).List: %v, want nothing", itemKeys(other))
	}
	gb, err := l.Cluster("b")
	if err != nil {
		t.Fatal(err)
	}
	if o, err := gb.Namespace(ns).Get("b1"); err != nil || o.GetName() != "b1" {
		t.Errorf("Cluster(b).Get(b1): %v, %v", o, err)
	}
	if _, err := l.Get("a", ns, "b1"); !apierrors.IsNotFound(err) {
		t.Errorf("Get(a, b1): %v, want NotFound", err)
	}
	if _, err := l.Get("c", ns, "c1"); !apierrors.IsNotFound(err) {
		t.Errorf("Get(c, c1) before the CRD: %v, want NotFound", err)
	}
	if _, err := l.Get("d", ns, "a1"); !errors.Is(err, fleet.ErrUnknownCluster) {
		t.Errorf("Get(d, a1): %v, want ErrUnknownCluster", err)
	}

	// A handler added late is given what every cluster holds; once
	// removed it is given nothing more.
	late := newRecorder()
	lateReg, err := byGVR.AddEventHandler(late)
	if err != nil {
		t.Fatal(err)
	}
	late.holds(t, "a", keys(ns, "a1", "a2")...)
	late.holds(t, "b", keys(ns, "b1")...)
	if lateReg.HasSynced() {
		t.Errorf("registration synced while c does not serve the resource: %s", describe(byGVR))
	}
	lateReg.Remove()

	// The CRD arrives in c: both informers start there.
	install(t, ctx, crd, ps["c"])
	create(t, ctx, ps["c"], gvr, ns, nil, "c1")
	rec.holds(t, "c", keys(ns, "c1")...)
	if _, err := byGVR.WaitForSync(ctx, fleet.AllClusters); err != nil {
		t.Fatalf("fleet-wide sync once the CRD is in c: %v", err)
	}
	if _, err := byName.WaitForSync(ctx, fleet.AllClusters); err != nil {
		t.Fatalf("fleet-wide sync of the name once the CRD is in c: %v (%s)", err, describe(byName))
	}
	waitFor(t, 30*time.Second, "the name's lister to read c1 of c", func() (bool, string) {
		items, _ := byName.Lister().List(nil)
		return len(items) == 4, describe(byName)
	})
	if got := late.names("c"); len(got) != 0 {
		t.Errorf("a removed handler was given c's objects: %v", got)
	}
	if !f.Status().Synced() {
		t.Errorf("fleet status not Synced: %s", describe(byGVR))
	}
	if overlap, bad := rec.violations(); overlap != 0 || len(bad) != 0 {
		t.Errorf("handler contract: %d overlapping calls for one cluster, violations %v", overlap, bad)
	}
	f.Shutdown()
	snap.VerifyNoLeaks(t)
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A black-holed cluster (its proxy forwards nothing) and then a refused
// one delay nothing of the other: its events keep coming, the black-holed
// cluster's objects stay readable and its status says why, and a new
// resource syncs in the reachable cluster.
func TestBlackHoledClusterDoesNotDelayOthers(t *testing.T) {
	snap := controlplane.Parallel(t)
	ctx := ctxT(t, 5*time.Minute)
	ps := planes()
	group := unique("g") + ".fleet.example.com"
	ns := unique("ns")
	gvr, crd := widgetCRD(group)
	gvr2, crd2 := widgetCRD("two." + group)
	install(t, ctx, crd, ps["a"], ps["b"])
	install(t, ctx, crd2, ps["a"], ps["b"])
	namespace(t, ctx, ns, ps["a"], ps["b"])
	create(t, ctx, ps["a"], gvr, ns, nil, "a1")
	create(t, ctx, ps["b"], gvr, ns, nil, "b1")
	create(t, ctx, ps["b"], gvr2, ns, nil, "second")

	pa, pb := ps["a"].NewProxy(t), ps["b"].NewProxy(t)
	f := newFleet(t, fleet.NewStaticSource(map[string]*rest.Config{"a": pa.Config(), "b": pb.Config()}))
	r := f.ForResource(gvr)
	rec := newRecorder()
	if _, err := r.AddEventHandler(rec); err != nil {
		t.Fatal(err)
	}
	if _, err := r.WaitForSync(ctx, fleet.AllClusters); err != nil {
		t.Fatal(err)
	}
	rec.holds(t, "a", keys(ns, "a1")...)

	pa.SetStalled(true)
	t.Cleanup(func() { pa.SetStalled(false) })
	start := time.Now()
	create(t, ctx, ps["b"], gvr, ns, nil, "b2")
	rec.holds(t, "b", keys(ns, "b1", "b2")...)
	t.Logf("b's event delivered %v after a was black-holed", time.Since(start))
	items, err := r.Lister().List(nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := itemKeys(items), []string{"a:" + ns + "/a1", "b:" + ns + "/b1", "b:" + ns + "/b2"}; !equal(got, want) {
		t.Errorf("List with a black-holed: %v, want %v", got, want)
	}
	waitFor(t, 60*time.Second, "a's status to say it lost contact (Stale, ContactErr ErrNoContact)", func() (bool, string) {
		c := clusterStatus(r, "a")
		return c.State == dynamicinformer.Stale && errors.Is(c.ContactErr, dynamicinformer.ErrNoContact) && c.HasSynced, describe(r)
	})
	if cs := f.Status().Clusters; len(cs) != 2 || cs[0].Reachable() || !cs[1].Reachable() {
		t.Errorf("fleet clusters %+v: want a unreachable, b reachable", cs)
	}

	// A resource added while a is black-holed syncs in b; the wait for the
	// reachable clusters does not wait for a.
	r2 := f.ForResource(gvr2)
	start = time.Now()
	st, err := r2.WaitForSync(ctx, fleet.ReachableClusters)
	if err != nil {
		t.Fatalf("wait for the reachable clusters with a black-holed: %v", err)
	}
	t.Logf("second resource: reachable clusters synced in %v: %s", time.Since(start), describe(r2))
	if c, _ := st.Cluster("b"); !c.HasSynced {
		t.Errorf("b not synced: %s", describe(r2))
	}
	if c, _ := st.Cluster("a"); c.HasSynced || c.ContactErr == nil {
		t.Errorf("a: synced=%v contact=%v, want not synced and a ContactErr", c.HasSynced, c.ContactErr)
	}

	// a comes back: its events resume.
	pa.SetStalled(false)
	create(t, ctx, ps["a"], gvr, ns, nil, "a2")
	rec.holds(t, "a", keys(ns, "a1", "a2")...)
	if _, err := r2.WaitForSync(ctx, fleet.AllClusters); err != nil {
		t.Fatalf("second resource once a is back: %v", err)
	}

	// a refuses connections: b goes on.
	pa.SetRefuse(true)
	pa.CutAll()
	t.Cleanup(func() { pa.SetRefuse(false) })
	create(t, ctx, ps["b"], gvr, ns, nil, "b3")
	rec.holds(t, "b", keys(ns, "b1", "b2", "b3")...)
	waitFor(t, 60*time.Second, "a's status to say it lost contact after refusing", func() (bool, string) {
		c := clusterStatus(r, "a")
		return errors.Is(c.ContactErr, dynamicinformer.ErrNoContact), describe(r)
	})
	if a, _ := r.Lister().Get("a", ns, "a2"); a == nil {
		t.Error("a's objects not readable while it refuses connections")
	}
	pa.SetRefuse(false)
	if overlap, bad := rec.violations(); overlap != 0 || len(bad) != 0 {
		t.Errorf("handler contract: %d overlapping calls for one cluster, violations %v", overlap, bad)
	}
	f.Shutdown()
	snap.VerifyNoLeaks(t)
}

// A cluster added to the source arrives as adds; a cluster removed sends a
// delete per object and its goroutines end; a name that leaves and comes
// back keeps its events in order.
func TestClustersJoinAndLeave(t *testing.T) {
	snap := controlplane.Parallel(t)
	ctx := ctxT(t, 5*time.Minute)
	ps := planes()
	group := unique("g") + ".fleet.example.com"
	ns := unique("ns")
	gvr, crd := widgetCRD(group)
	install(t, ctx, crd, ps["a"], ps["b"], ps["c"])
	namespace(t, ctx, ns, ps["a"], ps["b"], ps["c"])
	for name, c := range ps {
		create(t, ctx, c, gvr, ns, nil, name+"1", name+"2")
	}

	src := fleet.NewStaticSource(map[string]*rest.Config{"a": ps["a"].Config(), "b": ps["b"].Config()})
	f := newFleet(t, src)
	r := f.ForResource(gvr)
	rec := newRecorder()
	if _, err := r.AddEventHandler(rec); err != nil {
		t.Fatal(err)
	}
	if _, err := r.WaitForSync(ctx, fleet.AllClusters); err != nil {
		t.Fatal(err)
	}
	rec.holds(t, "a", keys(ns, "a1", "a2")...)
	rec.holds(t, "b", keys(ns, "b1", "b2")...)

	// c joins, from this goroutine (StaticSource.Set applies the change
	// in the caller's goroutine), so its goroutines are tracked apart.
	joined := controlplane.SnapshotGoroutines()
	src.Set("c", ps["c"].Config())
	rec.holds(t, "c", keys(ns, "c1", "c2")...)
	if _, err := r.WaitForSync(ctx, fleet.AllClusters); err != nil {
		t.Fatal(err)
	}
	if adds, updates, deletes := rec.counts("c"); adds != 2 || updates != 0 || deletes != 0 {
		t.Errorf("c joining: %d adds, %d updates, %d deletes; want 2 adds", adds, updates, deletes)
	}
	if running := joined.Running(); running == 0 {
		t.Error("no goroutine seen for c (the leak check below would prove nothing)")
	}

	// c leaves.
	src.Delete("c")
	rec.holds(t, "c")
	if _, _, deletes := rec.counts("c"); deletes != 2 {
		t.Errorf("c leaving: %d deletes, want 2", deletes)
	}
	items, _ := r.Lister().List(nil)
	for _, it := range items {
		if it.Cluster == "c" {
			t.Errorf("c's object %s still listed after c left", it.Object.GetName())
		}
	}
	if _, ok := r.Status().Cluster("c"); ok {
		t.Error("c still in the status after it left")
	}
	joined.VerifyNoLeaks(t)

	// b leaves; c comes back, leaves and comes back again at once: its
	// events stay in order (the recorder flags an add of a held object or
	// a delete of an unknown one).
	src.Delete("b")
	rec.holds(t, "b")
	src.Set("c", ps["c"].Config())
	src.Delete("c")
	src.Set("c", ps["c"].Config())
	rec.holds(t, "c", keys(ns, "c1", "c2")...)
	create(t, ctx, ps["c"], gvr, ns, nil, "c3")
	rec.holds(t, "c", keys(ns, "c1", "c2", "c3")...)
	rec.holds(t, "a", keys(ns, "a1", "a2")...)
	if overlap, bad := rec.violations(); overlap != 0 || len(bad) != 0 {
		t.Errorf("handler contract: %d overlapping calls for one cluster, violations %v", overlap, bad)
	}
	f.Shutdown()
	snap.VerifyNoLeaks(t)
	joined.VerifyNoLeaks(t)
}

// keep imports used if a test above is trimmed.
var _ = os.Getenv
var _ = context.Background
