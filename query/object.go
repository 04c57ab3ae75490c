package query

import (
	"strconv"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"

	ikcache "github.com/informerkit/informerkit/cache"
)

// view reads fields of one cached object: *unstructured.Unstructured in
// place; *cache.Compact from its metadata or its encoding
// (Compact.NestedField decodes only the value read); and
// *metav1.PartialObjectMetadata from its fields, converting the object
// once per view only for metadata the fast path does not know. Any other
// runtime.Object is converted once per view.
type view struct {
	obj interface{}
	// partField and part: in a partitioned cache (ScanParts), the
	// one-step path that reads the object's part, and the part.
	partField, part string
	root            map[string]interface{} // converted form, once needed
	conv            bool                   // root was computed
}

// isPart reports whether steps read the part's name.
func (v *view) isPart(steps []step) bool {
	return v.partField != "" && len(steps) == 1 && steps[0].kind == stepField && steps[0].name == v.partField
}

// values calls emit for each value steps reach, until emit returns false.
func (v *view) values(steps []step, emit func(interface{}) bool) {
	if v.isPart(steps) {
		emit(v.part)
		return
	}
	switch o := v.obj.(type) {
	case *unstructured.Unstructured:
		collect(steps, o.Object, emit)
		return
	case *ikcache.Compact:
		if val, ok := metaField(o.GetObjectMeta(), steps, false); ok {
			if val != nil {
				collect(steps[len(steps):], val, emit)
			}
			return
		}
		n := 0
		for n < len(steps) && steps[n].kind == stepField {
			n++
		}
		names := make([]string, n)
		for i := range names {
			names[i] = steps[i].name
		}
		if n == 0 {
			return // the root is an object: [*] and [n] reach nothing
		}
		if val, found, err := o.NestedField(names...); found && err == nil {
			collect(steps[n:], val, emit)
		}
		return
	case *metav1.PartialObjectMetadata:
		if val, ok := metaField(o, steps, true); ok {
			if val != nil {
				emit(val)
			}
			return
		}
	}
	if !v.conv {
		v.conv = true
		switch o := v.obj.(type) {
		case runtime.Unstructured:
			v.root = o.UnstructuredContent()
		case runtime.Object:
			v.root, _ = runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		}
	}
	if v.root != nil {
		collect(steps, v.root, emit)
	}
}

// first returns the first value steps reach.
func (v *view) first(steps []step) (interface{}, bool) {
	var out interface{}
	found := false
	v.values(steps, func(x interface{}) bool { out, found = x, true; return false })
	return out, found
}

// metaField answers the metadata paths that a Compact keeps decoded (and
// that PartialObjectMetadata holds as fields) without reading further:
// metadata.name, .namespace, .uid, .resourceVersion, .generation and
// .labels.<key>. It returns ok=false for any other path; val nil with ok
// means the field is absent. full also answers creationTimestamp (a
// Compact reads that from its encoding more cheaply through NestedField).
func metaField(m metav1.Object, steps []step, full bool) (val interface{}, ok bool) {
	if len(steps) < 2 || steps[0].kind != stepField || steps[0].name != "metadata" || steps[1].kind != stepField {
		return nil, false
	}
	str := func(s string) (interface{}, bool) {
		if len(steps) != 2 {
			return nil, true
		}
		if s == "" {
			return nil, true
		}
		return s, true
	}
	switch steps[1].name {
	case "name":
		return str(m.GetName())
	case "namespace":
		return str(m.GetNamespace())
	case "uid":
		return str(string(m.GetUID()))
	case "resourceVersion":
		return str(m.GetResourceVersion())
	case "generation":
		if len(steps) != 2 || m.GetGeneration() == 0 {
			return nil, true
		}
		return m.GetGeneration(), true
	case "labels":
		if len(steps) != 3 || steps[2].kind != stepField {
			return nil, false
		}
		l, found := m.GetLabels()[steps[2].name]
		if !found {
			return nil, true
		}
		return l, true
	case "creationTimestamp":
		if !full {
			return nil, false
		}
		t := m.GetCreationTimestamp()
		if len(steps) != 2 || t.IsZero() {
			return nil, true
		}
		return t.UTC().Format("2006-01-02T15:04:05Z07:00"), true
	}
	return nil, false
}

// objectKey is the object's cache key (namespace/name), as client-go's
// MetaNamespaceKeyFunc makes it.
func objectKey(obj interface{}) (string, bool) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		md, _ := u.Object["metadata"].(map[string]interface{})
		name, _ := md["name"].(string)
		ns, _ := md["namespace"].(string)
		if ns == "" {
			return name, name != ""
		}
		return ns + "/" + name, name != ""
	}
	k, err := toolscache.MetaNamespaceKeyFunc(obj)
	return k, err == nil && k != ""
}

// objectNamespace reads an object's namespace without allocating.
func objectNamespace(obj interface{}) string {
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		md, _ := o.Object["metadata"].(map[string]interface{})
		ns, _ := md["namespace"].(string)
		return ns
	case *metav1.PartialObjectMetadata:
		return o.Namespace
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return ""
	}
	return m.GetNamespace()
}

// objectRV is the object's resourceVersion as an integer, when it is one
// (as every etcd-backed API server makes them).
func objectRV(obj interface{}) (uint64, bool) {
	var s string
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		md, _ := o.Object["metadata"].(map[string]interface{})
		s, _ = md["resourceVersion"].(string)
	case *metav1.PartialObjectMetadata:
		s = o.ResourceVersion
	default:
		m, err := meta.Accessor(obj)
		if err != nil {
			return 0, false
		}
		s = m.GetResourceVersion()
	}
	rv, err := strconv.ParseUint(s, 10, 64)
	return rv, err == nil
}
