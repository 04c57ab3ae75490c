package decode

import (
	"bytes"
	"hash/maphash"
)

// consTable makes the identical sets of one object's managedFields share
// their maps. A managed-fields set (fieldsV1) is a tree of maps, most of
// them {} and many repeated: the same {".": {}, "f:name": {}, ...} for
// each element of a list, the same {} for each leaf. The decoder keeps,
// while it decodes one top-level object, each set it built by its JSON
// text; a set with the same text is the map already built. The result is
// reflect.DeepEqual to decoding every set on its own and takes one map
// per distinct set instead of one per occurrence.
//
// Only sets inside metadata.managedFields[*].fieldsV1 are shared, and only
// within one object: those are data nobody edits in place (server-side
// apply tooling reads them, and replaces managedFields whole), and an
// object from an informer's cache must not be mutated anyway. DeepCopy
// gives every occurrence a map of its own.
type consTable struct {
	entries []consEntry // nil or a power of two long
	n       int
}

type consEntry struct {
	hash       uint64
	start, end int // the set's JSON text in the decoder's data
	m          map[string]interface{}
}

// maxConsText bounds the text of a set the table keeps: repeated sets are
// small, and hashing a large one at every level would cost more than it
// saves.
const maxConsText = 512

// find returns the map already built for data[start:end] and, when there
// is none, the text's hash for add (0: do not add).
func (t *consTable) find(data []byte, start, end int) (map[string]interface{}, uint64) {
	if end-start > maxConsText {
		return nil, 0
	}
	text := data[start:end]
	h := maphash.Bytes(internSeed, text) | 1
	if t.entries == nil {
		return nil, h
	}
	mask := uint64(len(t.entries) - 1)
	for i := h & mask; t.entries[i].m != nil; i = (i + 1) & mask {
		e := &t.entries[i]
		if e.hash == h && bytes.Equal(data[e.start:e.end], text) {
			return e.m, 0
		}
	}
	return nil, h
}

// add keeps m as the map for data[start:end], whose hash find gave.
func (t *consTable) add(h uint64, start, end int, m map[string]interface{}) {
	if h == 0 {
		return
	}
	if 2*(t.n+1) > len(t.entries) {
		t.grow()
	}
	mask := uint64(len(t.entries) - 1)
	i := h & mask
	for t.entries[i].m != nil {
		i = (i + 1) & mask
	}
	t.entries[i] = consEntry{hash: h, start: start, end: end, m: m}
	t.n++
}

func (t *consTable) grow() {
	old := t.entries
	t.entries = make([]consEntry, max(64, 2*len(old)))
	mask := uint64(len(t.entries) - 1)
	for _, e := range old {
		if e.m == nil {
			continue
		}
		i := e.hash & mask
		for t.entries[i].m != nil {
			i = (i + 1) & mask
		}
		t.entries[i] = e
	}
	clear(old) // a scratch in the pool may still hold the old entries
}

// reset forgets every set, keeping the entries' memory.
func (t *consTable) reset() {
	if t.n > 0 {
		clear(t.entries)
		t.n = 0
	}
}
