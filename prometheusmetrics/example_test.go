package prometheusmetrics_test

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/prometheusmetrics"
)

func Example() {
	gvr := schema.GroupVersionResource{Group: "stable.example.com", Version: "v1", Resource: "crontabs"}
	ct := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "stable.example.com/v1", "kind": "CronTab",
		"metadata": map[string]interface{}{"name": "nightly", "namespace": "team-a"},
	}}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{gvr: "CronTabList"}, ct)

	// Register the adapter with a registry (here a plain one; with
	// controller-runtime, metrics.Registry.MustRegister(m)) and give it to
	// the factory. Serve the registry with promhttp.HandlerFor.
	m := prometheusmetrics.New()
	registry := prometheus.NewRegistry()
	registry.MustRegister(m)
	factory := dynamicinformer.NewSharedInformerFactory(client, dynamicinformer.Options{DisableCRDTracking: true, Metrics: m})
	defer factory.Shutdown()
	crontabs := factory.ForResource(gvr)
	defer crontabs.Release()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	factory.Start(ctx)
	factory.WaitForCacheSync(ctx)

	// Handlers (the adapter's counter among them) get their events
	// shortly after the cache: wait for the count.
	for ctx.Err() == nil && gauge(registry, "informerkit_objects_cached") != 1 {
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println("informerkit_objects_cached", gauge(registry, "informerkit_objects_cached"))
	fmt.Println("informerkit_informers_running", gauge(registry, "informerkit_informers_running"))
	// Output:
	// informerkit_objects_cached 1
	// informerkit_informers_running 1
}

// gauge reads the first sample of a gauge from the registry.
func gauge(g prometheus.Gatherer, name string) float64 {
	fams, _ := g.Gather()
	for _, f := range fams {
		if f.GetName() == name && len(f.Metric) > 0 {
			return f.Metric[0].GetGauge().GetValue()
		}
	}
	return -1
}
