package genericlister

import (
	"fmt"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
)

// Typed reads objects of type T from an informer's indexer and returns
// them as they are stored, as client-go's generated listers and its
// metadatalister do: Typed[*metav1.PartialObjectMetadata] over a
// metadata-only informer's indexer answers as metadatalister.New would,
// Typed[*unstructured.Unstructured] as client-go's dynamiclister would.
// A compact-mode indexer read as Typed[*unstructured.Unstructured] returns
// the objects decoded through their cache.Compactor (see Lister); read as
// Typed[*cache.Compact], the Compacts themselves.
//
// It follows the Lister rules: the results are the cache's own objects,
// shared with every reader (never modify them), unordered; label
// selectors are answered from the label indexes when the indexer has
// them; a Typed is safe for concurrent use. A cached object that is not a
// T is an error wrapping ErrWrongType, never a conversion.
type Typed[T runtime.Object] struct {
	indexer  toolscache.Indexer
	resource schema.GroupResource
}

// NewTyped returns a Typed over indexer (typically informer.GetIndexer()).
// resource names the resource in NotFound errors.
func NewTyped[T runtime.Object](indexer toolscache.Indexer, resource schema.GroupResource) *Typed[T] {
	return &Typed[T]{indexer: indexer, resource: resource}
}

// List returns the objects, in all namespaces, whose labels match selector
// (nil means everything), as stored.
func (l *Typed[T]) List(selector labels.Selector) ([]T, error) {
	return selectAs(l.indexer, "", selector, asStored[T](true))
}

// Get returns the object stored under key name (see Lister.Get), as
// stored, or an error that apierrors.IsNotFound recognises.
func (l *Typed[T]) Get(name string) (T, error) {
	return getAs(l.indexer, l.resource, name, name, asStored[T](false))
}

// Namespace returns a lister restricted to namespace ns.
func (l *Typed[T]) Namespace(ns string) *TypedNamespace[T] {
	return &TypedNamespace[T]{indexer: l.indexer, resource: l.resource, namespace: ns}
}

// TypedNamespace reads the objects of one namespace, following the Typed
// rules.
type TypedNamespace[T runtime.Object] struct {
	indexer   toolscache.Indexer
	resource  schema.GroupResource
	namespace string
}

// List returns the objects of the namespace whose labels match selector
// (nil means everything), as stored.
func (l *TypedNamespace[T]) List(selector labels.Selector) ([]T, error) {
	return selectAs(l.indexer, l.namespace, selector, asStored[T](true))
}

// Get returns the object name of the namespace, as stored, or an error
// that apierrors.IsNotFound recognises.
func (l *TypedNamespace[T]) Get(name string) (T, error) {
	return getAs(l.indexer, l.resource, l.namespace+"/"+name, name, asStored[T](false))
}

// asStored returns the conversion of a Typed[T]: a cached T as it is, the
// decoded form of a *cache.Compact when that is a T (inList: read as one
// of many, see materialize), an ErrWrongType error for anything else.
func asStored[T runtime.Object](inList bool) func(obj interface{}) (T, error) {
	return func(obj interface{}) (T, error) {
		if t, ok := obj.(T); ok {
			return t, nil
		}
		var zero T
		ro, err := asObject(obj, inList)
		if err != nil {
			return zero, err
		}
		if t, ok := ro.(T); ok {
			return t, nil
		}
		return zero, fmt.Errorf("%w: %T, not %T", ErrWrongType, obj, zero)
	}
}
