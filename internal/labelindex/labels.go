package labelindex

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// ObjectLabels returns a read-only view of obj's labels that a
// labels.Selector can match, without copying them.
//
// For *unstructured.Unstructured it reads metadata.labels in place (where
// Unstructured.GetLabels copies the map on every call) with the same
// meaning as GetLabels: a null value reads as "", and a label map holding a
// non-string value reads as no labels at all. For *metav1.PartialObjectMetadata
// and any other object meta.Accessor understands it returns the object's own
// label map. The second result is false when obj has no object metadata.
//
// The view shares memory with obj: it must not be kept after obj may have
// changed, and it must not be used to change obj.
func ObjectLabels(obj interface{}) (labels.Labels, bool) {
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		return unstructuredLabels(unstructuredLabelMap(o.Object)), true
	case *metav1.PartialObjectMetadata:
		return labels.Set(o.Labels), true
	case metav1.ObjectMetaAccessor: // *cache.Compact
		return labels.Set(o.GetObjectMeta().GetLabels()), true
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, false
	}
	return labels.Set(m.GetLabels()), true
}

// unstructuredLabelMap returns metadata.labels of an unstructured object
// without copying, or nil when it is missing or not a map of strings (and
// nulls), matching Unstructured.GetLabels.
func unstructuredLabelMap(obj map[string]interface{}) map[string]interface{} {
	md, ok := obj["metadata"].(map[string]interface{})
	if !ok {
		return nil
	}
	l, ok := md["labels"].(map[string]interface{})
	if !ok {
		return nil
	}
	for _, v := range l {
		if v == nil {
			continue
		}
		if _, ok := v.(string); !ok {
			return nil
		}
	}
	return l
}

// unstructuredLabels is a labels.Labels over an unstructured label map that
// unstructuredLabelMap has validated (string or nil values only).
type unstructuredLabels map[string]interface{}

func (l unstructuredLabels) Has(key string) bool {
	_, ok := l[key]
	return ok
}

func (l unstructuredLabels) Get(key string) string {
	s, _ := l[key].(string)
	return s
}

func (l unstructuredLabels) Lookup(key string) (string, bool) {
	v, ok := l[key]
	if !ok {
		return "", false
	}
	s, _ := v.(string)
	return s, true
}
