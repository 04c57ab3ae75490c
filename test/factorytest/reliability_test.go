package factorytest

import (
	"context"
	"fmt"
	"math/rand"
	"reflect"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/test/controlplane"
)

var configmaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// converged checks the convergence condition of the reliability suite for
// configmaps in ns (see convergedResource).
func converged(t *testing.T, ctx context.Context, h *dynamicinformer.InformerHandle, rec *recorder, ns string) (objects int) {
	t.Helper()
	return convergedResource(t, ctx, h, rec, configmaps, ns)
}

// convergedResource checks the convergence condition of the reliability
// suite: the cache holds exactly the server's objects (gvr in ns, "" for
// all) at the server's resourceVersions, and the handler's last-seen state
// per object equals the server's. It waits (bounded) for the informer to
// catch up.
func convergedResource(t *testing.T, ctx context.Context, h *dynamicinformer.InformerHandle, rec *recorder, gvr schema.GroupVersionResource, ns string) (objects int) {
	t.Helper()
	var server, cache, handler []string
	dyn := cp.Dynamic()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := dyn.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		server = server[:0]
		for _, o := range l.Items {
			server = append(server, o.GetNamespace()+"/"+o.GetName()+"@"+o.GetResourceVersion())
		}
		sort.Strings(server)
		cache = keysOf(h.Informer().GetStore().List())
		if !reflect.DeepEqual(server, cache) {
			return false, nil
		}
		if rec == nil {
			return true, nil
		}
		objs, _, _, _ := rec.snapshot()
		handler = handler[:0]
		for k, rv := range objs {
			handler = append(handler, k+"@"+rv)
		}
		sort.Strings(handler)
		return reflect.DeepEqual(server, handler), nil
	})
	if err != nil {
		t.Fatalf("%s not converged:\nserver  %d %v\ncache   %d %v\nhandler %d %v", gvr.Resource, len(server), head(server), len(cache), head(cache), len(handler), head(handler))
	}
	return len(server)
}

func head(s []string) []string {
	if len(s) > 5 {
		return s[:5]
	}
	return s
}

// writer creates, updates and deletes configmaps in ns through its own
// client.
type writer struct {
	kube kubernetes.Interface
	ns   string
	rnd  *rand.Rand
	n    int
}

func (w *writer) step(ctx context.Context) error {
	w.n++
	name := fmt.Sprintf("cm-%d", w.rnd.Intn(40))
	cms := w.kube.CoreV1().ConfigMaps(w.ns)
	switch w.rnd.Intn(3) {
	case 0:
		_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"n": fmt.Sprint(w.n)}}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	case 1:
		cm, err := cms.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		cm.Data = map[string]string{"n": fmt.Sprint(w.n)}
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return nil
		}
		return err
	default:
		err := cms.Delete(ctx, name, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
}

func (w *writer) run(ctx context.Context, t *testing.T, steps int) {
	for i := 0; i < steps; i++ {
		if err := w.step(ctx); err != nil {
			t.Logf("write %d: %v", w.n, err)
		}
	}
}

func startConfigMapInformer(t *testing.T, ctx context.Context, cfg *rest.Config, ns string) (*dynamicinformer.Factory, *dynamicinformer.InformerHandle, *recorder) {
	t.Helper()
	f := newFactory(t, cfg)
	h := f.ForResource(configmaps, dynamicinformer.WithNamespaces(ns))
	rec := newRecorder()
	if _, err := h.Informer().AddEventHandler(rec); err != nil {
		t.Fatal(err)
	}
	f.Start(ctx)
	eventually(t, ctx, "configmap informer synced", h.Informer().HasSynced)
	return f, h, rec
}

// TestConvergesAcrossAPIServerRestart: writes before the stop and right
// after the restart all reach the cache and the handler.
func TestConvergesAcrossAPIServerRestart(t *testing.T) {
	// Not parallel: it restarts the shared API server.
	ctx := ctxT(t, 6*time.Minute)
	sc := scenario(t)
	sc.Injected("kube-apiserver stopped and restarted on the same etcd; 60 random configmap writes before, 60 right after")
	ns := unique("restart")
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	leaks := controlplane.SnapshotGoroutines()
	f, h, rec := startConfigMapInformer(t, ctx, cp.Config(), ns)
	defer f.Shutdown()
	w := &writer{kube: cp.Kube(), ns: ns, rnd: rand.New(rand.NewSource(1))}
	w.run(ctx, t, 60)
	if err := cp.RestartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "server back", func() bool {
		_, err := cp.Kube().CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil
	})
	w.run(ctx, t, 60)
	n := converged(t, ctx, h, rec, ns)
	_, adds, updates, deletes := rec.snapshot()
	t.Logf("converged on %d objects after restart (handler: %d adds, %d updates, %d deletes; status %s)", n, adds, updates, deletes, h.Status().State)
	f.Shutdown()
	leaks.VerifyNoLeaks(t)
	sc.Held("converged: %d objects, cache = server = handler; handler saw %d adds, %d updates, %d deletes; no goroutine leak", n, adds, updates, deletes)
}

// TestRelistAfterCompactionDeliversDeletes: the informer's connection is
// stalled while objects are deleted and etcd is compacted; when the
// connection comes back the watch gets 410 Gone, the informer relists, and
// the deletes reach the handler (as DeletedFinalStateUnknown).
func TestRelistAfterCompactionDeliversDeletes(t *testing.T) {
	// Not parallel: it compacts the shared etcd (other tests' watches from older revisions would get 410).
	ctx := ctxT(t, 6*time.Minute)
	px := cp.NewProxy(t) // faults below reach this test's clients only
	sc := scenario(t)
	sc.Injected("informer's connection stalled; 10 of 20 configmaps deleted; etcd compacted; connection cut and restored (watch gets 410 Gone, relist)")
	ns := unique("compact")
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	direct := kubernetes.NewForConfigOrDie(cp.DirectConfig())
	for i := 0; i < 20; i++ {
		if _, err := direct.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	leaks := controlplane.SnapshotGoroutines()
	f, h, rec := startConfigMapInformer(t, ctx, px.Config(), ns)
	defer f.Shutdown()
	converged(t, ctx, h, rec, ns)
	// The informer falls behind: its connection is black-holed.
	px.SetStalled(true)
	for i := 0; i < 10; i++ {
		if err := direct.CoreV1().ConfigMaps(ns).Delete(ctx, fmt.Sprintf("cm-%d", i), metav1.DeleteOptions{}); err != nil {
			px.SetStalled(false)
			t.Fatal(err)
		}
	}
	if _, err := cp.Compact(ctx); err != nil {
		px.SetStalled(false)
		t.Fatal(err)
	}
	px.CutAll()
	px.SetStalled(false)
	n := converged(t, ctx, h, rec, ns)
	_, _, _, deletes := rec.snapshot()
	if n != 10 || deletes != 10 {
		t.Fatalf("after compaction: %d objects, %d deletes; want 10 and 10", n, deletes)
	}
	f.Shutdown()
	leaks.VerifyNoLeaks(t)
	sc.Held("converged: %d objects; the %d deletes made during the gap reached the handler as deletes; no goroutine leak", n, deletes)
}

// TestConvergesThroughConnectionCuts: for a bounded time the proxy cuts,
// stalls and refuses connections at random while writes continue.
func TestConvergesThroughConnectionCuts(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 6*time.Minute)
	px := cp.NewProxy(t) // faults below reach this test's clients only
	sc := scenario(t)
	ns := unique("cuts")
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	leaks := controlplane.SnapshotGoroutines()
	f, h, rec := startConfigMapInformer(t, ctx, px.Config(), ns)
	defer f.Shutdown()
	w := &writer{kube: kubernetes.NewForConfigOrDie(cp.DirectConfig()), ns: ns, rnd: rand.New(rand.NewSource(2))}
	rnd := rand.New(rand.NewSource(3))
	faults := map[string]int{}
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		w.run(ctx, t, 10)
		switch rnd.Intn(4) {
		case 0:
			px.CutAll()
			faults["cut"]++
		case 1:
			px.SetStalled(true)
			time.Sleep(time.Duration(rnd.Intn(500)) * time.Millisecond)
			px.SetStalled(false)
			faults["stall"]++
		case 2:
			px.SetRefuse(true)
			px.CutAll()
			time.Sleep(time.Duration(rnd.Intn(500)) * time.Millisecond)
			px.SetRefuse(false)
			faults["refuse"]++
		default:
			time.Sleep(100 * time.Millisecond)
		}
	}
	px.SetStalled(false)
	px.SetRefuse(false)
	n := converged(t, ctx, h, rec, ns)
	t.Logf("converged on %d objects after %d writes and faults %v", n, w.n, faults)
	_, adds, updates, deletes := rec.snapshot()
	f.Shutdown()
	leaks.VerifyNoLeaks(t)
	sc.Injected("15 s of random proxy faults while writing: %d cuts, %d stalls (≤0.5 s), %d refusals (≤0.5 s); %d writes", faults["cut"], faults["stall"], faults["refuse"], w.n)
	sc.Held("converged: %d objects; handler saw %d adds, %d updates, %d deletes; no goroutine leak", n, adds, updates, deletes)
}
