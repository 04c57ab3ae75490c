package listwatch

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/pager"

	"github.com/informerkit/informerkit/internal/leakcheck"
	"github.com/informerkit/informerkit/shard"
)

// Two shards, and UIDs chosen to fall in the first ("in-") or the second
// ("out-").
var firstHalf, secondHalf = mustStatic(0, 2), mustStatic(1, 2)

func mustStatic(i, n int) shard.Shard {
	s, err := shard.Static(i, n)
	if err != nil {
		panic(err)
	}
	return s
}

// uidIn returns a UID with the given prefix that falls in s.
func uidIn(prefix string, s shard.Shard) string {
	for i := 0; ; i++ {
		if u := fmt.Sprintf("%s%d", prefix, i); s.ContainsValue(u) {
			return u
		}
	}
}

func inShard(obj any) bool { return firstHalf.Contains(obj) }

func uidWidget(name, uid string) *unstructured.Unstructured {
	w := widget("a", name, "5")
	if strings.HasPrefix(uid, "in-") {
		uid = uidIn(uid, firstHalf)
	} else {
		uid = uidIn(uid, secondHalf)
	}
	w.SetUID(types.UID(uid))
	return w
}

func static(s shard.Shard) func() shard.Shard { return func() shard.Shard { return s } }

// A server that ignores the shard selector: every page carries it (the
// continue token does not remember it), items outside are dropped and
// counted, items inside are kept in order.
func TestShardFilterLists(t *testing.T) {
	var seen []metav1.ListOptions
	pages := []*unstructured.UnstructuredList{
		widgetList("10", uidWidget("w1", "in-1"), uidWidget("w2", "out-2")),
		widgetList("10", uidWidget("w3", "out-3"), uidWidget("w4", "in-4")),
	}
	funcs := Funcs{List: func(_ context.Context, ns string, o metav1.ListOptions) (runtime.Object, error) {
		seen = append(seen, o)
		i := 0
		if o.Continue != "" {
			i = 1
		}
		l := pages[i].DeepCopy()
		if i == 0 {
			l.SetContinue("page-2")
		}
		return l, nil
	}}
	var outside atomic.Int64
	var listed []shard.Shard
	f := &ShardFilter{Current: static(firstHalf), Outside: func(n int) { outside.Add(int64(n)) },
		Listed: func(s shard.Shard) { listed = append(listed, s) }}
	lw := &Single{Funcs: f.Funcs(funcs), Selectors: Selectors{Label: "a=b"}}
	p := pager.New(lw.ListWithContext)
	obj, _, err := p.List(context.Background(), metav1.ListOptions{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	items, err := meta.ExtractList(obj) // the pager merges pages into an internal list
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, it := range items {
		names = append(names, it.(*unstructured.Unstructured).GetName())
	}
	if strings.Join(names, ",") != "w1,w4" {
		t.Fatalf("kept %v, want w1,w4", names)
	}
	if outside.Load() != 2 {
		t.Fatalf("outside %d, want 2", outside.Load())
	}
	if len(seen) != 2 {
		t.Fatalf("%d pages requested, want 2", len(seen))
	}
	if len(listed) != 1 || !listed[0].Equal(firstHalf) {
		t.Fatalf("Listed calls %v, want one with the first half", listed)
	}
	for i, o := range seen {
		if o.ShardSelector != firstHalf.Selector() || o.LabelSelector != "a=b" {
			t.Fatalf("page %d sent %+v without the selectors", i, o)
		}
	}
}

func TestShardFilterMetadataAndOtherLists(t *testing.T) {
	md := &metav1.PartialObjectMetadataList{Items: []metav1.PartialObjectMetadata{
		{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: types.UID(uidIn("in-a", firstHalf))}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b", UID: types.UID(uidIn("out-b", secondHalf))}},
	}}
	if n, err := filterList(md, inShard); err != nil || n != 1 || len(md.Items) != 1 || md.Items[0].Name != "a" {
		t.Fatalf("metadata list: dropped %d, err %v, items %v", n, err, md.Items)
	}
	// Any other list type goes through meta.ExtractList/SetList.
	typed := &metav1.List{Items: []runtime.RawExtension{
		{Object: uidWidget("c", "out-c")}, {Object: uidWidget("d", "in-d")},
	}}
	if n, err := filterList(typed, inShard); err != nil || n != 1 || len(typed.Items) != 1 {
		t.Fatalf("generic list: dropped %d, err %v, items %d", n, err, len(typed.Items))
	}
}

// Watch events outside the shard are dropped (and counted); bookmarks and
// errors pass; Stop ends the forwarding goroutine and the server watch.
func TestShardFilterWatch(t *testing.T) {
	check := leakcheck.Snapshot("informerkit/dynamicinformer/internal/listwatch.")
	server := watch.NewRaceFreeFake()
	var sent metav1.ListOptions
	funcs := Funcs{Watch: func(_ context.Context, _ string, o metav1.ListOptions) (watch.Interface, error) {
		sent = o
		return server, nil
	}}
	var outside atomic.Int64
	f := &ShardFilter{Current: static(firstHalf), Outside: func(n int) { outside.Add(int64(n)) }}
	lw := &Single{Funcs: f.Funcs(funcs)}
	w, err := lw.WatchWithContext(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sent.ShardSelector != firstHalf.Selector() {
		t.Fatalf("watch sent without the shard selector: %+v", sent)
	}
	bookmark := widget("", "", "20")
	server.Add(uidWidget("w1", "out-1"))
	server.Add(uidWidget("w2", "in-2"))
	server.Modify(uidWidget("w1", "out-1"))
	server.Delete(uidWidget("w1", "out-1"))
	server.Action(watch.Bookmark, bookmark)
	server.Delete(uidWidget("w2", "in-2"))
	server.Error(&metav1.Status{Message: "gone"})
	var got []string
	for len(got) < 4 {
		select {
		case ev := <-w.ResultChan():
			name := ""
			if m, ok := ev.Object.(interface{ GetName() string }); ok {
				name = m.GetName()
			}
			got = append(got, string(ev.Type)+":"+name)
		case <-time.After(5 * time.Second):
			t.Fatalf("events so far %v", got)
		}
	}
	if strings.Join(got, " ") != "ADDED:w2 BOOKMARK: DELETED:w2 ERROR:" {
		t.Fatalf("events %v", got)
	}
	if outside.Load() != 3 {
		t.Fatalf("outside %d, want 3", outside.Load())
	}
	w.Stop()
	w.Stop()
	if !server.IsStopped() {
		t.Fatal("server watch not stopped")
	}
	if _, ok := <-w.ResultChan(); ok {
		t.Fatal("result channel open after Stop")
	}
	check(t)
}

// The server's watch ends: the filtered watch's channel closes.
func TestShardFilterWatchEndsWithServer(t *testing.T) {
	check := leakcheck.Snapshot("informerkit/dynamicinformer/internal/listwatch.")
	server := watch.NewRaceFreeFake()
	f := &ShardFilter{Current: static(firstHalf)}
	w, _ := f.Funcs(Funcs{Watch: func(context.Context, string, metav1.ListOptions) (watch.Interface, error) { return server, nil }}).
		Watch(context.Background(), "", metav1.ListOptions{})
	server.Stop()
	select {
	case _, ok := <-w.ResultChan():
		if ok {
			t.Fatal("unexpected event")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("channel not closed after the server's watch ended")
	}
	check(t)
}

// The shard changes in the middle of a list: the list's later pages keep
// the first page's shard (selector and filter), so the list is one
// shard's complete list, and Listed names that shard; the next list and
// the next watch use the new shard. A watch-list stream is complete when
// the reader has taken its initial-events-end bookmark.
func TestShardFilterSwitchMidList(t *testing.T) {
	check := leakcheck.Snapshot("informerkit/dynamicinformer/internal/listwatch.")
	var current atomic.Pointer[shard.Shard]
	current.Store(&firstHalf)
	var sent []string
	server := watch.NewRaceFreeFake()
	funcs := Funcs{
		List: func(_ context.Context, _ string, o metav1.ListOptions) (runtime.Object, error) {
			sent = append(sent, o.ShardSelector)
			l := widgetList("10", uidWidget("w1", "in-1"), uidWidget("w2", "out-2"))
			if o.Continue == "" {
				l.SetContinue("more")
			}
			return l, nil
		},
		Watch: func(_ context.Context, _ string, o metav1.ListOptions) (watch.Interface, error) {
			sent = append(sent, o.ShardSelector)
			return server, nil
		},
	}
	var listed []shard.Shard
	f := &ShardFilter{Current: func() shard.Shard { return *current.Load() }, Listed: func(s shard.Shard) { listed = append(listed, s) }}
	ff := f.Funcs(funcs)
	ctx := context.Background()
	first, err := ff.List(ctx, "", metav1.ListOptions{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	current.Store(&secondHalf)
	second, err := ff.List(ctx, "", metav1.ListOptions{Limit: 2, Continue: "more"})
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range []runtime.Object{first, second} {
		items := l.(*unstructured.UnstructuredList).Items
		if len(items) != 1 || items[0].GetName() != "w1" {
			t.Fatalf("page %d filtered by the wrong shard: %d items", i, len(items))
		}
	}
	if sent[0] != firstHalf.Selector() || sent[1] != firstHalf.Selector() {
		t.Fatalf("pages sent %q", sent)
	}
	if len(listed) != 1 || !listed[0].Equal(firstHalf) {
		t.Fatalf("listed %v, want the first half once", listed)
	}
	if _, err := ff.List(ctx, "", metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if sent[2] != secondHalf.Selector() {
		t.Fatalf("a new list after the switch sent %q", sent[2])
	}
	// A watch-list stream with the second shard.
	w, err := ff.Watch(ctx, "", metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sent[len(sent)-1] != secondHalf.Selector() {
		t.Fatalf("watch sent %q", sent[len(sent)-1])
	}
	listed = nil
	bm := widget("", "", "30")
	bm.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
	server.Add(uidWidget("w2", "out-2"))
	server.Action(watch.Bookmark, bm)
	ev := <-w.ResultChan()
	if ev.Type != watch.Added {
		t.Fatalf("first event %v", ev.Type)
	}
	ev = <-w.ResultChan()
	if ev.Type != watch.Bookmark {
		t.Fatalf("second event %v", ev.Type)
	}
	w.Stop()
	for range w.ResultChan() {
	}
	if len(listed) != 1 || !listed[0].Equal(secondHalf) {
		t.Fatalf("watch-list: listed %v, want the second half", listed)
	}
	check(t)
}

// A list made with a DeferListed context completes without calling
// Listed; Run makes the call, once.
func TestShardFilterDeferredListed(t *testing.T) {
	var listed atomic.Int32
	f := &ShardFilter{Current: static(firstHalf), Listed: func(s shard.Shard) {
		if !s.Equal(firstHalf) {
			t.Errorf("Listed(%v)", s)
		}
		listed.Add(1)
	}}
	funcs := f.Funcs(Funcs{List: func(context.Context, string, metav1.ListOptions) (runtime.Object, error) {
		return widgetList("10", uidWidget("w1", "in-1")), nil
	}})
	ctx, d := DeferListed(context.Background())
	if _, err := funcs.List(ctx, "", metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := listed.Load(); n != 0 {
		t.Fatalf("Listed called %d times before Run", n)
	}
	d.Run()
	d.Run()
	if n := listed.Load(); n != 1 {
		t.Fatalf("Listed called %d times after Run, want 1", n)
	}
	if _, err := funcs.List(context.Background(), "", metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := listed.Load(); n != 2 {
		t.Fatalf("a list without the context: Listed called %d times in all, want 2", n)
	}
}
