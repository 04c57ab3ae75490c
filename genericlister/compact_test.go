package genericlister

import (
	"fmt"
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
	gg, _ := l.Generic().ByNamespace("ns").Get("w1")
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
			o, err := l.Generic().ByNamespace("ns").Get("w1")
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
	cp, _ := l.Namespace("ns").GetCopy("w3")
	cp.SetLabels(map[string]string{"app": "changed"})
	cp.Object["spec"].(map[string]interface{})["size"] = int64(-1)
	lc, _ := l.ListCopy(nil)
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
