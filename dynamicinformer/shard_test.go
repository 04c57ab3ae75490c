package dynamicinformer

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/shard"
)

// client-go's fake dynamic client ignores the shard selector, as a server
// without the ShardedListAndWatch gate does: three members still hold
// exactly their shards, through later creates and deletes, and say that
// the server did not filter.
func TestShardsWithAServerThatIgnoresTheSelector(t *testing.T) {
	before := runtime.NumGoroutine()
	var objs []kruntime.Object
	for i := 0; i < 60; i++ {
		w := widget("a", fmt.Sprintf("w%02d", i), nil)
		w.SetUID(uuid.NewUUID())
		objs = append(objs, w)
	}
	client := fakeClient(objs...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var handles []*InformerHandle
	var shards []shard.Shard
	var factories []*Factory
	for i := 0; i < 3; i++ {
		s, err := shard.Static(i, 3)
		if err != nil {
			t.Fatal(err)
		}
		f := NewSharedInformerFactory(client, Options{Defaults: []ResourceOption{WithShard(s)}, DisableCRDTracking: true})
		factories = append(factories, f)
		shards = append(shards, s)
		h := f.ForResource(widgets)
		handles = append(handles, h)
		f.Start(ctx)
	}
	defer func() {
		for _, f := range factories {
			f.Shutdown()
		}
		checkNoLeaks(t, before)
	}()
	for _, h := range handles {
		waitFor(t, func() bool { return h.Status().State == Synced })
	}
	check := func(want map[types.UID]bool) {
		t.Helper()
		// Wait for the set, not the count: while creates and deletes are
		// in flight the count passes through len(want) with other objects.
		waitFor(t, func() bool {
			n := 0
			for _, h := range handles {
				for _, o := range h.Informer().GetStore().List() {
					if !want[o.(*unstructured.Unstructured).GetUID()] {
						return false
					}
					n++
				}
			}
			return n == len(want)
		})
		seen := map[types.UID]int{}
		for i, h := range handles {
			for _, o := range h.Informer().GetStore().List() {
				u := o.(*unstructured.Unstructured)
				if !shards[i].Contains(u) {
					t.Fatalf("member %d holds %s, outside its shard", i, u.GetName())
				}
				seen[u.GetUID()]++
			}
		}
		for uid := range want {
			if seen[uid] != 1 {
				t.Fatalf("uid %s held by %d members", uid, seen[uid])
			}
		}
	}
	want := map[types.UID]bool{}
	for _, o := range objs {
		want[o.(*unstructured.Unstructured).GetUID()] = true
	}
	check(want)
	for i, h := range handles {
		st := h.Status()
		if st.Shard != shards[i].Selector() || st.OutsideShard == 0 {
			t.Fatalf("member %d status: shard %q, outside %d (the fake ignores the selector)", i, st.Shard, st.OutsideShard)
		}
	}
	// Creates and deletes after the sync reach the right member only.
	res := client.Resource(widgets).Namespace("a")
	for i := 0; i < 15; i++ {
		w := widget("a", fmt.Sprintf("new%02d", i), nil)
		w.SetUID(uuid.NewUUID())
		if _, err := res.Create(ctx, w, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		want[w.GetUID()] = true
	}
	for _, o := range objs[:10] {
		u := o.(*unstructured.Unstructured)
		if err := res.Delete(ctx, u.GetName(), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		delete(want, u.GetUID())
	}
	check(want)
}

// Handlers see only the shard: no add, update or delete of another
// member's object.
func TestShardHandlersSeeOnlyTheShard(t *testing.T) {
	in, out := widget("a", "in", nil), widget("a", "out", nil)
	s, _ := shard.Static(0, 2)
	for in.SetUID(uuid.NewUUID()); !s.Contains(in); in.SetUID(uuid.NewUUID()) {
	}
	for out.SetUID(uuid.NewUUID()); s.Contains(out); out.SetUID(uuid.NewUUID()) {
	}
	client := fakeClient(in, out)
	f := NewSharedInformerFactory(client, Options{DisableCRDTracking: true})
	defer f.Shutdown()
	h := f.ForResource(widgets, WithShard(s))
	var events []string
	done := make(chan struct{}, 10)
	if _, err := h.Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(o interface{}) {
			events = append(events, "add:"+o.(*unstructured.Unstructured).GetName())
			done <- struct{}{}
		},
		UpdateFunc: func(_, o interface{}) {
			events = append(events, "update:"+o.(*unstructured.Unstructured).GetName())
			done <- struct{}{}
		},
		DeleteFunc: func(o interface{}) {
			events = append(events, "delete:"+o.(*unstructured.Unstructured).GetName())
			done <- struct{}{}
		},
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f.Start(ctx)
	waitFor(t, func() bool { return h.Status().State == Synced })
	res := client.Resource(widgets).Namespace("a")
	for _, u := range []*unstructured.Unstructured{out, in} {
		u.SetLabels(map[string]string{"v": "2"})
		if _, err := res.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"out", "in"} {
		if err := res.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3; i++ {
		select {
		case <-done:
		case <-ctx.Done():
			t.Fatalf("events %v", events)
		}
	}
	time.Sleep(100 * time.Millisecond) // an event of "out" would have come by now
	got := strings.Join(events, " ")
	if got != "add:in update:in delete:in" {
		t.Fatalf("events %q", got)
	}
	if st := h.Status(); st.OutsideShard != 3 { // listed, updated, deleted
		t.Fatalf("outside %d, want 3", st.OutsideShard)
	}
}

// An exporter is told (metrics.Informer.OutsideShard) about every object
// dropped outside the shard.
func TestShardMetrics(t *testing.T) {
	s, _ := shard.Static(0, 2)
	var objs []kruntime.Object
	outside := 0
	for i := 0; i < 20; i++ {
		w := widget("a", fmt.Sprintf("w%02d", i), nil)
		w.SetUID(uuid.NewUUID())
		if !s.Contains(w) {
			outside++
		}
		objs = append(objs, w)
	}
	rec := &recorder{}
	f := NewSharedInformerFactory(fakeClient(objs...), Options{DisableCRDTracking: true, Metrics: rec})
	defer f.Shutdown()
	h := f.ForResource(widgets, WithShard(s))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f.Start(ctx)
	waitFor(t, func() bool { return h.Status().State == Synced })
	all := rec.all()
	if len(all) != 1 || !all[0].read(func(ir *informerRecord) bool { return ir.outsideShard == outside }) {
		t.Fatalf("metrics: %d informers; want one told of %d objects outside the shard", len(all), outside)
	}
	if st := h.Status(); st.OutsideShard != int64(outside) {
		t.Fatalf("Status.OutsideShard %d, want %d", st.OutsideShard, outside)
	}
}

func TestShardsSplitInformers(t *testing.T) {
	f := NewSharedInformerFactory(fakeClient(), Options{DisableCRDTracking: true})
	defer f.Shutdown()
	s0, _ := shard.Static(0, 2)
	s0b, _ := shard.ParseStatic("0/2")
	s1, _ := shard.Static(1, 2)
	a, b, c, all := f.ForResource(widgets, WithShard(s0)), f.ForResource(widgets, WithShard(s0b)), f.ForResource(widgets, WithShard(s1)), f.ForResource(widgets)
	if a.Informer().GetIndexer() != b.Informer().GetIndexer() {
		t.Fatal("equal shards must share an informer")
	}
	if a.Informer().GetIndexer() == c.Informer().GetIndexer() || a.Informer().GetIndexer() == all.Informer().GetIndexer() {
		t.Fatal("different shards must not share")
	}
	// The zero Shard undoes a factory default.
	g := NewSharedInformerFactory(fakeClient(), Options{Defaults: []ResourceOption{WithShard(s1)}, DisableCRDTracking: true})
	defer g.Shutdown()
	sts := []string{g.ForResource(widgets).Status().Shard, g.ForResource(widgets, WithShard(shard.Shard{})).Status().Shard}
	sort.Strings(sts)
	if sts[0] != "" || sts[1] != s1.Selector() {
		t.Fatalf("shards %q", sts)
	}
}

// testSource is a shard.Source the test moves by hand.
type testSource struct {
	mu      sync.Mutex // guards all below
	now     shard.Shard
	changed chan struct{}
	holds   []string // what consumers reported, as "name:selector" or "name:-"
	open    int      // registered consumers not closed
}

func newTestSource(s shard.Shard) *testSource {
	return &testSource{now: s, changed: make(chan struct{})}
}

func (t *testSource) Current() (shard.Shard, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.now, t.changed
}

func (t *testSource) set(s shard.Shard) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.now = s
	close(t.changed)
	t.changed = make(chan struct{})
}

func (t *testSource) Register(name string) shard.Consumer {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.open++
	return &testConsumer{src: t}
}

func (t *testSource) lastHolds() (string, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.holds) == 0 {
		return "", t.open
	}
	return t.holds[len(t.holds)-1], t.open
}

type testConsumer struct{ src *testSource }

func (c *testConsumer) Holds(s shard.Shard, ok bool) {
	c.src.mu.Lock()
	defer c.src.mu.Unlock()
	h := "-"
	if ok {
		h = s.Selector()
	}
	c.src.holds = append(c.src.holds, h)
}

func (c *testConsumer) Close() {
	c.src.mu.Lock()
	defer c.src.mu.Unlock()
	c.src.open--
}

// An informer following a source switches shards without a restart:
// handlers get a delete per object that left and an add per object that
// entered; the source is told what the cache holds at each step.
func TestShardSourceSwitch(t *testing.T) {
	before := runtime.NumGoroutine()
	first, _ := shard.Static(0, 2)
	second, _ := shard.Static(1, 2)
	var objs []kruntime.Object
	inFirst := map[string]bool{}
	for i := 0; i < 40; i++ {
		w := widget("a", fmt.Sprintf("w%02d", i), nil)
		w.SetUID(uuid.NewUUID())
		inFirst[w.GetName()] = first.Contains(w)
		objs = append(objs, w)
	}
	src := newTestSource(first)
	f := NewSharedInformerFactory(fakeClient(objs...), Options{DisableCRDTracking: true})
	h := f.ForResource(widgets, WithShardSource(src))
	if h2 := f.ForResource(widgets, WithShardSource(src)); h2.Informer().GetIndexer() != h.Informer().GetIndexer() {
		t.Fatal("the same source must share an informer")
	}
	var mu sync.Mutex
	adds, deletes := map[string]int{}, map[string]int{}
	if _, err := h.Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(o interface{}) {
			mu.Lock()
			adds[o.(*unstructured.Unstructured).GetName()]++
			mu.Unlock()
		},
		DeleteFunc: func(o interface{}) {
			if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			mu.Lock()
			deletes[o.(*unstructured.Unstructured).GetName()]++
			mu.Unlock()
		},
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f.Start(ctx)
	waitFor(t, func() bool { return h.Status().State == Synced })
	waitFor(t, func() bool { last, open := src.lastHolds(); return last == first.Selector() && open == 1 })
	names := func(wantFirst bool) map[string]bool {
		out := map[string]bool{}
		for n, in := range inFirst {
			if in == wantFirst {
				out[n] = true
			}
		}
		return out
	}
	cached := func() map[string]bool {
		out := map[string]bool{}
		for _, k := range h.Informer().GetStore().ListKeys() {
			out[strings.TrimPrefix(k, "a/")] = true
		}
		return out
	}
	equal := func(a, b map[string]bool) bool {
		if len(a) != len(b) {
			return false
		}
		for k := range a {
			if !b[k] {
				return false
			}
		}
		return true
	}
	if !equal(cached(), names(true)) {
		t.Fatalf("cache %v, want the first half's objects", cached())
	}
	src.set(second)
	waitFor(t, func() bool { return equal(cached(), names(false)) })
	waitFor(t, func() bool { last, _ := src.lastHolds(); return last == second.Selector() })
	src.mu.Lock()
	holds := append([]string(nil), src.holds...)
	src.mu.Unlock()
	// first, then nothing (the halves do not overlap), then second.
	if strings.Join(holds, " ; ") != first.Selector()+" ; - ; "+second.Selector() {
		t.Fatalf("holds reported: %q", holds)
	}
	// Handlers are told after the cache changes: wait for them.
	handled := func() []string {
		mu.Lock()
		defer mu.Unlock()
		var wrong []string
		for n, in := range inFirst {
			wantAdds, wantDeletes := 1, 0
			if in {
				wantDeletes = 1
			}
			if adds[n] != wantAdds || deletes[n] != wantDeletes {
				wrong = append(wrong, fmt.Sprintf("%s (first half %v): %d adds, %d deletes", n, in, adds[n], deletes[n]))
			}
		}
		return wrong
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(handled()) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if wrong := handled(); len(wrong) > 0 {
		t.Fatalf("handler events: %v", wrong)
	}
	if st := h.Status(); st.Shard != second.Selector() {
		t.Fatalf("Status.Shard %q", st.Shard)
	}
	// And back, twice.
	for i, s := range []shard.Shard{first, second} {
		src.set(s)
		want := names(s.Equal(first))
		deadline := time.Now().Add(10 * time.Second)
		for !equal(cached(), want) {
			if time.Now().After(deadline) {
				t.Fatalf("switch %d: cache %d objects, want %d", i+2, len(cached()), len(want))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	f.Shutdown()
	if _, open := src.lastHolds(); open != 0 {
		t.Fatalf("%d consumers still registered after Shutdown", open)
	}
	checkNoLeaks(t, before)
	// A source with several namespaces is a configuration error.
	g := NewSharedInformerFactory(fakeClient(), Options{DisableCRDTracking: true})
	defer g.Shutdown()
	if st := g.ForResource(widgets, WithShardSource(src), WithNamespaces("a", "b")).Status(); !errors.Is(st.Err, ErrInvalid) {
		t.Fatalf("several namespaces with a source: %+v", st)
	}
}
