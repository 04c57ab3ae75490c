package listwatch

import (
	"errors"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ListBuilder builds a list object holding items at resourceVersion rv.
type ListBuilder func(rv string, items []runtime.Object) (runtime.Object, error)

func listBuilder(newList func() runtime.Object) ListBuilder {
	return func(rv string, items []runtime.Object) (runtime.Object, error) {
		l := newList()
		acc, err := meta.ListAccessor(l)
		if err != nil {
			return nil, err
		}
		acc.SetResourceVersion(rv)
		if err := meta.SetList(l, items); err != nil {
			return nil, err
		}
		return l, nil
	}
}

// UnstructuredLists builds UnstructuredLists of the group-version gvr
// returns at each call.
func UnstructuredLists(gvr func() schema.GroupVersionResource) ListBuilder {
	return listBuilder(func() runtime.Object {
		return &unstructured.UnstructuredList{Object: map[string]interface{}{
			"apiVersion": gvr().GroupVersion().String(), "kind": "List",
		}}
	})
}

// MetadataLists builds PartialObjectMetadataLists.
var MetadataLists = listBuilder(func() runtime.Object { return &metav1.PartialObjectMetadataList{} })

// ListRV returns a list's resourceVersion.
func ListRV(obj runtime.Object) (string, error) {
	type rvGetter interface{ GetResourceVersion() string }
	if l, ok := obj.(rvGetter); ok {
		return l.GetResourceVersion(), nil
	}
	return "", errors.New("no list metadata")
}
