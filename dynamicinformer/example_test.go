package dynamicinformer_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/dynamicinformer"
)

func Example() {
	gvr := schema.GroupVersionResource{Group: "stable.example.com", Version: "v1", Resource: "crontabs"}
	ct := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "stable.example.com/v1", "kind": "CronTab",
		"metadata": map[string]interface{}{"name": "nightly", "namespace": "team-a", "labels": map[string]interface{}{"tier": "batch"}},
	}}
	// A fake client for the example; use dynamicinformer.NewForConfig with a
	// real *rest.Config to get ForName and CRD tracking.
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{gvr: "CronTabList"}, ct)

	factory := dynamicinformer.NewSharedInformerFactory(client, 0, dynamicinformer.WithoutCRDTracking())
	defer factory.Shutdown()

	crontabs := factory.ForResource(gvr, dynamicinformer.InNamespaces("team-a"))
	defer crontabs.Release()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	factory.Start(ctx)
	fmt.Println("synced:", factory.WaitForCacheSync(ctx)[gvr])

	sel, _ := labels.Parse("tier=batch")
	objs, _ := crontabs.Lister().ByNamespace("team-a").List(sel)
	for _, o := range objs {
		fmt.Println("cached:", o.(*unstructured.Unstructured).GetName())
	}
	// Output:
	// synced: true
	// cached: nightly
}

// A level-triggered consumer slower than the write rate: Coalescing keeps
// one pending entry per object (the latest state), RecoverPanics keeps a
// panicking consumer from crashing the process.
func ExampleCoalescing() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	last := map[string]string{}
	consumer := toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, o any) {
			u := o.(*unstructured.Unstructured)
			mu.Lock()
			last[u.GetName()] = u.GetResourceVersion()
			mu.Unlock()
		},
	}
	c := dynamicinformer.Coalescing(ctx, dynamicinformer.RecoverPanics(consumer, func(p *dynamicinformer.HandlerPanicError) {
		fmt.Println("recovered:", p)
	}))
	// With a real informer: handle.Informer().AddEventHandler(c).
	version := func(v int) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetNamespace("team-a")
		u.SetName("nightly")
		u.SetResourceVersion(fmt.Sprint(v))
		return u
	}
	for v := 1; v <= 1000; v++ {
		c.OnUpdate(version(v-1), version(v))
	}
	for {
		mu.Lock()
		done := last["nightly"] == "1000"
		mu.Unlock()
		if done {
			break
		}
		time.Sleep(time.Millisecond)
	}
	st := c.Stats()
	fmt.Println("final state delivered:", last["nightly"])
	fmt.Println("at most one entry pending:", st.MaxPending <= 1)
	fmt.Println("fewer deliveries than events:", st.Delivered <= st.Received)
	// Output:
	// final state delivered: 1000
	// at most one entry pending: true
	// fewer deliveries than events: true
}
