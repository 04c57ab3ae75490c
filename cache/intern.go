package cache

import (
	"sync"
	"unsafe"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// maxInterned bounds the intern table: past it, new strings are not added
// (lookups still share the strings already there), so objects with
// high-cardinality keys cannot grow it without limit.
const maxInterned = 1 << 16

// internTable holds one copy of each interned string.
type internTable struct {
	// mu guards strings.
	mu      sync.RWMutex
	strings map[string]string
}

var keys = &internTable{strings: map[string]string{}}

// intern returns the table's copy of s, adding s if there is room.
func (t *internTable) intern(s string) string {
	t.mu.RLock()
	is, ok := t.strings[s]
	t.mu.RUnlock()
	if ok {
		return is
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if is, ok := t.strings[s]; ok {
		return is
	}
	if len(t.strings) >= maxInterned {
		return s
	}
	t.strings[s] = s
	return s
}

// InternKeys is a transform that makes every object of a cache share one
// copy of each JSON object key ("metadata", "labels", "spec", field and
// label names …) instead of the separate copy the JSON decoder allocates
// per object: about 300 bytes per server-shaped object (see
// docs/PERFORMANCE.md). It rewrites map keys in place (a Go map assignment
// to an existing key replaces the stored key), leaves values alone, and
// follows the transform contract: it does not write to an object whose
// keys are already shared, and it leaves the object of a
// DeletedFinalStateUnknown tombstone untouched (interning only saves
// memory, so a tombstone need not be copied for it). Non-Unstructured
// objects pass through. The process-wide table of keys is bounded (65536
// strings); keys beyond it simply stay unshared.
func InternKeys(obj interface{}) (interface{}, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		internMapKeys(u.Object)
	}
	return obj, nil
}

func internMapKeys(m map[string]interface{}) {
	for k, v := range m {
		if ik := keys.intern(k); unsafe.StringData(ik) != unsafe.StringData(k) {
			m[ik] = v // replaces the stored key: the decoder's copy is freed
		}
		internValue(v)
	}
}

func internValue(v interface{}) {
	switch x := v.(type) {
	case map[string]interface{}:
		internMapKeys(x)
	case []interface{}:
		for _, e := range x {
			internValue(e)
		}
	}
}
