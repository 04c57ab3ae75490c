package controller

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
)

// Key names one object of one resource: what the work queue holds. It is
// comparable, so the queue deduplicates it: a key queued several times
// before a worker takes it is reconciled once.
type Key struct {
	GVR       schema.GroupVersionResource
	Namespace string // empty for cluster-scoped objects
	Name      string
}

// ObjectKey is the object's key in its informer's cache ("namespace/name",
// or "name" for cluster-scoped objects), as client-go's
// MetaNamespaceKeyFunc writes it.
func (k Key) ObjectKey() string {
	if k.Namespace == "" {
		return k.Name
	}
	return k.Namespace + "/" + k.Name
}

// String is "resource.version.group namespace/name" (kubectl's fully
// qualified resource name, then the object key).
func (k Key) String() string {
	r := k.GVR.Resource + "." + k.GVR.Version
	if k.GVR.Group != "" {
		r += "." + k.GVR.Group
	}
	return r + " " + k.ObjectKey()
}

// KeyOf returns the key of obj (a cached object, or a
// toolscache.DeletedFinalStateUnknown) in resource gvr. ok is false for
// something that has no object metadata.
func KeyOf(gvr schema.GroupVersionResource, obj any) (Key, bool) {
	if d, isTombstone := obj.(toolscache.DeletedFinalStateUnknown); isTombstone {
		if d.Obj == nil {
			ns, name, err := toolscache.SplitMetaNamespaceKey(d.Key)
			return Key{GVR: gvr, Namespace: ns, Name: name}, err == nil && name != ""
		}
		obj = d.Obj
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return Key{}, false
	}
	name := m.GetName()
	return Key{GVR: gvr, Namespace: m.GetNamespace(), Name: name}, name != ""
}
