package fleet_test

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/informerkit/informerkit/fleet"
)

var deployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

// A fleet over clusters the program names. With no cluster yet, every
// resource has synced; clusters added with Set join at once.
func ExampleStaticSource() {
	src := fleet.NewStaticSource(map[string]*rest.Config{})
	f := fleet.New(src, fleet.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f.Start(ctx)
	defer f.Shutdown()

	r := f.ForResource(deployments)
	st, err := r.WaitForSync(ctx, fleet.AllClusters)
	fmt.Println(len(st.Clusters), st.Synced(), err)
	// src.Set("east", eastConfig) would add a cluster; src.Delete("east") remove it.
	// Output: 0 true <nil>
}

// A fleet over some contexts of a kubeconfig file, printing every
// cluster's Deployment events.
func ExampleKubeconfigSource() {
	src := &fleet.KubeconfigSource{Path: "/home/me/.kube/config", Contexts: []string{"east", "west"}, Reload: time.Minute}
	f := fleet.New(src, fleet.Options{})
	ctx := context.Background()
	f.Start(ctx)
	defer f.Shutdown()

	r := f.ForResource(deployments)
	_, _ = r.AddEventHandler(fleet.HandlerFuncs{
		AddFunc: func(cluster string, obj any, _ bool) { fmt.Println("added in", cluster) },
		DeleteFunc: func(cluster string, obj any) {
			fmt.Println("deleted in", cluster)
		},
	})
	// Wait for the clusters that answer; the status says why others did not.
	st, err := r.WaitForSync(ctx, fleet.ReachableClusters)
	for _, c := range st.Clusters {
		fmt.Println(c.Cluster, c.State, c.HasSynced, c.Err, c.ContactErr)
	}
	if err != nil {
		return
	}
	web, _ := r.Lister().Namespace("prod").List(labels.SelectorFromSet(labels.Set{"app": "web"}))
	for _, it := range web {
		fmt.Println(it.Cluster, it.Object.GetName())
	}
}

// A fleet over the clusters whose kubeconfig Secrets carry a label in a hub
// cluster (the convention of Argo CD and multicluster-runtime). Rotating a
// Secret's credentials rebuilds that cluster's clients; deleting it makes
// the cluster leave.
func ExampleSecretSource() {
	hub, err := rest.InClusterConfig()
	if err != nil {
		return
	}
	src := &fleet.SecretSource{Hub: hub, Namespace: "fleet-system", LabelSelector: "fleet.example.com/member=true"}
	f := fleet.New(src, fleet.Options{})
	ctx := context.Background()
	f.Start(ctx)
	defer f.Shutdown()

	r := f.ForName("deploy") // resolved in each cluster on its own
	for _, c := range f.Status().Clusters {
		fmt.Println(c.Name, c.Reachable(), c.Generation)
	}
	items, _ := r.Lister().List(nil)
	fmt.Println(len(items))
}
