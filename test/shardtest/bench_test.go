package shardtest

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/shard"
	"github.com/informerkit/informerkit/test/controlplane"
)

// TestShardCost measures, for docs/PERFORMANCE.md, the sync time and heap
// of one member of 1, 2 and 4 static shards beside one unsharded informer
// over INFORMERKIT_SHARD_BENCH objects, with the ShardedListAndWatch gate
// on and off. Each informer runs alone: its factory is started, synced,
// measured (heap after GC, minus the heap before it started) and shut
// down before the next. Run without -race:
//
//	INFORMERKIT_SHARD_BENCH=10000 go test -count=1 -run TestShardCost -v ./shardtest/
func TestShardCost(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("INFORMERKIT_SHARD_BENCH"))
	if n <= 0 {
		t.Skip("set INFORMERKIT_SHARD_BENCH=<objects> to measure sharded informers")
	}
	for _, gateOn := range []bool{true, false} {
		t.Run(fmt.Sprintf("gate=%v", gateOn), func(t *testing.T) { shardCost(t, n, gateOn) })
	}
}

func shardCost(t *testing.T, n int, gateOn bool) {
	cp := startControlPlane(t, gateOn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	crd := controlplane.NewCRD("cost.shardtest.example.com", "Part", "parts")
	if err := cp.InstallCRD(ctx, crd); err != nil {
		t.Fatal(err)
	}
	gvr := controlplane.GVR(crd)
	if err := cp.CreateNamespace(ctx, "cost"); err != nil {
		t.Fatal(err)
	}
	dyn := cp.Dynamic()
	start := time.Now()
	if err := parallel(n, 16, func(i int) error {
		_, err := dyn.Resource(gvr).Namespace("cost").Create(ctx, costPart(gvr, i), metav1.CreateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("created %d objects in %v", n, time.Since(start).Round(time.Second))

	measure := func(s shard.Shard) (time.Duration, float64, int) {
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		f, err := dynamicinformer.NewForConfig(cp.Config(), dynamicinformer.Options{})
		if err != nil {
			t.Fatal(err)
		}
		h := f.ForResource(gvr, dynamicinformer.WithShard(s))
		begin := time.Now()
		f.Start(ctx)
		if !f.WaitForCacheSync(ctx)[gvr] {
			t.Fatalf("not synced: %+v", h.Status())
		}
		took := time.Since(begin)
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		objects := len(h.Informer().GetStore().ListKeys())
		f.Shutdown()
		return took, float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / (1 << 20), objects
	}
	measure(shard.Shard{}) // warm the server's watch cache and the client
	took, heap, objects := measure(shard.Shard{})
	t.Logf("RESULT gate=%v members=unsharded sync=%v heapMiB=%.1f objects=%d", gateOn, took.Round(time.Millisecond), heap, objects)
	for _, members := range []int{1, 2, 4} {
		var syncs []time.Duration
		var heaps []float64
		var counts []int
		for i := 0; i < members; i++ {
			s, _ := shard.Static(i, members)
			took, heap, objects := measure(s)
			syncs, heaps, counts = append(syncs, took), append(heaps, heap), append(counts, objects)
		}
		slices.Sort(syncs)
		slices.Sort(heaps)
		t.Logf("RESULT gate=%v members=%d sync median=%v max=%v heapMiB median=%.1f max=%.1f objects=%v",
			gateOn, members, syncs[len(syncs)/2].Round(time.Millisecond), syncs[len(syncs)-1].Round(time.Millisecond),
			heaps[len(heaps)/2], heaps[len(heaps)-1], counts)
	}
}

// costPart is an object of about 1 KB: 20 data keys and 4 labels.
func costPart(gvr schema.GroupVersionResource, i int) *unstructured.Unstructured {
	data := map[string]interface{}{}
	for k := 0; k < 20; k++ {
		data[fmt.Sprintf("key-%02d", k)] = fmt.Sprintf("value-%d-%d-abcdefghijklmnopqrstuvwxyz", i, k)
	}
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": gvr.GroupVersion().String(), "kind": "Part",
		"metadata": map[string]interface{}{"name": fmt.Sprintf("c%06d", i)},
		"spec":     map[string]interface{}{"data": data},
	}}
	u.SetLabels(map[string]string{"app": "cost", "tier": strconv.Itoa(i % 3), "zone": strconv.Itoa(i % 5), "shardtest": "yes"})
	return u
}
