package metrics_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/dynamicinformer/metrics"
)

// stateLog is an Exporter that keeps each informer's states and the
// number of objects its cache holds.
type stateLog struct {
	mu      sync.Mutex // guards states and objects
	states  map[string][]string
	objects map[string]int
}

func (l *stateLog) NewInformer(id metrics.Identity) metrics.Informer {
	return &informerLog{l: l, resource: id.GVR.Resource}
}

func (l *stateLog) read(f func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f()
}

type informerLog struct {
	l        *stateLog
	resource string
}

func (in *informerLog) State(s string) {
	in.l.read(func() { in.l.states[in.resource] = append(in.l.states[in.resource], s) })
}
func (in *informerLog) Event(_ string, objects int) {
	in.l.read(func() { in.l.objects[in.resource] = objects })
}
func (in *informerLog) Synced()                         {}
func (in *informerLog) Request(string, string)          {}
func (in *informerLog) WatchRestart()                   {}
func (in *informerLog) HandlerPanic()                   {}
func (in *informerLog) QueuedItems(int)                 {}
func (in *informerLog) ProcessingLatency(time.Duration) {}
func (in *informerLog) StoreResourceVersion(float64)    {}
func (in *informerLog) OutsideShard(int)                {}

func Example() {
	gvr := schema.GroupVersionResource{Group: "stable.example.com", Version: "v1", Resource: "crontabs"}
	ct := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "stable.example.com/v1", "kind": "CronTab",
		"metadata": map[string]interface{}{"name": "nightly", "namespace": "team-a"},
	}}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{gvr: "CronTabList"}, ct)

	exporter := &stateLog{states: map[string][]string{}, objects: map[string]int{}}
	factory := dynamicinformer.NewSharedInformerFactory(client,
		dynamicinformer.Options{DisableCRDTracking: true, Metrics: exporter})
	crontabs := factory.ForResource(gvr)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	factory.Start(ctx)
	factory.WaitForCacheSync(ctx)
	// Handlers (the exporter's event counter among them) get their events
	// shortly after the cache: wait for the one object.
	for cached := 0; ctx.Err() == nil && cached != 1; time.Sleep(10 * time.Millisecond) {
		exporter.read(func() { cached = exporter.objects["crontabs"] })
	}
	crontabs.Release()
	factory.Shutdown()

	exporter.read(func() {
		fmt.Println("crontabs:", strings.Join(exporter.states["crontabs"], " → "))
		fmt.Println("objects cached:", exporter.objects["crontabs"])
	})
	// Output:
	// crontabs: Pending → Syncing → Synced → Stopped
	// objects cached: 1
}
