package dynamicinformer

import (
	"reflect"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
)

// skipUnchanged is how a relist reaches handlers: only what changed.
//
// A relist (after a 410, a watch that could not resume, WithRelistPeriod,
// a restored disk cache diffed against the server) ends in the
// reflector's Replace, and client-go's informer turns every listed object
// it already caches into an update, old the cached object and new the
// listed one. For an object that did not change both carry the same
// resourceVersion: client-go itself calls such an update a sync (its
// OnUpdate's isSync) and gives it to every listener still counted as
// resyncing — every listener of an informer without resync checks. A
// controller over N objects got N updates that change nothing after each
// relist.
//
// skipUnchanged drops exactly those: an update whose old and new are two
// different objects at the same non-empty resourceVersion, apiVersion
// and kind. It keeps
//   - updates whose resourceVersion changed (real changes), and those
//     that give the object at another apiVersion (a following informer
//     relists at its new version: MoveTo),
//   - resyncs: client-go's resync (Sync deltas, or SyncAll) hands a
//     handler the cached object as both old and new, the same object,
//   - adds and deletes (OnAdd, OnDelete are not touched).
//
// The gate's in-stream refills and switches already skip such objects
// before the reflector (gate.ListerWatcher's cachedAsIs); this is the
// same rule for the lists the reflector makes itself.
type skipUnchanged struct {
	toolscache.ResourceEventHandler
}

func (s skipUnchanged) OnUpdate(old, obj interface{}) {
	if unchangedReplacement(old, obj) {
		return
	}
	s.ResourceEventHandler.OnUpdate(old, obj)
}

// unchangedReplacement reports whether an update is a relist's
// replacement of a cached object by an equal version of it: old and obj
// are different objects with the same, non-empty resourceVersion and the
// same apiVersion and kind. (An informer that follows a new version
// relists at it: the objects keep their resourceVersions but handlers
// are given them at the new apiVersion, a change.)
func unchangedReplacement(old, obj interface{}) bool {
	if sameObject(old, obj) {
		return false // a resync: the cached object as old and new
	}
	o, err := meta.Accessor(old)
	if err != nil {
		return false
	}
	n, err := meta.Accessor(obj)
	if err != nil {
		return false
	}
	rv := o.GetResourceVersion()
	return rv != "" && rv == n.GetResourceVersion() && kindOf(old) == kindOf(obj)
}

// kindOf is obj's apiVersion and kind as it carries them (empty if it
// carries none).
func kindOf(obj interface{}) schema.GroupVersionKind {
	if o, ok := obj.(interface{ GetObjectKind() schema.ObjectKind }); ok {
		if k := o.GetObjectKind(); k != nil {
			return k.GroupVersionKind()
		}
	}
	return schema.GroupVersionKind{}
}

// sameObject reports whether a and b are the same object: cached objects
// are pointers (values that are not pointers are never the same).
func sameObject(a, b interface{}) bool {
	t := reflect.TypeOf(a)
	return t != nil && t.Kind() == reflect.Pointer && t == reflect.TypeOf(b) && a == b
}
