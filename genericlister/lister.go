package genericlister

import (
	stderrors "errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"

	ikcache "github.com/informerkit/informerkit/cache"
	"github.com/informerkit/informerkit/internal/labelindex"
)

// Lister reads *unstructured.Unstructured objects from an informer's
// indexer.
//
// Sharing: List, Get, ByField and ByIndex return the very objects the cache
// holds, shared with every other reader and with event handlers. They must
// not be modified: call DeepCopy on a result to change it.
// (cache.MutationDetector catches violations in tests.) A compact-mode indexer (*cache.Compact objects) is read through
// the objects' cache.Compactor: Get keeps the decoded object and returns
// it shared, List, ByField and ByIndex return kept objects shared and
// decode the others (keeping those read a second time); either way the
// results must not be modified, exactly as for a normal cache, and a read
// after an update never returns the older version. An object of any other
// type (for example *metav1.PartialObjectMetadata from a metadata-only
// informer) is an error wrapping ErrWrongType: read such a cache as it is
// stored with NewTyped or NewGeneric, as client-go's listers do, or ask
// for a fresh Unstructured converted on every read with the
// ConvertToUnstructured option.
//
// Ordering: results come in no particular order, and the order may change
// between calls; sort them if order matters.
//
// Concurrency: a Lister is safe for concurrent use, and reads run
// concurrently with the informer's writes. A list answered from an index
// set may see each object as of a slightly different moment (every object
// returned matched the query when it was read).
//
// A Lister is a small value over the indexer; making one is cheap.
type Lister struct {
	indexer  toolscache.Indexer
	resource schema.GroupResource
	convert  bool // ConvertToUnstructured
}

// ErrWrongType is wrapped by the errors of a lister whose cache holds an
// object of another type than the one it returns: anything but
// *unstructured.Unstructured and *cache.Compact for a Lister made without
// ConvertToUnstructured, anything but T for a Typed[T].
var ErrWrongType = stderrors.New("genericlister: the cache holds an object of another type")

// Option changes how New reads the cache.
type Option func(*Lister)

// ConvertToUnstructured makes a Lister convert every cached object that is
// neither an *unstructured.Unstructured nor a *cache.Compact (a
// *metav1.PartialObjectMetadata, a typed object) to a fresh Unstructured
// on every read, instead of failing with ErrWrongType. The conversion
// costs a walk of the object for each object returned; the converted
// objects are the caller's. Without it, use NewTyped or NewGeneric to read
// such a cache as it is stored.
func ConvertToUnstructured() Option { return func(l *Lister) { l.convert = true } }

// New returns a Lister over indexer (typically informer.GetIndexer()).
// resource names the resource in NotFound errors. The Lister uses the label
// indexes of informerkit's cache package and toolscache.NamespaceIndex
// automatically when the indexer has them; it works without them, by
// scanning. It returns the cached *unstructured.Unstructured objects as
// they are stored (and compact-mode objects decoded); other types are an
// error unless opts include ConvertToUnstructured.
func New(indexer toolscache.Indexer, resource schema.GroupResource, opts ...Option) *Lister {
	l := &Lister{indexer: indexer, resource: resource}
	for _, o := range opts {
		o(l)
	}
	return l
}

// List returns the objects, in all namespaces, whose labels match selector
// (nil means everything), shared with the cache and unordered.
//
// The requirements "key=value", "key==value", "key in (v1,v2)" and "key"
// are answered from an index when one covers the key: the key's per-key
// index (cache.LabelKeyIndexers), else a per-key index that List adds
// when the indexer allows it (the cache.AutoLabelKeyIndexers marker, which
// dynamicinformer installs by default; adding one indexes every object
// once, under the indexer's write lock). From the indexes,
// the candidate sets of the indexable requirements are compared and only
// the smallest is examined, against the whole selector (so "!=", "notin",
// "!key", "gt" and "lt" requirements are checked on that narrowed set). A
// selector with no indexable requirement ("key!=v", "!key" alone) scans
// the cache, as it does without the index; so does labels.Everything().
func (l *Lister) List(selector labels.Selector) ([]*unstructured.Unstructured, error) {
	return list(l.indexer, "", selector, l.convert)
}

// Get returns the object stored under key name — the name of a
// cluster-scoped object, or "namespace/name" (use Namespace(ns).Get for
// namespaced objects) — shared with the cache. It returns an error that
// apierrors.IsNotFound recognises when there is none.
func (l *Lister) Get(name string) (*unstructured.Unstructured, error) {
	return get(l.indexer, l.resource, name, name, l.convert)
}

// Namespace returns a lister restricted to namespace ns.
func (l *Lister) Namespace(ns string) *NamespaceLister {
	return &NamespaceLister{indexer: l.indexer, resource: l.resource, namespace: ns, convert: l.convert}
}

// ByField returns the objects whose field at path has value (see
// cache.FieldIndexers for the path syntax and how values are formatted),
// shared with the cache and unordered. It uses the index of path when the
// indexer has it (add it with cache.FieldIndexers(path), which also gives
// the path syntax and how values are formatted), and otherwise scans the
// cache evaluating the path on every object, with the same result. A
// malformed path is an error wrapping cache.ErrInvalidFieldPath.
func (l *Lister) ByField(path, value string) ([]*unstructured.Unstructured, error) {
	return byField(l.indexer, "", path, value, l.convert)
}

// ByIndex returns the objects that the named index maps to value, shared
// with the cache and unordered. It is an error if the indexer has no such
// index: the indexes the caller added (dynamicinformer.WithIndexers), or
// toolscache.NamespaceIndex.
func (l *Lister) ByIndex(indexName, value string) ([]*unstructured.Unstructured, error) {
	objs, err := l.indexer.ByIndex(indexName, value)
	if err != nil {
		return nil, err
	}
	return toUnstructuredList(objs, "", l.convert)
}

// NamespaceLister reads the objects of one namespace. Its results follow
// the Lister rules: shared with the cache, unordered, safe for concurrent
// use.
type NamespaceLister struct {
	indexer   toolscache.Indexer
	resource  schema.GroupResource
	namespace string
	convert   bool // ConvertToUnstructured
}

// List returns the objects of the namespace whose labels match selector
// (nil means everything). It combines the label indexes with
// toolscache.NamespaceIndex when the indexer has them, examining the
// smallest candidate set (see Lister.List).
func (l *NamespaceLister) List(selector labels.Selector) ([]*unstructured.Unstructured, error) {
	return list(l.indexer, l.namespace, selector, l.convert)
}

// Get returns the object name of the namespace, shared with the cache, or
// an error that apierrors.IsNotFound recognises.
func (l *NamespaceLister) Get(name string) (*unstructured.Unstructured, error) {
	return get(l.indexer, l.resource, l.namespace+"/"+name, name, l.convert)
}

// ByField is Lister.ByField restricted to the namespace.
func (l *NamespaceLister) ByField(path, value string) ([]*unstructured.Unstructured, error) {
	return byField(l.indexer, l.namespace, path, value, l.convert)
}

// ByIndex is Lister.ByIndex restricted to the namespace.
func (l *NamespaceLister) ByIndex(indexName, value string) ([]*unstructured.Unstructured, error) {
	objs, err := l.indexer.ByIndex(indexName, value)
	if err != nil {
		return nil, err
	}
	return toUnstructuredList(objs, l.namespace, l.convert)
}

func list(indexer toolscache.Indexer, namespace string, selector labels.Selector, convert bool) ([]*unstructured.Unstructured, error) {
	return selectAs(indexer, namespace, selector, func(obj interface{}) (*unstructured.Unstructured, error) { return toUnstructured(obj, true, convert) })
}

func get(indexer toolscache.Indexer, resource schema.GroupResource, key, name string, convert bool) (*unstructured.Unstructured, error) {
	return getAs(indexer, resource, key, name, func(obj interface{}) (*unstructured.Unstructured, error) { return toUnstructured(obj, false, convert) })
}

// selectAs is selectObjects returning each selected object converted by
// conv; the objects conv fails on are left out and the first failure is
// returned with the others.
func selectAs[T any](indexer toolscache.Indexer, namespace string, selector labels.Selector, conv func(interface{}) (T, error)) ([]T, error) {
	var out []T
	var convErr error
	err := selectObjects(indexer, namespace, selector, func(n int) {
		out = make([]T, 0, n)
	}, func(obj interface{}) {
		v, err := conv(obj)
		if err != nil {
			if convErr == nil {
				convErr = err
			}
			return
		}
		out = append(out, v)
	})
	if err != nil {
		return nil, err
	}
	return out, convErr
}

// getAs returns the object stored under key converted by conv, or a
// NotFound error naming name.
func getAs[T any](indexer toolscache.Indexer, resource schema.GroupResource, key, name string, conv func(interface{}) (T, error)) (T, error) {
	var zero T
	obj, exists, err := indexer.GetByKey(key)
	if err != nil {
		return zero, err
	}
	if !exists {
		return zero, errors.NewNotFound(resource, name)
	}
	return conv(obj)
}

func byField(indexer toolscache.Indexer, namespace, path, value string, convert bool) ([]*unstructured.Unstructured, error) {
	// FieldIndexers names the index of path and builds its function (the
	// one way to index a field), so the lister uses exactly what it
	// installs.
	fi, err := ikcache.FieldIndexers(path)
	if err != nil {
		return nil, err
	}
	var indexName string
	var f toolscache.IndexFunc
	for indexName, f = range fi {
	}
	if labelindex.HasIndex(indexer, indexName) {
		objs, err := indexer.ByIndex(indexName, value)
		if err != nil {
			return nil, err
		}
		return toUnstructuredList(objs, namespace, convert)
	}
	var out []*unstructured.Unstructured
	for _, obj := range indexer.List() {
		if namespace != "" && objectNamespace(obj) != namespace {
			continue
		}
		vals, _ := f(obj)
		for _, v := range vals {
			if v == value {
				u, err := toUnstructured(obj, true, convert)
				if err != nil {
					return nil, err
				}
				out = append(out, u)
				break
			}
		}
	}
	return out, nil
}

func toUnstructuredList(objs []interface{}, namespace string, convert bool) ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, obj := range objs {
		if namespace != "" && objectNamespace(obj) != namespace {
			continue
		}
		u, err := toUnstructured(obj, true, convert)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// toUnstructured returns a cached Unstructured as is and the decoded form
// of a compact-mode *cache.Compact (see materialize; inList says whether
// obj is read as one of many). Anything else (PartialObjectMetadata, typed
// objects) is converted to a fresh Unstructured when convert is set, and
// an ErrWrongType error otherwise.
func toUnstructured(obj interface{}, inList, convert bool) (*unstructured.Unstructured, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u, nil
	}
	ro, err := asObject(obj, inList)
	if err != nil {
		return nil, err
	}
	if u, ok := ro.(*unstructured.Unstructured); ok {
		return u, nil
	}
	if !convert {
		return nil, fmt.Errorf("%w: %T, not *unstructured.Unstructured (read it with NewTyped or NewGeneric, or convert it with ConvertToUnstructured)", ErrWrongType, obj)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ro)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// materialize returns the object a reader should see for a cached object:
// the decoded form of a compact-mode *cache.Compact (shared, through its
// Compactor: Compact.Shared for the read of one object, SharedInList for
// a read among many), the object itself otherwise.
func materialize(obj runtime.Object, inList bool) (runtime.Object, error) {
	c, ok := obj.(*ikcache.Compact)
	if !ok {
		return obj, nil
	}
	if inList {
		return c.SharedInList()
	}
	return c.Shared()
}
