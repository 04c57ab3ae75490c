package genericlister

import (
	"errors"
	"reflect"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"

	ikcache "github.com/informerkit/informerkit/cache"
	"github.com/informerkit/informerkit/internal/labelindex"
)

func TestGetCopiesAndNotFound(t *testing.T) {
	d := ikcache.NewMutationDetector()
	idx := d.WrapIndexer(toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, labelindex.LabelIndexers()))
	if err := idx.Add(newObject("ns", "a", map[string]string{"app": "web"})); err != nil {
		t.Fatal(err)
	}
	if err := idx.Add(newObject("", "cluster", nil)); err != nil {
		t.Fatal(err)
	}
	l := New(idx, widgets)
	if _, err := l.Namespace("ns").Get("missing"); !apierrors.IsNotFound(err) {
		t.Errorf("missing: %v", err)
	}
	if u, err := l.Get("cluster"); err != nil || u.GetName() != "cluster" {
		t.Errorf("cluster-scoped Get: %v %v", u, err)
	}
	if u, err := l.Get("ns/a"); err != nil || u.GetName() != "a" {
		t.Errorf("Get by key: %v %v", u, err)
	}
	// Copies are private: changing them leaves the cache intact.
	c, err := deepCopy(l.Namespace("ns").Get("a"))
	if err != nil {
		t.Fatal(err)
	}
	c.SetLabels(map[string]string{"app": "changed"})
	cs, err := deepCopies(l.List(labels.Everything()))
	if err != nil || len(cs) != 2 {
		t.Fatal(cs, err)
	}
	for _, u := range cs {
		u.SetName("changed")
	}
	nc, _ := deepCopies(l.Namespace("ns").List(nil))
	nc[0].SetNamespace("x")
	if err := d.Verify(); err != nil {
		t.Errorf("copying reads changed the cache: %v", err)
	}
	// Shared reads are the cached objects themselves.
	shared, _ := l.Namespace("ns").Get("a")
	cached, _, _ := idx.GetByKey("ns/a")
	if any(shared) != cached {
		t.Error("Get did not return the cached object")
	}
}

func TestByFieldAndByIndex(t *testing.T) {
	fi, err := ikcache.FieldIndexers("spec.size")
	if err != nil {
		t.Fatal(err)
	}
	withIndex := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, fi)
	without := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
	for _, idx := range []toolscache.Indexer{withIndex, without} {
		for _, o := range []struct{ ns, name string }{{"a", "x"}, {"b", "y"}, {"a", "zz"}} {
			if err := idx.Add(newObject(o.ns, o.name, nil)); err != nil { // spec.size = len(name)
				t.Fatal(err)
			}
		}
	}
	for name, idx := range map[string]toolscache.Indexer{"indexed": withIndex, "scan": without} {
		l := New(idx, widgets)
		got, err := l.ByField("spec.size", "1")
		if err != nil {
			t.Fatal(err)
		}
		if k := keysOf(t, got); !reflect.DeepEqual(k, []string{"a/x", "b/y"}) {
			t.Errorf("%s: ByField = %v", name, k)
		}
		got, err = l.Namespace("a").ByField("spec.size", "1")
		if err != nil {
			t.Fatal(err)
		}
		if k := keysOf(t, got); !reflect.DeepEqual(k, []string{"a/x"}) {
			t.Errorf("%s: namespaced ByField = %v", name, k)
		}
		if _, err := l.ByField("spec..size", "1"); !errors.Is(err, ikcache.ErrInvalidFieldPath) {
			t.Errorf("%s: malformed path: %v", name, err)
		}
	}
	l := New(withIndex, widgets)
	got, err := l.ByIndex(fieldIndexName("spec.size"), "2")
	if err != nil || len(got) != 1 || got[0].GetName() != "zz" {
		t.Errorf("ByIndex: %v %v", got, err)
	}
	if _, err := l.ByIndex("nope", "x"); err == nil {
		t.Error("ByIndex of a missing index succeeded")
	}
}

func TestListerOverPartialObjectMetadata(t *testing.T) {
	idx := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, fieldIndexers(ownerUIDPath))
	p := &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "example.com/v1", Kind: "Widget"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", Labels: map[string]string{"app": "web"}, OwnerReferences: []metav1.OwnerReference{{UID: "owner", Name: "o", Kind: "K", APIVersion: "v1"}}},
	}
	if err := idx.Add(p); err != nil {
		t.Fatal(err)
	}
	// Without the option the Lister returns objects as stored, and a
	// PartialObjectMetadata is not an Unstructured.
	if _, err := New(idx, widgets).Namespace("ns").Get("a"); !errors.Is(err, ErrWrongType) {
		t.Fatalf("Get over PartialObjectMetadata without ConvertToUnstructured = %v, want ErrWrongType", err)
	}
	if _, err := New(idx, widgets).List(nil); !errors.Is(err, ErrWrongType) {
		t.Fatalf("List over PartialObjectMetadata without ConvertToUnstructured = %v, want ErrWrongType", err)
	}
	l := New(idx, widgets, ConvertToUnstructured())
	u, err := l.Namespace("ns").Get("a")
	if err != nil || u.GetLabels()["app"] != "web" || u.GetKind() != "Widget" {
		t.Fatalf("Get over PartialObjectMetadata: %v %v", u, err)
	}
	u.SetLabels(nil) // a fresh conversion: the cache is unaffected
	if p.Labels["app"] != "web" {
		t.Error("conversion shared the label map")
	}
	owned, err := l.ByField(ownerUIDPath, "owner")
	if err != nil || len(owned) != 1 {
		t.Errorf("owner index over PartialObjectMetadata: %v %v", owned, err)
	}
}
