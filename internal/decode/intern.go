package decode

import (
	"hash/maphash"
	"sync/atomic"
)

// The intern table: a fixed array of slots indexed by a hash of the key,
// each holding the last key stored there. A lookup is a hash, an atomic
// load and a compare; a miss allocates the string and replaces the slot.
// It never grows (keys of unbounded variety — label keys of many objects —
// only take turns in their slots), and it is safe for concurrent use
// without a lock.
const (
	internSlots  = 1 << 13
	maxInternLen = 64 // longer keys are not interned
)

var (
	internSeed  = maphash.MakeSeed()
	internTable [internSlots]atomic.Pointer[string]
)

// internBytes returns b as a string, shared with earlier keys of the same
// bytes when the table still holds one.
func internBytes(b []byte) string {
	if len(b) > maxInternLen {
		return string(b)
	}
	slot := &internTable[maphash.Bytes(internSeed, b)&(internSlots-1)]
	if p := slot.Load(); p != nil && *p == string(b) {
		return *p
	}
	s := string(b)
	slot.Store(&s)
	return s
}
