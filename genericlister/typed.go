package genericlister

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// Typed reads the cache of a Lister as values of a Go struct type T (for
// example a CRD's Go type, or corev1.Pod), converting each object with
// runtime.DefaultUnstructuredConverter.
//
// Every *T returned is a fresh value that the caller owns and may modify:
// conversion copies. That makes typed reads slower and allocate more than
// Lister's shared reads. A conversion error (a cached object that does not
// fit T) fails the whole call. Lists are unordered; Typed is safe for
// concurrent use.
type Typed[T any] struct {
	l *Lister
}

// For returns the typed view of l. T must be a struct type that
// runtime.DefaultUnstructuredConverter can fill (json tags as for the API).
func For[T any](l *Lister) *Typed[T] {
	return &Typed[T]{l: l}
}

// List returns the objects matching selector (see Lister.List) as new *T.
func (t *Typed[T]) List(selector labels.Selector) ([]*T, error) {
	objs, err := t.l.List(selector)
	if err != nil {
		return nil, err
	}
	return convertList[T](objs)
}

// Get returns the object stored under name (see Lister.Get) as a new *T.
func (t *Typed[T]) Get(name string) (*T, error) {
	u, err := t.l.Get(name)
	if err != nil {
		return nil, err
	}
	return convert[T](u)
}

// Namespace returns the typed view of one namespace.
func (t *Typed[T]) Namespace(ns string) *TypedNamespace[T] {
	return &TypedNamespace[T]{l: t.l.Namespace(ns)}
}

// TypedNamespace is Typed restricted to one namespace.
type TypedNamespace[T any] struct {
	l *NamespaceLister
}

// List returns the namespace's objects matching selector as new *T.
func (t *TypedNamespace[T]) List(selector labels.Selector) ([]*T, error) {
	objs, err := t.l.List(selector)
	if err != nil {
		return nil, err
	}
	return convertList[T](objs)
}

// Get returns the namespace's object name as a new *T.
func (t *TypedNamespace[T]) Get(name string) (*T, error) {
	u, err := t.l.Get(name)
	if err != nil {
		return nil, err
	}
	return convert[T](u)
}

func convertList[T any](objs []*unstructured.Unstructured) ([]*T, error) {
	out := make([]*T, 0, len(objs))
	for _, u := range objs {
		v, err := convert[T](u)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func convert[T any](u *unstructured.Unstructured) (*T, error) {
	v := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, v); err != nil {
		return nil, err
	}
	return v, nil
}
