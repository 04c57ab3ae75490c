package dynamicinformer

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/internal/persist"
)

var configmapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// diskObject is a ConfigMap-shaped object of about 2.3 KB of JSON: 20
// data keys, 4 labels.
func diskObject(i int) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "v1", "kind": "ConfigMap"}}
	u.SetNamespace("bench")
	u.SetName(fmt.Sprintf("cm-%d", i))
	u.SetUID("7f1c8a52-3b0e-4d6a-9a51-0c2f5e1d9b3a")
	u.SetResourceVersion(fmt.Sprint(1000 + i))
	u.SetLabels(map[string]string{"app": "bench", "tier": "backend", "team": "platform", "shard": fmt.Sprint(i % 8)})
	data := map[string]interface{}{}
	for k := 0; k < 20; k++ {
		data[fmt.Sprintf("key-%02d", k)] = fmt.Sprintf("value %d of object %d, padded to look like configuration: %080d", k, i, k)
	}
	u.Object["data"] = data
	return u
}

func TestDiskSpecNames(t *testing.T) {
	a := resourceConfig{namespaces: []string{"a"}}.spec(configmapsGVR, false)
	b := resourceConfig{namespaces: []string{"b"}}.spec(configmapsGVR, false)
	if diskSpec(a) == diskSpec(b) || diskName(a, diskSpec(a)) == diskName(b, diskSpec(b)) {
		t.Fatalf("two namespaces share a stored state: %q", diskName(a, diskSpec(a)))
	}
	if diskName(a, diskSpec(a)) != diskName(a, diskSpec(a)) {
		t.Fatal("the name is not a function of the spec")
	}
	for _, c := range []struct {
		cfg     resourceConfig
		gvr     string
		secrets bool
		ok      bool
	}{
		{resourceConfig{}, "configmaps", false, true},
		{resourceConfig{namespaces: []string{"a", "b"}}, "configmaps", false, false},
		{resourceConfig{}, "secrets", false, false},
		{resourceConfig{}, "secrets", true, true},
		{resourceConfig{own: 1}, "configmaps", false, false},
	} {
		key := c.cfg.spec(configmapsGVR.GroupVersion().WithResource(c.gvr), false)
		if why, ok := diskEligible(key, c.secrets); ok != c.ok {
			t.Errorf("%+v %s secrets=%v: eligible %v (%s), want %v", c.cfg, c.gvr, c.secrets, ok, why, c.ok)
		}
	}
}

// BenchmarkDiskJournalPut is the persistence cost of one event: encoding
// the cached object (JSON) and appending it to the journal (buffered; the
// once-a-second fsync is not per event).
func BenchmarkDiskJournalPut(b *testing.B) {
	d, err := persist.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	w, err := d.Create("bench", persist.Identity{Spec: "s", Cluster: "c"}, persist.State{})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	objs := make([]*unstructured.Unstructured, 1000)
	for i := range objs {
		objs[i] = diskObject(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	var bytes int64
	for i := 0; i < b.N; i++ {
		o := objs[i%len(objs)]
		data, err := encodeForDisk(o)
		if err != nil {
			b.Fatal(err)
		}
		bytes += int64(len(data))
		if err := w.Put("bench/"+o.GetName(), o.GetResourceVersion(), data); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(bytes)/float64(b.N), "bytes/event")
}

// BenchmarkDiskDecodeRestore is the cost of one restored object at start:
// decoding its JSON into the object handed to the reflector.
func BenchmarkDiskDecodeRestore(b *testing.B) {
	data, _ := encodeForDisk(diskObject(1))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			b.Fatal(err)
		}
	}
}

type countUpdates struct {
	toolscache.ResourceEventHandlerFuncs
	n *int
}

func (c countUpdates) OnUpdate(_, _ interface{}) { *c.n++ }

func TestSkipUnchanged(t *testing.T) {
	n := 0
	h := skipUnchanged{countUpdates{n: &n}}
	h.OnUpdate(diskObject(1), diskObject(1)) // same resourceVersion: dropped
	changed := diskObject(1)
	changed.SetResourceVersion("99999")
	h.OnUpdate(diskObject(1), changed)
	if n != 1 {
		t.Fatalf("%d updates delivered, want 1 (the changed one)", n)
	}
}
