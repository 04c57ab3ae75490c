package cache

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
)

// Transforms make objects smaller before they enter an informer's cache
// (client-go's SharedIndexInformer.SetTransform). Every transform here
// follows the same contract:
//
//   - It accepts *unstructured.Unstructured, *metav1.PartialObjectMetadata
//     and toolscache.DeletedFinalStateUnknown (it transforms the inner
//     object); other types pass through unchanged unless the transform says
//     otherwise.
//   - It is idempotent, and it does not write to an object that needs no
//     change. client-go may hand a transform an object that is already in
//     the cache (a tombstone's inner object, or an object passed back to
//     Replace); such objects come back untouched.
//   - It may change the object it is given in place (client-go calls the
//     transform on a freshly decoded object that nobody else holds yet),
//     except the inner object of a DeletedFinalStateUnknown, which may be
//     shared with the cache and with event handlers: when that one needs a
//     change, the transform changes a deep copy and returns a new tombstone.
//   - It never fails on a well-formed object; the error result exists for
//     the TransformFunc signature.

// lastAppliedConfigAnnotation is the annotation kubectl apply writes with
// the whole applied object (k8s.io/api/core/v1.LastAppliedConfigAnnotation);
// DropLastAppliedConfiguration removes it.
const lastAppliedConfigAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// StripManagedFields removes metadata.managedFields, which server-side
// apply writes on every object and which is often 30-50% of a cached
// object. Besides the types every transform accepts, it strips any object
// meta.Accessor understands (typed objects).
func StripManagedFields(obj interface{}) (interface{}, error) {
	return editInPlace(obj, stripManagedFields), nil
}

func stripManagedFields(obj interface{}, apply bool) bool {
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		md, _ := o.Object["metadata"].(map[string]interface{})
		if _, ok := md["managedFields"]; !ok {
			return false
		}
		if apply {
			delete(md, "managedFields")
		}
		return true
	case *metav1.PartialObjectMetadata:
		if o.ManagedFields == nil {
			return false
		}
		if apply {
			o.ManagedFields = nil
		}
		return true
	}
	m, err := meta.Accessor(obj)
	if err != nil || m.GetManagedFields() == nil {
		return false
	}
	if apply {
		m.SetManagedFields(nil)
	}
	return true
}

// DropLastAppliedConfiguration removes the
// kubectl.kubernetes.io/last-applied-configuration annotation (a full copy
// of the applied object), and the annotations map itself when that was its
// only entry. Besides the types every transform accepts, it edits any
// object meta.Accessor understands.
func DropLastAppliedConfiguration(obj interface{}) (interface{}, error) {
	return editInPlace(obj, dropLastApplied), nil
}

func dropLastApplied(obj interface{}, apply bool) bool {
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		md, _ := o.Object["metadata"].(map[string]interface{})
		ann, _ := md["annotations"].(map[string]interface{})
		if _, ok := ann[lastAppliedConfigAnnotation]; !ok {
			return false
		}
		if apply {
			delete(ann, lastAppliedConfigAnnotation)
			if len(ann) == 0 {
				delete(md, "annotations")
			}
		}
		return true
	case *metav1.PartialObjectMetadata:
		if _, ok := o.Annotations[lastAppliedConfigAnnotation]; !ok {
			return false
		}
		if apply {
			delete(o.Annotations, lastAppliedConfigAnnotation)
			if len(o.Annotations) == 0 {
				o.Annotations = nil
			}
		}
		return true
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return false
	}
	ann := m.GetAnnotations()
	if _, ok := ann[lastAppliedConfigAnnotation]; !ok {
		return false
	}
	if apply {
		delete(ann, lastAppliedConfigAnnotation)
		if len(ann) == 0 {
			ann = nil
		}
		m.SetAnnotations(ann)
	}
	return true
}

// editInPlace runs edit (which reports whether obj needs a change and, if
// apply, makes it) on obj, or on a deep copy of a tombstone's inner object.
func editInPlace(obj interface{}, edit func(obj interface{}, apply bool) bool) interface{} {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		inner, ok := t.Obj.(runtime.Object)
		if !ok || !edit(inner, false) {
			return obj
		}
		c := inner.DeepCopyObject()
		edit(c, true)
		return toolscache.DeletedFinalStateUnknown{Key: t.Key, Obj: c}
	}
	edit(obj, true)
	return obj
}

// Chain returns a TransformFunc that applies fns in order, each to the
// result of the previous one, and stops at the first error. Nil entries are
// skipped; Chain() returns the identity. Chain of transforms that follow
// the contract above follows it too.
func Chain(fns ...toolscache.TransformFunc) toolscache.TransformFunc {
	var list []toolscache.TransformFunc
	for _, f := range fns {
		if f != nil {
			list = append(list, f)
		}
	}
	return func(obj interface{}) (interface{}, error) {
		for _, f := range list {
			var err error
			if obj, err = f(obj); err != nil {
				return nil, err
			}
		}
		return obj, nil
	}
}

// projectedMetadataFields are the fields of metadata that Project always
// keeps: what keys, listers, label and owner indexes, finalizer-aware and
// generation-aware controllers need. Project drops the rest of metadata
// (managedFields, selfLink, and any field a future API adds) unless a path
// names it.
var projectedMetadataFields = []string{
	"name", "generateName", "namespace", "uid", "resourceVersion",
	"generation", "creationTimestamp", "deletionTimestamp",
	"deletionGracePeriodSeconds", "labels", "annotations",
	"ownerReferences", "finalizers",
}

// Project returns a TransformFunc that keeps, of each
// *unstructured.Unstructured, only apiVersion, kind, the metadata fields
// name, generateName, namespace, uid, resourceVersion, generation,
// creationTimestamp, deletionTimestamp, deletionGracePeriodSeconds, labels,
// annotations, ownerReferences and finalizers, and the listed field paths;
// everything else is dropped. Paths use the syntax of FieldIndexers except that [n] is not
// allowed: "spec.nodeName", "status.conditions", "spec.containers[*].image"
// (keeps spec.containers as a list of objects that have only "image").
// A path that reaches an object or list keeps all of it; a path missing
// from an object adds nothing. When one path is a prefix of another the
// shorter one wins.
//
// For *metav1.PartialObjectMetadata it keeps those metadata fields plus
// any top-level metadata field a path names ("metadata.managedFields") and
// clears the others; other types pass through. The projection of an
// Unstructured is a new object that shares kept values with the input (the
// input is not modified).
//
// A malformed path is an error wrapping ErrInvalidFieldPath.
func Project(paths ...string) (toolscache.TransformFunc, error) {
	var parsed []fieldPath
	for _, path := range paths {
		p, err := parseFieldPath(path)
		if err != nil {
			return nil, err
		}
		for _, s := range p {
			if s.kind == stepIndex {
				return nil, fmt.Errorf("%w %q: [n] is not allowed in a projection", ErrInvalidFieldPath, path)
			}
		}
		parsed = append(parsed, p)
	}
	for _, f := range projectedMetadataFields {
		parsed = append(parsed, fieldPath{{kind: stepField, name: "metadata"}, {kind: stepField, name: f}})
	}
	parsed = append(parsed, fieldPath{{kind: stepField, name: "apiVersion"}}, fieldPath{{kind: stepField, name: "kind"}})
	pr := &projection{paths: dropCoveredPaths(parsed)}
	pr.metadataKept = map[string]bool{}
	for _, p := range pr.paths {
		if len(p) == 1 && p[0].kind == stepField && p[0].name == "metadata" {
			pr.allMetadata = true
		}
		if len(p) >= 2 && p[0].kind == stepField && p[0].name == "metadata" && p[1].kind == stepField {
			pr.metadataKept[p[1].name] = true
		}
	}
	return pr.transform, nil
}

// dropCoveredPaths removes every path that another path is a prefix of
// (equal paths are kept once), so that projecting never writes into a
// subtree it already shares with the input.
func dropCoveredPaths(paths []fieldPath) []fieldPath {
	var out []fieldPath
	for i, p := range paths {
		covered := false
		for j, q := range paths {
			if i == j || len(q) > len(p) || !hasPrefix(p, q) {
				continue
			}
			if len(q) < len(p) || j < i {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, p)
		}
	}
	return out
}

func hasPrefix(p, q fieldPath) bool {
	for i := range q {
		if p[i] != q[i] {
			return false
		}
	}
	return true
}

type projection struct {
	paths        []fieldPath
	allMetadata  bool
	metadataKept map[string]bool
}

func (pr *projection) transform(obj interface{}) (interface{}, error) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		switch t.Obj.(type) {
		case *unstructured.Unstructured:
			p := pr.unstructured(t.Obj.(*unstructured.Unstructured))
			// The projection shares values with the cached object; a
			// tombstone's object must not.
			return toolscache.DeletedFinalStateUnknown{Key: t.Key, Obj: p.DeepCopy()}, nil
		case *metav1.PartialObjectMetadata:
			return editInPlace(obj, pr.partial), nil
		}
		return obj, nil
	}
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		return pr.unstructured(o), nil
	case *metav1.PartialObjectMetadata:
		pr.partial(o, true)
		return o, nil
	}
	return obj, nil
}

func (pr *projection) unstructured(u *unstructured.Unstructured) *unstructured.Unstructured {
	var dst interface{}
	for _, p := range pr.paths {
		dst = projectInto(u.Object, dst, p)
	}
	m, _ := dst.(map[string]interface{})
	if m == nil {
		m = map[string]interface{}{}
	}
	return &unstructured.Unstructured{Object: m}
}

// projectInto copies into dst (creating maps and lists as needed) the part
// of src that path reaches, and returns the new dst. Values at the end of
// the path are shared with src, never copied.
func projectInto(src, dst interface{}, path fieldPath) interface{} {
	if len(path) == 0 {
		return src
	}
	s, rest := path[0], path[1:]
	switch s.kind {
	case stepField:
		sm, ok := src.(map[string]interface{})
		if !ok {
			return dst
		}
		v, ok := sm[s.name]
		if !ok {
			return dst
		}
		dm, _ := dst.(map[string]interface{})
		if dm == nil {
			dm = make(map[string]interface{}, 4)
		}
		dm[s.name] = projectInto(v, dm[s.name], rest)
		return dm
	case stepAll:
		switch c := src.(type) {
		case []interface{}:
			dl, _ := dst.([]interface{})
			if dl == nil {
				dl = make([]interface{}, len(c))
			}
			for i, e := range c {
				dl[i] = projectInto(e, dl[i], rest)
				if _, isMap := e.(map[string]interface{}); isMap && dl[i] == nil {
					// Keep the list's shape: an element without the
					// field becomes an empty object, not null.
					dl[i] = map[string]interface{}{}
				}
			}
			return dl
		case map[string]interface{}:
			dm, _ := dst.(map[string]interface{})
			if dm == nil {
				dm = make(map[string]interface{}, len(c))
			}
			for k, e := range c {
				if v := projectInto(e, dm[k], rest); v != nil {
					dm[k] = v
				}
			}
			return dm
		}
	}
	return dst
}

// partial applies the projection to a PartialObjectMetadata; with apply
// false it only reports whether anything would change.
func (pr *projection) partial(obj interface{}, apply bool) bool {
	o, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok || pr.allMetadata {
		return false
	}
	changed := false
	clear := func(field string, isSet bool, zero func()) {
		if isSet && !pr.metadataKept[field] {
			changed = true
			if apply {
				zero()
			}
		}
	}
	clear("managedFields", o.ManagedFields != nil, func() { o.ManagedFields = nil })
	clear("selfLink", o.SelfLink != "", func() { o.SelfLink = "" })
	return changed
}
