package codec

import (
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
)

// RawObjects hands the JSON a watch event's object was decoded from to
// whoever later receives that very object (by pointer): an informer's
// disk journal, given each object as its watch stream hands it on,
// writes it as the server sent it instead of encoding it again.
//
// It is bounded: it holds at most 2×rawGeneration objects' bytes. Once a
// generation is full the older one is dropped, so bytes nobody takes (a
// bookmark, an event a shard filter dropped) do not stay; Take then
// reports false and the taker encodes the object itself. Safe for
// concurrent use.
type RawObjects struct {
	mu        sync.Mutex // guards cur, prev
	cur, prev map[runtime.Object][]byte
}

// rawGeneration is how many objects' bytes a generation holds.
const rawGeneration = 512

// NewRawObjects returns an empty RawObjects.
func NewRawObjects() *RawObjects {
	return &RawObjects{cur: make(map[runtime.Object][]byte, rawGeneration)}
}

// Put records that obj was decoded from raw; raw is copied (the stream's
// buffer is reused for the next event), into a buffer Release gave back
// if one is large enough.
func (r *RawObjects) Put(obj runtime.Object, raw []byte) {
	var data []byte
	if p, ok := rawBuffers.Get().(*[]byte); ok && cap(*p) >= len(raw) {
		data = (*p)[:0]
	} else {
		data = make([]byte, 0, len(raw)+len(raw)/4) // room for the object's next versions
	}
	data = append(data, raw...)
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.cur) >= rawGeneration {
		// The older generation's bytes are held by nothing else (Take
		// removes what it hands out): give them back for later copies.
		for _, b := range r.prev {
			Release(b)
		}
		r.prev, r.cur = r.cur, make(map[runtime.Object][]byte, rawGeneration)
	}
	r.cur[obj] = data
}

// Take returns the JSON obj was decoded from, once, and forgets it. ok
// is false when obj is not one r holds (decoded elsewhere, taken before,
// or dropped). The caller owns the returned bytes, and may give them to
// Release once it no longer uses them.
func (r *RawObjects) Take(obj runtime.Object) (raw []byte, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if raw, ok = r.cur[obj]; ok {
		delete(r.cur, obj)
		return raw, true
	}
	if raw, ok = r.prev[obj]; ok {
		delete(r.prev, obj)
	}
	return raw, ok
}

// Len returns how many objects' bytes r holds.
func (r *RawObjects) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.cur) + len(r.prev)
}

// rawBuffers are buffers Release gave back, for Put: an informer's events
// come one at a time, so a few buffers serve them all and the copies
// allocate nothing.
var rawBuffers sync.Pool

// maxReleased bounds the buffers kept for reuse (larger ones are left to
// the collector).
const maxReleased = 64 << 10

// Release gives back raw, bytes Take returned that the caller no longer
// uses (nor anything else: they are overwritten by a later Put).
func Release(raw []byte) {
	if cap(raw) == 0 || cap(raw) > maxReleased {
		return
	}
	raw = raw[:0]
	rawBuffers.Put(&raw)
}
