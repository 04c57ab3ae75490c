package dynamicinformer_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/informerkit/informerkit/dynamicinformer"
)

// A factory with a cache directory: the second start restores the cache
// from disk (no list) and resumes the watch.
func ExampleOptions_cacheDir() {
	dir, _ := os.MkdirTemp("", "informerkit-cache")
	defer os.RemoveAll(dir)
	configmaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	run := func() dynamicinformer.Status {
		// A fake cluster for the example: its kube-system namespace's UID
		// identifies it; its resourceVersions are not later than the
		// fake server's (a stored state later than the server's is not
		// used).
		ns := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "v1", "kind": "Namespace",
			"metadata": map[string]interface{}{"name": "kube-system", "uid": "5b0f7c8e-cluster-a"}}}
		cm := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]interface{}{"name": "settings", "namespace": "team-a", "resourceVersion": "1"}}}
		client := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme(), ns, cm)
		factory := dynamicinformer.NewSharedInformerFactory(client, dynamicinformer.Options{DisableCRDTracking: true, CacheDir: dir})
		defer factory.Shutdown()
		h := factory.ForResource(configmaps, dynamicinformer.WithNamespaces("team-a"))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		factory.Start(ctx)
		factory.WaitForCacheSync(ctx)
		return h.Status()
	}
	first := run()
	fmt.Println("first start:", first.State, "restored", first.Restored, "cached", first.Objects)
	second := run()
	fmt.Println("second start:", second.State, "restored", second.Restored, "cached", second.Objects)
	// Output:
	// first start: Synced restored 0 cached 1
	// second start: Synced restored 1 cached 1
}
