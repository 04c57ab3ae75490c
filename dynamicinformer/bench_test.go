package dynamicinformer

import (
	"context"
	"fmt"
	"testing"

	kruntime "k8s.io/apimachinery/pkg/runtime"
	cgdynamicinformer "k8s.io/client-go/dynamic/dynamicinformer"
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
