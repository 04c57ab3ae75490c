package persist

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// A fold writes a new snapshot without decoding anything: a put record
// is framed the same in a snapshot and in a journal, so the new snapshot
// is the old one's records and the journals' latest puts, copied as they
// are. A Writer keeps where each record is (an index: the key and the
// record's file, offset and length, not the object) and the fold copies
// those byte ranges, adjacent ones in one read. The records are not
// checked again while copied: each was checked when read at the start
// or written by this Writer, and Load checks every record's checksum.

// loc is where a put record's frame is: in the snapshot, or in journal
// gen, at off, n bytes long. The zero loc (n 0) is no record: a delete.
type loc struct {
	journal bool
	gen     uint64
	off     int64
	n       int64
}

// indexed is one object of an index: its key and its record.
type indexed struct {
	key string
	at  loc
}

func sortIndex(idx []indexed) {
	cmp := func(a, b indexed) int { return strings.Compare(a.key, b.key) }
	if !slices.IsSortedFunc(idx, cmp) {
		slices.SortFunc(idx, cmp)
	}
}

// frameLen is the length of a record whose payload is n bytes long.
func frameLen(n int) int { return 8 + n }

// merge writes name's snapshot headed by h (its Count set here): the
// records of base, sorted by key, with the changes of layers (older
// first) applied. It returns the new snapshot's index and size.
func (d *Dir) merge(name string, h header, base []indexed, layers []map[string]loc) ([]indexed, int64, error) {
	changes := layers[0]
	if len(layers) > 1 {
		changes = make(map[string]loc)
		for _, l := range layers {
			for k, v := range l {
				changes[k] = v
			}
		}
	}
	keys := make([]string, 0, len(changes))
	for k := range changes {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	// The merged index, in key order: base's records, those of a
	// changed key replaced by their latest put or dropped for a delete.
	out := make([]indexed, 0, len(base)+len(keys))
	i, j := 0, 0
	for i < len(base) || j < len(keys) {
		switch {
		case j == len(keys) || i < len(base) && base[i].key < keys[j]:
			out = append(out, base[i])
			i++
			continue
		case i < len(base) && base[i].key == keys[j]:
			i++
		}
		if at := changes[keys[j]]; at.n > 0 {
			out = append(out, indexed{key: keys[j], at: at})
		}
		j++
	}

	files := map[loc]*os.File{} // by file (off and n zero)
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	file := func(at loc) (*os.File, error) {
		k := loc{journal: at.journal, gen: at.gen}
		if f, ok := files[k]; ok {
			return f, nil
		}
		path := d.snapPath(name)
		if at.journal {
			path = d.journalPath(name, at.gen)
		}
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		files[k] = f
		return f, nil
	}
	h.Count = len(out)
	idx := make([]indexed, len(out))
	var buf []byte
	size, err := d.writeSnapshot(name, h, func(w io.Writer, pos int64) (int64, error) {
		for a := 0; a < len(out); {
			// A run of records adjacent in one file, read at once
			// (up to 1 MiB, or one record longer).
			first := out[a].at
			b, n := a+1, first.n
			for b < len(out) && n < 1<<20 {
				at := out[b].at
				if at.journal != first.journal || at.gen != first.gen || at.off != first.off+n {
					break
				}
				n += at.n
				b++
			}
			f, err := file(first)
			if err != nil {
				return 0, err
			}
			buf = slices.Grow(buf[:0], int(n))[:n]
			if _, err := f.ReadAt(buf, first.off); err != nil {
				return 0, fmt.Errorf("%w: reading a stored record: %v", ErrCorrupt, err)
			}
			for off := int64(0); a < b; a++ {
				at := out[a].at
				if int64(frameLen(int(binary.LittleEndian.Uint32(buf[off:])))) != at.n {
					return 0, fmt.Errorf("%w: a record is not where the index has it", ErrCorrupt)
				}
				idx[a] = indexed{key: out[a].key, at: loc{off: pos, n: at.n}}
				pos += at.n
				off += at.n
			}
			if _, err := w.Write(buf); err != nil {
				return 0, err
			}
		}
		return pos, nil
	})
	if err != nil {
		return nil, 0, err
	}
	return idx, size, nil
}
