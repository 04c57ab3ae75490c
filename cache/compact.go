package cache

import (
	"container/list"
	"encoding/json"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
)

// Compact is the cache form of an object in compact mode: the object's
// JSON encoding plus the few metadata fields that keys, the namespace and
// label indexes, the owner index and label selectors read. It is several
// times smaller than the decoded *unstructured.Unstructured (see
// docs/PERFORMANCE.md) at the price of decoding on read.
//
// CompactTransform puts Compact objects into an informer's cache;
// genericlister decodes them transparently (through a bounded cache of
// decoded objects, DefaultCompactDecoder), and DecodingHandler does the
// same for event handlers, so readers keep seeing
// *unstructured.Unstructured. A Compact is immutable once built: its
// metadata fields and its encoding must not be changed.
type Compact struct {
	// The metadata below is all keys, the namespace, label and owner
	// indexes and label selectors read; everything else is only in raw.
	apiVersion, kind  string
	name, namespace   string
	uid               types.UID
	resourceVersion   string
	generation        int64
	labels            map[string]string
	ownerReferences   []metav1.OwnerReference
	deletionTimestamp *metav1.Time
	raw               []byte
}

var _ runtime.Object = &Compact{}
var _ metav1.Object = &Compact{}

// DeepCopyObject implements runtime.Object. The encoding, which is never
// modified, is shared.
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

// GetObjectKind implements runtime.Object.
func (c *Compact) GetObjectKind() schema.ObjectKind { return c }

// GroupVersionKind implements schema.ObjectKind.
func (c *Compact) GroupVersionKind() schema.GroupVersionKind {
	return schema.FromAPIVersionAndKind(c.apiVersion, c.kind)
}

// SetGroupVersionKind implements schema.ObjectKind.
func (c *Compact) SetGroupVersionKind(gvk schema.GroupVersionKind) {
	c.apiVersion, c.kind = gvk.ToAPIVersionAndKind()
}

// The metav1.Object methods below let client-go's key functions, indexes
// and meta.Accessor read a Compact. Getters of fields a Compact does not
// keep return zero values (the full object is in the encoding: Decode);
// setters of such fields do nothing. A Compact in a cache must not be
// changed through any setter.

func (c *Compact) GetNamespace() string                        { return c.namespace }
func (c *Compact) SetNamespace(v string)                       { c.namespace = v }
func (c *Compact) GetName() string                             { return c.name }
func (c *Compact) SetName(v string)                            { c.name = v }
func (c *Compact) GetGenerateName() string                     { return "" }
func (c *Compact) SetGenerateName(string)                      {}
func (c *Compact) GetUID() types.UID                           { return c.uid }
func (c *Compact) SetUID(v types.UID)                          { c.uid = v }
func (c *Compact) GetResourceVersion() string                  { return c.resourceVersion }
func (c *Compact) SetResourceVersion(v string)                 { c.resourceVersion = v }
func (c *Compact) GetGeneration() int64                        { return c.generation }
func (c *Compact) SetGeneration(v int64)                       { c.generation = v }
func (c *Compact) GetSelfLink() string                         { return "" }
func (c *Compact) SetSelfLink(string)                          {}
func (c *Compact) GetCreationTimestamp() metav1.Time           { return metav1.Time{} }
func (c *Compact) SetCreationTimestamp(metav1.Time)            {}
func (c *Compact) GetDeletionTimestamp() *metav1.Time          { return c.deletionTimestamp }
func (c *Compact) SetDeletionTimestamp(v *metav1.Time)         { c.deletionTimestamp = v }
func (c *Compact) GetDeletionGracePeriodSeconds() *int64       { return nil }
func (c *Compact) SetDeletionGracePeriodSeconds(*int64)        {}
func (c *Compact) GetLabels() map[string]string                { return c.labels }
func (c *Compact) SetLabels(v map[string]string)               { c.labels = v }
func (c *Compact) GetAnnotations() map[string]string           { return nil }
func (c *Compact) SetAnnotations(map[string]string)            {}
func (c *Compact) GetFinalizers() []string                     { return nil }
func (c *Compact) SetFinalizers([]string)                      {}
func (c *Compact) GetOwnerReferences() []metav1.OwnerReference { return c.ownerReferences }
func (c *Compact) SetOwnerReferences(v []metav1.OwnerReference) {
	c.ownerReferences = v
}
func (c *Compact) GetManagedFields() []metav1.ManagedFieldsEntry { return nil }
func (c *Compact) SetManagedFields([]metav1.ManagedFieldsEntry)  {}

// Raw returns the object's JSON encoding. It must not be modified.
func (c *Compact) Raw() []byte { return c.raw }

// Decode returns a new *unstructured.Unstructured decoded from the
// encoding; the caller owns it.
func (c *Compact) Decode() (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(c.raw); err != nil {
		return nil, fmt.Errorf("decode compact %s/%s: %w", c.namespace, c.name, err)
	}
	return u, nil
}

// NewCompact encodes u as a Compact. u is not modified or retained.
func NewCompact(u *unstructured.Unstructured) (*Compact, error) {
	raw, err := json.Marshal(u.Object)
	if err != nil {
		return nil, err
	}
	return &Compact{
		apiVersion: u.GetAPIVersion(), kind: u.GetKind(),
		name: u.GetName(), namespace: u.GetNamespace(),
		uid: u.GetUID(), resourceVersion: u.GetResourceVersion(), generation: u.GetGeneration(),
		labels:            u.GetLabels(),
		ownerReferences:   u.GetOwnerReferences(),
		deletionTimestamp: u.GetDeletionTimestamp(),
		raw:               raw,
	}, nil
}

// CompactTransform is the TransformFunc of compact mode: it turns each
// *unstructured.Unstructured into a *Compact. Put it last in a Chain, after
// StripManagedFields and the like, so that the encoding is of the reduced
// object. Compact objects and other types pass through; a tombstone whose
// object is an Unstructured gets a new tombstone with its Compact form (the
// original is only read, never modified).
func CompactTransform(obj interface{}) (interface{}, error) {
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		return NewCompact(o)
	case toolscache.DeletedFinalStateUnknown:
		if u, ok := o.Obj.(*unstructured.Unstructured); ok {
			c, err := NewCompact(u)
			if err != nil {
				return nil, err
			}
			return toolscache.DeletedFinalStateUnknown{Key: o.Key, Obj: c}, nil
		}
	}
	return obj, nil
}

// CompactDecoder decodes Compact objects for readers, keeping up to a fixed
// number of recently decoded objects so that repeated reads of hot objects
// do not decode again. Decoded objects it returns are shared between
// readers exactly like cached objects: they must not be modified. Entries
// are keyed by the Compact's identity, so an updated object (a new Compact)
// is decoded afresh and the old entry ages out. Safe for concurrent use.
type CompactDecoder struct {
	capacity int
	// mu guards lru and entries.
	mu      sync.Mutex
	lru     *list.List // of *decodedEntry, most recent first
	entries map[*Compact]*list.Element
}

type decodedEntry struct {
	c *Compact
	u *unstructured.Unstructured
}

// NewCompactDecoder returns a decoder that keeps up to capacity decoded
// objects (capacity <= 0 keeps none: every read decodes).
func NewCompactDecoder(capacity int) *CompactDecoder {
	return &CompactDecoder{capacity: capacity, lru: list.New(), entries: map[*Compact]*list.Element{}}
}

var defaultDecoder = NewCompactDecoder(1024)

// DefaultCompactDecoder returns the decoder genericlister and
// DecodingHandler use: it keeps the 1024 most recently read objects.
func DefaultCompactDecoder() *CompactDecoder { return defaultDecoder }

// Decode returns obj decoded if it is a *Compact (or a tombstone holding
// one, as a tombstone holding the decoded object) and obj itself otherwise.
func (d *CompactDecoder) Decode(obj interface{}) (interface{}, error) {
	switch o := obj.(type) {
	case *Compact:
		return d.decode(o)
	case toolscache.DeletedFinalStateUnknown:
		if c, ok := o.Obj.(*Compact); ok {
			u, err := d.decode(c)
			if err != nil {
				return nil, err
			}
			return toolscache.DeletedFinalStateUnknown{Key: o.Key, Obj: u}, nil
		}
	}
	return obj, nil
}

func (d *CompactDecoder) decode(c *Compact) (*unstructured.Unstructured, error) {
	if d.capacity <= 0 {
		return c.Decode()
	}
	d.mu.Lock()
	if e, ok := d.entries[c]; ok {
		d.lru.MoveToFront(e)
		u := e.Value.(*decodedEntry).u
		d.mu.Unlock()
		return u, nil
	}
	d.mu.Unlock()
	u, err := c.Decode()
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if e, ok := d.entries[c]; ok { // decoded concurrently: share one
		d.lru.MoveToFront(e)
		return e.Value.(*decodedEntry).u, nil
	}
	d.entries[c] = d.lru.PushFront(&decodedEntry{c: c, u: u})
	for d.lru.Len() > d.capacity {
		last := d.lru.Back()
		d.lru.Remove(last)
		delete(d.entries, last.Value.(*decodedEntry).c)
	}
	return u, nil
}

// Len returns the number of decoded objects kept.
func (d *CompactDecoder) Len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lru.Len()
}

// DecodingHandler wraps h so that it receives decoded
// *unstructured.Unstructured objects (shared, read-only, from
// DefaultCompactDecoder) instead of the *Compact objects of a compact-mode
// cache; other objects reach h unchanged. An object that cannot be decoded
// (never the case for objects CompactTransform built) is passed as is.
func DecodingHandler(h toolscache.ResourceEventHandler) toolscache.ResourceEventHandler {
	return decodingHandler{h: h}
}

type decodingHandler struct {
	h toolscache.ResourceEventHandler
}

func decodeOrKeep(obj interface{}) interface{} {
	out, err := defaultDecoder.Decode(obj)
	if err != nil {
		return obj
	}
	return out
}

func (d decodingHandler) OnAdd(obj interface{}, isInInitialList bool) {
	d.h.OnAdd(decodeOrKeep(obj), isInInitialList)
}

func (d decodingHandler) OnUpdate(oldObj, newObj interface{}) {
	d.h.OnUpdate(decodeOrKeep(oldObj), decodeOrKeep(newObj))
}

func (d decodingHandler) OnDelete(obj interface{}) { d.h.OnDelete(decodeOrKeep(obj)) }
