package listwatch

import (
	"context"
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
)

// inShard: objects whose UID starts with "in-".
func inShard(obj runtime.Object) bool {
	m, ok := obj.(interface{ GetUID() types.UID })
	return ok && strings.HasPrefix(string(m.GetUID()), "in-")
}

func uidWidget(name, uid string) *unstructured.Unstructured {
	w := widget("a", name, "5")
	w.SetUID(types.UID(uid))
	return w
}

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
	f := ShardFilter{Contains: inShard, Outside: func(n int) { outside.Add(int64(n)) }}
	lw := &Single{Funcs: f.Funcs(funcs), Selectors: Selectors{Label: "a=b", Shard: "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"}}
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
	for i, o := range seen {
		if o.ShardSelector != lw.Selectors.Shard || o.LabelSelector != "a=b" {
			t.Fatalf("page %d sent %+v without the selectors", i, o)
		}
	}
}

func TestShardFilterMetadataAndOtherLists(t *testing.T) {
	f := ShardFilter{Contains: inShard}
	md := &metav1.PartialObjectMetadataList{Items: []metav1.PartialObjectMetadata{
		{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "in-a"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b", UID: "out-b"}},
	}}
	if n, err := f.filterList(md); err != nil || n != 1 || len(md.Items) != 1 || md.Items[0].Name != "a" {
		t.Fatalf("metadata list: dropped %d, err %v, items %v", n, err, md.Items)
	}
	// Any other list type goes through meta.ExtractList/SetList.
	typed := &metav1.List{Items: []runtime.RawExtension{
		{Object: uidWidget("c", "out-c")}, {Object: uidWidget("d", "in-d")},
	}}
	if n, err := f.filterList(typed); err != nil || n != 1 || len(typed.Items) != 1 {
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
	f := ShardFilter{Contains: inShard, Outside: func(n int) { outside.Add(int64(n)) }}
	lw := &Single{Funcs: f.Funcs(funcs), Selectors: Selectors{Shard: "s"}}
	w, err := lw.WatchWithContext(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sent.ShardSelector != "s" {
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
	f := ShardFilter{Contains: inShard}
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
