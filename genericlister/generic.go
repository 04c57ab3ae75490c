package genericlister

import (
	"fmt"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
)

// NewGeneric returns a client-go toolscache.GenericLister over indexer that
// works whatever runtime.Object type the indexer holds:
// *unstructured.Unstructured, *metav1.PartialObjectMetadata from a
// metadata-only informer, or typed objects. Code written against client-go's
// dynamicinformer GenericInformer.Lister() compiles and behaves unchanged,
// with label selectors answered from the label indexes when the indexer has
// them (see Lister.List).
//
// The objects returned are the cached objects themselves (no conversion;
// the decoded form of a compact-mode *cache.Compact, see Lister), shared
// with every reader: do not modify them, DeepCopyObject first. Lists are
// unordered. The lister is safe for concurrent use. dynamicinformer's
// InformerHandle.Lister is one.
func NewGeneric(indexer toolscache.Indexer, resource schema.GroupResource) toolscache.GenericLister {
	return &genericLister{indexer: indexer, resource: resource}
}

type genericLister struct {
	indexer  toolscache.Indexer
	resource schema.GroupResource
}

var _ toolscache.GenericLister = &genericLister{}
var _ toolscache.GenericNamespaceLister = &genericNamespaceLister{}

func (l *genericLister) List(selector labels.Selector) ([]runtime.Object, error) {
	return listObjects(l.indexer, "", selector)
}

func (l *genericLister) Get(name string) (runtime.Object, error) {
	return getObject(l.indexer, l.resource, name, name)
}

func (l *genericLister) ByNamespace(namespace string) toolscache.GenericNamespaceLister {
	return &genericNamespaceLister{indexer: l.indexer, resource: l.resource, namespace: namespace}
}

type genericNamespaceLister struct {
	indexer   toolscache.Indexer
	resource  schema.GroupResource
	namespace string
}

func (l *genericNamespaceLister) List(selector labels.Selector) ([]runtime.Object, error) {
	return listObjects(l.indexer, l.namespace, selector)
}

func (l *genericNamespaceLister) Get(name string) (runtime.Object, error) {
	return getObject(l.indexer, l.resource, l.namespace+"/"+name, name)
}

func listObjects(indexer toolscache.Indexer, namespace string, selector labels.Selector) ([]runtime.Object, error) {
	return selectAs(indexer, namespace, selector, func(obj interface{}) (runtime.Object, error) { return asObject(obj, true) })
}

func getObject(indexer toolscache.Indexer, resource schema.GroupResource, key, name string) (runtime.Object, error) {
	return getAs(indexer, resource, key, name, func(obj interface{}) (runtime.Object, error) { return asObject(obj, false) })
}

func asObject(obj interface{}, inList bool) (runtime.Object, error) {
	ro, ok := obj.(runtime.Object)
	if !ok {
		return nil, fmt.Errorf("%w: %T is not a runtime.Object", ErrWrongType, obj)
	}
	return materialize(ro, inList)
}
