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

// Short string values repeat across objects (kinds, apiVersions, condition
// types and statuses, quantities, managers, label values): they are kept
// as interface values in a second table of the same kind, so a repeated
// value costs no allocation and objects share one copy.
const (
	valueSlots     = 1 << 13
	maxInternValue = 32 // longer values are not interned
)

type boxedString struct {
	s string
	v interface{}
}

var valueTable [valueSlots]atomic.Pointer[boxedString]

// internValue returns b as an interface{} holding a string, shared with
// earlier values of the same bytes when the table still holds one.
func internValue(b []byte) interface{} {
	if len(b) > maxInternValue {
		return string(b)
	}
	slot := &valueTable[maphash.Bytes(internSeed, b)&(valueSlots-1)]
	if p := slot.Load(); p != nil && p.s == string(b) {
		return p.v
	}
	s := string(b)
	e := &boxedString{s: s, v: s}
	slot.Store(e)
	return e.v
}
