package subscription_test

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/informerkit/informerkit/discoveryresolver"
	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/subscription"
)

// Every resource of a group with one handler. Fake clients keep the
// example self-contained; with a cluster, use dynamicinformer.NewForConfig,
// which brings its resolver and follows CRDs as they come and go.
func Example() {
	widgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	gizmo := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "gizmo", "namespace": "team-a"},
	}}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{widgets: "WidgetList"}, gizmo)
	discovery := &fakediscovery.FakeDiscovery{Fake: &k8stesting.Fake{Resources: []*metav1.APIResourceList{
		{GroupVersion: "example.com/v1", APIResources: []metav1.APIResource{
			{Name: "widgets", Kind: "Widget", Namespaced: true, Verbs: metav1.Verbs{"get", "list", "watch"}},
		}},
	}}}
	factory := dynamicinformer.NewSharedInformerFactory(client, dynamicinformer.Options{Resolver: discoveryresolver.New(discovery), DisableCRDTracking: true})
	defer factory.Shutdown()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	factory.Start(ctx)

	events := make(chan subscription.Event, 10)
	sub, err := subscription.New(ctx, factory, discoveryresolver.Filter{Groups: []string{"example.com"}},
		func(e subscription.Event) { events <- e }) // one call at a time, for every resource
	if err != nil {
		panic(err)
	}
	defer sub.Stop() // before Shutdown (deferred calls run last first)

	e := <-events
	fmt.Println(e.Type, e.GVR, e.Object.(metav1.Object).GetName(), "initial:", e.IsInitialList)
	fmt.Println("watching:", sub.Resources())
	// Output:
	// ADDED example.com/v1, Resource=widgets gizmo initial: true
	// watching: [example.com/v1, Resource=widgets]
}
