package dynamicinformer

import (
	"context"
	"sync"
	"testing"
	"time"

	toolscache "k8s.io/client-go/tools/cache"
)

// drift records the handler events of the objects a test tampers with.
type drift struct {
	mu      sync.Mutex // guards added, deleted
	added   map[string]int
	deleted map[string]int
}

func (d *drift) OnAdd(obj interface{}, _ bool) {
	k, _ := toolscache.MetaNamespaceKeyFunc(obj)
	d.mu.Lock()
	d.added[k]++
	d.mu.Unlock()
}
func (d *drift) OnUpdate(_, _ interface{}) {}
func (d *drift) OnDelete(obj interface{}) {
	k, _ := toolscache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	d.mu.Lock()
	d.deleted[k]++
	d.mu.Unlock()
}
func (d *drift) counts(k string) (added, deleted int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.added[k], d.deleted[k]
}

// WithRelistPeriod lists from the server again and again, staying Synced,
// and repairs a cache that drifted: an object the cache lost comes back
// (handlers see an add), an object the server does not have goes (a
// delete). Without it the informer lists once.
func TestRelistPeriodRepairsDrift(t *testing.T) {
	noLeaks := newGoroutinesCheck()
	client := fakeClient(widget("a", "w1", nil), widget("a", "w2", nil))
	f := NewSharedInformerFactory(client, Options{DisableCRDTracking: true})
	h := f.ForResource(widgets, WithRelistPeriod(50*time.Millisecond))
	plain := f.ForResource(widgets, WithSharingKey("no relist"))
	d := &drift{added: map[string]int{}, deleted: map[string]int{}}
	if _, err := h.Informer().AddEventHandler(d); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Start(ctx)
	waitFor(t, func() bool { return h.Status().State == Synced && plain.Status().State == Synced })
	lists := func() int { return countActions(client, "list", widgets, "") }
	// Drift: the cache loses w1 and holds a ghost the server never had.
	idx := h.Informer().GetIndexer()
	w1, ok, _ := idx.GetByKey("a/w1")
	if !ok {
		t.Fatal("w1 not cached")
	}
	if err := idx.Delete(w1); err != nil {
		t.Fatal(err)
	}
	if err := idx.Add(widget("a", "ghost", nil)); err != nil {
		t.Fatal(err)
	}
	before := lists()
	waitFor(t, func() bool {
		_, w1, _ := idx.GetByKey("a/w1")
		_, ghost, _ := idx.GetByKey("a/ghost")
		return w1 && !ghost && lists() >= before+2
	})
	if _, ok, _ := idx.GetByKey("a/w1"); !ok {
		t.Fatal("w1 not back in the cache")
	}
	if added, _ := d.counts("a/w1"); added < 2 {
		t.Fatalf("w1 added %d times, want the first add and the repair", added)
	}
	if _, deleted := d.counts("a/ghost"); deleted != 1 {
		t.Fatalf("ghost deleted %d times, want 1", deleted)
	}
	if st := h.Status(); st.State != Synced || st.Err != nil || st.Objects != 2 {
		t.Fatalf("status %+v, want Synced with 2 objects", st)
	}
	if n := len(plain.Informer().GetStore().ListKeys()); n != 2 {
		t.Fatalf("informer without relists holds %d objects", n)
	}
	f.Shutdown()
	noLeaks(t)
}
