package genericlister

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"

	ikcache "github.com/informerkit/informerkit/cache"
)

// ErrNotCompact is wrapped by the errors of ListCompact and GetCompact
// when the cache holds an object that is not a *cache.Compact (the
// informer is not in compact mode).
var ErrNotCompact = errors.New("genericlister: the cache holds an object that is not compact")

// ListCompact is List for a compact-mode cache that does not decode: it
// returns the cache's *cache.Compact objects themselves. A Compact
// answers metadata through GetObjectMeta (name, namespace, labels, owners … at the
// cost of a field load; other metadata read from its encoding) and reads
// any other field with NestedField without decoding the object; Shared
// and Decode give the whole object. Listing therefore costs what it costs
// in a normal cache, whatever the objects' size, instead of one decode per
// object not yet kept. The Compacts must not be modified (they are
// immutable); results are unordered. An object in the cache that is not
// a Compact is an error wrapping ErrNotCompact.
func (l *Lister) ListCompact(selector labels.Selector) ([]*ikcache.Compact, error) {
	return listCompact(l.indexer, "", selector)
}

// GetCompact is Get returning the cache's *cache.Compact without decoding
// it (see ListCompact), or an error that apierrors.IsNotFound recognises.
func (l *Lister) GetCompact(name string) (*ikcache.Compact, error) {
	return getCompact(l.indexer, l.resource, name, name)
}

// ListCompact is Lister.ListCompact restricted to the namespace.
func (l *NamespaceLister) ListCompact(selector labels.Selector) ([]*ikcache.Compact, error) {
	return listCompact(l.indexer, l.namespace, selector)
}

// GetCompact is Lister.GetCompact of the object name of the namespace.
func (l *NamespaceLister) GetCompact(name string) (*ikcache.Compact, error) {
	return getCompact(l.indexer, l.resource, l.namespace+"/"+name, name)
}

func listCompact(indexer toolscache.Indexer, namespace string, selector labels.Selector) ([]*ikcache.Compact, error) {
	out, err := selectAs(indexer, namespace, selector, asCompact)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func getCompact(indexer toolscache.Indexer, resource schema.GroupResource, key, name string) (*ikcache.Compact, error) {
	return getAs(indexer, resource, key, name, asCompact)
}

func asCompact(obj interface{}) (*ikcache.Compact, error) {
	if c, ok := obj.(*ikcache.Compact); ok {
		return c, nil
	}
	return nil, fmt.Errorf("%w: %T", ErrNotCompact, obj)
}
