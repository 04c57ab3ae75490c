package decode

import (
	"hash/maphash"
	"sync/atomic"

	"github.com/informerkit/informerkit/internal/box"
)

// The intern table: a fixed array of slots indexed by a hash of the key,
// each holding the last key stored there (see table). A lookup is a hash,
// an atomic load of the slot's hash and, when it matches, a compare; a
// miss allocates the string and replaces the slot.
// It never grows (keys of unbounded variety — label keys of many objects —
// only take turns in their slots), and it is safe for concurrent use
// without a lock.
const (
	internSlots  = 1 << 13
	maxInternLen = 64 // longer keys are not interned
)

var (
	internSeed  = maphash.MakeSeed()
	internTable table
)

// table is an intern table: slots indexed by a hash of the text, each
// holding the last string stored there and its hash. A lookup compares
// the hash first, so a miss does not read the string (which lives
// elsewhere in the heap); a hash and string written apart by two
// goroutines are read as a miss, never as a wrong hit, because a hit
// compares the text itself.
type table [internSlots]slot

type slot struct {
	hash atomic.Uint64
	str  atomic.Pointer[string]
}

// find returns the slot for b, and *p when it holds b.
func (t *table) find(b []byte) (*slot, uint64, *string) {
	h := maphash.Bytes(internSeed, b)
	s := &t[h&(internSlots-1)]
	if s.hash.Load() == h {
		if p := s.str.Load(); p != nil && *p == string(b) {
			return s, h, p
		}
	}
	return s, h, nil
}

// store makes p, whose text has hash h, the string of s.
func (s *slot) store(h uint64, p *string) {
	s.str.Store(p)
	s.hash.Store(h)
}

// internBytes returns b as a string, shared with earlier keys of the same
// bytes when the table still holds one.
func internBytes(b []byte) string {
	if len(b) > maxInternLen {
		return string(b)
	}
	s, h, p := internTable.find(b)
	if p != nil {
		return *p
	}
	p = new(string)
	*p = string(b)
	s.store(h, p)
	return *p
}

// Short string values repeat across objects (kinds, apiVersions, condition
// types and statuses, quantities, managers, label values): they are kept
// as interface values in a second table like the first, so a repeated
// value costs no allocation and objects share one copy.
const maxInternValue = 32 // longer values are not interned

// valueTable's slots point at the string header an interface value holds:
// a string held by an interface is read-only to the runtime and to every
// reader, so all objects with the value share the header and its bytes.
// A miss costs the bytes and the header, both kept by the object; nothing
// is left as garbage when the slot is taken over by another value.
var valueTable table

// internValue returns b as an interface{} holding a string, shared with
// earlier values of the same bytes when the table still holds one.
func internValue(b []byte) interface{} {
	if len(b) > maxInternValue {
		return string(b)
	}
	s, h, p := valueTable.find(b)
	if p == nil {
		p = new(string)
		*p = string(b)
		s.store(h, p)
	}
	return box.String(p)
}
