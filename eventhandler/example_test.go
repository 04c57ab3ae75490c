package eventhandler_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/eventhandler"
)

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
	c := eventhandler.Coalescing(ctx, eventhandler.RecoverPanics(consumer, func(p *eventhandler.PanicError) {
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
