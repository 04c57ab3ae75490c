package gate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/dynamicinformer/internal/listwatch"
	"github.com/informerkit/informerkit/shard"
)

// switchFixture is a fixture whose server is behind a ShardFilter (over
// the whole space: the test changes what the stub lists instead), with
// Keys set. listed counts the filter's Listed calls.
type switchFixture struct {
	*fixture
	listed atomic.Int32
}

func newSwitchFixture(t *testing.T) *switchFixture {
	t.Helper()
	f := &switchFixture{fixture: newFixture(t, true, 0)}
	all, err := shard.Static(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	filter := &listwatch.ShardFilter{
		Current: func() shard.Shard { return all },
		Listed:  func(shard.Shard) { f.listed.Add(1) },
	}
	funcs := filter.Funcs(listwatch.Funcs{
		List: func(ctx context.Context, _ string, o metav1.ListOptions) (k8sruntime.Object, error) {
			return f.inner.ListWithContext(ctx, o)
		},
		Watch: func(ctx context.Context, _ string, o metav1.ListOptions) (watch.Interface, error) {
			return f.inner.WatchWithContext(ctx, o)
		},
	})
	f.lw.Server = &listwatch.Liveness{Inner: &listwatch.Single{Funcs: funcs}}
	f.lw.Keys = &KeySet{}
	f.lw.CachedByKey = func(key string) (interface{}, bool) {
		for _, o := range f.cache.list() {
			if m, _ := meta.Accessor(o); m.GetNamespace()+"/"+m.GetName() == key {
				return o, true
			}
		}
		return nil, false
	}
	return f
}

func uidWidget(name, rv string) *unstructured.Unstructured {
	w := widget(name, rv)
	w.SetUID(types.UID("uid-" + name))
	return w
}

func sorted(s []string) []string { slices.Sort(s); return s }

// A switch inside the open stream: the server watch stops, the new list
// is delivered as adds, every key the reflector was given that the list
// lacks as a delete — including w2, whose add is still queued (not in the
// cache): its delete carries its name, namespace and UID — then a bookmark
// at the list's resourceVersion, then the new watch's events. No relist:
// the stream stays open. The filter's Listed waits for the bookmark.
func TestSwitchInStream(t *testing.T) {
	leaks(t)
	f := newSwitchFixture(t)
	f.inner.set(func(s *stubLW) {
		s.items = []*unstructured.Unstructured{uidWidget("w0", "4"), uidWidget("w1", "5"), uidWidget("w2", "6")}
	})
	f.cache.set(uidWidget("w0", "4"), uidWidget("w1", "5")) // w2's add is still in the reflector's queue
	w := listAndWatch(t, f.lw)
	defer w.Stop()
	_, first := f.inner.lastWatch()
	first.Add(uidWidget("w3", "11"))
	if got := summary(drain(t, w, 1)); !slices.Equal(got, []string{"ADDED:w3@11"}) {
		t.Fatalf("server event: %v", got)
	}
	f.cache.set(uidWidget("w0", "4"), uidWidget("w1", "5"), uidWidget("w3", "11"))
	// The key set records an event once it was handed over (Delivered),
	// so just after the reader got it.
	waitFor(t, "4 keys (w0, w1, w2, w3)", func() bool { return f.lw.Keys.Len() == 4 })
	listedBefore := f.listed.Load()
	// The new selection holds w0 (as cached: no event), w1 (modified)
	// and w4.
	f.inner.set(func(s *stubLW) {
		s.items = []*unstructured.Unstructured{uidWidget("w0", "4"), uidWidget("w1", "9"), uidWidget("w4", "8")}
	})
	f.lw.Switch()
	evs := drain(t, w, 4)
	if got := summary(evs[:2]); !slices.Equal(got, []string{"ADDED:w1@9", "ADDED:w4@8"}) {
		t.Errorf("adds: %v", got)
	}
	if got := sorted(summary(evs[2:])); !slices.Equal(got, []string{"DELETED:w2@10", "DELETED:w3@11"}) {
		t.Errorf("deletes: %v (w2 from its key, at the list's resourceVersion; w3 the cached copy)", got)
	}
	for _, ev := range evs[2:] {
		if m, _ := meta.Accessor(ev.Object); m.GetName() == "w2" && (m.GetUID() != "uid-w2" || m.GetNamespace() != "a") {
			t.Errorf("w2's delete: uid %q namespace %q", m.GetUID(), m.GetNamespace())
		}
	}
	if f.listed.Load() != listedBefore {
		t.Error("Listed was called before the switch's bookmark was taken")
	}
	if got := summary(drain(t, w, 1)); !slices.Equal(got, []string{"BOOKMARK:@10"}) {
		t.Fatalf("bookmark: %v", got)
	}
	waitFor(t, "Listed after the bookmark", func() bool { return f.listed.Load() == listedBefore+1 })
	if !first.IsStopped() {
		t.Error("the old server watch was not stopped")
	}
	opts, second := f.inner.lastWatch()
	if opts.ResourceVersion != "10" {
		t.Errorf("new watch from %q, want the list's 10", opts.ResourceVersion)
	}
	second.Modify(uidWidget("w4", "12"))
	if got := summary(drain(t, w, 1)); !slices.Equal(got, []string{"MODIFIED:w4@12"}) {
		t.Fatalf("after the switch: %v", got)
	}
	if lists, watches := f.inner.counts(); lists != 2 || watches != 2 {
		t.Errorf("requests: %d lists, %d watches; want 2 and 2 (one of each for the switch)", lists, watches)
	}
	if p := f.lw.Phase(); p != Serving {
		t.Errorf("phase %v", p)
	}
	if n := f.lw.Keys.Len(); n != 3 {
		t.Errorf("keys after the switch: %d, want 3", n)
	}
}

// A switch whose list fails ends the stream "expired": the reflector
// relists (Relisting answers the next watch "expired").
func TestSwitchListFailsRelists(t *testing.T) {
	leaks(t)
	f := newSwitchFixture(t)
	w := listAndWatch(t, f.lw)
	defer w.Stop()
	f.inner.set(func(s *stubLW) { s.listErr = errors.New("connection refused") })
	f.lw.Switch()
	if got := summary(drain(t, w, -1)); !slices.Equal(got, []string{"ERROR:Expired"}) {
		t.Fatalf("events: %v", got)
	}
	if p := f.lw.Phase(); p != Relisting {
		t.Fatalf("phase %v, want Relisting", p)
	}
	if _, err := f.lw.WatchWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "10"}); err == nil {
		t.Fatal("a watch while Relisting was answered")
	}
}

// A switch whose new watch fails falls back the same way.
func TestSwitchWatchFailsRelists(t *testing.T) {
	leaks(t)
	f := newSwitchFixture(t)
	w := listAndWatch(t, f.lw)
	defer w.Stop()
	f.inner.set(func(s *stubLW) { s.watchErr = errors.New("connection refused") })
	f.lw.Switch()
	if got := summary(drain(t, w, -1)); !slices.Equal(got, []string{"ERROR:Expired"}) {
		t.Fatalf("events: %v", got)
	}
	if p := f.lw.Phase(); p != Relisting {
		t.Fatalf("phase %v, want Relisting", p)
	}
}

// A switch while the reflector lists cannot happen in a stream: the list
// in flight may be of the old selection, so the next watch answers
// "expired" and the reflector lists again.
func TestSwitchDuringListRelists(t *testing.T) {
	leaks(t)
	f := newSwitchFixture(t)
	if _, err := f.lw.ListWithContext(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	f.inner.set(func(s *stubLW) { s.onList = func() { once.Do(f.lw.Switch) } })
	if _, err := f.lw.ListWithContext(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if p := f.lw.Phase(); p != Relisting {
		t.Fatalf("phase %v after a list a switch raced with, want Relisting", p)
	}
}

// A switch while a switch lists: that list may be of the older selection;
// the stream lists again and delivers only the newest.
func TestSwitchWhileSwitching(t *testing.T) {
	leaks(t)
	f := newSwitchFixture(t)
	w := listAndWatch(t, f.lw)
	defer w.Stop()
	var lists atomic.Int32
	f.inner.set(func(s *stubLW) {
		s.onList = func() {
			if lists.Add(1) == 1 {
				f.lw.Switch() // the shard moves again while the switch lists
			}
		}
	})
	f.lw.Switch()
	evs := drain(t, w, 1) // w1 is cached as listed: no add
	if got := summary(evs); !slices.Equal(got, []string{"BOOKMARK:@10"}) {
		t.Fatalf("events: %v", got)
	}
	if n := lists.Load(); n != 2 {
		t.Errorf("the switch listed %d times, want 2", n)
	}
	if l, wa := f.inner.counts(); l != 3 || wa != 2 {
		t.Errorf("requests: %d lists, %d watches; want 3 and 2 (the first switch's watch not opened twice)", l, wa)
	}
	if p := f.lw.Phase(); p != Serving {
		t.Errorf("phase %v", p)
	}
}

// Without Keys (or before a list completed) Switch is Relist.
func TestSwitchWithoutKeysRelists(t *testing.T) {
	leaks(t)
	f := newFixture(t, true, 0)
	w := listAndWatch(t, f.lw)
	defer w.Stop()
	f.lw.Switch()
	if got := summary(drain(t, w, -1)); !slices.Equal(got, []string{"ERROR:Expired"}) {
		t.Fatalf("events: %v", got)
	}
	if l, _ := f.inner.counts(); l != 1 {
		t.Errorf("%d lists: a Switch without Keys listed in the stream", l)
	}
}

// The reader stops the stream while it switches: the switch is dropped
// (or, if the reader still reads, completed), nothing leaks, a dropped
// switch leaves the next watch answering "expired" (the reflector
// relists), and a later Switch is not stuck behind it.
func TestSwitchStoppedByReader(t *testing.T) {
	leaks(t)
	f := newSwitchFixture(t)
	w := listAndWatch(t, f.lw)
	block := make(chan struct{})
	f.inner.set(func(s *stubLW) { s.onList = func() { <-block } })
	f.lw.Switch()
	waitFor(t, "the switch's list", func() bool { l, _ := f.inner.counts(); return l == 1 && f.lw.Phase() == Relisting })
	w.Stop()
	close(block)
	// The stream may still hand over what it has ready (the reader reads
	// on after Stop here); it ends either way.
	evs := drain(t, w, -1)
	if p := f.lw.Phase(); len(evs) == 0 && p != Relisting {
		t.Fatalf("phase %v after a switch dropped before its events, want Relisting", p)
	}
	if f.lw.Phase() == Relisting {
		if w3, err := f.lw.WatchWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "10"}); err == nil {
			w3.Stop()
			t.Fatal("a watch after a dropped switch was answered")
		}
	}
	f.inner.set(func(s *stubLW) { s.onList = nil })
	w2 := listAndWatch(t, f.lw)
	defer w2.Stop()
	f.lw.Switch()
	if got := summary(drain(t, w2, 1)); !slices.Equal(got, []string{"BOOKMARK:@10"}) {
		t.Fatalf("second switch: %v", got)
	}
}

// The gate closes while the stream switches: the new stream delivers the
// removal (a delete per cached object) instead of the server's events.
func TestSwitchThenGateCloses(t *testing.T) {
	leaks(t)
	f := newSwitchFixture(t)
	w := listAndWatch(t, f.lw)
	defer w.Stop()
	var once sync.Once
	f.inner.set(func(s *stubLW) { s.onWatch = func() { once.Do(func() { f.lw.SetServed(false, "gone", true) }) } })
	f.lw.Switch()
	evs := summary(drain(t, w, -1)) // the switch's events, or some of them
	if f.lw.Phase() == Relisting {
		// The stream ended before its prefix was out: the next watch
		// delivers the removal.
		w2, err := f.lw.WatchWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "10"})
		if err != nil {
			t.Fatal(err)
		}
		evs = summary(drain(t, w2, -1))
	}
	if !slices.Equal(evs[len(evs)-2:], []string{"DELETED:w1@5", "BOOKMARK:@1"}) {
		t.Fatalf("events %v: want the removal last", evs)
	}
	if p := f.lw.Phase(); p != Emptied {
		t.Errorf("phase %v", p)
	}
}

// A watch-list stream's initial events go aside until the bookmark that
// ends them; then they are the set.
func TestKeySetWatchList(t *testing.T) {
	k := &KeySet{}
	k.beginList()
	deliver(k, watch.Event{Type: watch.Added, Object: uidWidget("w1", "5")})
	if k.Valid() || k.Len() != 0 {
		t.Fatalf("valid %v len %d during the initial events", k.Valid(), k.Len())
	}
	end := &unstructured.Unstructured{Object: map[string]interface{}{}}
	end.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
	deliver(k, watch.Event{Type: watch.Bookmark, Object: end})
	deliver(k, watch.Event{Type: watch.Added, Object: uidWidget("w2", "6")})
	deliver(k, watch.Event{Type: watch.Deleted, Object: uidWidget("w1", "7")})
	if !k.Valid() || k.Len() != 1 {
		t.Fatalf("valid %v len %d after the initial events", k.Valid(), k.Len())
	}
	if m := k.missing(map[string]struct{}{}); m["a/w2"] != "uid-w2" || len(m) != 1 {
		t.Fatalf("missing: %v", m)
	}
}

// The set's keys are the informer store's keys (MetaNamespaceKeyFunc):
// "namespace/name", and "name" alone for a cluster-scoped object; a
// deletion removes the key its object was recorded under.
func TestKeySetKeysAreStoreKeys(t *testing.T) {
	namespaced := uidWidget("w1", "5")
	cluster := uidWidget("c1", "6")
	cluster.SetNamespace("")
	gone := uidWidget("w2", "7")
	list := &unstructured.UnstructuredList{Items: []unstructured.Unstructured{*namespaced, *cluster, *gone}}

	k := &KeySet{}
	k.beginList()
	k.listPage(list)
	k.endList()
	deliver(k, watch.Event{Type: watch.Deleted, Object: gone})

	want := map[string]types.UID{}
	for _, o := range []*unstructured.Unstructured{namespaced, cluster} {
		key, err := toolscache.MetaNamespaceKeyFunc(o)
		if err != nil {
			t.Fatal(err)
		}
		want[key] = o.GetUID()
	}
	if got := k.missing(map[string]struct{}{}); !maps.Equal(got, want) {
		t.Fatalf("keys %v, want %v", got, want)
	}
	if _, ok := want["c1"]; !ok {
		t.Fatalf("a cluster-scoped key is the bare name: %v", want)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// BenchmarkKeySetMemory measures the heap a KeySet takes per object
// (10,000 objects with namespaced names and UIDs as the API server makes
// them; the UIDs are shared with the objects, the keys are not).
func BenchmarkKeySetMemory(b *testing.B) {
	const n = 10000
	list := &unstructured.UnstructuredList{}
	for i := range n {
		w := widget(fmt.Sprintf("widget-%06d", i), "5")
		w.SetNamespace(fmt.Sprintf("team-%02d", i%20))
		w.SetUID(types.UID(fmt.Sprintf("%08x-1234-4abc-9def-%012x", i, i)))
		list.Items = append(list.Items, *w)
	}
	var perObject float64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		k := &KeySet{}
		k.beginList()
		k.listPage(list)
		k.endList()
		runtime.GC()
		runtime.ReadMemStats(&after)
		perObject = float64(after.HeapAlloc-before.HeapAlloc) / n
		runtime.KeepAlive(k)
	}
	b.ReportMetric(perObject, "B/object")
}

// A Switch (or Relist) while a watch request is on its way to the server
// — after the gate chose to watch, before the stream became active —
// finds no stream to end; the watch that then opens may be of the old
// shard (the filter read it before the call). It must end "expired" so
// the reflector lists the new shard. Before the fix the stream stayed
// open for good with the old shard, the phase Relisting and nothing to
// end it: the objects of the new shard never came (the soak's shard
// group, a member missing an object for 90 s after a connection cut).
func TestSwitchWhileWatchRequestInFlight(t *testing.T) {
	for _, how := range []string{"Switch", "Relist", "Switch during a watch-list relist", "Relist during a watch-list relist"} {
		t.Run(how, func(t *testing.T) {
			leaks(t)
			f := newSwitchFixture(t)
			if _, err := f.lw.ListWithContext(context.Background(), metav1.ListOptions{}); err != nil {
				t.Fatal(err)
			}
			opts := metav1.ListOptions{ResourceVersion: "10"}
			if strings.HasSuffix(how, "watch-list relist") {
				opts.SendInitialEvents, opts.AllowWatchBookmarks = truePtr(), true
			}
			entered, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			f.inner.set(func(s *stubLW) {
				s.onWatch = func() { once.Do(func() { close(entered); <-release }) }
			})
			done := watchAsync(f.lw, opts)
			<-entered
			if strings.HasPrefix(how, "Switch") {
				f.lw.Switch()
			} else {
				f.lw.Relist()
			}
			close(release)
			r := <-done
			if r.err != nil {
				t.Fatal(r.err)
			}
			defer r.w.Stop()
			if got := summary(drain(t, r.w, -1)); !slices.Equal(got, []string{"ERROR:Expired"}) {
				t.Fatalf("the watch opened before the %s: %v, want it to end expired", how, got)
			}
			if p := f.lw.Phase(); p != Relisting {
				t.Fatalf("phase %v, want Relisting", p)
			}
		})
	}
}

// A relist the reflector streams (watch-list) after an earlier complete
// list: a Switch during its initial events must end the stream
// "expired", not switch inside it. The reflector waits for the bookmark
// that ends the initial events, and a switched stream never sends one:
// before the fix the key set stayed Valid from the earlier list, the
// stream was switched (its first event an add of the new list, no
// initial-events-end bookmark), and the reflector kept every later event
// in its temporary store, the cache frozen (the soak's shard member with
// 2 missing and 7 stale objects for 90 s after a refuse fault, client-go
// warning "hasn't received required bookmark event marking the end of
// initial events stream").
func TestSwitchDuringWatchListRelist(t *testing.T) {
	leaks(t)
	f := newSwitchFixture(t)
	w := listAndWatch(t, f.lw)
	w.Stop()
	drain(t, w, -1)
	if !f.lw.Keys.Valid() {
		t.Fatal("keys not valid after a complete list")
	}
	ctx := context.Background()
	ws, err := f.lw.WatchWithContext(ctx, metav1.ListOptions{SendInitialEvents: truePtr(), AllowWatchBookmarks: true, ResourceVersion: "10"})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Stop()
	_, fake := f.inner.lastWatch()
	fake.Add(uidWidget("w1", "11")) // an initial event
	if got := summary(drain(t, ws, 1)); !slices.Equal(got, []string{"ADDED:w1@11"}) {
		t.Fatalf("initial event: %v", got)
	}
	if f.lw.Keys.Valid() {
		t.Error("keys valid during a watch-list stream's initial events")
	}
	f.lw.Switch()
	if got := summary(drain(t, ws, 1)); !slices.Equal(got, []string{"ERROR:Expired"}) {
		t.Fatalf("after a switch during the initial events: %v, want the stream to end expired", got)
	}
	if p := f.lw.Phase(); p != Relisting {
		t.Fatalf("phase %v, want Relisting", p)
	}
}
