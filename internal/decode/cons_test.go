package decode

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	kruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/informerkit/informerkit/internal/decode/decodetest"
)

// fieldSets walks v, a managed-fields set, and records each map in it:
// by its JSON text, the distinct maps (pointers) seen for that text.
func fieldSets(t *testing.T, v interface{}, into map[string]map[uintptr]bool) {
	m, ok := v.(map[string]interface{})
	if !ok {
		return
	}
	text, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if into[string(text)] == nil {
		into[string(text)] = map[uintptr]bool{}
	}
	into[string(text)][reflect.ValueOf(m).Pointer()] = true
	for _, x := range m {
		fieldSets(t, x, into)
	}
}

func managedSets(t *testing.T, obj map[string]interface{}) map[string]map[uintptr]bool {
	sets := map[string]map[uintptr]bool{}
	md, _ := obj["metadata"].(map[string]interface{})
	entries, _ := md["managedFields"].([]interface{})
	if len(entries) == 0 {
		t.Fatal("no managedFields")
	}
	for _, e := range entries {
		fieldSets(t, e.(map[string]interface{})["fieldsV1"], sets)
	}
	return sets
}

// TestManagedFieldsShared: within one object, identical managed-fields
// sets are one map; nothing else is shared, neither between objects nor
// outside fieldsV1, and the result equals apimachinery's.
func TestManagedFieldsShared(t *testing.T) {
	data := decodetest.ServerObject(1)
	checkSame(t, data, Options{})
	obj, err := Object(data, Options{})
	if err != nil {
		t.Fatal(err)
	}
	sets := managedSets(t, obj)
	repeated := 0
	for text, maps := range sets {
		if len(maps) != 1 {
			t.Errorf("set %s: %d maps, want 1", text, len(maps))
		}
	}
	if maps := sets["{}"]; len(maps) != 1 {
		t.Fatalf("the empty set: %d maps, want 1", len(maps))
	}
	// The same text occurs many times: count the occurrences that reuse a
	// map (a decoder that shared nothing would give each its own map, and
	// the check above would have failed).
	var count func(v interface{})
	count = func(v interface{}) {
		if m, ok := v.(map[string]interface{}); ok {
			repeated++
			for _, x := range m {
				count(x)
			}
		}
	}
	for _, e := range obj["metadata"].(map[string]interface{})["managedFields"].([]interface{}) {
		count(e.(map[string]interface{})["fieldsV1"])
	}
	t.Logf("%d managed-fields sets, %d distinct maps", repeated, len(sets))
	if repeated < 2*len(sets) {
		t.Fatalf("%d sets in %d maps: the object has fewer repeats than expected", repeated, len(sets))
	}

	// Outside fieldsV1, equal maps stay apart.
	other, err := Object([]byte(`{"spec":{"a":{},"b":{},"c":{"x":1},"d":{"x":1}},"metadata":{"managedFields":[{"fieldsV1":{"f:a":{},"f:b":{}}}]}}`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	spec := other["spec"].(map[string]interface{})
	for _, pair := range [][2]string{{"a", "b"}, {"c", "d"}} {
		if reflect.ValueOf(spec[pair[0]]).Pointer() == reflect.ValueOf(spec[pair[1]]).Pointer() {
			t.Errorf("spec.%s and spec.%s are one map", pair[0], pair[1])
		}
	}

	// Two objects, whether decoded apart, as watch events or as items of
	// one list, never share a set.
	second, err := Object(data, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, _, third, ok := WatchEventObject([]byte(`{"type":"ADDED","object":`+string(data)+`}`), Options{})
	if !ok {
		t.Fatal("watch event not decoded")
	}
	list, err := List([]byte(`{"items":[`+string(data)+`,`+string(data)+`]}`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	items := list["items"].([]interface{})
	owner := map[uintptr]int{} // map -> the object it was found in
	for i, o := range []map[string]interface{}{obj, second, third, items[0].(map[string]interface{}), items[1].(map[string]interface{})} {
		if !reflect.DeepEqual(o, obj) {
			t.Fatalf("object %d differs from the first", i)
		}
		for text, maps := range managedSets(t, o) {
			if len(maps) != 1 {
				t.Errorf("object %d, set %s: %d maps, want 1", i, text, len(maps))
			}
			for p := range maps {
				if j, seen := owner[p]; seen {
					t.Errorf("objects %d and %d share the set %s", j, i, text)
				}
				owner[p] = i
			}
		}
	}

	// A deep copy gives every occurrence a map of its own: writing one
	// leaves the others alone.
	cp := kruntime.DeepCopyJSON(obj)
	copySets := managedSets(t, cp)
	if len(copySets["{}"]) < 2 {
		t.Fatalf("the copy's empty sets: %d maps, want one per occurrence", len(copySets["{}"]))
	}
}

// TestNameBytesApart: the bytes of an object's long strings share one
// allocation, except the name's, which a cache may keep as a key after the
// object is gone.
func TestNameBytesApart(t *testing.T) {
	data := decodetest.ServerObject(4)
	var obj map[string]interface{}
	for range 2 { // the second decode sizes its arena from the first
		var err error
		if obj, err = Object(data, Options{}); err != nil {
			t.Fatal(err)
		}
	}
	lo, hi := ^uintptr(0), uintptr(0)
	n := 0
	var walk func(v interface{})
	walk = func(v interface{}) {
		switch v := v.(type) {
		case map[string]interface{}:
			for _, x := range v {
				walk(x)
			}
		case []interface{}:
			for _, x := range v {
				walk(x)
			}
		case string:
			if len(v) > maxInternValue { // boxed, not interned
				p := uintptr(unsafe.Pointer(unsafe.StringData(v)))
				lo, hi = min(lo, p), max(hi, p+uintptr(len(v)))
				n++
			}
		}
	}
	walk(obj)
	if n < 2 || hi-lo > uintptr(len(data)) {
		t.Fatalf("%d long config values spread over %d bytes: not one arena", n, hi-lo)
	}
	name := obj["metadata"].(map[string]interface{})["name"].(string)
	if p := uintptr(unsafe.Pointer(unsafe.StringData(name))); p >= lo && p < hi {
		t.Fatalf("the name's bytes lie among the other strings' (%#x in [%#x, %#x))", p, lo, hi)
	}
}

// TestSmallAfterLarge: a decoder sizes the memory it shares among an
// object's strings and slices from the object decoded before it, but an
// object far smaller than that one does not get (and keep) that much.
func TestSmallAfterLarge(t *testing.T) {
	var large strings.Builder
	large.WriteString(`{"data":{`)
	for i := range 2000 {
		if i > 0 {
			large.WriteByte(',')
		}
		fmt.Fprintf(&large, `"k%d":[%q]`, i, strings.Repeat("x", 100)+fmt.Sprint(i))
	}
	large.WriteString(`}}`)
	small := []byte(`{"metadata":{"name":"a","uid":"b"},"data":{"k":["` + strings.Repeat("y", 40) + `"]}}`)
	// The least allocated over the samples: TotalAlloc is the process's,
	// so whatever else runs meanwhile (the race detector, the runtime,
	// other tests' goroutines) can only add to a sample, while a decoder
	// that sized the small object's memory from the large one would
	// allocate ~230 KB in every sample.
	least, samples := uint64(math.MaxUint64), 0
	var ms0, ms1 runtime.MemStats
	for range 20 {
		if _, err := Object([]byte(large.String()), Options{}); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&ms0)
		if _, err := Object(small, Options{}); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&ms1)
		if ms1.NumGC != ms0.NumGC {
			// A collection empties the scratch pool: the small object
			// then allocates fresh working memory, which is not what
			// this measures.
			continue
		}
		samples++
		least = min(least, ms1.TotalAlloc-ms0.TotalAlloc)
	}
	if samples == 0 {
		t.Fatal("every sample had a collection in it; nothing was measured")
	}
	if least > 4096 {
		t.Fatalf("decoding a %d-byte object after a %d-byte one allocated at least %d bytes in each of %d samples", len(small), large.Len(), least, samples)
	}
	t.Logf("a %d-byte object after a %d-byte one: %d bytes allocated (least of %d samples)", len(small), large.Len(), least, samples)
}

// TestPooledScratchHoldsNoMaps: after an object whose distinct sets grew
// the table, the working memory back in the pool refers to none of the
// object's maps.
func TestPooledScratchHoldsNoMaps(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"metadata":{"managedFields":[{"fieldsV1":{`)
	for i := range 200 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"f:%d":{"f:x%d":{}}`, i, i)
	}
	b.WriteString(`}}]}}`)
	if _, err := Object([]byte(b.String()), Options{}); err != nil {
		t.Fatal(err)
	}
	s := scratchPool.Get().(*scratch)
	defer scratchPool.Put(s)
	if len(s.fields.entries) < 256 {
		t.Skipf("the pool gave another scratch (%d entries)", len(s.fields.entries))
	}
	for i, e := range s.fields.entries {
		if e.m != nil {
			t.Fatalf("entry %d of the pooled table still holds a map", i)
		}
	}
	for i, v := range s.stack[:cap(s.stack)] {
		if v != nil {
			t.Fatalf("stack element %d still holds a value", i)
		}
	}
}
