package cache

import (
	"encoding/json"
	"fmt"
	"math/rand"
	goruntime "runtime"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/internal/diskcost"
	"github.com/informerkit/informerkit/internal/labelindex"
)

// serverJSON returns object i as the API server writes it: typical
// metadata with four labels, a spec of 20 string fields and one
// managedFields entry (an Update by the creating client) — about 1.6 KB.
// Values vary with i so that no two objects share strings.
func serverJSON(i int, rv int) []byte {
	spec := map[string]interface{}{}
	specFields := map[string]interface{}{".": map[string]interface{}{}}
	for k := 0; k < 20; k++ {
		name := fmt.Sprintf("field%02d", k)
		spec[name] = fmt.Sprintf("value-%06d-%02d", i, k)
		specFields["f:"+name] = map[string]interface{}{}
	}
	labels := map[string]interface{}{
		"app":      fmt.Sprintf("app-%d", i%100),
		"tier":     []string{"front", "back", "cache"}[i%3],
		"env":      []string{"prod", "staging"}[i%2],
		"instance": fmt.Sprintf("inst-%06d", i),
	}
	labelFields := map[string]interface{}{".": map[string]interface{}{}}
	for k := range labels {
		labelFields["f:"+k] = map[string]interface{}{}
	}
	obj := map[string]interface{}{
		"apiVersion": "bench.example.com/v1",
		"kind":       "Widget",
		"metadata": map[string]interface{}{
			"name":              fmt.Sprintf("widget-%06d", i),
			"namespace":         fmt.Sprintf("ns-%d", i%10),
			"uid":               fmt.Sprintf("6f1c2a8e-0000-4000-8000-%012d", i),
			"resourceVersion":   fmt.Sprint(1000 + 2*i + rv),
			"generation":        1,
			"creationTimestamp": "2026-11-29T15:00:00Z",
			"labels":            labels,
			"managedFields": []interface{}{map[string]interface{}{
				"manager":    "informerkit-bench",
				"operation":  "Update",
				"apiVersion": "bench.example.com/v1",
				"time":       "2026-11-29T15:00:00Z",
				"fieldsType": "FieldsV1",
				"fieldsV1": map[string]interface{}{
					"f:metadata": map[string]interface{}{"f:labels": labelFields},
					"f:spec":     specFields,
				},
			}},
		},
		"spec": spec,
	}
	b, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	return b
}

func decodeUnstructured(b []byte) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		panic(err)
	}
	return u
}

func decodePartial(b []byte) *metav1.PartialObjectMetadata {
	p := &metav1.PartialObjectMetadata{}
	if err := json.Unmarshal(b, p); err != nil {
		panic(err)
	}
	return p
}

func heapInUse() uint64 {
	goruntime.GC()
	goruntime.GC()
	var m goruntime.MemStats
	goruntime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkHeapPerObject reports the in-use heap per cached object
// ("B/obj", after GC) for each form an informer can keep, with objects
// decoded from server-shaped JSON (serverJSON) and stored in a client-go
// indexer with the namespace index, as an informer stores them. The
// "+labelindex" rows add labelindex.LabelIndex; "+keyindex" rows add per-key indexes
// of all four labels (the factory default after selector Lists on every
// key). Time per op is meaningless here.
func BenchmarkHeapPerObject(b *testing.B) {
	const n = 5000
	ns := toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc}
	withLabels := labelindex.LabelIndexers()
	withLabels[toolscache.NamespaceIndex] = toolscache.MetaNamespaceIndexFunc
	raw := make([][]byte, n)
	size := 0
	for i := range raw {
		raw[i] = serverJSON(i, 0)
		size += len(raw[i])
	}
	b.Logf("server JSON: %d bytes per object", size/n)
	decodeU := func(i int) interface{} { return decodeUnstructured(raw[i]) }
	forms := []struct {
		name     string
		indexers toolscache.Indexers
		make     func(i int) interface{}
	}{
		{"unstructured", ns, decodeU},
		{"unstructured+labelindex", withLabels, decodeU},
		{"unstructured+keyindex", keyIndexers(4), decodeU},
		{"unstructured-stripped", ns, transformed(decodeU, StripManagedFields)},
		{"unstructured-stripped+labelindex", withLabels, transformed(decodeU, StripManagedFields)},
		{"unstructured-stripped+keyindex", keyIndexers(4), transformed(decodeU, StripManagedFields)},
		{"unstructured-stripped-interned", ns, transformed(decodeU, Chain(StripManagedFields, InternKeys))},
		{"unstructured-projected", ns, transformed(decodeU, mustProject(b, "spec.field00"))},
		{"compact", ns, transformed(decodeU, NewCompactor(CompactorOptions{}).Transform)},
		{"compact-stripped", ns, transformed(decodeU, Chain(StripManagedFields, NewCompactor(CompactorOptions{}).Transform))},
		{"compact-stripped+labelindex", withLabels, transformed(decodeU, Chain(StripManagedFields, NewCompactor(CompactorOptions{}).Transform))},
		{"compact-stripped+keyindex", keyIndexers(4), transformed(decodeU, Chain(StripManagedFields, NewCompactor(CompactorOptions{}).Transform))},
		{"metadata-only", ns, func(i int) interface{} { return decodePartial(raw[i]) }},
		{"metadata-only-stripped", ns, transformed(func(i int) interface{} { return decodePartial(raw[i]) }, StripManagedFields)},
		{"json-bytes", nil, func(i int) interface{} { return append([]byte(nil), raw[i]...) }},
	}
	for _, f := range forms {
		b.Run(f.name, func(b *testing.B) {
			var perObj float64
			for it := 0; it < b.N; it++ {
				before := heapInUse()
				var keep interface{}
				if f.indexers == nil {
					objs := make([]interface{}, n)
					for i := range objs {
						objs[i] = f.make(i)
					}
					keep = objs
				} else {
					idx := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, f.indexers)
					for i := 0; i < n; i++ {
						if err := idx.Add(f.make(i)); err != nil {
							b.Fatal(err)
						}
					}
					keep = idx
				}
				after := heapInUse()
				goruntime.KeepAlive(keep)
				perObj = float64(after-before) / n
			}
			b.ReportMetric(perObj, "B/obj")
		})
	}
}

func transformed(make func(int) interface{}, t toolscache.TransformFunc) func(int) interface{} {
	return func(i int) interface{} {
		o, err := t(make(i))
		if err != nil {
			panic(err)
		}
		return o
	}
}

// BenchmarkIndexerWrite measures updates per second through a client-go
// indexer holding 10k server-shaped objects (stripped of managedFields, as
// a memory-conscious informer keeps them), alternating between two
// pre-decoded versions of each object so that decoding is not measured.
// "clientgo" has the namespace index an informer has by default;
// "labelindex" adds labelindex.LabelIndex (4 labels per object, so 8 index values);
// "labelindex-relabel" also changes one label value on every update.
// "labelindex-plain" uses the stateless labelindex.LabelIndexFunc, which builds every
// "key=value" string afresh (what labelindex.LabelIndexers installed before it kept
// its strings), to show what the string table saves. "keyindex-K" is the
// factory's default after selector Lists on K label keys: the
// AutoLabelKeyIndexers marker and K per-key indexes (K=4: every label).
func BenchmarkIndexerWrite(b *testing.B) {
	const n = 10000
	type version [2]interface{}
	mk := func(relabel bool) []version {
		out := make([]version, n)
		for i := range out {
			for v := 0; v < 2; v++ {
				u := decodeUnstructured(serverJSON(i, v))
				StripManagedFields(u)
				if relabel && v == 1 {
					l := u.GetLabels()
					l["tier"] = "moved"
					u.SetLabels(l)
				}
				out[i][v] = u
			}
		}
		return out
	}
	same, relabeled := mk(false), mk(true)
	withLabels := labelindex.LabelIndexers()
	withLabels[toolscache.NamespaceIndex] = toolscache.MetaNamespaceIndexFunc
	plain := toolscache.Indexers{labelindex.LabelIndex: labelindex.LabelIndexFunc, toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc}
	cases := []struct {
		name     string
		indexers toolscache.Indexers
		objs     []version
	}{
		{"clientgo", toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc}, same},
		{"labelindex", withLabels, same},
		{"labelindex-plain", plain, same},
		{"keyindex-1", keyIndexers(1), same},
		{"keyindex-2", keyIndexers(2), same},
		{"keyindex-4", keyIndexers(4), same},
		{"clientgo-relabel", toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc}, relabeled},
		{"labelindex-relabel", withLabels, relabeled},
		{"labelindex-plain-relabel", plain, relabeled},
		{"keyindex-4-relabel", keyIndexers(4), relabeled},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			idx := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, c.indexers)
			for i := range c.objs {
				if err := idx.Add(c.objs[i][0]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for it := 0; it < b.N; it++ {
				i := it % n
				if err := idx.Update(c.objs[i][(it/n+1)%2]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchLW serves a fixed initial list and then a fake watch that the
// benchmark feeds. It declares no watch-list support, so the reflector
// lists and then watches.
type benchLW struct {
	list *unstructured.UnstructuredList
	w    *watch.FakeWatcher
}

func (l *benchLW) List(metav1.ListOptions) (runtime.Object, error) { return l.list, nil }
func (l *benchLW) Watch(metav1.ListOptions) (watch.Interface, error) {
	return l.w, nil
}
func (l *benchLW) IsWatchListSemanticsUnSupported() bool { return true }

// BenchmarkInformerWrite measures updates per second through a whole
// client-go SharedIndexInformer (reflector, FIFO, indexer, one event
// handler) holding 10k server-shaped objects, fed MODIFIED watch events
// with pre-decoded objects (decoding, which a real informer also pays, is
// left out so the index's share is not understated). One op is one event
// seen by the handler. "clientgo" has the namespace index; "labelindex"
// adds labelindex.LabelIndex; "labelindex-plain" uses the stateless labelindex.LabelIndexFunc;
// "keyindex-K" has the factory's default after selector Lists on K label
// keys (the AutoLabelKeyIndexers marker and K per-key indexes; K=4: every
// label of the objects).
func BenchmarkInformerWrite(b *testing.B) {
	const n = 10000
	var versions [2][]*unstructured.Unstructured
	list := &unstructured.UnstructuredList{Object: map[string]interface{}{"apiVersion": "v1", "kind": "List", "metadata": map[string]interface{}{"resourceVersion": "1"}}}
	for v := 0; v < 2; v++ {
		for i := 0; i < n; i++ {
			u := decodeUnstructured(serverJSON(i, v+1))
			StripManagedFields(u)
			versions[v] = append(versions[v], u)
		}
	}
	for i := 0; i < n; i++ {
		list.Items = append(list.Items, *decodeUnstructured(serverJSON(i, 0)))
	}
	withLabels := labelindex.LabelIndexers()
	withLabels[toolscache.NamespaceIndex] = toolscache.MetaNamespaceIndexFunc
	for _, c := range []struct {
		name     string
		indexers toolscache.Indexers
	}{
		{"clientgo", toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc}},
		{"labelindex", withLabels},
		{"labelindex-plain", toolscache.Indexers{labelindex.LabelIndex: labelindex.LabelIndexFunc, toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc}},
		{"keyindex-1", keyIndexers(1)},
		{"keyindex-2", keyIndexers(2)},
		{"keyindex-4", keyIndexers(4)},
	} {
		b.Run(c.name, func(b *testing.B) {
			lw := &benchLW{list: list, w: watch.NewFakeWithChanSize(1024, false)}
			inf := toolscache.NewSharedIndexInformer(lw, &unstructured.Unstructured{}, 0, c.indexers)
			var seen atomic.Int64
			done := make(chan struct{})
			target := int64(b.N)
			if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
				UpdateFunc: func(_, _ interface{}) {
					if seen.Add(1) == target {
						close(done)
					}
				},
			}); err != nil {
				b.Fatal(err)
			}
			stop := make(chan struct{})
			defer close(stop)
			go inf.Run(stop)
			if !toolscache.WaitForCacheSync(stop, inf.HasSynced) {
				b.Fatal("no sync")
			}
			b.ResetTimer()
			for it := 0; it < b.N; it++ {
				// Alternate versions so every event is a real change.
				lw.w.Modify(versions[(it/n)%2][it%n])
			}
			<-done
			b.StopTimer()
		})
	}
}

// keyIndexers is the factory's default indexer set after selector Lists on
// the first k of the benchmark objects' four label keys: namespace index,
// the AutoLabelKeyIndexers marker and k per-key indexes.
func keyIndexers(k int) toolscache.Indexers {
	out := AutoLabelKeyIndexers()
	for name, f := range LabelKeyIndexers([]string{"app", "tier", "env", "instance"}[:k]...) {
		out[name] = f
	}
	out[toolscache.NamespaceIndex] = toolscache.MetaNamespaceIndexFunc
	return out
}

// BenchmarkCompactRead compares reads of a compact-mode cache with reads
// of client-go's indexer holding decoded objects, in the same run: Get of
// a random object among N, and List of one namespace (10% of N), each
// object read as genericlister reads it (GetByKey then Compact.Shared;
// ByIndex(namespace) then Compact.SharedInList per object). Objects are
// serverJSON's (1.6 KB of JSON, managedFields kept, 10 namespaces).
//
// Besides ns/op it reports cpu-ns/op, the process's CPU time per op.
//
// Rows: "clientgo" the plain indexer of decoded objects; "compact" a
// Compactor with default options, measured after its warm-up (Get: every
// object read once before the timer, so reads hit; namespace List: two
// Lists before the timer, for every row); "compact-decode" a Compactor that keeps nothing (MaxDecoded -1):
// every read decodes the compact encoding — the cost of a cold read;
// "json-decode" decodes the object's JSON with apimachinery on every read
// (what a cold read cost when compact mode kept JSON).
func BenchmarkCompactRead(b *testing.B) {
	for _, n := range []int{10000, 50000} {
		raw := make([][]byte, n)
		for i := range raw {
			raw[i] = serverJSON(i, 0)
		}
		nsIndex := toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc}
		build := func(f func(i int) interface{}) toolscache.Indexer {
			idx := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, nsIndex)
			for i := 0; i < n; i++ {
				if err := idx.Add(f(i)); err != nil {
					b.Fatal(err)
				}
			}
			return idx
		}
		keyOf := func(i int) string { return fmt.Sprintf("ns-%d/widget-%06d", i%10, i) }
		keys := make([]string, n)
		for i := range keys {
			keys[i] = keyOf(i)
		}
		type variant struct {
			name string
			idx  toolscache.Indexer
			read func(obj interface{}, inList bool) *unstructured.Unstructured
		}
		compactRead := func(obj interface{}, inList bool) *unstructured.Unstructured {
			var u *unstructured.Unstructured
			var err error
			if inList {
				u, err = obj.(*Compact).SharedInList()
			} else {
				u, err = obj.(*Compact).Shared()
			}
			if err != nil {
				b.Fatal(err)
			}
			return u
		}
		withCompactor := func(opts CompactorOptions) toolscache.Indexer {
			c := NewCompactor(opts)
			return build(func(i int) interface{} {
				o, err := c.Transform(decodeUnstructured(raw[i]))
				if err != nil {
					b.Fatal(err)
				}
				return o
			})
		}
		variants := []variant{
			{"clientgo", build(func(i int) interface{} { return decodeUnstructured(raw[i]) }),
				func(obj interface{}, _ bool) *unstructured.Unstructured { return obj.(*unstructured.Unstructured) }},
			{"compact", withCompactor(CompactorOptions{}), compactRead},
			{"compact-decode", withCompactor(CompactorOptions{MaxDecoded: -1}), compactRead},
			{"json-decode", build(func(i int) interface{} {
				return &jsonObject{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns-%d", i%10), Name: fmt.Sprintf("widget-%06d", i)}, raw: raw[i]}
			}),
				func(obj interface{}, _ bool) *unstructured.Unstructured {
					return decodeUnstructured(obj.(*jsonObject).raw)
				}},
		}
		for _, v := range variants {
			b.Run(fmt.Sprintf("N=%d/get/%s", n, v.name), func(b *testing.B) {
				rnd := rand.New(rand.NewSource(1))
				for _, k := range keys { // one read of each: a Compactor keeps what Get reads
					if v.name != "compact" {
						break
					}
					obj, _, _ := v.idx.GetByKey(k)
					v.read(obj, false)
				}
				b.ReportAllocs()
				b.ResetTimer()
				done := reportCPU(b)
				for it := 0; it < b.N; it++ {
					obj, ok, err := v.idx.GetByKey(keys[rnd.Intn(n)])
					if err != nil || !ok {
						b.Fatal("missing object")
					}
					if v.read(obj, false) == nil {
						b.Fatal("nil object")
					}
				}
				done()
			})
			b.Run(fmt.Sprintf("N=%d/nslist/%s", n, v.name), func(b *testing.B) {
				list := func() {
					objs, err := v.idx.ByIndex(toolscache.NamespaceIndex, "ns-3")
					if err != nil || len(objs) != n/10 {
						b.Fatalf("namespace list: %d objects, %v", len(objs), err)
					}
					out := make([]*unstructured.Unstructured, 0, len(objs))
					for _, o := range objs {
						out = append(out, v.read(o, true))
					}
				}
				list()
				list()
				b.ReportAllocs()
				b.ResetTimer()
				done := reportCPU(b)
				for it := 0; it < b.N; it++ {
					list()
				}
				done()
			})
		}
	}
}

// jsonObject is an object kept as its JSON, as compact mode kept them
// before the compact encoding; it has the metadata keys read.
type jsonObject struct {
	metav1.ObjectMeta
	raw []byte
}

func (j *jsonObject) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
func (j *jsonObject) DeepCopyObject() runtime.Object   { return j }

// BenchmarkCompactTransform measures the write side of compact mode: the
// transform that turns a decoded object into its cache form, per object,
// for serverJSON's and workloadJSON's shapes (managedFields kept). "compactor" is Compactor.Transform
// (the binary encoding and the metadata read from it); "json" is what the
// transform cost when compact mode kept JSON (json.Marshal of the object
// and the metadata from its getters); "decode" is apimachinery's decode
// of the object's JSON, which every informer pays before any transform,
// for scale.
func BenchmarkCompactTransform(b *testing.B) {
	for _, shape := range []struct {
		name string
		make func(int) []byte
	}{{"server-1.6KB", func(i int) []byte { return serverJSON(i, 0) }}, {"workload-7KB", workloadJSON}} {
		const n = 1000
		objs := make([]*unstructured.Unstructured, n)
		raws := make([][]byte, n)
		for i := range objs {
			raws[i] = shape.make(i)
			objs[i] = decodeUnstructured(raws[i])
		}
		c := NewCompactor(CompactorOptions{})
		b.Run(shape.name+"/compactor", func(b *testing.B) {
			b.ReportAllocs()
			done := reportCPU(b)
			for it := 0; it < b.N; it++ {
				if _, err := c.Transform(objs[it%n]); err != nil {
					b.Fatal(err)
				}
			}
			done()
		})
		b.Run(shape.name+"/json", func(b *testing.B) {
			b.ReportAllocs()
			done := reportCPU(b)
			for it := 0; it < b.N; it++ {
				u := objs[it%n]
				raw, err := json.Marshal(u.Object)
				if err != nil {
					b.Fatal(err)
				}
				_ = &jsonObject{ObjectMeta: metav1.ObjectMeta{Name: u.GetName(), Namespace: u.GetNamespace(), UID: u.GetUID(),
					ResourceVersion: u.GetResourceVersion(), Labels: u.GetLabels(), OwnerReferences: u.GetOwnerReferences()}, raw: raw}
			}
			done()
		})
		b.Run(shape.name+"/decode", func(b *testing.B) {
			b.ReportAllocs()
			done := reportCPU(b)
			for it := 0; it < b.N; it++ {
				decodeUnstructured(raws[it%n])
			}
			done()
		})
	}
}

// reportCPU starts measuring the process's CPU time; the returned func,
// called after the timed loop, reports it per op as "cpu-ns/op" (GC work
// included; steadier than ns/op when other processes compete for cores).
func reportCPU(b *testing.B) func() {
	start := diskcost.ProcessCPU()
	return func() {
		b.ReportMetric(float64(diskcost.ProcessCPU()-start)/float64(b.N), "cpu-ns/op")
	}
}

// workloadJSON returns object i shaped like the performance suite's
// objects (test/bench: four labels, two annotations, a spec of about 3 KB
// with a pod-like template of three containers and a 20-entry string map)
// with a managedFields entry of server-side apply's shape (every field,
// an empty map per leaf): about 7 KB of JSON, about 240 maps decoded.
func workloadJSON(i int) []byte {
	containers := make([]interface{}, 0, 3)
	for c := 0; c < 3; c++ {
		env := make([]interface{}, 0, 4)
		for e := 0; e < 4; e++ {
			env = append(env, map[string]interface{}{"name": fmt.Sprintf("ENV_VAR_%d", e), "value": fmt.Sprintf("value-%d-%d-%d", i, c, e)})
		}
		containers = append(containers, map[string]interface{}{
			"name":  fmt.Sprintf("container-%d", c),
			"image": fmt.Sprintf("registry.example.com/team/image-%d:v1.%d.%d", c, i%10, c),
			"args":  []interface{}{"--verbose", "--port=8080", fmt.Sprintf("--id=%d", i)},
			"env":   env,
			"resources": map[string]interface{}{
				"requests": map[string]interface{}{"cpu": "100m", "memory": "128Mi"},
				"limits":   map[string]interface{}{"cpu": "500m", "memory": "512Mi"},
			},
		})
	}
	config := map[string]interface{}{}
	for k := 0; k < 20; k++ {
		config[fmt.Sprintf("setting%02d", k)] = fmt.Sprintf("setting-%02d-value-for-object-%d-xxxxxxxxxxxxxxxxxxxxxxxx", k, i)
	}
	name := fmt.Sprintf("obj-%06d", i)
	labels := map[string]interface{}{"app": fmt.Sprintf("app-%d", i%100), "tier": []string{"front", "back", "db"}[i%3],
		"env": []string{"prod", "staging"}[i%2], "instance": name}
	ann := map[string]interface{}{"bench.informerkit.io/owner": fmt.Sprintf("team-%d", i%7),
		"bench.informerkit.io/description": "A benchmark object shaped like a typical workload CRD: labels, annotations, a nested spec and managed fields."}
	spec := map[string]interface{}{
		"replicas": int64(1 + i%5), "paused": i%11 == 0,
		"template": map[string]interface{}{
			"metadata": map[string]interface{}{"labels": map[string]interface{}{"app": fmt.Sprintf("app-%d", i%100)}},
			"spec":     map[string]interface{}{"containers": containers, "serviceAccountName": "bench"},
		},
		"config": config,
	}
	obj := map[string]interface{}{
		"apiVersion": "bench.informerkit.io/v1", "kind": "Widget",
		"metadata": map[string]interface{}{
			"name": name, "namespace": fmt.Sprintf("ns-%d", i%10), "uid": fmt.Sprintf("6f1c2a8e-0000-4000-8000-%012d", i),
			"resourceVersion": fmt.Sprint(1000 + i), "generation": int64(1), "creationTimestamp": "2026-11-29T15:00:00Z",
			"labels": labels, "annotations": ann,
			"managedFields": []interface{}{map[string]interface{}{
				"manager": "ikbench", "operation": "Apply", "apiVersion": "bench.informerkit.io/v1",
				"time": "2026-11-29T15:00:00Z", "fieldsType": "FieldsV1",
				"fieldsV1": map[string]interface{}{
					"f:metadata": map[string]interface{}{"f:labels": ssaFields(labels), "f:annotations": ssaFields(ann)},
					"f:spec":     ssaFields(spec),
				},
			}},
		},
		"spec": spec,
	}
	b, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	return b
}

// ssaFields is the FieldsV1 set of v as server-side apply writes it.
func ssaFields(v interface{}) map[string]interface{} {
	out := map[string]interface{}{}
	switch x := v.(type) {
	case map[string]interface{}:
		out["."] = map[string]interface{}{}
		for k, e := range x {
			out["f:"+k] = ssaFields(e)
		}
	case []interface{}:
		for i, e := range x {
			if m, ok := e.(map[string]interface{}); ok && m["name"] != nil {
				out[fmt.Sprintf(`k:{"name":%q}`, m["name"])] = ssaFields(e)
			} else {
				out[fmt.Sprintf(`i:%d`, i)] = map[string]interface{}{}
			}
		}
	}
	return out
}

// BenchmarkCompactDecode measures one cold read — the decode of one
// object — for the two object shapes: serverJSON's (1.6 KB) and
// workloadJSON's (7 KB, the performance suite's shape). "tree" decodes the
// compact encoding (Compact.Decode), "json" decodes the JSON with
// apimachinery (what compact mode paid when it kept JSON, and what an
// informer pays per event).
func BenchmarkCompactDecode(b *testing.B) {
	for _, shape := range []struct {
		name string
		make func(int) []byte
	}{{"server-1.6KB", func(i int) []byte { return serverJSON(i, 0) }}, {"workload-7KB", workloadJSON}} {
		const n = 500
		raws := make([][]byte, n)
		cs := make([]*Compact, n)
		for i := range raws {
			raws[i] = shape.make(i)
			c, err := NewCompact(decodeUnstructured(raws[i]))
			if err != nil {
				b.Fatal(err)
			}
			cs[i] = c
		}
		b.Run(shape.name+"/tree", func(b *testing.B) {
			b.ReportAllocs()
			done := reportCPU(b)
			for it := 0; it < b.N; it++ {
				if _, err := cs[it%n].Decode(); err != nil {
					b.Fatal(err)
				}
			}
			done()
		})
		b.Run(shape.name+"/json", func(b *testing.B) {
			b.ReportAllocs()
			done := reportCPU(b)
			for it := 0; it < b.N; it++ {
				decodeUnstructured(raws[it%n])
			}
			done()
		})
	}
}
