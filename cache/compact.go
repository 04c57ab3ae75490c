package cache

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/internal/decode"
	"github.com/informerkit/informerkit/internal/treecodec"
)

// Compact is the cache form of an object in compact mode: the object in a
// pre-parsed binary encoding plus the few metadata fields that keys, the
// namespace and label indexes, the owner index and label selectors read.
// It is several times smaller than the decoded *unstructured.Unstructured
// (see docs/PERFORMANCE.md) and lossless: Decode returns the whole object.
// It is also a view of the object that reads without decoding it: the
// getters of its GetObjectMeta answer as the decoded object's would, and
// NestedField reads any field from the encoding (genericlister's
// ListCompact and GetCompact hand out such views).
//
// A Compactor (NewCompactor(...).Transform) puts Compact objects into an
// informer's cache.
// genericlister and DecodingHandler read them through Shared and
// SharedInList, which keep decoded objects of the Compactor's working set,
// so readers keep seeing *unstructured.Unstructured. A Compact is
// immutable: the setters of its metadata and kind panic.
type Compact struct {
	// The metadata below is all keys, the namespace, label and owner
	// indexes and label selectors read; everything else is only in enc.
	apiVersion, kind  string
	name, namespace   string
	uid               types.UID
	resourceVersion   string
	generation        int64
	labels            map[string]string
	ownerReferences   []metav1.OwnerReference
	deletionTimestamp *metav1.Time
	// enc is the encoding (internal/treecodec); never modified once built (decoded
	// strings point into it).
	enc []byte
	// owner keeps this Compact's decoded form (see Compactor).
	owner *Compactor
	// st is the decoded-object state, shared with deep copies (which have
	// the same encoding) so that reflect.DeepEqual of a Compact and its
	// copy does not depend on what was read.
	st *compactState
}

var _ runtime.Object = &Compact{}
var _ metav1.ObjectMetaAccessor = &Compact{}

// DeepCopyObject implements runtime.Object. The encoding, which is never
// modified, and the decoded form are shared.
func (c *Compact) DeepCopyObject() runtime.Object {
	out := *c
	if c.labels != nil {
		out.labels = make(map[string]string, len(c.labels))
		for k, v := range c.labels {
			out.labels[k] = v
		}
	}
	if c.ownerReferences != nil {
		out.ownerReferences = make([]metav1.OwnerReference, len(c.ownerReferences))
		for i := range c.ownerReferences {
			c.ownerReferences[i].DeepCopyInto(&out.ownerReferences[i])
		}
	}
	out.deletionTimestamp = c.deletionTimestamp.DeepCopy()
	return &out
}

// GetObjectKind implements runtime.Object: the object's apiVersion and
// kind. Its SetGroupVersionKind panics (a Compact is immutable).
func (c *Compact) GetObjectKind() schema.ObjectKind { return compactKind{c} }

// GetObjectMeta implements metav1.ObjectMetaAccessor: the object's
// metadata, as the decoded object's getters would answer, read without
// decoding (meta.Accessor, client-go's key functions and indexes read a
// Compact through it). GetLabels and GetOwnerReferences return values
// shared with every reader, which must not be modified; the other getters
// return values the caller owns. A Compact is immutable: every setter of
// the returned metav1.Object panics with an error wrapping
// ErrCachedObjectMutated. Decode returns an object to change.
func (c *Compact) GetObjectMeta() metav1.Object { return compactObjectMeta{c} }

// compactKind is the schema.ObjectKind of a Compact.
type compactKind struct{ c *Compact }

func (k compactKind) GroupVersionKind() schema.GroupVersionKind {
	return schema.FromAPIVersionAndKind(k.c.apiVersion, k.c.kind)
}

func (k compactKind) SetGroupVersionKind(schema.GroupVersionKind) { immutable("SetGroupVersionKind") }

// immutable panics: a setter was called on a Compact.
func immutable(setter string) {
	panic(fmt.Errorf("%w: %s called on a *cache.Compact, which is immutable (Decode returns a copy to change)", ErrCachedObjectMutated, setter))
}

// compactObjectMeta is the metav1.Object of a Compact (GetObjectMeta). The
// metadata a Compact keeps costs a field load; the rest is read from the
// encoding (see compactview.go).
type compactObjectMeta struct{ c *Compact }

func (m compactObjectMeta) GetNamespace() string               { return m.c.namespace }
func (m compactObjectMeta) GetName() string                    { return m.c.name }
func (m compactObjectMeta) GetUID() types.UID                  { return m.c.uid }
func (m compactObjectMeta) GetResourceVersion() string         { return m.c.resourceVersion }
func (m compactObjectMeta) GetGeneration() int64               { return m.c.generation }
func (m compactObjectMeta) GetDeletionTimestamp() *metav1.Time { return m.c.deletionTimestamp }
func (m compactObjectMeta) GetLabels() map[string]string       { return m.c.labels }
func (m compactObjectMeta) GetOwnerReferences() []metav1.OwnerReference {
	return m.c.ownerReferences
}

func (compactObjectMeta) SetNamespace(string)                        { immutable("SetNamespace") }
func (compactObjectMeta) SetName(string)                             { immutable("SetName") }
func (compactObjectMeta) SetUID(types.UID)                           { immutable("SetUID") }
func (compactObjectMeta) SetResourceVersion(string)                  { immutable("SetResourceVersion") }
func (compactObjectMeta) SetGeneration(int64)                        { immutable("SetGeneration") }
func (compactObjectMeta) SetDeletionTimestamp(*metav1.Time)          { immutable("SetDeletionTimestamp") }
func (compactObjectMeta) SetLabels(map[string]string)                { immutable("SetLabels") }
func (compactObjectMeta) SetOwnerReferences([]metav1.OwnerReference) { immutable("SetOwnerReferences") }
func (compactObjectMeta) SetGenerateName(string)                     { immutable("SetGenerateName") }
func (compactObjectMeta) SetSelfLink(string)                         { immutable("SetSelfLink") }
func (compactObjectMeta) SetCreationTimestamp(metav1.Time)           { immutable("SetCreationTimestamp") }
func (compactObjectMeta) SetDeletionGracePeriodSeconds(*int64) {
	immutable("SetDeletionGracePeriodSeconds")
}
func (compactObjectMeta) SetAnnotations(map[string]string)             { immutable("SetAnnotations") }
func (compactObjectMeta) SetFinalizers([]string)                       { immutable("SetFinalizers") }
func (compactObjectMeta) SetManagedFields([]metav1.ManagedFieldsEntry) { immutable("SetManagedFields") }

// Decode returns a new *unstructured.Unstructured decoded from the
// encoding; the caller owns it and may modify it. (Its strings share
// memory with the Compact, which is harmless: Go strings are immutable.)
func (c *Compact) Decode() (*unstructured.Unstructured, error) {
	m, err := treecodec.Decode(c.enc)
	if err != nil {
		return nil, fmt.Errorf("decode compact %s/%s: %w", c.namespace, c.name, err)
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// TreeEncoding returns the encoding c keeps, shared (it must not be
// modified). It is for this module's own packages (the disk cache): no
// other module can make its argument.
func (c *Compact) TreeEncoding(treecodec.Sealed) []byte { return c.enc }

// encodeBuffers holds scratch buffers for encoding.
var encodeBuffers = sync.Pool{New: func() interface{} { return new([]byte) }}

// encodeExact encodes obj into a slice of exactly its length (a grown
// buffer would keep up to twice that in every cached object).
func encodeExact(obj map[string]interface{}) ([]byte, error) {
	bp := encodeBuffers.Get().(*[]byte)
	defer encodeBuffers.Put(bp)
	b, err := treecodec.Encode((*bp)[:0], obj)
	if err != nil {
		return nil, err
	}
	if cap(b) <= 1<<20 {
		*bp = b
	}
	return append(make([]byte, 0, len(b)), b...), nil
}

// NewCompact encodes u as a Compact owned by no Compactor: its Shared
// reads decode afresh each time. u is not modified or retained. Values of types JSON
// decoding never produces (int, []string …, which a transform may have
// set) are normalized through JSON first, as the API server would.
func NewCompact(u *unstructured.Unstructured) (*Compact, error) {
	return newCompact(u, nil)
}

func newCompact(u *unstructured.Unstructured, owner *Compactor) (*Compact, error) {
	var enc []byte
	var err error
	if t, ok := u.Object[decode.TreeKey].(*decode.Tree); ok {
		// An envelope of informerkit's decoder: the encoding is built and
		// its metadata fields are in u (see Compactor).
		enc = t.Enc
	} else {
		enc, err = encodeExact(u.Object)
	}
	if errors.Is(err, errNotJSONLike) {
		var b []byte
		if b, err = json.Marshal(u.Object); err == nil {
			n := &unstructured.Unstructured{}
			if err = n.UnmarshalJSON(b); err == nil {
				u = n
				enc, err = encodeExact(u.Object)
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("compact %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	// Strings read from the encoding share its memory instead of keeping
	// the decoded object's strings; the few with few distinct values are
	// interned.
	meta, err := readCompactMeta(enc)
	if err != nil {
		return nil, fmt.Errorf("compact %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	labels := meta.labels
	if !meta.labelsOK || len(labels) == 0 {
		labels = u.GetLabels() // same answer as GetLabels, whatever the content
	}
	// One allocation for the Compact and its state.
	a := &struct {
		c  Compact
		st compactState
	}{}
	a.c = Compact{
		apiVersion: keys.intern(u.GetAPIVersion()), kind: keys.intern(u.GetKind()),
		name: meta.name, namespace: keys.intern(u.GetNamespace()),
		uid: types.UID(meta.uid), resourceVersion: meta.resourceVersion, generation: u.GetGeneration(),
		labels:            labels,
		ownerReferences:   u.GetOwnerReferences(),
		deletionTimestamp: u.GetDeletionTimestamp(),
		enc:               enc,
		owner:             owner,
		st:                &a.st,
	}
	return &a.c, nil
}

// DecodingHandler wraps h so that it receives decoded
// *unstructured.Unstructured objects instead of the *Compact objects of a
// compact-mode cache (objects their Compactor keeps are shared, the others
// decoded afresh and not kept; either way h must not modify them); other
// objects reach h unchanged. An object that cannot be decoded
// (never the case for objects a Compactor built) is passed as is.
func DecodingHandler(h toolscache.ResourceEventHandler) toolscache.ResourceEventHandler {
	return decodingHandler{h: h}
}

type decodingHandler struct {
	h toolscache.ResourceEventHandler
}

func decodeOrKeep(obj interface{}) interface{} {
	switch o := obj.(type) {
	case *Compact:
		if u, err := o.peek(); err == nil {
			return u
		}
	case toolscache.DeletedFinalStateUnknown:
		if c, ok := o.Obj.(*Compact); ok {
			if u, err := c.peek(); err == nil {
				return toolscache.DeletedFinalStateUnknown{Key: o.Key, Obj: u}
			}
		}
	}
	return obj
}

func (d decodingHandler) OnAdd(obj interface{}, isInInitialList bool) {
	d.h.OnAdd(decodeOrKeep(obj), isInInitialList)
}

func (d decodingHandler) OnUpdate(oldObj, newObj interface{}) {
	d.h.OnUpdate(decodeOrKeep(oldObj), decodeOrKeep(newObj))
}

func (d decodingHandler) OnDelete(obj interface{}) { d.h.OnDelete(decodeOrKeep(obj)) }
