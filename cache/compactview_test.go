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

	"github.com/informerkit/informerkit/internal/decode"
	"github.com/informerkit/informerkit/internal/treecodec"
)

// viewPaths lists the paths of obj's fields (every map entry, to depth 6),
// and beside each a path that is absent and one that goes on past it (an
// error when the field is not a map, not found when it is null).
func viewPaths(obj map[string]interface{}) [][]string {
	out := [][]string{{}, {"absent"}, {"metadata", "absent"}, {"metadata", "annotations", "absent"}}
	var walk func(prefix []string, m map[string]interface{})
	walk = func(prefix []string, m map[string]interface{}) {
		if len(prefix) >= 6 {
			return
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := append(append([]string{}, prefix...), k)
			out = append(out, p, append(append([]string{}, p...), "beyond"))
			if sub, ok := m[k].(map[string]interface{}); ok {
				walk(p, sub)
			}
		}
		out = append(out, append(append([]string{}, prefix...), "no-such-key"))
	}
	walk(nil, obj)
	return out
}

// sameView checks that c, read as a view, answers what the decoded object
// want answers: every field NestedField reads, and every metav1.Object
// getter.
func sameView(t testing.TB, what string, c *Compact, want map[string]interface{}) {
	t.Helper()
	u := &unstructured.Unstructured{Object: want}
	for _, p := range viewPaths(want) {
		got, gotFound, gotErr := c.NestedField(p...)
		exp, expFound, expErr := unstructured.NestedFieldCopy(want, p...)
		if gotFound != expFound || !reflect.DeepEqual(got, exp) || (gotErr == nil) != (expErr == nil) ||
			(gotErr != nil && gotErr.Error() != expErr.Error()) {
			t.Fatalf("%s: NestedField(%q) = %#v, %v, %v; want %#v, %v, %v", what, p, got, gotFound, gotErr, exp, expFound, expErr)
		}
		gs, gsFound, gsErr := nestedString(c, p...)
		es, esFound, esErr := unstructured.NestedString(want, p...)
		if gs != es || gsFound != esFound || (gsErr == nil) != (esErr == nil) || (gsErr != nil && gsErr.Error() != esErr.Error()) {
			t.Fatalf("%s: NestedString(%q) = %q, %v, %v; want %q, %v, %v", what, p, gs, gsFound, gsErr, es, esFound, esErr)
		}
		gi, giFound, giErr := nestedInt64(c, p...)
		ei, eiFound, eiErr := unstructured.NestedInt64(want, p...)
		if gi != ei || giFound != eiFound || (giErr == nil) != (eiErr == nil) || (giErr != nil && giErr.Error() != eiErr.Error()) {
			t.Fatalf("%s: NestedInt64(%q) = %d, %v, %v; want %d, %v, %v", what, p, gi, giFound, giErr, ei, eiFound, eiErr)
		}
	}
	type meta struct {
		Namespace, Name, GenerateName, UID, RV, SelfLink string
		Generation                                       int64
		Created                                          metav1.Time
		Deleted                                          *metav1.Time
		Grace                                            *int64
		Labels, Annotations                              map[string]string
		Finalizers                                       []string
		Owners                                           []metav1.OwnerReference
		Managed                                          []metav1.ManagedFieldsEntry
	}
	of := func(o metav1.Object) meta {
		return meta{o.GetNamespace(), o.GetName(), o.GetGenerateName(), string(o.GetUID()), o.GetResourceVersion(), o.GetSelfLink(),
			o.GetGeneration(), o.GetCreationTimestamp(), o.GetDeletionTimestamp(), o.GetDeletionGracePeriodSeconds(),
			o.GetLabels(), o.GetAnnotations(), o.GetFinalizers(), o.GetOwnerReferences(), o.GetManagedFields()}
	}
	g, w := of(c.GetObjectMeta()), of(u)
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("%s: metadata of the view\n%+v\nwant\n%+v", what, g, w)
	}
}

// TestCompactViewSameAsDecoded reads every field of the equivalence
// inputs (edge cases, duplicate keys, project objects, server-shaped
// objects) through the view of Compacts built both ways — from the
// decoder's envelope, which keeps duplicate keys in the encoding, and
// from the decoded map — and compares with the decoded object.
func TestCompactViewSameAsDecoded(t *testing.T) {
	checked := 0
	for _, data := range treeInputs(t) {
		for _, opts := range treeOptions {
			want, err := decode.Object(data, opts)
			if err != nil || want == nil {
				continue
			}
			c := NewCompactor(CompactorOptions{})
			viaMap, err := c.Transform(&unstructured.Unstructured{Object: decodeCopy(t, data, opts)})
			if err != nil {
				t.Fatalf("%q: %v", clip(data), err)
			}
			sameView(t, "from the map "+clip(data), viaMap.(*Compact), want)
			checked++
			env, err := decode.TreeObject(data, opts)
			if errors.Is(err, decode.ErrNotPlain) {
				continue
			}
			if err != nil {
				t.Fatalf("%q: TreeObject: %v", clip(data), err)
			}
			direct, err := c.Transform(&unstructured.Unstructured{Object: env})
			if err != nil {
				t.Fatalf("%q: %v", clip(data), err)
			}
			sameView(t, "from the envelope "+clip(data), direct.(*Compact), want)
			checked++
		}
	}
	if checked < 100 {
		t.Fatalf("only %d objects checked", checked)
	}
}

// decodeCopy decodes data afresh (Transform must not share the expected
// object's maps).
func decodeCopy(t testing.TB, data []byte, opts decode.Options) map[string]interface{} {
	m, err := decode.Object(data, opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestCompactViewReadsWithoutDecoding: reading a field of the view
// allocates only what it returns, not the object.
func TestCompactViewReadsWithoutDecoding(t *testing.T) {
	c, err := NewCompact(decodeUnstructured(workloadJSON(1)))
	if err != nil {
		t.Fatal(err)
	}
	decodeAllocs := testing.AllocsPerRun(20, func() { _, _ = c.Decode() })
	var s string
	fieldAllocs := testing.AllocsPerRun(20, func() { s, _, _ = nestedString(c, "spec", "template", "spec", "serviceAccountName") })
	if s == "" {
		t.Fatal("the workload object has no spec.template.spec.serviceAccountName")
	}
	if fieldAllocs > 2 || decodeAllocs < 100 {
		t.Fatalf("NestedString allocates %.0f times, Decode %.0f: the view should not decode", fieldAllocs, decodeAllocs)
	}
}

func FuzzCompactView(f *testing.F) {
	for _, s := range treeCases {
		f.Add([]byte(s))
	}
	f.Add(workloadJSON(0))
	f.Fuzz(func(t *testing.T, data []byte) {
		want, err := decode.Object(data, decode.Options{})
		if err != nil || want == nil {
			return
		}
		env, err := decode.TreeObject(data, decode.Options{})
		if err != nil {
			return
		}
		c, err := NewCompactor(CompactorOptions{}).Transform(&unstructured.Unstructured{Object: env})
		if err != nil {
			t.Fatal(err)
		}
		sameView(t, clip(data), c.(*Compact), want)
	})
}

// BenchmarkCompactView reads one field of a 7 KB object (workloadJSON's
// shape, managedFields kept) from its Compact without decoding it — a
// field near the end of the object, metadata's annotations, and a kept
// metadata field — beside the decode a cold read would otherwise cost.
func BenchmarkCompactView(b *testing.B) {
	const n = 500
	cs := make([]*Compact, n)
	for i := range cs {
		c, err := NewCompact(decodeUnstructured(workloadJSON(i)))
		if err != nil {
			b.Fatal(err)
		}
		cs[i] = c
	}
	for _, r := range []struct {
		name string
		read func(c *Compact) bool
	}{
		{"NestedString-spec", func(c *Compact) bool {
			s, ok, _ := nestedString(c, "spec", "template", "spec", "serviceAccountName")
			return ok && s != ""
		}},
		{"GetAnnotations", func(c *Compact) bool { return c.GetObjectMeta().GetAnnotations() != nil }},
		{"GetLabels", func(c *Compact) bool { return c.GetObjectMeta().GetLabels() != nil }},
		{"Decode", func(c *Compact) bool { u, err := c.Decode(); return err == nil && u != nil }},
	} {
		b.Run(r.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if !r.read(cs[i%n]) {
					b.Fatal("read nothing")
				}
				i++
			}
		})
	}
}

// TestFieldIndexOnCompactSameAsDecoded: a field index over Compacts (read
// from the encoding, without decoding) gives the values it gives over
// the decoded objects, for fixed paths with every kind of selector and for
// a path to every field of the equivalence inputs.
func TestFieldIndexOnCompactSameAsDecoded(t *testing.T) {
	fixed := []string{"spec.nodeName", "status.phase", "metadata.ownerReferences[*].uid", "spec.containers[*].image",
		"spec.containers[0].name", "spec.template.spec.containers[*].image", "metadata.labels['app']", "[*]",
		"metadata[*]", "metadata.managedFields[*].manager", "metadata.managedFields[1].operation", "a[*]", "a[3]", "x", "x[*][*]"}
	checked := 0
	for _, data := range treeInputs(t) {
		want, err := decode.Object(data, decode.Options{})
		if err != nil || want == nil {
			continue
		}
		env, err := decode.TreeObject(data, decode.Options{})
		if err != nil {
			continue
		}
		obj, err := NewCompactor(CompactorOptions{}).Transform(&unstructured.Unstructured{Object: env})
		if err != nil {
			t.Fatal(err)
		}
		c := obj.(*Compact)
		paths := append([]string{}, fixed...)
		for _, p := range viewPaths(want) {
			if len(p) == 0 {
				continue
			}
			var b strings.Builder
			for _, k := range p {
				fmt.Fprintf(&b, "[%q]", k)
			}
			paths = append(paths, b.String())
		}
		for _, path := range paths {
			f, err := fieldIndexFunc(path)
			if err != nil {
				continue // a key the path syntax cannot spell
			}
			got, err1 := f(c)
			exp, err2 := f(&unstructured.Unstructured{Object: want})
			sort.Strings(got)
			sort.Strings(exp)
			if err1 != nil || err2 != nil || !reflect.DeepEqual(got, exp) {
				t.Fatalf("%s: field index %q on the Compact = %q (%v), on the decoded object %q (%v)", clip(data), path, got, err1, exp, err2)
			}
			checked++
		}
		if c.st.decoded.Load() != nil {
			t.Fatalf("%s: indexing kept a decoded object", clip(data))
		}
	}
	if checked < 1000 {
		t.Fatalf("only %d paths checked", checked)
	}
}

// TestLargeContainersCarryTheirLength: both writers of the encoding (the
// map encoder and the JSON one) prefix a large nested container with its
// length, so that field reads skip it; small ones are left as they are.
func TestLargeContainersCarryTheirLength(t *testing.T) {
	data := workloadJSON(2)
	env, err := decode.TreeObject(data, decode.Options{})
	if err != nil {
		t.Fatal(err)
	}
	viaMap, err := NewCompact(decodeUnstructured(data))
	if err != nil {
		t.Fatal(err)
	}
	fromJSON, err := NewCompactor(CompactorOptions{}).Transform(&unstructured.Unstructured{Object: env})
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*Compact{"map encoder": viaMap, "JSON writer": fromJSON.(*Compact)} {
		r := treecodec.Reader{Enc: c.enc[:len(c.enc)-4]}
		tags := map[string]byte{}
		if _, err := r.MapEntries(func(k string) error {
			tags[k] = r.Enc[r.Pos]
			return r.Skip()
		}); err != nil {
			t.Fatal(err)
		}
		if tags["metadata"] != treecodec.TagSized || tags["spec"] != treecodec.TagSized {
			t.Errorf("%s: metadata and spec start with tags %d and %d, want TagSized (%d)", name, tags["metadata"], tags["spec"], treecodec.TagSized)
		}
		if tags["kind"] != treecodec.TagString {
			t.Errorf("%s: kind starts with tag %d", name, tags["kind"])
		}
	}
}
