package prometheusmetrics

import (
	"context"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	cgdynamicinformer "k8s.io/client-go/dynamic/dynamicinformer"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/dynamicinformer/metrics"
)

// BenchmarkInitialSyncMetrics measures listing n objects into a fresh
// informer and delivering them to one handler, on the same fake client:
// client-go's dynamicinformer, informerkit without metrics, and
// informerkit with this package's metrics (its counting handler, client-go's
// FIFO and store metrics, the collectors registered).
func BenchmarkInitialSyncMetrics(b *testing.B) {
	const n = 10000
	objs := make([]kruntime.Object, n)
	for i := range objs {
		objs[i] = widget(fmt.Sprintf("ns-%d", i%10), fmt.Sprintf("w-%d", i), fmt.Sprint(i+1))
	}
	newClient := func() *dynamicfake.FakeDynamicClient {
		return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(kruntime.NewScheme(),
			map[schema.GroupVersionResource]string{widgets: "WidgetList"}, objs...)
	}
	run := func(b *testing.B, metrics bool) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			opts := dynamicinformer.Options{DisableCRDTracking: true}
			if metrics {
				m := New()
				prometheus.NewRegistry().MustRegister(m)
				opts.Metrics = m
			}
			f := dynamicinformer.NewSharedInformerFactory(newClient(), opts)
			h := f.ForResource(widgets)
			count := make(chan struct{}, n)
			_, _ = h.Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(interface{}) { count <- struct{}{} }})
			ctx, cancel := context.WithCancel(context.Background())
			b.StartTimer()
			f.Start(ctx)
			for j := 0; j < n; j++ {
				<-count
			}
			b.StopTimer()
			cancel()
			f.Shutdown()
		}
	}
	b.Run("client-go", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			f := cgdynamicinformer.NewDynamicSharedInformerFactory(newClient(), 0)
			inf := f.ForResource(widgets).Informer()
			count := make(chan struct{}, n)
			_, _ = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(interface{}) { count <- struct{}{} }})
			stop := make(chan struct{})
			b.StartTimer()
			f.Start(stop)
			for j := 0; j < n; j++ {
				<-count
			}
			b.StopTimer()
			close(stop)
			f.Shutdown()
		}
	})
	b.Run("informerkit", func(b *testing.B) { run(b, false) })
	b.Run("informerkit+metrics", func(b *testing.B) { run(b, true) })
}

// BenchmarkEvent is the adapter's cost per delivered event (a counter
// increment, the objects gauge moved under the informer's lock), with
// GOMAXPROCS goroutines reporting for informers of one resource.
func BenchmarkEvent(b *testing.B) {
	m := New()
	b.RunParallel(func(pb *testing.PB) {
		in := m.NewInformer(metrics.Identity{GVR: widgets})
		n := 0
		for pb.Next() {
			n++
			in.Event("ADDED", n)
		}
	})
}
