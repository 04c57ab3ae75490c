package decode

import (
	"sync"
	"unsafe"

	"github.com/informerkit/informerkit/internal/box"
)

// scratch is a decoder's working memory, kept between calls so that
// decoding an object leaves no garbage of its own: the stacks of array
// elements and object members and the buffer for unescaping strings.
type scratch struct {
	stack    []interface{}
	pending  []member
	unquoted []byte
	fields   consTable
	// strs and slices are how many boxes of each kind the last object
	// decoded with this scratch used, and text how many bytes its boxed
	// strings held: objects of one resource are alike, so the next one
	// gets that much in its first allocation.
	strs, slices, text int
}

// maxScratch bounds what goes back to the pool (elements of each stack,
// bytes of the buffer): an unusual object does not pin its working memory.
const maxScratch = 1 << 14

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// getScratch gives d working memory from the pool.
func (d *decoder) getScratch() {
	s := scratchPool.Get().(*scratch)
	d.scratch = s
	d.stack, d.pending, d.unquoted = s.stack[:0], s.pending[:0], s.unquoted[:0]
	d.fields = s.fields
}

// putScratch returns d's working memory to the pool, holding no values
// (an error leaves elements on the stacks).
func (d *decoder) putScratch() {
	if cap(d.stack) > maxScratch || cap(d.pending) > maxScratch || cap(d.unquoted) > maxScratch {
		return
	}
	clear(d.stack[:cap(d.stack)])
	clear(d.pending[:cap(d.pending)])
	d.fields.reset()
	s := d.scratch
	s.stack, s.pending, s.unquoted = d.stack[:0], d.pending[:0], d.unquoted[:0]
	s.fields = consTable{}
	if len(d.fields.entries) <= maxScratch {
		s.fields = d.fields
	}
	if d.boxes {
		s.strs, s.slices, s.text = d.nStrs, d.nSlices, d.nText
	}
	scratchPool.Put(s)
}

// boxChunk is how many boxes to allocate when d has none left: what the
// last object needed beyond the used ones, at least minBoxes, and no more
// than the rest of the input could use at perBox bytes of JSON each (the
// last object may have been of another resource, far larger: a guess too
// small costs another chunk, one too large is kept with the object).
func (d *decoder) boxChunk(used int, last func(*scratch) int, perBox int) int {
	n := minBoxes
	if d.scratch != nil {
		n = max(n, last(d.scratch)-used)
	}
	return min(n, minBoxes+(len(d.data)-d.pos)/perBox)
}

const minBoxes = 4

// box returns b as a string in an interface value whose header shares an
// allocation with those of other strings of the object; shared: its bytes
// do too (see text), else they are an allocation of their own.
func (d *decoder) box(b []byte, shared bool) interface{} {
	if !d.boxes {
		return string(b)
	}
	if len(d.strs) == 0 {
		// A boxed string is longer than maxInternValue (but for the few
		// metadata fields that are never interned).
		d.strs = make([]string, d.boxChunk(d.nStrs, func(s *scratch) int { return s.strs }, maxInternValue+2))
	}
	p := &d.strs[0]
	d.strs = d.strs[1:]
	d.nStrs++
	if shared {
		*p = d.text(b)
	} else {
		*p = string(b)
	}
	return box.String(p)
}

// text returns a copy of b whose bytes share an allocation with those of
// other strings of the object: the bytes of a string are never written
// after it is made, and no two objects share an allocation.
func (d *decoder) text(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if cap(d.arena)-len(d.arena) < len(b) {
		// What the last object needed, but no more than the rest of the
		// input can hold (see boxChunk).
		n := minText
		if d.scratch != nil {
			n = max(n, d.scratch.text-d.nText)
		}
		d.arena = make([]byte, 0, max(min(n, len(b)+len(d.data)-d.pos), len(b)))
	}
	start := len(d.arena)
	d.arena = append(d.arena, b...)
	d.nText += len(b)
	return unsafe.String(&d.arena[start], len(b))
}

// minText is the least a decoder allocates for the bytes of strings.
const minText = 256

// boxSlice returns v in an interface value; the slice's header shares an
// allocation with those of other slices of the object.
func (d *decoder) boxSlice(v []interface{}) interface{} {
	if !d.boxes {
		return v
	}
	if len(d.slices) == 0 {
		d.slices = make([][]interface{}, d.boxChunk(d.nSlices, func(s *scratch) int { return s.slices }, 16))
	}
	p := &d.slices[0]
	d.slices = d.slices[1:]
	d.nSlices++
	*p = v
	return box.Slice(p)
}
