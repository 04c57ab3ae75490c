package genericlister

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"

	ikcache "github.com/informerkit/informerkit/cache"
)

// TestCompactReads reads a compact-mode indexer through Lister and the
// generic adapter: reads are kept and shared (by Get and List alike), an
// update or delete is seen by the next read, and copies
// leave the cache untouched.
func TestCompactReads(t *testing.T) {
	c := ikcache.NewCompactor(ikcache.CompactorOptions{})
	d := ikcache.NewMutationDetector()
	idx := d.WrapIndexer(toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc}))
	put := func(u *unstructured.Unstructured) {
		t.Helper()
		obj, err := c.Transform(u)
		if err != nil {
			t.Fatal(err)
		}
		if err := idx.Update(obj); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 10; i++ {
		put(newObject("ns", fmt.Sprint("w", i), map[string]string{"app": "web"}))
	}
	l := New(idx, widgets)

	g1, err := l.Namespace("ns").Get("w1")
	if err != nil {
		t.Fatal(err)
	}
	g2, _ := l.Namespace("ns").Get("w1")
	gg, _ := NewGeneric(l.indexer, l.resource).ByNamespace("ns").Get("w1")
	if g1 != g2 || gg != g1 {
		t.Error("Get of a kept object is not the shared object")
	}

	byName := func(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
		m := map[string]*unstructured.Unstructured{}
		for _, o := range objs {
			m[o.GetName()] = o
		}
		return m
	}
	l1, _ := l.Namespace("ns").List(labels.Everything())
	l2, _ := l.Namespace("ns").List(labels.Everything())
	l3, _ := l.Namespace("ns").List(labels.Everything())
	m1, m2, m3 := byName(l1), byName(l2), byName(l3)
	if len(m3) != 10 || m1["w1"] != g1 {
		t.Fatalf("list: %d objects; Get's object not shared", len(m3))
	}
	if m1["w5"] != m2["w5"] || m2["w5"] != m3["w5"] {
		t.Error("a List's objects are not kept")
	}

	// Update w1: the next reads see the new version.
	nu := newObject("ns", "w1", map[string]string{"app": "db"})
	nu.Object["spec"] = map[string]interface{}{"size": int64(99)}
	put(nu)
	for _, get := range []func() (*unstructured.Unstructured, error){
		func() (*unstructured.Unstructured, error) { return l.Namespace("ns").Get("w1") },
		func() (*unstructured.Unstructured, error) {
			o, err := NewGeneric(l.indexer, l.resource).ByNamespace("ns").Get("w1")
			if err != nil {
				return nil, err
			}
			return o.(*unstructured.Unstructured), nil
		},
	} {
		u, err := get()
		if err != nil || u.GetLabels()["app"] != "db" || u.Object["spec"].(map[string]interface{})["size"] != int64(99) {
			t.Errorf("read after update: %v, %v", u, err)
		}
	}
	web, _ := l.List(labels.SelectorFromSet(labels.Set{"app": "web"}))
	if len(web) != 9 {
		t.Errorf("app=web after the update: %d objects, want 9", len(web))
	}
	if m := byName(mustList(t, l)); m["w1"].GetLabels()["app"] != "db" {
		t.Error("List after update serves the old w1")
	}

	// Delete w2.
	old, _, _ := idx.GetByKey("ns/w2")
	if err := idx.Delete(old); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Namespace("ns").Get("w2"); !apierrors.IsNotFound(err) {
		t.Errorf("Get after delete: %v", err)
	}

	// Copies are private.
	cp, _ := deepCopy(l.Namespace("ns").Get("w3"))
	cp.SetLabels(map[string]string{"app": "changed"})
	cp.Object["spec"].(map[string]interface{})["size"] = int64(-1)
	lc, _ := deepCopies(l.List(nil))
	for _, u := range lc {
		u.SetName("changed")
	}
	if u, _ := l.Namespace("ns").Get("w3"); u.GetLabels()["app"] != "web" || u.Object["spec"].(map[string]interface{})["size"] != int64(2) {
		t.Errorf("copies changed the shared object: %v", u.Object)
	}
	if err := d.Verify(); err != nil {
		t.Error(err)
	}
}

func mustList(t *testing.T, l *Lister) []*unstructured.Unstructured {
	t.Helper()
	objs, err := l.List(nil)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// TestCompactViews lists and gets the Compacts of a compact-mode indexer
// without decoding them: the same objects as List, by the same selectors
// and namespaces, with nothing kept by the Compactor; a normal cache is
// refused with ErrNotCompact, a missing object is NotFound.
func TestCompactViews(t *testing.T) {
	c := ikcache.NewCompactor(ikcache.CompactorOptions{})
	idx := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	if err := idx.AddIndexers(ikcache.LabelKeyIndexers("app")); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 30; i++ {
		u := newObject(fmt.Sprint("ns", i%3), fmt.Sprint("w", i), map[string]string{"app": fmt.Sprint("a", i%2)})
		u.Object["spec"] = map[string]interface{}{"size": int64(i)}
		obj, err := c.Transform(u)
		if err != nil {
			t.Fatal(err)
		}
		if err := idx.Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	l := New(idx, widgets)
	names := func(objs []*ikcache.Compact) map[string]int64 {
		m := map[string]int64{}
		for _, o := range objs {
			size, found, err := nestedInt64(o, "spec", "size")
			if !found || err != nil {
				t.Fatalf("%s: spec.size %v %v", o.GetObjectMeta().GetName(), found, err)
			}
			m[o.GetObjectMeta().GetNamespace()+"/"+o.GetObjectMeta().GetName()] = size
		}
		return m
	}
	for _, sel := range []labels.Selector{labels.Everything(), labels.SelectorFromSet(labels.Set{"app": "a1"}), labels.Nothing()} {
		before := c.Stats()
		views, err := l.ListCompact(sel)
		if err != nil {
			t.Fatal(err)
		}
		nsViews, err := l.Namespace("ns1").ListCompact(sel)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := len(views), 30; sel.Empty() && got != want {
			t.Fatalf("ListCompact(everything) = %d objects, want %d", got, want)
		}
		// Reading the views keeps nothing; the decoded List below, the
		// reference, does.
		_ = names(views)
		if st := c.Stats(); st != before {
			t.Fatalf("ListCompact changed the Compactor: %+v, was %+v", st, before)
		}
		want, wantNS := map[string]int64{}, map[string]int64{}
		for _, ns := range []string{"", "ns1"} {
			var objs []*unstructured.Unstructured
			if ns == "" {
				objs, err = l.List(sel)
			} else {
				objs, err = l.Namespace(ns).List(sel)
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range objs {
				size, _, _ := unstructured.NestedInt64(o.Object, "spec", "size")
				if ns == "" {
					want[o.GetNamespace()+"/"+o.GetName()] = size
				} else {
					wantNS[o.GetNamespace()+"/"+o.GetName()] = size
				}
			}
		}
		if got := names(views); !reflect.DeepEqual(got, want) {
			t.Errorf("ListCompact(%v) = %v, List = %v", sel, got, want)
		}
		if got := names(nsViews); !reflect.DeepEqual(got, wantNS) {
			t.Errorf("Namespace(ns1).ListCompact(%v) = %v, List = %v", sel, got, wantNS)
		}
	}
	v, err := l.Namespace("ns2").GetCompact("w5")
	if err != nil || v.GetObjectMeta().GetName() != "w5" || v.GetObjectMeta().GetNamespace() != "ns2" {
		t.Fatalf("GetCompact = %v, %v", v, err)
	}
	if u, err := v.Shared(); err != nil || u.GetName() != "w5" {
		t.Fatalf("Shared of the view: %v, %v", u, err)
	}
	if _, err := l.Namespace("ns2").GetCompact("missing"); !apierrors.IsNotFound(err) {
		t.Fatalf("GetCompact of a missing object: %v, want NotFound", err)
	}
	if _, err := l.GetCompact("ns0/w0"); err != nil {
		t.Fatalf("Lister.GetCompact by key: %v", err)
	}

	plain := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
	if err := plain.Add(newObject("ns", "p", nil)); err != nil {
		t.Fatal(err)
	}
	pl := New(plain, widgets)
	if _, err := pl.ListCompact(labels.Everything()); !errors.Is(err, ErrNotCompact) {
		t.Fatalf("ListCompact of a normal cache: %v, want ErrNotCompact", err)
	}
	if _, err := pl.Namespace("ns").GetCompact("p"); !errors.Is(err, ErrNotCompact) {
		t.Fatalf("GetCompact of a normal cache: %v, want ErrNotCompact", err)
	}
}
