package cache

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/internal/treecodec"
)

// TestTreeCodecEquivalence checks that the compact encoding decodes to
// exactly what apimachinery's JSON decoding gives (int64 for integers,
// float64 otherwise, nulls, empty maps and lists, unicode and escapes).
func TestTreeCodecEquivalence(t *testing.T) {
	docs := []string{
		`{}`,
		`{"a":null,"b":true,"c":false,"d":0,"e":-1,"f":9223372036854775807,"g":-9223372036854775808,"h":1.5,"i":1e300,"j":-0.0,"k":""}`,
		`{"s":"h\u00e9llo \"q\" \\ \n \u2028 \ud83d\ude00","l":[],"m":{},"n":[null,[1,[2,{}]],{"x":[]}]}`,
		`{"metadata":{"name":"a","labels":{"":"","k":"v"}},"spec":{"replicas":3,"ratio":0.25,"big":1.0}}`,
	}
	for i := 0; i < 20; i++ {
		docs = append(docs, string(serverJSON(i, 0)))
	}
	for _, d := range docs {
		want := &unstructured.Unstructured{}
		if err := want.UnmarshalJSON([]byte(d)); err != nil {
			// Not an object with a kind: decode as plain JSON the way
			// apimachinery's converter does for content.
			want.Object = map[string]interface{}{}
			if err := json.Unmarshal([]byte(d), &want.Object); err != nil {
				t.Fatal(err)
			}
			want.Object = normalizeNumbers(want.Object).(map[string]interface{})
		}
		enc, err := treecodec.Encode(nil, want.Object)
		if err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		got, err := treecodec.Decode(enc)
		if err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		if !reflect.DeepEqual(got, want.Object) {
			t.Errorf("decoded %#v\nwant %#v", got, want.Object)
		}
	}
}

// normalizeNumbers turns float64 integers into int64, as apimachinery's
// JSON decoding does.
func normalizeNumbers(v interface{}) interface{} {
	switch x := v.(type) {
	case map[string]interface{}:
		for k, e := range x {
			x[k] = normalizeNumbers(e)
		}
	case []interface{}:
		for i, e := range x {
			x[i] = normalizeNumbers(e)
		}
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x)
		}
	}
	return v
}

// TestTreeCodecCorrupt feeds every truncation and many byte flips of a
// real encoding to the decoder: errors, never a panic.
func TestTreeCodecCorrupt(t *testing.T) {
	u := decodeUnstructured(serverJSON(1, 0))
	enc, err := treecodec.Encode(nil, u.Object)
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < len(enc); n++ {
		if _, err := treecodec.Decode(enc[:n]); err == nil {
			t.Fatalf("truncated to %d bytes: no error", n)
		}
	}
	for i := 0; i < len(enc); i += 7 {
		b := append([]byte(nil), enc...)
		b[i] ^= 0xff
		_, _ = treecodec.Decode(b) // must not panic
	}
	if _, err := treecodec.Decode(append(enc, 0)); err == nil {
		t.Error("trailing byte: no error")
	}
}

// TestCompactNormalizesNonJSONValues: a transform may leave Go values JSON
// decoding never makes; the Compact holds what the server would return.
func TestCompactNormalizesNonJSONValues(t *testing.T) {
	u := widget("ns", "a", nil, map[string]interface{}{"n": 3, "l": []string{"x"}})
	c, err := NewCompact(u)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Decode()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]interface{}{"n": int64(3), "l": []interface{}{"x"}}
	if !reflect.DeepEqual(got.Object["spec"], want) {
		t.Errorf("spec %#v", got.Object["spec"])
	}
	raw, err := rawJSON(c)
	if err != nil || string(raw) != `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"a","namespace":"ns"},"spec":{"l":["x"],"n":3}}` {
		t.Errorf("Raw %s, %v", raw, err)
	}
}

func compactOf(t testing.TB, c *Compactor, u *unstructured.Unstructured) *Compact {
	t.Helper()
	obj, err := c.Transform(u)
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*Compact)
}

// fakeClock is a settable clock for Compactor tests.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeClock) now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.t }
func (f *fakeClock) advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.t = f.t.Add(d)
}

func newTestCompactor(opts CompactorOptions) (*Compactor, *fakeClock) {
	c := NewCompactor(opts)
	clk := &fakeClock{t: time.Unix(1000, 0)}
	c.now, c.lastTick = clk.now, clk.t
	return c, clk
}

func TestCompactorAdmission(t *testing.T) {
	c, _ := newTestCompactor(CompactorOptions{})
	a := compactOf(t, c, widget("ns", "a", nil, nil))
	b := compactOf(t, c, widget("ns", "b", nil, nil))

	// A point read keeps the decoded object at once.
	first, _ := a.Shared()
	again, _ := a.Shared()
	if first != again || first.GetName() != "a" {
		t.Error("point read not kept")
	}
	inList, _ := a.SharedInList()
	if inList != first {
		t.Error("list read of a kept object not shared")
	}
	// A read in a list keeps it.
	l1, _ := b.SharedInList()
	l2, _ := b.SharedInList()
	if l1 != l2 {
		t.Error("list read not kept")
	}
	if s := c.Stats(); s.Held != 2 || s.Admitted != 2 {
		t.Errorf("stats %+v", s)
	}
	// An event handler's read keeps nothing but shares what is kept.
	e := compactOf(t, c, widget("ns", "e", nil, nil))
	var seen []interface{}
	h := DecodingHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(obj interface{}) { seen = append(seen, obj) }})
	h.OnAdd(e, false)
	h.OnAdd(e, false)
	h.OnAdd(a, false)
	if seen[0] == seen[1] || seen[2] != first || c.Stats().Held != 2 {
		t.Errorf("handler reads: kept %d, shared %v", c.Stats().Held, seen[2] == first)
	}

	// KeepListsOnSecondRead: a read in a list keeps only the second time.
	c2, _ := newTestCompactor(CompactorOptions{KeepListsOnSecondRead: true})
	b2 := compactOf(t, c2, widget("ns", "b", nil, nil))
	m1, _ := b2.SharedInList()
	m2, _ := b2.SharedInList()
	m3, _ := b2.SharedInList()
	if m1 == m2 || m2 != m3 {
		t.Errorf("list reads: first %p second %p third %p; want kept from the second", m1, m2, m3)
	}

	none := NewCompactor(CompactorOptions{MaxDecoded: -1})
	x := compactOf(t, none, widget("ns", "x", nil, nil))
	x1, _ := x.Shared()
	x2, _ := x.Shared()
	if x1 == x2 || none.Stats().Held != 0 {
		t.Error("MaxDecoded<0 kept an object")
	}
}

// TestCompactorNeverStale reads objects through a lister-like path (the
// indexer's current Compact) around updates and deletes: a read after an
// update always sees the update, even when the old version was kept.
func TestCompactorNeverStale(t *testing.T) {
	c, _ := newTestCompactor(CompactorOptions{})
	idx := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	get := func(key string) (*unstructured.Unstructured, bool) {
		obj, ok, err := idx.GetByKey(key)
		if err != nil || !ok {
			return nil, false
		}
		u, err := obj.(*Compact).Shared()
		if err != nil {
			t.Fatal(err)
		}
		return u, true
	}
	for v := 0; v < 5; v++ {
		u := widget("ns", "a", map[string]string{"v": strconv.Itoa(v)}, map[string]interface{}{"v": int64(v)})
		u.SetResourceVersion(strconv.Itoa(v))
		if err := idx.Update(compactOf(t, c, u)); err != nil {
			t.Fatal(err)
		}
		for r := 0; r < 3; r++ { // kept after the first read
			got, ok := get("ns/a")
			if !ok || got.GetResourceVersion() != strconv.Itoa(v) || got.Object["spec"].(map[string]interface{})["v"] != int64(v) {
				t.Fatalf("version %d, read %d: got %v", v, r, got)
			}
		}
		// The list path too.
		objs, _ := idx.ByIndex(toolscache.NamespaceIndex, "ns")
		for r := 0; r < 3; r++ {
			got, _ := objs[0].(*Compact).SharedInList()
			if got.GetResourceVersion() != strconv.Itoa(v) {
				t.Fatalf("version %d: list read %s", v, got.GetResourceVersion())
			}
		}
	}
	old, _, _ := idx.GetByKey("ns/a")
	if err := idx.Delete(old); err != nil {
		t.Fatal(err)
	}
	if _, ok := get("ns/a"); ok {
		t.Error("deleted object still read")
	}
}

// TestCompactorIdle: decoded objects not read for Idle are dropped; read
// ones stay.
func TestCompactorIdle(t *testing.T) {
	c, clk := newTestCompactor(CompactorOptions{Idle: time.Minute})
	hot := compactOf(t, c, widget("ns", "hot", nil, nil))
	cold := compactOf(t, c, widget("ns", "cold", nil, nil))
	h0, _ := hot.Shared()
	cold.Shared()
	for i := 0; i < 5; i++ {
		clk.advance(20 * time.Second)
		if h, _ := hot.Shared(); h != h0 {
			t.Fatal("hot object dropped while read")
		}
	}
	c.Trim()
	if cold.st.decoded.Load() != nil {
		t.Error("object idle for 100s (Idle 1m, dropped within 1.5×Idle) still kept")
	}
	if hot.st.decoded.Load() == nil {
		t.Error("hot object dropped")
	}
	if s := c.Stats(); s.Held != 1 || s.Dropped != 1 {
		t.Errorf("stats %+v", s)
	}
	// Dropped objects are decoded again on the next read.
	if u, err := cold.Shared(); err != nil || u.GetName() != "cold" {
		t.Errorf("read after drop: %v, %v", u, err)
	}
	// Reads alone (no Trim) also reclaim idle objects over time.
	clk.advance(2 * time.Minute)
	for i := 0; i < 10; i++ {
		for r := 0; r < 2000; r++ { // hits only: a sampled few advance the epoch
			hot.Shared()
		}
		clk.advance(31 * time.Second)
	}
	if cold.st.decoded.Load() != nil {
		t.Error("idle object not reclaimed by sweeps on reads")
	}
}

// TestCompactorScanResistance: with MaxDecoded, Lists of many objects do
// not push out the objects that are read one by one.
func TestCompactorScanResistance(t *testing.T) {
	c, _ := newTestCompactor(CompactorOptions{MaxDecoded: 20})
	var hot []*Compact
	var hotU []*unstructured.Unstructured
	for i := 0; i < 10; i++ {
		cp := compactOf(t, c, widget("ns", fmt.Sprint("hot", i), nil, nil))
		u, _ := cp.Shared()
		hot, hotU = append(hot, cp), append(hotU, u)
	}
	var scan []*Compact
	for i := 0; i < 200; i++ {
		scan = append(scan, compactOf(t, c, widget("ns", fmt.Sprint("scan", i), nil, nil)))
	}
	for round := 0; round < 5; round++ {
		for _, cp := range hot { // the hot set is read between Lists
			cp.Shared()
		}
		for _, cp := range scan { // a List of 200 objects
			cp.SharedInList()
		}
	}
	for i, cp := range hot {
		if u, _ := cp.Shared(); u != hotU[i] {
			t.Errorf("hot object %d was pushed out by the scans", i)
		}
	}
	if s := c.Stats(); s.Held > 20 {
		t.Errorf("holds %d, MaxDecoded 20", s.Held)
	}
}

// TestCompactorConcurrent reads objects while they are updated, deleted
// and re-created, under -race: every read after an update's return sees
// that version or a later one.
func TestCompactorConcurrent(t *testing.T) {
	c := NewCompactor(CompactorOptions{MaxDecoded: 16})
	idx := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	const objects = 32
	var published [objects]atomic.Int64
	put := func(i, v int) {
		u := widget("ns", fmt.Sprint("o", i), nil, map[string]interface{}{"v": int64(v)})
		u.SetResourceVersion(strconv.Itoa(v))
		if err := idx.Update(compactOf(t, c, u)); err != nil {
			t.Error(err)
		}
		published[i].Store(int64(v))
	}
	for i := 0; i < objects; i++ {
		put(i, 1)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var failures atomic.Int64
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				i := (n*7 + r) % objects
				min := published[i].Load()
				obj, ok, _ := idx.GetByKey(fmt.Sprint("ns/o", i))
				if !ok {
					failures.Add(1)
					continue
				}
				var u *unstructured.Unstructured
				if n%2 == 0 {
					u, _ = obj.(*Compact).Shared()
				} else {
					u, _ = obj.(*Compact).SharedInList()
				}
				v, _ := strconv.ParseInt(u.GetResourceVersion(), 10, 64)
				if v < min || u.Object["spec"].(map[string]interface{})["v"] != v {
					failures.Add(1)
				}
				if n%50 == 0 {
					objs, _ := idx.ByIndex(toolscache.NamespaceIndex, "ns")
					for _, o := range objs {
						o.(*Compact).SharedInList()
					}
				}
			}
		}(r)
	}
	for v := 2; v < 300; v++ {
		put(v%objects, v)
	}
	close(stop)
	wg.Wait()
	if n := failures.Load(); n > 0 {
		t.Errorf("%d reads saw an older version than the cache held", n)
	}
	if s := c.Stats(); s.Held > 16 {
		t.Errorf("holds %d, MaxDecoded 16", s.Held)
	}
}

// TestCompactMetadata: the metadata a Compact keeps (read from its
// encoding) equals the object's, including odd label maps.
func TestCompactMetadata(t *testing.T) {
	objs := []*unstructured.Unstructured{managedObject(), widget("ns", "a", nil, nil)}
	for i := 0; i < 5; i++ {
		objs = append(objs, decodeUnstructured(serverJSON(i, 0)))
	}
	nullLabel := widget("ns", "n", nil, nil)
	nullLabel.Object["metadata"].(map[string]interface{})["labels"] = map[string]interface{}{"a": nil, "b": "x"}
	badLabel := widget("ns", "b", nil, nil)
	badLabel.Object["metadata"].(map[string]interface{})["labels"] = map[string]interface{}{"a": int64(1)}
	notMap := widget("ns", "m", nil, nil)
	notMap.Object["metadata"].(map[string]interface{})["labels"] = "x"
	objs = append(objs, nullLabel, badLabel, notMap)
	for _, u := range objs {
		c, err := NewCompact(u)
		if err != nil {
			t.Fatal(err)
		}
		if c.GetObjectMeta().GetName() != u.GetName() || c.GetObjectMeta().GetNamespace() != u.GetNamespace() || c.GetObjectMeta().GetUID() != u.GetUID() ||
			c.GetObjectMeta().GetResourceVersion() != u.GetResourceVersion() || c.GetObjectMeta().GetGeneration() != u.GetGeneration() ||
			c.GetObjectKind().GroupVersionKind() != u.GroupVersionKind() {
			t.Errorf("%s: metadata differs", u.GetName())
		}
		if got, want := c.GetObjectMeta().GetLabels(), u.GetLabels(); len(got) != len(want) || (len(want) > 0 && !reflect.DeepEqual(got, want)) {
			t.Errorf("%s: labels %v, want %v", u.GetName(), got, want)
		}
	}
}

// TestCompactDecodeOwned: an object from Decode belongs to the caller;
// changing it changes neither the Compact nor later decodes.
func TestCompactDecodeOwned(t *testing.T) {
	c, err := NewCompact(decodeUnstructured(serverJSON(3, 0)))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := c.Decode()
	u, _ := c.Decode()
	spec := u.Object["spec"].(map[string]interface{})
	spec["field00"] = "changed"
	spec["new"] = int64(1)
	delete(spec, "field01")
	u.SetLabels(map[string]string{"x": "y"})
	again, _ := c.Decode()
	if !reflect.DeepEqual(again.Object, want.Object) || c.GetObjectMeta().GetLabels()["app"] != "app-3" {
		t.Error("changing a decoded object changed the Compact")
	}
	if s, ok := again.Object["spec"].(map[string]interface{})["field00"].(string); !ok || s != "value-000003-00" {
		t.Errorf("spec.field00 = %#v", again.Object["spec"].(map[string]interface{})["field00"])
	}
}

// FuzzTreeCodec: any JSON object apimachinery decodes survives the
// compact encoding unchanged (DeepEqual), and decoding arbitrary bytes
// never panics.
func FuzzTreeCodec(f *testing.F) {
	f.Add([]byte(`{"a":1,"b":[1.5,"x",null,true,{}],"c":{"d":-9223372036854775808}}`))
	f.Add(serverJSON(1, 0))
	f.Add([]byte(`{"s":"\u00e9\ud83d\ude00","e":"","n":1e400}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = treecodec.Decode(data) // none of these may panic
		_, _ = readCompactMeta(data)
		for _, path := range [][]string{{"metadata", "annotations"}, {"a"}, {"b", "x"}, {"c", "d"}} {
			_, _, _ = (&Compact{enc: data}).NestedField(path...)
		}
		var obj map[string]interface{}
		if err := utiljson.Unmarshal(data, &obj); err != nil || obj == nil {
			return
		}
		enc, err := treecodec.Encode(nil, obj)
		if err != nil {
			t.Fatalf("encode %s: %v", data, err)
		}
		got, err := treecodec.Decode(enc)
		if err != nil {
			t.Fatalf("decode %s: %v", data, err)
		}
		if !reflect.DeepEqual(got, obj) {
			t.Fatalf("%s: decoded %#v, want %#v", data, got, obj)
		}
	})
}

// The disk cache reads a Compact's encoding through treecodec.Encoding,
// without decoding it; other values have none.
func TestCompactTreeEncoding(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]interface{}{"name": "a", "namespace": "ns", "uid": "u1"},
		"data":     map[string]interface{}{"k": "v"},
	}}
	c, err := NewCompact(u)
	if err != nil {
		t.Fatal(err)
	}
	enc, ok := treecodec.Encoding(c)
	if !ok {
		t.Fatal("treecodec.Encoding(*Compact) reported no encoding")
	}
	back, err := treecodec.Decode(enc)
	if err != nil || !reflect.DeepEqual(back, u.Object) {
		t.Fatalf("Decode(Encoding(c)) = %v, %v; want %v", back, err, u.Object)
	}
	if _, ok := treecodec.Encoding(u); ok {
		t.Fatal("treecodec.Encoding(*Unstructured) reported an encoding")
	}
}
