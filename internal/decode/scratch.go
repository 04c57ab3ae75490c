package decode

import "sync"

// scratch is a decoder's working memory, kept between calls so that
// decoding an object leaves no garbage of its own: the stacks of array
// elements and object members and the buffer for unescaping strings.
type scratch struct {
	stack    []interface{}
	members  []member
	unquoted []byte
}

// maxScratch bounds what goes back to the pool (elements of each stack,
// bytes of the buffer): an unusual object does not pin its working memory.
const maxScratch = 1 << 14

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// getScratch gives d working memory from the pool.
func (d *decoder) getScratch() {
	s := scratchPool.Get().(*scratch)
	d.scratch = s
	d.stack, d.members, d.unquoted = s.stack[:0], s.members[:0], s.unquoted[:0]
}

// putScratch returns d's working memory to the pool, holding no values
// (an error leaves elements on the stacks).
func (d *decoder) putScratch() {
	if cap(d.stack) > maxScratch || cap(d.members) > maxScratch || cap(d.unquoted) > maxScratch {
		return
	}
	clear(d.stack[:cap(d.stack)])
	clear(d.members[:cap(d.members)])
	s := d.scratch
	s.stack, s.members, s.unquoted = d.stack[:0], d.members[:0], d.unquoted[:0]
	scratchPool.Put(s)
}
