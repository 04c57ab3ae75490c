package cache

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/internal/labelindex"
)

func TestCompactRoundTrip(t *testing.T) {
	u := managedObject()
	compact := NewCompactor(CompactorOptions{}).Transform
	obj, err := Chain(StripManagedFields, compact)(u.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	c, ok := obj.(*Compact)
	if !ok {
		t.Fatalf("Compactor.Transform returned %T", obj)
	}
	want := u.DeepCopy()
	StripManagedFields(want)
	got, err := c.Decode()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Object, want.Object) {
		t.Errorf("decoded %v\nwant %v", got.Object, want.Object)
	}
	// Keys, label index and owner index work on the compact form.
	if k, _ := toolscache.MetaNamespaceKeyFunc(c); k != "ns/a" {
		t.Errorf("key %q", k)
	}
	if v, _ := labelindex.LabelIndexFunc(c); !reflect.DeepEqual(sorted(v), []string{"app", "app=web"}) {
		t.Errorf("label index %v", v)
	}
	if v, _ := ownerUIDIndexFunc(c); !reflect.DeepEqual(v, []string{"o"}) {
		t.Errorf("owner index %v", v)
	}
	f, _ := fieldIndexFunc("status.phase")
	if v, _ := f(c); !reflect.DeepEqual(v, []string{"Running"}) {
		t.Errorf("field index %v", v)
	}
	if again, _ := compact(c); again != c {
		t.Error("Compactor.Transform is not idempotent")
	}
	ts, _ := compact(toolscache.DeletedFinalStateUnknown{Key: "ns/a", Obj: u})
	if _, ok := ts.(toolscache.DeletedFinalStateUnknown).Obj.(*Compact); !ok {
		t.Errorf("tombstone not compacted: %#v", ts)
	}
}

func TestDecodingHandler(t *testing.T) {
	c, _ := NewCompact(widget("ns", "a", nil, nil))
	var got []interface{}
	h := DecodingHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { got = append(got, obj) },
		UpdateFunc: func(o, n interface{}) { got = append(got, o, n) },
		DeleteFunc: func(obj interface{}) { got = append(got, obj) },
	})
	h.OnAdd(c, true)
	h.OnUpdate(c, c)
	h.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "ns/a", Obj: c})
	for i, o := range got[:3] {
		if u, ok := o.(*unstructured.Unstructured); !ok || u.GetName() != "a" {
			t.Errorf("event %d: %T", i, o)
		}
	}
	if ts, ok := got[3].(toolscache.DeletedFinalStateUnknown); !ok || ts.Obj.(*unstructured.Unstructured).GetName() != "a" {
		t.Errorf("delete: %#v", got[3])
	}
}

func TestInternKeys(t *testing.T) {
	a, b := managedObject(), managedObject()
	for _, u := range []*unstructured.Unstructured{a, b} {
		if _, err := InternKeys(u); err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(a, managedObject()) {
		t.Error("InternKeys changed the object's content")
	}
	keyOf := func(m map[string]interface{}, want string) *byte {
		for k := range m {
			if k == want {
				return unsafe.StringData(k)
			}
		}
		return nil
	}
	ma, mb := a.Object["metadata"].(map[string]interface{}), b.Object["metadata"].(map[string]interface{})
	if keyOf(ma, "resourceVersion") != keyOf(mb, "resourceVersion") || keyOf(a.Object, "spec") != keyOf(b.Object, "spec") {
		t.Error("keys of two objects are not shared")
	}
	// Already interned: no write (the race detector would flag one racing
	// with this reader); tombstones are untouched.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 50; i++ {
			_ = fmt.Sprint(a.Object)
		}
	}()
	InternKeys(a)
	<-done
	ts := toolscache.DeletedFinalStateUnknown{Key: "k", Obj: a}
	if out, _ := InternKeys(ts); !reflect.DeepEqual(out, ts) {
		t.Error("tombstone changed")
	}
}

func TestMutationDetectorOnCompact(t *testing.T) {
	u := managedObject()
	now := metav1.Now()
	u.SetDeletionTimestamp(&now)
	c, err := NewCompact(u)
	if err != nil {
		t.Fatal(err)
	}
	d := NewMutationDetector()
	d.addObject(c)
	if err := d.Verify(); err != nil {
		t.Fatal(err)
	}
	c.name = "mutated"
	if err := d.Verify(); err == nil {
		t.Error("mutation of a Compact not detected")
	}
	// A setter panics: a Compact is immutable.
	func() {
		defer func() {
			err, _ := recover().(error)
			if !errors.Is(err, ErrCachedObjectMutated) {
				t.Errorf("SetName on a Compact: recovered %v, want an error wrapping ErrCachedObjectMutated", err)
			}
		}()
		c.GetObjectMeta().SetName("x")
	}()
	func() {
		defer func() {
			if err, _ := recover().(error); !errors.Is(err, ErrCachedObjectMutated) {
				t.Errorf("SetGroupVersionKind on a Compact: recovered %v", err)
			}
		}()
		c.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{Kind: "Other"})
	}()
}
