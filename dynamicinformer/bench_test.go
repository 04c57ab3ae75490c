package dynamicinformer

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	cgdynamicinformer "k8s.io/client-go/dynamic/dynamicinformer"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	clienttesting "k8s.io/client-go/testing"
	toolscache "k8s.io/client-go/tools/cache"
)

// benchObjects builds n widgets with a few labels.
func benchObjects(n int) []kruntime.Object {
	objs := make([]kruntime.Object, n)
	for i := range objs {
		objs[i] = widget(fmt.Sprintf("ns-%d", i%10), fmt.Sprintf("w-%d", i), map[string]string{
			"app": fmt.Sprintf("app-%d", i%100), "tier": []string{"web", "db", "cache"}[i%3],
		})
	}
	return objs
}

// BenchmarkInitialSync measures listing n objects into a fresh informer and
// delivering them to one handler: informerkit's factory (gate, label index)
// against client-go's dynamicinformer on the same fake client.
func BenchmarkInitialSync(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		objs := benchObjects(n)
		b.Run(fmt.Sprintf("informerkit/n=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				client := fakeClient(objs...)
				f := NewSharedInformerFactory(client, Options{DisableCRDTracking: true})
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
		})
		b.Run(fmt.Sprintf("client-go/n=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				client := fakeClient(objs...)
				f := cgdynamicinformer.NewDynamicSharedInformerFactory(client, 0)
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
	}
}

// BenchmarkEvent measures one watch event's way from the watch to a
// handler, informer's cache holding n objects: each iteration sends a
// Modified event for one of the n cached objects on a fake watch and
// waits until the handler has seen it (allocs/op count every goroutine's
// allocations, the informer's included). informerkit's factory beside
// client-go's dynamicinformer on the same fake client: the per-event
// cost must not grow with n (compare n=1000 with n=100000, and each with
// client-go's at the same n).
func BenchmarkEvent(b *testing.B) {
	// The fake watch sends no initial events: both list, then watch.
	clientfeaturestesting.SetFeatureDuringTest(b, clientfeatures.WatchListClient, false)
	for _, n := range []int{1000, 10000, 100000} {
		objs := benchObjects(n)
		for _, impl := range []string{"informerkit", "client-go"} {
			b.Run(fmt.Sprintf("%s/n=%d", impl, n), func(b *testing.B) {
				client := fakeClient(objs...)
				fw := watch.NewFakeWithChanSize(1, false)
				client.PrependWatchReactor("widgets", func(clienttesting.Action) (bool, watch.Interface, error) { return true, fw, nil })
				seen := make(chan struct{}, 1)
				var adds atomic.Int64
				handler := toolscache.ResourceEventHandlerFuncs{
					AddFunc:    func(interface{}) { adds.Add(1) },
					UpdateFunc: func(_, _ interface{}) { seen <- struct{}{} },
				}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				switch impl {
				case "informerkit":
					f := NewSharedInformerFactory(client, Options{DisableCRDTracking: true})
					defer func() { cancel(); f.Shutdown() }()
					_, _ = f.ForResource(widgets).Informer().AddEventHandler(handler)
					f.Start(ctx)
				default:
					f := cgdynamicinformer.NewDynamicSharedInformerFactory(client, 0)
					defer func() { cancel(); f.Shutdown() }() // client-go's Shutdown waits for the stop channel
					_, _ = f.ForResource(widgets).Informer().AddEventHandler(handler)
					f.Start(ctx.Done())
				}
				deadline := time.Now().Add(time.Minute)
				for adds.Load() < int64(n) {
					if time.Now().After(deadline) {
						b.Fatalf("%d of %d objects added", adds.Load(), n)
					}
					time.Sleep(time.Millisecond)
				}
				// The events' objects are built before the clock starts:
				// object i%n with a new resourceVersion.
				evs := make([]*unstructured.Unstructured, b.N)
				for i := range evs {
					o := objs[i%n].(*unstructured.Unstructured).DeepCopy()
					o.SetResourceVersion(fmt.Sprint(1000 + i))
					evs[i] = o
				}
				runtime.GC()
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					fw.Modify(evs[i])
					<-seen
				}
				b.StopTimer()
			})
		}
	}
}
