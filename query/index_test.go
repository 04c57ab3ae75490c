package query

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/internal/leakcheck"
)

// walk returns the keys of every page of q.
func walk(t *testing.T, run func(Query) (*Page[runtime.Object], error), q Query) []string {
	t.Helper()
	var keys []string
	for {
		p, err := run(q)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, itemKeys(t, p.Items)...)
		if p.Continue == "" {
			return keys
		}
		q.Continue = p.Continue
	}
}

// TestIndexesOnInformer: queries on a running shared informer through
// Indexes give Scan's answers before the index has caught up and after,
// and follow the informer's events.
func TestIndexesOnInformer(t *testing.T) {
	defer leakcheck.Snapshot("tools/cache.")(t)
	w := newWorld()
	for i := 0; i < 300; i++ {
		ph := modelPhases[i%3]
		r := int64(i % 7)
		w.put(&mobj{ns: modelNamespaces[i%3], name: fmt.Sprintf("w%03d", i), phase: &ph, replicas: &r, created: modelEpoch})
	}
	fw := watch.NewFakeWithChanSize(64, false)
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			l := &unstructured.UnstructuredList{Object: map[string]interface{}{"apiVersion": "v1", "kind": "List"}}
			l.SetResourceVersion(fmt.Sprint(w.rv))
			for _, o := range w.store.List() {
				l.Items = append(l.Items, *o.(*unstructured.Unstructured))
			}
			return l, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return fw, nil },
	}
	inf := toolscache.NewSharedIndexInformer(listWatchOnly{lw}, &unstructured.Unstructured{}, 0,
		toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go inf.RunWithContext(ctx)
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("no sync")
	}
	x := NewIndexes(inf)
	defer x.Close()
	q := New().InNamespaces("a", "b").Where("status.phase", In, String("Running"), String("Failed")).
		SortBy(Desc("spec.replicas")).WithLimit(7)
	scan := func(q Query) (*Page[runtime.Object], error) { return Scan(FromIndexer(inf.GetIndexer()), q) }
	want := walk(t, scan, q)
	if got := walk(t, x.Query, q); !slices.Equal(got, want) { // first use: built now, answered by Scan or the index
		t.Fatalf("first use:\n got %v\nwant %v", got, want)
	}
	ii, _ := x.index(mustCompile(t, q), false)
	waitFor(t, ii.reg.HasSynced)
	if got := walk(t, ii.idx.Query, q); !slices.Equal(got, want) {
		t.Fatalf("index:\n got %v\nwant %v", got, want)
	}

	// Events reach the index: change, add and delete through the watch.
	for i := 0; i < 30; i++ {
		m := *w.objs[fmt.Sprintf("a/w%03d", i*3)]
		r := int64(10 + i)
		m.replicas = &r
		w.put(&m)
		fw.Modify(m.render())
	}
	added := &mobj{ns: "b", name: "new", phase: &modelPhases[1], created: modelEpoch}
	w.put(added)
	fw.Add(added.render())
	gone := w.objs["b/w001"]
	w.remove("b/w001")
	fw.Delete(gone.render())
	waitFor(t, func() bool { return ii.idx.caughtUp(w.rv-1) && ii.idx.Len() == len(w.objs) })
	want = walk(t, scan, q)
	if got := walk(t, x.Query, q); !slices.Equal(got, want) {
		t.Fatalf("after events:\n got %v\nwant %v", got, want)
	}
	if !slices.Contains(want, "b/new") || slices.Contains(want, "b/w001") {
		t.Fatalf("events not applied: %v", want)
	}
	x.Close()
	if _, err := x.Query(q); err != ErrClosed {
		t.Fatalf("after Close: %v", err)
	}
	cancel()
}

// listWatchOnly lists then watches (the fake watch sends no initial
// events, so the reflector must not ask for a streamed list).
type listWatchOnly struct{ *toolscache.ListWatch }

func (listWatchOnly) IsWatchListSemanticsUnSupported() bool { return true }

func mustCompile(t *testing.T, q Query) *plan {
	p, err := compile(q)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatal("condition not met")
	}
}

// TestMetadataOnly: a metadata-only cache (PartialObjectMetadata) answers
// metadata queries as the same objects in full would.
func TestMetadataOnly(t *testing.T) {
	full := newWorld()
	meta := newWorld()
	meta.form = func(u *unstructured.Unstructured) interface{} {
		return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: u.GetAPIVersion(), Kind: u.GetKind()},
			ObjectMeta: metav1.ObjectMeta{Namespace: u.GetNamespace(), Name: u.GetName(), Labels: u.GetLabels(),
				ResourceVersion: u.GetResourceVersion(), CreationTimestamp: u.GetCreationTimestamp()}}
	}
	for i := 0; i < 120; i++ {
		m := &mobj{ns: modelNamespaces[i%3], name: fmt.Sprintf("w%03d", i), app: modelApps[i%4],
			created: modelEpoch.Add(time.Duration(i%11) * time.Hour)}
		full.put(m)
		mm := *m
		meta.put(&mm)
	}
	for _, q := range []Query{
		New().SortBy(Desc("metadata.creationTimestamp")).WithLimit(9),
		New().WithLabels("app in (web,db)").Where("metadata.name", Prefix, String("w0")).SortBy(Asc("metadata.labels.app")).WithLimit(4),
		New().Where("metadata.creationTimestamp", Ge, Time(modelEpoch.Add(5*time.Hour))).Where("metadata.namespace", Ne, String("b")).WithLimit(11),
	} {
		want := walk(t, full.index(t, q).Query, q)
		if len(want) == 0 {
			t.Fatalf("%s: nothing matches", q)
		}
		for name, run := range map[string]func(Query) (*Page[runtime.Object], error){
			"scan":  func(q Query) (*Page[runtime.Object], error) { return Scan(FromIndexer(meta.store), q) },
			"index": meta.index(t, q).Query,
		} {
			if got := walk(t, run, q); !slices.Equal(got, want) {
				t.Errorf("%s %s:\n got %v\nwant %v", name, q, got, want)
			}
		}
	}
}

// TestIndexOrderMismatch: an Index answers only its own order.
func TestIndexOrderMismatch(t *testing.T) {
	x, err := NewIndex(Asc("spec.replicas"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := x.Query(New().SortBy(Desc("spec.replicas"))); err != ErrIndexOrder {
		t.Fatalf("got %v", err)
	}
	if _, err := NewIndex(Asc("spec..x")); err == nil {
		t.Fatal("bad path accepted")
	}
}
