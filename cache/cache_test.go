package cache

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/internal/labelindex"
)

func widget(ns, name string, lbls map[string]string, spec map[string]interface{}) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "example.com/v1",
		"kind":       "Widget",
	}}
	u.SetNamespace(ns)
	u.SetName(name)
	if lbls != nil {
		u.SetLabels(lbls)
	}
	if spec != nil {
		u.Object["spec"] = spec
	}
	return u
}

func sorted(s []string) []string {
	s = append([]string(nil), s...)
	sort.Strings(s)
	return s
}

func TestLabelIndexFunc(t *testing.T) {
	lbls := map[string]string{"app": "web", "tier": "", "a.b/c": "x=y"}
	want := []string{"a.b/c", "a.b/c=x=y", "app", "app=web", "tier", "tier="}
	partial := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: lbls}}
	typed := &metav1.ObjectMeta{Labels: lbls} // any meta.Accessor object
	for name, obj := range map[string]interface{}{
		"unstructured": widget("ns", "u", lbls, nil),
		"partial":      partial,
		"typed":        typed,
	} {
		got, err := labelindex.LabelIndexFunc(obj)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(sorted(got), want) {
			t.Errorf("%s: labelindex.LabelIndexFunc = %v, want %v", name, sorted(got), want)
		}
	}
	for name, obj := range map[string]interface{}{
		"no labels":      widget("ns", "u", nil, nil),
		"not an object":  "hello",
		"bad label type": &unstructured.Unstructured{Object: map[string]interface{}{"metadata": map[string]interface{}{"labels": map[string]interface{}{"a": int64(1)}}}},
	} {
		got, err := labelindex.LabelIndexFunc(obj)
		if err != nil || len(got) != 0 {
			t.Errorf("%s: labelindex.LabelIndexFunc = %v, %v; want nothing", name, got, err)
		}
	}
}

func TestObjectLabelsMatchesGetLabels(t *testing.T) {
	objs := []*unstructured.Unstructured{
		widget("", "a", map[string]string{"app": "web"}, nil),
		widget("", "b", nil, nil),
		{Object: map[string]interface{}{"metadata": map[string]interface{}{"labels": map[string]interface{}{"n": nil, "app": "web"}}}},
		{Object: map[string]interface{}{"metadata": map[string]interface{}{"labels": map[string]interface{}{"x": true, "app": "web"}}}},
		{Object: map[string]interface{}{"metadata": "garbage"}},
	}
	sels := []string{"", "app=web", "app", "!app", "n", "n=", "app!=web", "x"}
	for i, u := range objs {
		view, ok := labelindex.ObjectLabels(u)
		if !ok {
			t.Fatalf("object %d: no labels view", i)
		}
		for _, s := range sels {
			sel, err := labels.Parse(s)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := sel.Matches(view), sel.Matches(labels.Set(u.GetLabels())); got != want {
				t.Errorf("object %d selector %q: view says %v, GetLabels says %v", i, s, got, want)
			}
		}
	}
	if _, ok := labelindex.ObjectLabels(42); ok {
		t.Error("labelindex.ObjectLabels(42) reported labels")
	}
}

func TestLabelIndexMaintainedByIndexer(t *testing.T) {
	idx := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, labelindex.LabelIndexers())
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(idx.Add(widget("ns", "a", map[string]string{"app": "web"}, nil)))
	must(idx.Add(widget("ns", "b", map[string]string{"app": "db"}, nil)))
	must(idx.Update(widget("ns", "a", map[string]string{"app": "db", "tier": "x"}, nil)))
	keys := func(v string) []string {
		k, err := idx.IndexKeys(labelindex.LabelIndex, v)
		must(err)
		return sorted(k)
	}
	if got := keys(labelindex.LabelIndexValue("app", "web")); len(got) != 0 {
		t.Errorf("app=web after relabel: %v", got)
	}
	if got := keys(labelindex.LabelIndexValue("app", "db")); !reflect.DeepEqual(got, []string{"ns/a", "ns/b"}) {
		t.Errorf("app=db: %v", got)
	}
	must(idx.Delete(widget("ns", "a", nil, nil)))
	if got := keys("tier"); len(got) != 0 {
		t.Errorf("tier after delete: %v", got)
	}
}

func TestParseFieldPath(t *testing.T) {
	good := map[string]string{
		"spec.nodeName":                             "spec.nodeName",
		".status.phase":                             "status.phase",
		"metadata.ownerReferences[*].uid":           "metadata.ownerReferences[*].uid",
		"spec.containers[0].image":                  "spec.containers[0].image",
		"metadata.labels['app.kubernetes.io/name']": "metadata.labels['app.kubernetes.io/name']",
		`metadata.annotations["it's"]`:              "metadata.annotations.it's",
		`metadata.annotations["a.'b"]`:              `metadata.annotations["a.'b"]`,
		"a[*][*]":                                   "a[*][*]",
		"['a.b'].c":                                 "['a.b'].c",
		"spec.a-b_c":                                "spec.a-b_c",
	}
	for in, canon := range good {
		p, err := parseFieldPath(in)
		if err != nil {
			t.Errorf("parse %q: %v", in, err)
			continue
		}
		if p.String() != canon {
			t.Errorf("parse %q: canonical %q, want %q", in, p.String(), canon)
		}
	}
	bad := []string{"", ".", "a.", "a..b", ".[*]x", "a[", "a[*", "a[x]", "a[1", "a['b", "a['b'", "a['']", "a]", "a[*]b", "a.[*]", "a[99999999]", "[*]..a"}
	for _, in := range bad {
		if _, err := parseFieldPath(in); !errors.Is(err, ErrInvalidFieldPath) {
			t.Errorf("parse %q: err = %v, want ErrInvalidFieldPath", in, err)
		}
	}
}

// FuzzParseFieldPath: the parser never panics, and whatever it accepts
// prints to a canonical form that parses back to the same path.
func FuzzParseFieldPath(f *testing.F) {
	for _, s := range []string{"spec.nodeName", "metadata.ownerReferences[*].uid", "a[0].b['c.d']", `x["y'z"]`, "[*]", ".a", "a[", "a]b"} {
		f.Add(s)
	}
	obj := map[string]interface{}{
		"a":    []interface{}{map[string]interface{}{"b": "x"}, "y", int64(3)},
		"spec": map[string]interface{}{"nodeName": "n1", "m": map[string]interface{}{"k": 1.5}},
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := parseFieldPath(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidFieldPath) {
				t.Fatalf("parse %q: error %v does not wrap ErrInvalidFieldPath", s, err)
			}
			return
		}
		if len(p) == 0 {
			t.Fatalf("parse %q: empty path without error", s)
		}
		back, err := parseFieldPath(p.String())
		if err != nil {
			t.Fatalf("canonical form %q of %q does not parse: %v", p.String(), s, err)
		}
		if !reflect.DeepEqual(back, p) {
			t.Fatalf("round trip of %q via %q: %#v != %#v", s, p.String(), back, p)
		}
		p.indexValues(obj) // must not panic on any shape
		if pr, err := Project(s); err == nil {
			if _, err := pr(&unstructured.Unstructured{Object: obj}); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestFieldIndexFunc(t *testing.T) {
	u := widget("ns", "a", nil, map[string]interface{}{
		"nodeName": "node-1",
		"replicas": int64(3),
		"ratio":    0.5,
		"paused":   false,
		"nothing":  nil,
		"obj":      map[string]interface{}{"x": "y"},
		"containers": []interface{}{
			map[string]interface{}{"image": "nginx"},
			map[string]interface{}{"image": "redis"},
			map[string]interface{}{"image": "nginx"},
			map[string]interface{}{"name": "no-image"},
		},
	})
	u.SetOwnerReferences([]metav1.OwnerReference{{UID: "u1", Name: "o1", Kind: "K", APIVersion: "v1"}, {UID: "u2", Name: "o2", Kind: "K", APIVersion: "v1"}})
	cases := map[string][]string{
		"spec.nodeName":                   {"node-1"},
		"spec.replicas":                   {"3"},
		"spec.ratio":                      {"0.5"},
		"spec.paused":                     {"false"},
		"spec.nothing":                    nil,
		"spec.obj":                        nil,
		"spec.missing":                    nil,
		"spec.nodeName.deeper":            nil,
		"spec.containers[*].image":        {"nginx", "redis"},
		"spec.containers[1].image":        {"redis"},
		"spec.containers[9].image":        nil,
		"metadata.ownerReferences[*].uid": {"u1", "u2"},
		"metadata.name":                   {"a"},
	}
	for path, want := range cases {
		f, err := fieldIndexFunc(path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := f(u)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(sorted(got), sorted(want)) {
			t.Errorf("%s: %v, want %v", path, got, want)
		}
	}
	if _, err := fieldIndexFunc("spec..x"); !errors.Is(err, ErrInvalidFieldPath) {
		t.Errorf("malformed path: %v", err)
	}
	if _, err := FieldIndexers("spec.a", "b["); err == nil {
		t.Error("FieldIndexers accepted a malformed path")
	}

	// Typed and metadata-only objects go through the converter.
	p := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", OwnerReferences: u.GetOwnerReferences()}}
	f, _ := fieldIndexFunc("metadata.ownerReferences[*].uid")
	for name, obj := range map[string]interface{}{"unstructured": u, "partial": p} {
		generic, _ := f(obj)
		fast, _ := ownerUIDIndexFunc(obj)
		if !reflect.DeepEqual(sorted(generic), []string{"u1", "u2"}) || !reflect.DeepEqual(sorted(fast), []string{"u1", "u2"}) {
			t.Errorf("%s: owner UIDs generic %v fast %v", name, generic, fast)
		}
	}
	// FieldIndexers of the owner path installs the fast function.
	fi, err := FieldIndexers(ownerUIDPath)
	if err != nil || len(fi) != 1 || fi[fieldIndexName(ownerUIDPath)] == nil {
		t.Fatalf("FieldIndexers(%q) = %v, %v", ownerUIDPath, fi, err)
	}
}

func TestFieldIndexersInIndexer(t *testing.T) {
	fi, err := FieldIndexers("spec.nodeName", "status.phase")
	if err != nil {
		t.Fatal(err)
	}
	idx := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, fi)
	for i := 0; i < 10; i++ {
		u := widget("ns", fmt.Sprint("w", i), nil, map[string]interface{}{"nodeName": fmt.Sprint("node-", i%3)})
		if err := idx.Add(u); err != nil {
			t.Fatal(err)
		}
	}
	keys, err := idx.IndexKeys(fieldIndexName("spec.nodeName"), "node-1")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"ns/w1", "ns/w4", "ns/w7"}; !reflect.DeepEqual(sorted(keys), want) {
		t.Errorf("node-1: %v, want %v", sorted(keys), want)
	}
}

// managedObject has what the API server writes and the transforms remove.
func managedObject() *unstructured.Unstructured {
	u := widget("ns", "a", map[string]string{"app": "web"}, map[string]interface{}{
		"size": int64(1), "color": "red",
		"containers": []interface{}{
			map[string]interface{}{"name": "c1", "image": "nginx"},
			map[string]interface{}{"name": "c2"},
		},
	})
	u.Object["status"] = map[string]interface{}{"phase": "Running"}
	u.SetUID("uid-1")
	u.SetResourceVersion("7")
	u.SetGeneration(3)
	u.SetFinalizers([]string{"f"})
	u.SetOwnerReferences([]metav1.OwnerReference{{UID: "o", Name: "o", Kind: "K", APIVersion: "v1"}})
	u.SetAnnotations(map[string]string{lastAppliedConfigAnnotation: "{}", "keep": "me"})
	u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{}}`)}}})
	u.SetSelfLink("/x")
	return u
}

func TestStripAndDrop(t *testing.T) {
	for name, tf := range map[string]toolscache.TransformFunc{
		"strip": StripManagedFields, "drop": DropLastAppliedConfiguration,
		"chain": Chain(StripManagedFields, nil, DropLastAppliedConfiguration),
	} {
		u := managedObject()
		out, err := tf(u)
		if err != nil {
			t.Fatal(err)
		}
		got := out.(*unstructured.Unstructured)
		_, hasMF := got.Object["metadata"].(map[string]interface{})["managedFields"]
		_, hasLA := got.GetAnnotations()[lastAppliedConfigAnnotation]
		wantMF, wantLA := name == "drop", name == "strip"
		if hasMF != wantMF || hasLA != wantLA {
			t.Errorf("%s: managedFields %v (want %v), last-applied %v (want %v)", name, hasMF, wantMF, hasLA, wantLA)
		}
		if got.GetAnnotations()["keep"] != "me" || got.GetName() != "a" {
			t.Errorf("%s: removed too much: %v", name, got.Object["metadata"])
		}
	}
	// Annotations map removed when last-applied was its only entry.
	u := managedObject()
	u.SetAnnotations(map[string]string{lastAppliedConfigAnnotation: "{}"})
	DropLastAppliedConfiguration(u)
	if _, ok := u.Object["metadata"].(map[string]interface{})["annotations"]; ok {
		t.Error("empty annotations map left behind")
	}

	// PartialObjectMetadata and typed objects.
	p := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: "p", ManagedFields: u.GetManagedFields(),
		Annotations: map[string]string{lastAppliedConfigAnnotation: "{}"},
	}}
	if _, err := Chain(StripManagedFields, DropLastAppliedConfiguration)(p); err != nil {
		t.Fatal(err)
	}
	if p.ManagedFields != nil || p.Annotations != nil {
		t.Errorf("partial not transformed: %+v", p.ObjectMeta)
	}
	// Other types pass through.
	for _, tf := range []toolscache.TransformFunc{StripManagedFields, DropLastAppliedConfiguration, mustProject(t, "spec")} {
		if out, err := tf("string"); err != nil || out != "string" {
			t.Errorf("pass-through: %v %v", out, err)
		}
	}
}

func TestTransformsLeaveTombstonesAndCleanObjectsUntouched(t *testing.T) {
	transforms := map[string]toolscache.TransformFunc{
		"strip":   StripManagedFields,
		"drop":    DropLastAppliedConfiguration,
		"project": mustProject(t, "spec.size", "spec.containers[*].image"),
		"chain":   Chain(StripManagedFields, DropLastAppliedConfiguration, mustProject(t, "spec")),
	}
	for name, tf := range transforms {
		// A tombstone's object (shared with the cache) is never modified;
		// the returned tombstone holds a transformed copy.
		cached := managedObject()
		before := cached.DeepCopy()
		out, err := tf(toolscache.DeletedFinalStateUnknown{Key: "ns/a", Obj: cached})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(cached, before) {
			t.Errorf("%s modified a tombstone's object", name)
		}
		ts, ok := out.(toolscache.DeletedFinalStateUnknown)
		if !ok || ts.Key != "ns/a" || ts.Obj == cached {
			t.Fatalf("%s: tombstone result %#v", name, out)
		}
		direct, _ := tf(managedObject())
		if !reflect.DeepEqual(ts.Obj, direct) {
			t.Errorf("%s: tombstone transform %v differs from direct %v", name, ts.Obj, direct)
		}
		// Idempotent, and a clean object is not written to (the race
		// detector would see a write racing with this reader).
		clean := direct.(runtime.Object)
		snapshot := clean.DeepCopyObject()
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; i < 100; i++ {
				_ = fmt.Sprint(clean)
			}
		}()
		again, err := tf(clean)
		<-done
		if err != nil || !reflect.DeepEqual(again, snapshot) || !reflect.DeepEqual(clean, snapshot) {
			t.Errorf("%s is not idempotent or wrote to a clean object", name)
		}
		// A clean tombstone comes back as is.
		cleanTS := toolscache.DeletedFinalStateUnknown{Key: "k", Obj: clean}
		if out, _ := tf(cleanTS); name != "project" && name != "chain" && !reflect.DeepEqual(out, cleanTS) {
			t.Errorf("%s: clean tombstone changed", name)
		}
	}
}

func TestProject(t *testing.T) {
	u := managedObject()
	out, err := mustProject(t, "spec.size", "spec.containers[*].image", "status")(u)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*unstructured.Unstructured)
	want := map[string]interface{}{
		"apiVersion": "example.com/v1",
		"kind":       "Widget",
		"metadata": map[string]interface{}{
			"name": "a", "namespace": "ns", "uid": "uid-1", "resourceVersion": "7",
			"generation":      int64(3),
			"labels":          map[string]interface{}{"app": "web"},
			"annotations":     map[string]interface{}{lastAppliedConfigAnnotation: "{}", "keep": "me"},
			"finalizers":      []interface{}{"f"},
			"ownerReferences": u.Object["metadata"].(map[string]interface{})["ownerReferences"],
		},
		"spec": map[string]interface{}{
			"size":       int64(1),
			"containers": []interface{}{map[string]interface{}{"image": "nginx"}, map[string]interface{}{}},
		},
		"status": map[string]interface{}{"phase": "Running"},
	}
	if !reflect.DeepEqual(got.Object, want) {
		t.Errorf("projection:\n got %v\nwant %v", got.Object, want)
	}
	if !reflect.DeepEqual(u, managedObject()) {
		t.Error("Project modified its input")
	}
	// A path that covers another wins; metadata paths keep more metadata.
	out, _ = mustProject(t, "spec", "spec.size", "metadata.managedFields")(managedObject())
	got = out.(*unstructured.Unstructured)
	if len(got.Object["spec"].(map[string]interface{})) != 3 || got.GetManagedFields() == nil {
		t.Errorf("covering paths: %v", got.Object)
	}
	if _, err := Project("spec.containers[0]"); !errors.Is(err, ErrInvalidFieldPath) {
		t.Errorf("[n] in projection: %v", err)
	}
	if _, err := Project("a..b"); !errors.Is(err, ErrInvalidFieldPath) {
		t.Errorf("malformed path: %v", err)
	}

	p := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "p", SelfLink: "/s", ManagedFields: u.GetManagedFields(), Labels: map[string]string{"a": "b"}}}
	mustProject(t, "spec")(p)
	if p.ManagedFields != nil || p.SelfLink != "" || p.Labels["a"] != "b" {
		t.Errorf("partial projection: %+v", p.ObjectMeta)
	}
	p.ManagedFields = u.GetManagedFields()
	mustProject(t, "metadata.managedFields")(p)
	if p.ManagedFields == nil {
		t.Error("projection dropped a listed metadata field")
	}
}

func TestMutationDetector(t *testing.T) {
	d := NewMutationDetector()
	idx := d.WrapIndexer(toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, labelindex.LabelIndexers()))
	a := widget("ns", "a", map[string]string{"app": "web"}, nil)
	b := widget("ns", "b", nil, nil)
	for _, o := range []interface{}{a, b} {
		if err := idx.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Verify(); err != nil {
		t.Fatalf("no mutation yet: %v", err)
	}
	// A careless reader mutates a cached object.
	obj, _, _ := idx.GetByKey("ns/a")
	obj.(*unstructured.Unstructured).SetLabels(map[string]string{"app": "hacked"})
	err := d.Verify()
	if !errors.Is(err, ErrCachedObjectMutated) || !strings.Contains(err.Error(), "ns/a") || strings.Contains(err.Error(), "ns/b") {
		t.Fatalf("Verify = %v, want a mutation of ns/a", err)
	}
	if err := d.Verify(); err != nil {
		t.Errorf("mutation reported twice: %v", err)
	}
	// Mutation found when the object leaves the cache.
	b.Object["spec"] = "changed"
	if err := idx.Update(widget("ns", "b", nil, nil)); err != nil {
		t.Fatal(err)
	}
	if err := d.Verify(); err == nil || !strings.Contains(err.Error(), "ns/b") {
		t.Errorf("Verify after replacing a mutated object = %v", err)
	}
	// Handler form.
	h := d.ResourceEventHandler()
	c := widget("ns", "c", nil, nil)
	h.OnAdd(c, false)
	c.SetName("other")
	h.OnDelete(c)
	if err := d.Verify(); err == nil {
		t.Error("handler-fed detector missed a mutation")
	}
}

// mustProject is Project for paths known to be well formed.
func mustProject(t testing.TB, paths ...string) toolscache.TransformFunc {
	t.Helper()
	f, err := Project(paths...)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
