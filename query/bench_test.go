package query

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	toolscache "k8s.io/client-go/tools/cache"
)

// Benchmarks of issue 51, side by side in one run:
//
//	go test ./query -run '^$' -bench . -benchtime 2000x
//	INFORMERKIT_QUERY_BENCH_LARGE=1 go test ./query -run '^$' -bench . -benchtime 500x   (adds 100,000 objects)
//
// The question: a page of 50 of the objects with spec.replicas=3 (10% of
// the cache), newest first (metadata.creationTimestamp descending, an
// indexed order). "caller" is what users do today: List everything,
// filter, sort, slice; "scan" is query.Scan (filter and sort every
// object); "index" is an Index in that order (keyset paging). "first" is
// page 1, "deep" is the last full page (page 20 at 10,000 objects, 200 at
// 100,000: with 10% matching there is no page 1,000).

func benchSizes() []int {
	if os.Getenv("INFORMERKIT_QUERY_BENCH_LARGE") != "" {
		return []int{10_000, 100_000}
	}
	return []int{10_000}
}

// benchObject is a Deployment-shaped object of about 1.5 KB.
func benchObject(i int) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]interface{}{
			"namespace": fmt.Sprintf("ns-%02d", i%20), "name": fmt.Sprintf("deploy-%06d", i),
			"uid": fmt.Sprintf("00000000-0000-0000-0000-%012d", i), "resourceVersion": strconv.Itoa(1000 + i),
			"creationTimestamp": time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i*7919%100_000) * time.Second).Format(time.RFC3339),
			"labels":            map[string]interface{}{"app": fmt.Sprintf("app-%d", i%50), "tier": []string{"web", "db", "cache"}[i%3], "team": fmt.Sprintf("t%d", i%7)},
			"annotations":       map[string]interface{}{"deployment.kubernetes.io/revision": "3", "note": strings.Repeat("x", 200)},
		},
		"spec": map[string]interface{}{
			"replicas": int64(i % 10),
			"selector": map[string]interface{}{"matchLabels": map[string]interface{}{"app": fmt.Sprintf("app-%d", i%50)}},
			"template": map[string]interface{}{
				"metadata": map[string]interface{}{"labels": map[string]interface{}{"app": fmt.Sprintf("app-%d", i%50)}},
				"spec": map[string]interface{}{"containers": []interface{}{map[string]interface{}{
					"name": "main", "image": fmt.Sprintf("registry.example.com/app-%d:v%d", i%50, i%5),
					"ports": []interface{}{map[string]interface{}{"containerPort": int64(8080)}},
					"env":   []interface{}{map[string]interface{}{"name": "MODE", "value": "production"}},
				}}},
			},
		},
		"status": map[string]interface{}{"replicas": int64(i % 10), "readyReplicas": int64(i % 10), "observedGeneration": int64(3)},
	}}
}

var benchQuery = New().Where("spec.replicas", Eq, Int(3)).SortBy(Desc("metadata.creationTimestamp")).WithLimit(50)

type benchCache struct {
	store toolscache.Indexer
	index *Index
	deep  string // the token of the last full page
	pages int
}

var benchCaches = map[int]*benchCache{}

func getBenchCache(b *testing.B, n int) *benchCache {
	if c, ok := benchCaches[n]; ok {
		return c
	}
	c := &benchCache{store: toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})}
	var err error
	if c.index, err = NewIndex(benchQuery.OrderBy...); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < n; i++ {
		u := benchObject(i)
		_ = c.store.Add(u)
		c.index.OnAdd(u, true)
	}
	q := benchQuery
	for {
		p, err := c.index.Query(q)
		if err != nil {
			b.Fatal(err)
		}
		c.pages++
		if p.Continue == "" {
			break
		}
		if len(p.Items) == q.Limit {
			c.deep = q.Continue
		}
		q.Continue = p.Continue
	}
	benchCaches[n] = c
	return c
}

// callerPage is what a caller does today: list, filter, sort, slice.
func callerPage(store toolscache.Indexer, page, size int) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range store.List() {
		u := o.(*unstructured.Unstructured)
		if r, found, _ := unstructured.NestedInt64(u.Object, "spec", "replicas"); found && r == 3 {
			out = append(out, u)
		}
	}
	slices.SortFunc(out, func(a, b *unstructured.Unstructured) int {
		ta, tb := a.GetCreationTimestamp(), b.GetCreationTimestamp()
		if c := tb.Compare(ta.Time); c != 0 {
			return c
		}
		return strings.Compare(a.GetNamespace()+"/"+a.GetName(), b.GetNamespace()+"/"+b.GetName())
	})
	lo := min(page*size, len(out))
	return out[lo:min(lo+size, len(out))]
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// timed runs f b.N times and reports p50 and p99 of one call (wall
// clock), and the CPU time per call (which a loaded machine inflates
// less).
func timed(b *testing.B, f func()) {
	d := make([]time.Duration, 0, b.N)
	cpu0 := cpuTime()
	defer func() { b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op") }()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		f()
		d = append(d, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(d[len(d)*99/100].Microseconds()), "p99-µs")
}

func BenchmarkPage(b *testing.B) {
	for _, n := range benchSizes() {
		c := getBenchCache(b, n)
		deepPage := c.pages - 2
		for _, depth := range []string{"first", "deep"} {
			tok := ""
			if depth == "deep" {
				tok = c.deep
			}
			b.Run(fmt.Sprintf("n=%d/%s/caller", n, depth), func(b *testing.B) {
				page := 0
				if depth == "deep" {
					page = deepPage
				}
				timed(b, func() {
					if len(callerPage(c.store, page, 50)) != 50 {
						b.Fatal("short page")
					}
				})
			})
			b.Run(fmt.Sprintf("n=%d/%s/scan", n, depth), func(b *testing.B) {
				timed(b, func() {
					if p, err := Scan(FromIndexer(c.store), benchQuery.After(tok)); err != nil || len(p.Items) != 50 {
						b.Fatal("short page", err)
					}
				})
			})
			b.Run(fmt.Sprintf("n=%d/%s/index", n, depth), func(b *testing.B) {
				timed(b, func() {
					if p, err := c.index.Query(benchQuery.After(tok)); err != nil || len(p.Items) != 50 {
						b.Fatal("short page", err)
					}
				})
			})
		}
	}
}

// BenchmarkIndexEvent is the cost of one update event to the index: "same"
// keeps the sort field (most updates: status changes), "move" changes it.
func BenchmarkIndexEvent(b *testing.B) {
	for _, n := range benchSizes() {
		c := getBenchCache(b, n)
		for _, kind := range []string{"same", "move"} {
			b.Run(fmt.Sprintf("n=%d/%s", n, kind), func(b *testing.B) {
				objs := make([]*unstructured.Unstructured, 256)
				for i := range objs {
					objs[i] = benchObject(i * 37 % n)
					if kind == "move" {
						_ = unstructured.SetNestedField(objs[i].Object, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i)*time.Second).Format(time.RFC3339), "metadata", "creationTimestamp")
					}
				}
				orig := make([]*unstructured.Unstructured, len(objs))
				for i := range orig {
					orig[i] = benchObject(i * 37 % n)
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					j := i % len(objs)
					if (i/len(objs))%2 == 0 {
						c.index.OnUpdate(orig[j], objs[j])
					} else {
						c.index.OnUpdate(objs[j], orig[j])
					}
				}
			})
		}
	}
}

// BenchmarkIndexBuild is the time to build an index over a synced cache
// (one OnAdd per object), and the index's heap as a share of the cache's.
func BenchmarkIndexBuild(b *testing.B) {
	for _, n := range benchSizes() {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			heap := func() uint64 {
				runtime.GC()
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				return m.HeapAlloc
			}
			h0 := heap()
			store := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
			for i := 0; i < n; i++ {
				_ = store.Add(benchObject(i))
			}
			h1 := heap()
			objs := store.List()
			var x *Index
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				x, _ = NewIndex(benchQuery.OrderBy...)
				for _, o := range objs {
					x.OnAdd(o, true)
				}
			}
			b.StopTimer()
			h2 := heap()
			x2, _ := NewIndex(benchQuery.OrderBy...)
			for _, o := range objs {
				x2.OnAdd(o, true)
			}
			h3 := heap()
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "build-ms")
			b.ReportMetric(float64(h3-h2)/float64(n), "index-B/obj")
			b.ReportMetric(100*float64(h3-h2)/float64(h1-h0), "index-%cache")
			runtime.KeepAlive(x)
			runtime.KeepAlive(x2)
			runtime.KeepAlive(store)
		})
	}
}
