package factorytest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/test/controlplane"
)

// keyedEvents counts a handler's events by key.
type keyedEvents struct {
	mu                      sync.Mutex // guards everything below
	added, updated, deleted map[string]int
	adds, updates, deletes  int
}

func newKeyedEvents() *keyedEvents {
	return &keyedEvents{added: map[string]int{}, updated: map[string]int{}, deleted: map[string]int{}}
}

func (k *keyedEvents) OnAdd(o interface{}, _ bool) {
	n, _ := key(o)
	k.mu.Lock()
	k.added[n]++
	k.adds++
	k.mu.Unlock()
}

func (k *keyedEvents) OnUpdate(_, o interface{}) {
	n, _ := key(o)
	k.mu.Lock()
	k.updated[n]++
	k.updates++
	k.mu.Unlock()
}

func (k *keyedEvents) OnDelete(o interface{}) {
	n, _ := toolscache.DeletionHandlingMetaNamespaceKeyFunc(o)
	k.mu.Lock()
	k.deleted[n]++
	k.deletes++
	k.mu.Unlock()
}

func (k *keyedEvents) counts() (adds, updates, deletes int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.adds, k.updates, k.deletes
}

// TestRelistDeliversOnlyWhatChanged: 1,000 ConfigMaps cached; the
// informer's connection is black-holed while 10 of them change (4
// updated, 3 created, 3 deleted) and etcd is compacted; the connection is
// cut and restored, the watch gets 410 Expired and the informer relists.
// A handler is given exactly the 10 changes; a handler of a handle
// WithUnchangedRelistUpdates (same informer) is given client-go's
// relist: an update for every one of the 997 objects found again.
func TestRelistDeliversOnlyWhatChanged(t *testing.T) {
	// Not parallel: it compacts the shared etcd (other tests' watches from older revisions would get 410).
	ctx := ctxT(t, 6*time.Minute)
	px := cp.NewProxy(t) // the black hole and the cut reach this test's clients only
	sc := scenario(t)
	const n = 1000
	ns := unique("relistchanges")
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	direct := kubernetes.NewForConfigOrDie(cp.DirectConfig())
	cms := direct.CoreV1().ConfigMaps(ns)
	name := func(i int) string { return fmt.Sprintf("cm-%04d", i) }
	createAll(t, ctx, cms, 0, n, name)
	leaks := controlplane.SnapshotGoroutines()
	f := newFactory(t, px.Config())
	defer f.Shutdown()
	h := f.ForResource(configmaps, dynamicinformer.WithNamespaces(ns))
	storm := f.ForResource(configmaps, dynamicinformer.WithNamespaces(ns), dynamicinformer.WithUnchangedRelistUpdates())
	quiet, loud := newKeyedEvents(), newKeyedEvents()
	if _, err := h.Informer().AddEventHandler(quiet); err != nil {
		t.Fatal(err)
	}
	if _, err := storm.Informer().AddEventHandler(loud); err != nil {
		t.Fatal(err)
	}
	f.Start(ctx)
	eventually(t, ctx, "1,000 adds to both handlers", func() bool {
		qa, _, _ := quiet.counts()
		la, _, _ := loud.counts()
		return qa == n && la == n
	})

	// The outage: the informer hears nothing while 10 objects change.
	px.SetStalled(true)
	defer px.SetStalled(false)
	for i := range 4 {
		if _, err := cms.Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name(i)}, Data: map[string]string{"changed": "yes"}}, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	createAll(t, ctx, cms, n, n+3, name)
	for i := n - 3; i < n; i++ {
		if err := cms.Delete(ctx, name(i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cp.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	px.CutAll()
	px.SetStalled(false)

	// client-go's relist reaches the storm handler: 997 updates (4 of
	// them real), 3 adds, 3 deletes.
	eventually(t, ctx, "the relist delivered to the WithUnchangedRelistUpdates handler", func() bool {
		a, u, d := loud.counts()
		return a == n+3 && u == n-3 && d == 3
	})
	// One more change through the watch: a handler's events are in
	// order, so once it has this one it has had all of the relist.
	if _, err := cms.Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name(500)}, Data: map[string]string{"after": "relist"}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	marker := ns + "/" + name(500)
	eventually(t, ctx, "the change after the relist", func() bool {
		quiet.mu.Lock()
		defer quiet.mu.Unlock()
		return quiet.updated[marker] == 1
	})
	quiet.mu.Lock()
	defer quiet.mu.Unlock()
	if quiet.adds != n+3 || quiet.updates != 4+1 || quiet.deletes != 3 {
		t.Fatalf("handler after the relist: %d adds, %d updates, %d deletes; want %d, 5 (4 changed + 1 after), 3",
			quiet.adds, quiet.updates, quiet.deletes, n+3)
	}
	for i := range 4 {
		if k := ns + "/" + name(i); quiet.updated[k] != 1 {
			t.Fatalf("%s updated %d times, want 1", k, quiet.updated[k])
		}
	}
	for i := n; i < n+3; i++ {
		if k := ns + "/" + name(i); quiet.added[k] != 1 {
			t.Fatalf("%s added %d times, want 1", k, quiet.added[k])
		}
	}
	for i := n - 3; i < n; i++ {
		if k := ns + "/" + name(i); quiet.deleted[k] != 1 {
			t.Fatalf("%s deleted %d times, want 1", k, quiet.deleted[k])
		}
	}
	f.Shutdown()
	leaks.VerifyNoLeaks(t)
	sc.Injected("1,000 ConfigMaps cached; connection black-holed while 4 were updated, 3 created, 3 deleted; etcd compacted; connection cut and restored (watch 410, relist)")
	sc.Held("the handler got exactly the 10 changes (4 updates, 3 adds, 3 deletes); a WithUnchangedRelistUpdates handler of the same informer got client-go's %d updates; no goroutine leak", n-3)
}

// createAll creates ConfigMaps name(from) .. name(to-1), 8 at a time.
func createAll(t *testing.T, ctx context.Context, cms interface {
	Create(context.Context, *corev1.ConfigMap, metav1.CreateOptions) (*corev1.ConfigMap, error)
}, from, to int, name func(int) string) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, to-from)
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name(i)}, Data: map[string]string{"i": fmt.Sprint(i)}}, metav1.CreateOptions{}); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := from; i < to; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
