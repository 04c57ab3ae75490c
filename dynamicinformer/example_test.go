package dynamicinformer_test

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

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

	factory := dynamicinformer.NewSharedInformerFactory(client, dynamicinformer.Options{DisableCRDTracking: true})
	defer factory.Shutdown()

	crontabs := factory.ForResource(gvr, dynamicinformer.WithNamespaces("team-a"))
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
