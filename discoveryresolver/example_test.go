package discoveryresolver_test

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/informerkit/informerkit/discoveryresolver"
)

// fakeClient stands in for discovery.NewDiscoveryClientForConfig(cfg).
func fakeClient() *fake.FakeDiscovery {
	verbs := metav1.Verbs{"get", "list", "watch", "create", "update", "patch", "delete"}
	return &fake.FakeDiscovery{Fake: &k8stesting.Fake{Resources: []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "pods", SingularName: "pod", Kind: "Pod", Namespaced: true, ShortNames: []string{"po"}, Verbs: verbs},
			{Name: "pods/status", Kind: "Pod", Namespaced: true, Verbs: metav1.Verbs{"get", "patch", "update"}},
		}},
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{
			{Name: "deployments", SingularName: "deployment", Kind: "Deployment", Namespaced: true, ShortNames: []string{"deploy"}, Verbs: verbs},
		}},
		{GroupVersion: "stable.example.com/v1", APIResources: []metav1.APIResource{
			{Name: "crontabs", SingularName: "crontab", Kind: "CronTab", Namespaced: true, ShortNames: []string{"ct"}, Categories: []string{"all"}, Verbs: verbs},
		}},
	}}}
}

func Example() {
	r := discoveryresolver.New(fakeClient())
	ctx := context.Background()
	for _, ref := range []string{"po", "Deployment.apps", "deployments.v1.apps", "ct", "crontabs.stable.example.com"} {
		res, err := r.Resolve(ctx, ref)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("%-28s %-36s namespaced=%v\n", ref, res.GVR, res.Namespaced)
	}
	_, err := r.Resolve(ctx, "pods/status")
	fmt.Println(errors.Is(err, discoveryresolver.ErrSubresource))
	// A miss is answered by a discovery round that starts after it: here it
	// waits for the one-second minimum refresh interval to end.
	_, err = r.Resolve(ctx, "cromtabs")
	fmt.Println(errors.Is(err, discoveryresolver.ErrNotFound), err)
	// Output:
	// po                           /v1, Resource=pods                   namespaced=true
	// Deployment.apps              apps/v1, Resource=deployments        namespaced=true
	// deployments.v1.apps          apps/v1, Resource=deployments        namespaced=true
	// ct                           stable.example.com/v1, Resource=crontabs namespaced=true
	// crontabs.stable.example.com  stable.example.com/v1, Resource=crontabs namespaced=true
	// true
	// true discoveryresolver: resolve "cromtabs": no served resource matches
}

func ExampleResolver_Match() {
	r := discoveryresolver.New(fakeClient())
	// What "kubectl get all" would list, restricted to informer targets.
	list, err := r.Match(context.Background(), discoveryresolver.Filter{
		Categories: []string{"all"},
		Verbs:      []string{"list", "watch"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, res := range list {
		fmt.Println(res.GVR.Resource, res.GVK.Kind)
	}
	// Output:
	// crontabs CronTab
}

func ExampleResolver_OnChange() {
	client := fakeClient()
	r := discoveryresolver.New(client)
	ctx := context.Background()
	_ = r.Refresh(ctx)
	remove := r.OnChange(func(c discoveryresolver.Change) {
		for _, res := range c.Removed {
			fmt.Println("removed", res.GVR)
		}
	})
	defer remove()
	// The CRD is deleted; a factory would stop its informer here.
	client.Resources = client.Resources[:2]
	_ = r.Refresh(ctx)
	// Output:
	// removed stable.example.com/v1, Resource=crontabs
}
