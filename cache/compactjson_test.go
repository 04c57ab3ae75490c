package cache

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/informerkit/informerkit/internal/decode"
	"github.com/informerkit/informerkit/internal/decode/decodetest"
)

// treeCases are objects whose direct encoding must match the decoded one:
// numbers, escapes, unicode, nulls, duplicate keys, empty objects and
// arrays, skipped fields in every arrangement. Each has a metadata.uid
// (objects without one are left to ordinary decoding); treeVariants
// derives more from internal/decode's edge cases.
var treeCases = []string{
	`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n","uid":"u","resourceVersion":"5","generation":2,"labels":{"a":"b","c":null}},"data":{"x":"y"}}`,
	`{"metadata":{"uid":"u","name":"\u00e9\ud83d\ude00\"","labels":{"k\u0041":"\n"}},"a":[1,-1,0,9223372036854775807,-9223372036854775808,9223372036854775808,1.5,1e3,-0.0,1e-400,123456789012345678901234567890]}`,
	`{"metadata":{"uid":"u"},"a":{},"b":[],"c":[[]],"d":[{}],"e":null,"f":[null,true,false],"g":""}`,
	`{"metadata":{"uid":"u"},"a":1,"a":2,"b":{"x":1},"b":{"y":2}}`,
	`{"metadata":{"uid":"u","name":"first"},"metadata":{"uid":"v","name":"second"}}`,
	`{"metadata":{"uid":"u","uid":"w","labels":{"a":"1"},"labels":{"b":"2"}}}`,
	`{"metadata":{"uid":"u","managedFields":[{"manager":"m","fieldsV1":{"f:a":{}}}],"name":"x"}}`,
	`{"metadata":{"uid":"u","managedFields":[]},"metadata":{"uid":"u","name":"y","managedFields":{}}}`,
	`{"metadata":{"uid":"u","annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{}"}}}`,
	`{"metadata":{"uid":"u","annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{}","a":"b"}}}`,
	`{"metadata":{"uid":"u","annotations":{"kubectl.kubernetes.io\/last-applied-configuration":"{}"}}}`,
	`{"metadata":{"uid":"u","annotations":{}}}`, `{"metadata":{"uid":"u","annotations":null}}`, `{"metadata":{"uid":"u","annotations":"x"}}`,
	`{"metadata":{"uid":"u","annotations":{"kubectl.kubernetes.io/last-applied-configuration":"x"},"annotations":{"a":"b"}}}`,
	`{"metadata":{"uid":"u","annotations":{"a":"b"},"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"x"}}}`,
	`{"metadata":{"uid":"u","annotations":{"kubectl.kubernetes.io/last-applied-configuration":"x","kubectl.kubernetes.io/last-applied-configuration":"y"}}}`,
	`{"metadata":{"uid":"u","ownerReferences":[{"apiVersion":"v1","kind":"K","name":"o","uid":"ou","controller":true}],"deletionTimestamp":"2026-11-30T10:00:00Z","generation":1.5}}`,
	`{"metadata":{"uid":"u","ownerReferences":"x","deletionTimestamp":7,"labels":[1]}}`,
	`{"apiVersion":7,"kind":{"a":1},"metadata":{"uid":"u"}}`,
	`{"Kind":"x","metadata":{"uid":"u"}}`,
	`{"metadata":{"uid":""}}`, `{"metadata":{"uid":7}}`, `{"metadata":null}`, `{"metadata":{"uid":"u"},"metadata":null}`,
	`{"metadata":{"uid":"u"},"a":1e400}`, `{"metadata":{"uid":"u"},"a":[1,}`, `{"metadata":{"uid":"u","managedFields":[1e999]}}`,
	`{"metadata":{"uid":"u"}}x`, `{"metadata":{"uid":"u"`,
}

// treeVariants derives objects with a metadata.uid from an edge case of
// internal/decode: the case under a field, its members beside a metadata,
// and a uid added to its own metadata.
func treeVariants(s string) []string {
	out := []string{`{"metadata":{"uid":"u"},"x":` + s + `}`}
	if t := strings.TrimSpace(s); len(t) > 2 && t[0] == '{' {
		out = append(out, `{"metadata":{"uid":"u"},`+t[1:])
	}
	if strings.Contains(s, `"metadata":{`) {
		out = append(out, strings.ReplaceAll(s, `"metadata":{`, `"metadata":{"uid":"u",`))
	}
	return out
}

var treeOptions = []decode.Options{{}, {SkipManagedFields: true}, {SkipLastApplied: true}, {SkipManagedFields: true, SkipLastApplied: true}}

// checkTree builds a Compact from data both ways — decode.TreeObject's
// envelope, and decode.Object's map through Compactor.Transform — and
// compares them. covered: the direct path took the object.
func checkTree(t testing.TB, data []byte, opts decode.Options) (covered bool) {
	t.Helper()
	want, wantErr := decode.Object(data, opts)
	env, err := decode.TreeObject(data, opts)
	if wantErr != nil || want == nil {
		if err == nil {
			t.Fatalf("%q: TreeObject accepted what Object does not (%v)", clip(data), wantErr)
		}
		return false
	}
	if errors.Is(err, decode.ErrNotPlain) {
		return false
	}
	if err != nil {
		t.Fatalf("%q: TreeObject: %v, Object succeeded", clip(data), err)
	}
	// The envelope carries the metadata fields as Object decodes them.
	wantMeta, _ := want["metadata"].(map[string]interface{})
	gotMeta, _ := env["metadata"].(map[string]interface{})
	for _, k := range decode.EnvelopeMetadata {
		w, wok := wantMeta[k]
		g, gok := gotMeta[k]
		if wok != gok || !reflect.DeepEqual(g, w) {
			t.Fatalf("%q: envelope metadata.%s = %#v (%v), want %#v (%v)", clip(data), k, g, gok, w, wok)
		}
	}
	for _, k := range []string{"apiVersion", "kind"} {
		if !reflect.DeepEqual(env[k], want[k]) {
			t.Fatalf("%q: envelope %s = %#v, want %#v", clip(data), k, env[k], want[k])
		}
	}
	c := NewCompactor(CompactorOptions{})
	direct, err := c.Transform(&unstructured.Unstructured{Object: env})
	if err != nil {
		t.Fatalf("%q: Transform of the envelope: %v", clip(data), err)
	}
	viaMap, err := c.Transform(&unstructured.Unstructured{Object: want})
	if err != nil {
		t.Fatalf("%q: Transform of the map: %v", clip(data), err)
	}
	sameCompact(t, data, direct.(*Compact), viaMap.(*Compact), want)
	return true
}

// sameCompact compares a Compact built from an envelope with one built
// from the decoded object want.
func sameCompact(t testing.TB, data []byte, got, old *Compact, want map[string]interface{}) {
	t.Helper()
	u, err := got.Decode()
	if err != nil {
		t.Fatalf("%q: Decode: %v", clip(data), err)
	}
	if !reflect.DeepEqual(u.Object, want) {
		t.Fatalf("%q: decoded\n%#v\nwant\n%#v", clip(data), u.Object, want)
	}
	uo, err := old.Decode()
	if err != nil || !reflect.DeepEqual(u.Object, uo.Object) {
		t.Fatalf("%q: the two Compacts decode differently (%v)", clip(data), err)
	}
	type meta struct {
		GVK                             interface{}
		Name, Namespace, UID, RV        string
		Generation                      int64
		Labels, Owners, Deletion, Owner interface{}
	}
	of := func(c *Compact) meta {
		return meta{c.GetObjectKind().GroupVersionKind(), c.GetObjectMeta().GetName(), c.GetObjectMeta().GetNamespace(), string(c.GetObjectMeta().GetUID()), c.GetObjectMeta().GetResourceVersion(),
			c.GetObjectMeta().GetGeneration(), c.GetObjectMeta().GetLabels(), c.GetObjectMeta().GetOwnerReferences(), c.GetObjectMeta().GetDeletionTimestamp(), c.owner}
	}
	if g, w := of(got), of(old); !reflect.DeepEqual(g, w) {
		t.Fatalf("%q: metadata\n%+v\nwant\n%+v", clip(data), g, w)
	}
}

func clip(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "..."
	}
	return string(b)
}

// treeInputs are the inputs of the equivalence test: the cases above,
// internal/decode's project objects and server-shaped objects, this
// package's benchmark shapes.
func treeInputs(t testing.TB) [][]byte {
	var in [][]byte
	for _, s := range treeCases {
		in = append(in, []byte(s))
	}
	files, err := filepath.Glob(filepath.Join("..", "internal", "decode", "testdata", "objects", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no objects under internal/decode/testdata/objects (%v)", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		in = append(in, data)
		for _, v := range treeVariants(string(data)) {
			in = append(in, []byte(v))
		}
	}
	for i := 0; i < 8; i++ {
		in = append(in, decodetest.ServerObject(i), serverJSON(i, 1), workloadJSON(i))
	}
	return append(in, largeCounts())
}

// largeCounts is an object whose maps and lists have counts that take
// more than one byte in the encoding (written after the entries, so the
// entries are moved), nested, with the last-applied annotation among 200
// annotations and 20000 list elements.
func largeCounts() []byte {
	var b strings.Builder
	b.WriteString(`{"metadata":{"uid":"u","name":"big","annotations":{`)
	for i := 0; i < 200; i++ {
		fmt.Fprintf(&b, `"a%d":"v%d",`, i, i)
	}
	b.WriteString(`"kubectl.kubernetes.io/last-applied-configuration":"{}"},"labels":{`)
	for i := 0; i < 130; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"l%d":"%d"`, i, i)
	}
	b.WriteString(`}},"list":[`)
	for i := 0; i < 20000; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		if i%1000 == 0 {
			b.WriteString(`{"nested":[` + strings.Repeat(`"x",`, 150) + `1]}`)
		} else {
			fmt.Fprintf(&b, "%d", i)
		}
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

func TestTreeObjectSameAsDecodeAndTransform(t *testing.T) {
	covered := 0
	inputs := treeInputs(t)
	for _, data := range inputs {
		for _, opts := range treeOptions {
			if checkTree(t, data, opts) {
				covered++
			}
		}
	}
	// Most inputs take the direct path; the rest are the ones it leaves
	// to ordinary decoding (no uid, malformed, odd kind keys).
	if covered < 2*len(inputs) {
		t.Errorf("only %d of %d decodings took the direct path", covered, 4*len(inputs))
	}
	t.Logf("%d of %d decodings took the direct path", covered, 4*len(inputs))
}

// TestTreeListSameAsDecodeAndTransform: a list body's items as envelopes
// give the Compacts its decoded items give.
func TestTreeListSameAsDecodeAndTransform(t *testing.T) {
	var items []string
	for i := 0; i < 5; i++ {
		items = append(items, string(workloadJSON(i)))
	}
	items = append(items, treeCases[0], treeCases[1], treeCases[3])
	for _, body := range []string{
		`{"apiVersion":"v1","kind":"ConfigMapList","metadata":{"resourceVersion":"9"},"items":[` + strings.Join(items, ",") + `]}`,
		`{"items":[],"kind":"L"}`, `{"items":null}`, `{"kind":"L"}`, `{"items":[` + treeCases[0] + `],"items":[` + treeCases[1] + `]}`,
		`{"items":[{"metadata":{}}]}`, `{"items":[1]}`, `{"items":[` + treeCases[0] + `,]}`, `{"items":{}}`,
	} {
		for _, opts := range treeOptions {
			want, wantErr := decode.List([]byte(body), opts)
			got, err := decode.TreeList([]byte(body), opts)
			if wantErr != nil || err != nil {
				if err == nil {
					t.Fatalf("%q: TreeList accepted what List does not (%v)", clip([]byte(body)), wantErr)
				}
				continue
			}
			wantItems, _ := want["items"].([]interface{})
			gotItems, _ := got["items"].([]interface{})
			delete(want, "items")
			delete(got, "items")
			if !reflect.DeepEqual(got, want) || len(gotItems) != len(wantItems) {
				t.Fatalf("%q: list %#v (%d items), want %#v (%d)", clip([]byte(body)), got, len(gotItems), want, len(wantItems))
			}
			c := NewCompactor(CompactorOptions{})
			for i := range gotItems {
				env := gotItems[i].(map[string]interface{})
				w := wantItems[i].(map[string]interface{})
				// What the client does to items without kind and apiVersion.
				if env["kind"] == nil && env["apiVersion"] == nil {
					if !decode.SetTreeMembers(env, "kind", "ConfigMap", "apiVersion", "v1") {
						t.Fatal("SetTreeMembers: not an envelope")
					}
					(&unstructured.Unstructured{Object: w}).SetKind("ConfigMap")
					(&unstructured.Unstructured{Object: w}).SetAPIVersion("v1")
				}
				direct, err := c.Transform(&unstructured.Unstructured{Object: env})
				if err != nil {
					t.Fatal(err)
				}
				viaMap, err := c.Transform(&unstructured.Unstructured{Object: w})
				if err != nil {
					t.Fatal(err)
				}
				sameCompact(t, []byte(body), direct.(*Compact), viaMap.(*Compact), w)
			}
		}
	}
}

// TestTreeObjectAllocatesLittle: decoding straight to the compact form
// allocates a small fraction of what decoding to maps and transforming
// does.
func TestTreeObjectAllocatesLittle(t *testing.T) {
	data := workloadJSON(1)
	c := NewCompactor(CompactorOptions{})
	direct := testing.AllocsPerRun(50, func() {
		env, err := decode.TreeObject(data, decode.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Transform(&unstructured.Unstructured{Object: env}); err != nil {
			t.Fatal(err)
		}
	})
	old := testing.AllocsPerRun(50, func() {
		m, err := decode.Object(data, decode.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Transform(&unstructured.Unstructured{Object: m}); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("allocations per object: direct %.0f, decode+transform %.0f", direct, old)
	// The path through decode.Object allocates about 144 times here (it
	// shares an object's managed-fields sets and string memory).
	if direct > 40 || direct*3 > old {
		t.Errorf("direct path: %.0f allocations per object, want ≤40 and ≤1/3 of decode+transform's %.0f", direct, old)
	}
}

// FuzzTreeObject compares the direct path with decode.Object and
// Compactor.Transform on arbitrary input, each also with a metadata.uid
// added (see treeVariants), with every combination of options.
func FuzzTreeObject(f *testing.F) {
	for _, s := range treeCases {
		f.Add([]byte(s), uint8(0))
	}
	f.Add(decodetest.ServerObject(3), uint8(3))
	f.Add(workloadJSON(2), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, o uint8) {
		opts := treeOptions[o%4]
		checkTree(t, data, opts)
		for _, v := range treeVariants(string(data)) {
			checkTree(t, []byte(v), opts)
		}
	})
}
