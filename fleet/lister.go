package fleet

import (
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/genericlister"
)

// Item is one object of a fleet's cache with the cluster it comes from.
type Item struct {
	Cluster string
	Object  *unstructured.Unstructured
}

// Lister reads a Resource's cache across the clusters of the fleet, through
// package genericlister over each cluster's cache (so label selectors use
// the factory's per-key label indexes).
//
// Contract: reads never wait for a cluster and never send a request: a
// cluster that cannot be reached is read from its cache as it was (its
// status says it is Stale); a cluster whose clients are being rebuilt is
// read from its previous cache until the new one has synced; a cluster that
// has left is not read. Objects are shared with the cache and with
// handlers: never modify them (DeepCopy first). Results come in no
// particular order. A Lister is safe for concurrent use and cheap to make.
type Lister struct {
	res *Resource
}

// Lister returns a reader of the resource's cache over every cluster.
func (r *Resource) Lister() *Lister { return &Lister{res: r} }

func (l *Lister) groupResource() schema.GroupResource { return l.res.gvr.GroupResource() }

// readers returns each cluster's current reader, sorted by cluster.
func (l *Lister) readers() []clusterReader {
	bs, _ := l.res.bindings()
	out := make([]clusterReader, 0, len(bs))
	for _, b := range bs {
		if idx := b.reader(); idx != nil {
			gr := l.groupResource()
			if h := b.currentHandle(); h != nil {
				gr = h.GVR().GroupResource()
			}
			// A resource read with a MetadataOnly projection caches
			// PartialObjectMetadata: converted, as fleet's Items hold
			// Unstructured objects.
			out = append(out, clusterReader{cluster: b.m.name, lister: genericlister.New(idx, gr, genericlister.ConvertToUnstructured()), indexer: idx})
		}
	}
	return out
}

type clusterReader struct {
	cluster string
	lister  *genericlister.Lister
	indexer toolscache.Indexer // what lister reads (for Query)
}

// List returns the objects of every cluster whose labels match selector (nil:
// all). An error of one cluster's cache does not keep the others' objects
// from the result: it is returned joined, as a *ClusterError each.
func (l *Lister) List(selector labels.Selector) ([]Item, error) {
	return l.list(func(gl *genericlister.Lister) ([]*unstructured.Unstructured, error) { return gl.List(selector) })
}

func (l *Lister) list(read func(*genericlister.Lister) ([]*unstructured.Unstructured, error)) ([]Item, error) {
	var items []Item
	var errs []error
	for _, cr := range l.readers() {
		objs, err := read(cr.lister)
		if err != nil {
			errs = append(errs, &ClusterError{Cluster: cr.cluster, Err: err})
		}
		for _, o := range objs {
			items = append(items, Item{Cluster: cr.cluster, Object: o})
		}
	}
	return items, errors.Join(errs...)
}

// Cluster returns a lister of one cluster's cache (genericlister's: Get,
// List, Namespace, ByField, ByIndex), or an error wrapping ErrUnknownCluster
// if the cluster is not in the fleet or has no cache of the resource yet. The
// lister reads the cache the cluster had when Cluster was called: call it
// again after the cluster's clients were rebuilt.
func (l *Lister) Cluster(name string) (*genericlister.Lister, error) {
	for _, cr := range l.readers() {
		if cr.cluster == name {
			return cr.lister, nil
		}
	}
	return nil, &ClusterError{Cluster: name, Err: fmt.Errorf("%w (or no cache of %s there yet)", ErrUnknownCluster, l.res)}
}

// Get returns the object namespace/name of cluster (namespace "" for a
// cluster-scoped object), or an error: apierrors.IsNotFound when the cluster
// does not hold it, errors.Is ErrUnknownCluster when the cluster is not in
// the fleet.
func (l *Lister) Get(cluster, namespace, name string) (*unstructured.Unstructured, error) {
	gl, err := l.Cluster(cluster)
	if err != nil {
		if errors.Is(err, ErrUnknownCluster) && l.res.fleet.member(cluster) != nil {
			return nil, apierrors.NewNotFound(l.groupResource(), name)
		}
		return nil, err
	}
	if namespace == "" {
		return gl.Get(name)
	}
	return gl.Namespace(namespace).Get(name)
}

// Namespace returns a reader of one namespace in every cluster.
func (l *Lister) Namespace(namespace string) *NamespaceLister {
	return &NamespaceLister{l: l, namespace: namespace}
}

// NamespaceLister reads one namespace of a Resource's cache in every cluster,
// under the Lister's contract.
type NamespaceLister struct {
	l         *Lister
	namespace string
}

// List returns the namespace's objects of every cluster whose labels match
// selector (nil: all), as Lister.List.
func (n *NamespaceLister) List(selector labels.Selector) ([]Item, error) {
	return n.l.list(func(gl *genericlister.Lister) ([]*unstructured.Unstructured, error) {
		return gl.Namespace(n.namespace).List(selector)
	})
}
