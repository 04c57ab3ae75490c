package dynamicinformer_test

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/informerkit/informerkit/dynamicinformer"
)

// A controller writes with its client, then waits for its informer's cache
// to have the write before reading it from the lister.
func ExampleInformerHandle_WaitForObject() {
	gvr := schema.GroupVersionResource{Group: "stable.example.com", Version: "v1", Resource: "crontabs"}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{gvr: "CronTabList"})
	factory := dynamicinformer.NewSharedInformerFactory(client, dynamicinformer.Options{DisableCRDTracking: true})
	defer factory.Shutdown()
	crontabs := factory.ForResource(gvr)
	defer crontabs.Release()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	factory.Start(ctx)
	factory.WaitForCacheSync(ctx)

	ct := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "stable.example.com/v1", "kind": "CronTab",
		// A real API server sets the resourceVersion; the fake client
		// keeps the one given.
		"metadata": map[string]interface{}{"name": "nightly", "namespace": "team-a", "resourceVersion": "42"},
	}}
	created, err := client.Resource(gvr).Namespace("team-a").Create(ctx, ct, metav1.CreateOptions{})
	if err != nil {
		panic(err)
	}
	if err := crontabs.WaitForObject(ctx, created); err != nil {
		panic(err) // context.DeadlineExceeded, ErrNotServed, ErrStopped, the Failed informer's Status.Err (ErrForbidden, ...)
	}
	cached, err := crontabs.Lister().ByNamespace("team-a").Get("nightly")
	fmt.Println(cached.(metav1.Object).GetName(), err)
	// Output:
	// nightly <nil>
}
