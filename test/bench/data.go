package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/informerkit/informerkit/test/controlplane"
)

const (
	// seqAnnotation carries the latency scenario's write sequence number.
	seqAnnotation = "bench.informerkit.io/seq"
	fieldManager  = "ikbench-loader"
	// Namespaces is how many namespaces objects are spread over.
	Namespaces = 10
	// latencyNamespace holds the objects the latency scenario writes; they
	// are deleted after each implementation's turn.
	latencyNamespace = "bench-latency"
)

// resourceFor installs (or finds) a namespaced CRD and returns its Resource.
func installCRD(ctx context.Context, cfg *rest.Config, group, kind, plural string) (Resource, error) {
	crd := controlplane.NewCRD(group, kind, plural)
	ext, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return Resource{}, err
	}
	c := ext.ApiextensionsV1().CustomResourceDefinitions()
	if _, err := c.Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return Resource{}, fmt.Errorf("create CRD %s: %w", crd.Name, err)
	}
	gvr := controlplane.GVR(crd)
	if err := controlplane.WaitForCRDAt(ctx, cfg, crd); err != nil {
		return Resource{}, err
	}
	return Resource{GVR: gvr, GVK: gvr.GroupVersion().WithKind(kind)}, nil
}

func createNamespaces(ctx context.Context, cfg *rest.Config, names ...string) error {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, n := range names {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

func namespaceName(i int) string { return fmt.Sprintf("bench-%d", i%Namespaces) }
func objectName(i int) string    { return fmt.Sprintf("obj-%06d", i) }

// AppSelector is the label selector the selector List uses: it matches 1%
// of the objects (app=app-7).
const AppSelector = "app=app-7"

// object is the realistic shape every benchmark object has: four labels
// (app matches 1%), two annotations, a spec of about 3 KB (scalars, a
// nested template with a container list, a 20-entry string map). The
// server adds managedFields for the apply (fieldManager) that creates it.
func object(r Resource, ns, name string, i int, extraAnnotations map[string]string) map[string]interface{} {
	ann := map[string]interface{}{
		"bench.informerkit.io/owner":       fmt.Sprintf("team-%d", i%7),
		"bench.informerkit.io/description": "A benchmark object shaped like a typical workload CRD: labels, annotations, a nested spec and managed fields.",
	}
	for k, v := range extraAnnotations {
		ann[k] = v
	}
	containers := make([]interface{}, 0, 3)
	for c := 0; c < 3; c++ {
		env := make([]interface{}, 0, 4)
		for e := 0; e < 4; e++ {
			env = append(env, map[string]interface{}{"name": fmt.Sprintf("ENV_VAR_%d", e), "value": fmt.Sprintf("value-%d-%d-%d", i, c, e)})
		}
		containers = append(containers, map[string]interface{}{
			"name":  fmt.Sprintf("container-%d", c),
			"image": fmt.Sprintf("registry.example.com/team/image-%d:v1.%d.%d", c, i%10, c),
			"args":  []interface{}{"--verbose", "--port=8080", fmt.Sprintf("--id=%d", i)},
			"env":   env,
			"resources": map[string]interface{}{
				"requests": map[string]interface{}{"cpu": "100m", "memory": "128Mi"},
				"limits":   map[string]interface{}{"cpu": "500m", "memory": "512Mi"},
			},
		})
	}
	config := map[string]interface{}{}
	for k := 0; k < 20; k++ {
		config[fmt.Sprintf("setting%02d", k)] = fmt.Sprintf("setting-%02d-value-for-object-%d-%s", k, i, strings.Repeat("x", 24))
	}
	return map[string]interface{}{
		"apiVersion": r.GVK.GroupVersion().String(),
		"kind":       r.GVK.Kind,
		"metadata": map[string]interface{}{
			"name":      name,
			"namespace": ns,
			"labels": map[string]interface{}{
				"app":      fmt.Sprintf("app-%d", i%100),
				"tier":     []string{"front", "back", "db"}[i%3],
				"env":      []string{"prod", "staging"}[i%2],
				"instance": name,
			},
			"annotations": ann,
		},
		"spec": map[string]interface{}{
			"replicas": int64(1 + i%5),
			"paused":   i%11 == 0,
			"template": map[string]interface{}{
				"metadata": map[string]interface{}{"labels": map[string]interface{}{"app": fmt.Sprintf("app-%d", i%100)}},
				"spec":     map[string]interface{}{"containers": containers, "serviceAccountName": "bench"},
			},
			"config": config,
		},
	}
}

// apply creates or updates one object with server-side apply, so the server
// writes managedFields as it does for kubectl apply and controllers.
func apply(ctx context.Context, dyn dynamic.Interface, r Resource, obj map[string]interface{}) error {
	data, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	md := obj["metadata"].(map[string]interface{})
	force := true
	_, err = dyn.Resource(r.GVR).Namespace(md["namespace"].(string)).Patch(ctx, md["name"].(string), types.ApplyPatchType, data,
		metav1.PatchOptions{FieldManager: fieldManager, Force: &force})
	return err
}

// load applies objects [from, to) of r with workers in parallel.
func load(ctx context.Context, cfg *rest.Config, r Resource, from, to, workers int) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan int)
	var wg sync.WaitGroup
	var once sync.Once
	var firstErr error
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := apply(ctx, dyn, r, object(r, namespaceName(i), objectName(i), i, nil)); err != nil {
					once.Do(func() { firstErr = fmt.Errorf("apply %s %d: %w", r.GVR.Resource, i, err); cancel() })
				}
			}
		}()
	}
feed:
	for i := from; i < to; i++ {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	return firstErr
}
