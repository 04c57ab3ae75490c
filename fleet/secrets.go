package fleet

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"sort"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/informerkit/informerkit/dynamicinformer"
)

// DefaultSecretKey is the data key of a cluster's kubeconfig in its Secret
// (the convention of multicluster-runtime's kubeconfig provider and of
// Argo CD's cluster Secrets with a kubeconfig).
const DefaultSecretKey = "kubeconfig"

// SecretSource is a Source of kubeconfig Secrets in a hub cluster: one
// cluster per Secret that matches LabelSelector in Namespace, named after
// the Secret ("namespace/name" when Namespace is empty), its Config built
// from the kubeconfig in the Secret's Key (its current context).
//
// The Secrets are read through an informer of informerkit's own (a
// dynamicinformer factory on Hub, holding only the matching Secrets). A
// Secret created joins the fleet, deleted leaves it, and one whose
// kubeconfig changed (credentials rotated) gives a new Config: the fleet
// rebuilds that cluster's clients. A change of anything else in the Secret
// (labels, annotations) changes nothing. A Secret without the key, or whose
// kubeconfig does not parse, is a cluster whose Err wraps ErrClusterConfig.
// The first set is reported once the Secrets are listed; Run returns an
// error if the hub cannot be used (its clients cannot be built).
type SecretSource struct {
	// Hub reaches the cluster that holds the Secrets.
	Hub *rest.Config
	// Namespace holds the Secrets; empty: every namespace.
	Namespace string
	// LabelSelector selects the Secrets (label selector syntax); empty:
	// every Secret of Namespace.
	LabelSelector string
	// Key is the data key that holds the kubeconfig; empty:
	// DefaultSecretKey.
	Key string
	// Logger is the hub factory's logger; zero: klog's.
	Logger logr.Logger
}

var secretsGVR = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}

// Run watches the Secrets and reports the clusters until ctx ends.
func (s *SecretSource) Run(ctx context.Context, update func([]Cluster)) error {
	fac, err := dynamicinformer.NewForConfig(s.Hub, dynamicinformer.Options{Logger: s.Logger})
	if err != nil {
		return fmt.Errorf("fleet: secret source: hub clients: %w", err)
	}
	defer fac.Shutdown()
	opts := []dynamicinformer.ResourceOption{dynamicinformer.WithProjection(dynamicinformer.Projection{StripManagedFields: true})}
	if s.Namespace != "" {
		opts = append(opts, dynamicinformer.WithNamespaces(s.Namespace))
	}
	if s.LabelSelector != "" {
		opts = append(opts, dynamicinformer.WithLabelSelector(s.LabelSelector))
	}
	h := fac.ForResource(secretsGVR, opts...)
	key := s.Key
	if key == "" {
		key = DefaultSecretKey
	}

	var mu sync.Mutex // guards known, synced; serialises publish
	known := map[string]secretEntry{}
	synced := false
	publish := func() {
		objs := h.Informer().GetStore().List()
		next := make(map[string]secretEntry, len(objs))
		var set []Cluster
		for _, o := range objs {
			u, ok := o.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			name := u.GetName()
			if s.Namespace == "" {
				name = u.GetNamespace() + "/" + name
			}
			e := secretCluster(u, key)
			if old, ok := known[name]; ok && e.raw != nil && bytes.Equal(old.raw, e.raw) {
				e = old
			}
			next[name] = e
			set = append(set, Cluster{Name: name, Config: e.cfg, Err: e.err})
		}
		known = next
		sort.Slice(set, func(i, j int) bool { return set[i].Name < set[j].Name })
		update(set)
	}
	onChange := func() {
		mu.Lock()
		defer mu.Unlock()
		if synced {
			publish()
		}
	}
	_, err = h.Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { onChange() },
		UpdateFunc: func(any, any) { onChange() },
		DeleteFunc: func(any) { onChange() },
	})
	if err != nil {
		return fmt.Errorf("fleet: secret source: %w", err)
	}
	fac.Start(ctx)
	if !toolscache.WaitForCacheSync(ctx.Done(), h.Informer().HasSynced) {
		return nil
	}
	mu.Lock()
	synced = true
	publish()
	mu.Unlock()
	<-ctx.Done()
	return nil
}

// secretEntry is a Secret's kubeconfig as last read and the Config given
// for it.
type secretEntry struct {
	raw []byte
	cfg *rest.Config
	err error
}

func secretCluster(u *unstructured.Unstructured, key string) secretEntry {
	enc, found, _ := unstructured.NestedString(u.Object, "data", key)
	if !found {
		return secretEntry{err: fmt.Errorf("%w: Secret %s/%s has no data key %q", ErrClusterConfig, u.GetNamespace(), u.GetName(), key)}
	}
	raw, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return secretEntry{err: fmt.Errorf("%w: Secret %s/%s key %q: %w", ErrClusterConfig, u.GetNamespace(), u.GetName(), key, err)}
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(raw)
	if err != nil {
		return secretEntry{raw: raw, err: fmt.Errorf("%w: Secret %s/%s key %q: %w", ErrClusterConfig, u.GetNamespace(), u.GetName(), key, err)}
	}
	return secretEntry{raw: raw, cfg: cfg}
}
