package cache

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
)

// fieldIndexPrefix starts the name of every field index.
const fieldIndexPrefix = "field:"

// fieldIndexName is the name of the index FieldIndexers builds for path:
// "field:" + path, the path used as written.
func fieldIndexName(path string) string {
	return fieldIndexPrefix + path
}

// FieldIndexers returns one index per path, ready for
// dynamicinformer.WithIndexers, toolscache.NewIndexer or
// SharedIndexInformer.AddIndexers; genericlister's ByField(path, value)
// uses the index of path when the indexer has it (and scans otherwise,
// with the same answer). It fails on the first malformed path, with an
// error wrapping ErrInvalidFieldPath.
//
// Paths are dot-separated field names with optional selectors: [*] (every
// element of a list), [n] (element n) and ['name'] or ["name"] (a field
// whose name contains dots or brackets), with an optional leading dot:
// "spec.nodeName", "status.phase", "metadata.ownerReferences[*].uid",
// "spec.containers[*].image", "metadata.labels['app.kubernetes.io/name']".
// An index is found by the path as written, so index and query must spell
// it the same way.
//
// Index values are the scalars the path reaches, formatted as strings:
// strings as they are, booleans as "true"/"false", numbers in their
// shortest decimal form (an integer 3 is "3"). Missing fields, null,
// objects and lists give no value, so such objects are simply not in the
// index; [*] gives one value per element (duplicates removed).
//
// The index functions read *unstructured.Unstructured and *Compact in
// place; any other runtime.Object (for example *metav1.PartialObjectMetadata
// in a metadata-only informer, where only "metadata..." paths can match) is
// first converted with runtime.DefaultUnstructuredConverter, which is
// slower, except for the owner path "metadata.ownerReferences[*].uid",
// which reads any object's metadata directly. They never modify objects and
// are safe for concurrent use.
func FieldIndexers(paths ...string) (toolscache.Indexers, error) {
	out := make(toolscache.Indexers, len(paths))
	for _, path := range paths {
		f, err := fieldIndexFunc(path)
		if err != nil {
			return nil, err
		}
		out[fieldIndexName(path)] = f
	}
	return out, nil
}

// fieldIndexFunc is the IndexFunc of the field index of path (see
// FieldIndexers).
func fieldIndexFunc(path string) (toolscache.IndexFunc, error) {
	if path == ownerUIDPath {
		return ownerUIDIndexFunc, nil
	}
	p, err := parseFieldPath(path)
	if err != nil {
		return nil, err
	}
	return func(obj interface{}) ([]string, error) {
		if c, ok := obj.(*Compact); ok {
			return p.compactIndexValues(c), nil
		}
		root, ok := jsonRoot(obj)
		if !ok {
			return nil, nil
		}
		return p.indexValues(root), nil
	}, nil
}

// indexValues returns the distinct scalar values the path reaches in v.
func (p fieldPath) indexValues(v interface{}) []string {
	var out []string
	p.collect(v, func(v interface{}) {
		if s, ok := scalarString(v); ok && !containsString(out, s) {
			out = append(out, s)
		}
	})
	return out
}

// compactIndexValues is indexValues for a Compact: its kept decoded
// form when it has one, else only the value at the path's leading field
// names, read from the encoding (NestedField), so indexing a compact
// cache does not decode its objects.
func (p fieldPath) compactIndexValues(c *Compact) []string {
	if c.st != nil {
		if u := c.st.decoded.Load(); u != nil {
			return p.indexValues(u.Object)
		}
	}
	n := 0
	for n < len(p) && p[n].kind == stepField {
		n++
	}
	names := make([]string, n)
	for i := range names {
		names[i] = p[i].name
	}
	v, found, err := c.NestedField(names...)
	if !found || err != nil {
		return nil
	}
	return p[n:].indexValues(v)
}

// jsonRoot returns obj as a JSON-like map: the map of an Unstructured as
// is, other runtime objects converted.
func jsonRoot(obj interface{}) (map[string]interface{}, bool) {
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		return o.Object, true
	case *Compact:
		u, err := o.peek()
		if err != nil {
			return nil, false
		}
		return u.Object, true
	case runtime.Unstructured:
		return o.UnstructuredContent(), true
	case runtime.Object:
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return nil, false
		}
		return m, true
	}
	return nil, false
}

// ownerUIDPath is the field path of the owners' UIDs, whose index reads
// any object's metadata directly (ownerUIDIndexFunc).
const ownerUIDPath = "metadata.ownerReferences[*].uid"

// ownerUIDIndexFunc indexes an object by the UIDs of its ownerReferences,
// as the generic field index of ownerUIDPath would. It reads Unstructured
// in place and any other object through meta.Accessor (so
// PartialObjectMetadata, Compact and typed objects are cheap).
func ownerUIDIndexFunc(obj interface{}) ([]string, error) {
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		md, _ := o.Object["metadata"].(map[string]interface{})
		refs, _ := md["ownerReferences"].([]interface{})
		if len(refs) == 0 {
			return nil, nil
		}
		out := make([]string, 0, len(refs))
		for _, r := range refs {
			m, _ := r.(map[string]interface{})
			if uid, ok := m["uid"].(string); ok && !containsString(out, uid) {
				out = append(out, uid)
			}
		}
		return out, nil
	case *metav1.PartialObjectMetadata:
		return ownerUIDs(o.OwnerReferences), nil
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil
	}
	return ownerUIDs(m.GetOwnerReferences()), nil
}

func ownerUIDs(refs []metav1.OwnerReference) []string {
	if len(refs) == 0 {
		return nil
	}
	out := make([]string, 0, len(refs))
	for _, r := range refs {
		if uid := string(r.UID); !containsString(out, uid) {
			out = append(out, uid)
		}
	}
	return out
}

func containsString(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}
