package treecodec

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"unsafe"

	"github.com/informerkit/informerkit/internal/box"
)

// Reader reads an encoding. Every read is bounds-checked:
// bad bytes give ErrCorrupt, never a panic.
type Reader struct {
	// Enc is the encoding without its trailer, Pos the position of
	// the next value in it.
	Enc []byte
	Pos int
	// boxes holds the decoded string values, so that their interface
	// values point into it rather than each into an allocation of its own.
	boxes []string
}

// box returns s as an interface value whose data points at a slot of
// r.boxes (a string held by an interface is read-only to the runtime and
// to every reader, so sharing one backing array is safe).
func (r *Reader) box(s string) interface{} {
	if s == "" || len(r.boxes) == 0 {
		return s // "" needs no allocation; a bad count only costs one
	}
	p := &r.boxes[0]
	r.boxes = r.boxes[1:]
	*p = s
	return box.String(p)
}

func (r *Reader) uvarint() (int, error) {
	if r.Pos < len(r.Enc) && r.Enc[r.Pos] < 0x80 { // the common one-byte case
		n := int(r.Enc[r.Pos])
		r.Pos++
		return n, nil
	}
	u, n := binary.Uvarint(r.Enc[r.Pos:])
	if n <= 0 || u > uint64(len(r.Enc)) {
		return 0, ErrCorrupt
	}
	r.Pos += n
	return int(u), nil
}

// str returns the next length-prefixed string, sharing the encoding's
// memory.
func (r *Reader) str() (string, error) {
	n, err := r.uvarint()
	if err != nil {
		return "", err
	}
	if n > len(r.Enc)-r.Pos {
		return "", ErrCorrupt
	}
	if n == 0 {
		return "", nil
	}
	s := unsafe.String(&r.Enc[r.Pos], n)
	r.Pos += n
	return s, nil
}

// Value decodes the value at r.Pos and moves past it.
func (r *Reader) Value() (interface{}, error) {
	if r.Pos >= len(r.Enc) {
		return nil, ErrCorrupt
	}
	tag := r.Enc[r.Pos]
	r.Pos++
	switch tag {
	case TagNull:
		return nil, nil
	case TagFalse:
		return false, nil
	case TagTrue:
		return true, nil
	case TagInt:
		v, n := binary.Varint(r.Enc[r.Pos:])
		if n <= 0 {
			return nil, ErrCorrupt
		}
		r.Pos += n
		return v, nil
	case TagFloat:
		if len(r.Enc)-r.Pos < 8 {
			return nil, ErrCorrupt
		}
		v := math.Float64frombits(binary.LittleEndian.Uint64(r.Enc[r.Pos:]))
		r.Pos += 8
		return v, nil
	case TagString:
		s, err := r.str()
		return r.box(s), err
	case TagNumber:
		s, err := r.str()
		return json.Number(s), err
	case TagMap:
		n, err := r.uvarint()
		if err != nil {
			return nil, err
		}
		m := make(map[string]interface{}, n)
		for ; n > 0; n-- {
			k, err := r.str()
			if err != nil {
				return nil, err
			}
			v, err := r.Value()
			if err != nil {
				return nil, err
			}
			m[k] = v
		}
		return m, nil
	case TagSized:
		n, err := r.sized()
		if err != nil {
			return nil, err
		}
		end := r.Pos + n
		if r.Enc[r.Pos] != TagMap && r.Enc[r.Pos] != TagList {
			return nil, ErrCorrupt
		}
		v, err := r.Value()
		if err == nil && r.Pos != end {
			err = ErrCorrupt
		}
		return v, err
	case TagList:
		n, err := r.uvarint()
		if err != nil {
			return nil, err
		}
		l := make([]interface{}, n)
		for i := range l {
			if l[i], err = r.Value(); err != nil {
				return nil, err
			}
		}
		return l, nil
	}
	return nil, ErrCorrupt
}

// Skip moves past one value.
func (r *Reader) Skip() error {
	if r.Pos >= len(r.Enc) {
		return ErrCorrupt
	}
	tag := r.Enc[r.Pos]
	r.Pos++
	switch tag {
	case TagNull, TagFalse, TagTrue:
		return nil
	case TagInt:
		if _, n := binary.Varint(r.Enc[r.Pos:]); n > 0 {
			r.Pos += n
			return nil
		}
		return ErrCorrupt
	case TagFloat:
		if len(r.Enc)-r.Pos < 8 {
			return ErrCorrupt
		}
		r.Pos += 8
		return nil
	case TagString, TagNumber:
		_, err := r.str()
		return err
	case TagSized:
		n, err := r.sized()
		r.Pos += n
		return err
	case TagMap, TagList:
		n, err := r.uvarint()
		if err != nil {
			return err
		}
		for ; n > 0; n-- {
			if tag == TagMap {
				if _, err := r.str(); err != nil {
					return err
				}
			}
			if err := r.Skip(); err != nil {
				return err
			}
		}
		return nil
	}
	return ErrCorrupt
}

// sized reads the length after a TagSized tag (at r.Pos-1): the length of
// the map or list that follows, which must fit in the encoding and start
// with its tag.
func (r *Reader) sized() (int, error) {
	if len(r.Enc)-r.Pos < 4 {
		return 0, ErrCorrupt
	}
	n := int(r.Enc[r.Pos]) | int(r.Enc[r.Pos+1])<<8 | int(r.Enc[r.Pos+2])<<16
	r.Pos += 3
	if n < 2 || n > len(r.Enc)-r.Pos {
		return 0, ErrCorrupt
	}
	return n, nil
}

// Unsized moves past a TagSized prefix at r's position, if there is one.
func (r *Reader) Unsized() error {
	if r.Pos < len(r.Enc) && r.Enc[r.Pos] == TagSized {
		r.Pos++
		_, err := r.sized()
		return err
	}
	return nil
}

// MapEntries calls f for each entry of the map that starts at r's
// position (after a TagSized prefix, if any); f reads or skips the value.
// A value that is not a map is skipped and reported as false.
func (r *Reader) MapEntries(f func(key string) error) (bool, error) {
	start := r.Pos
	if err := r.Unsized(); err != nil {
		return false, err
	}
	if r.Pos >= len(r.Enc) || r.Enc[r.Pos] != TagMap {
		r.Pos = start
		return false, r.Skip()
	}
	r.Pos++
	n, err := r.uvarint()
	if err != nil {
		return false, err
	}
	for ; n > 0; n-- {
		k, err := r.str()
		if err != nil {
			return false, err
		}
		if err := f(k); err != nil {
			return false, err
		}
	}
	return true, nil
}

// StringValue reads a string value (sharing the encoding's memory), and
// reports false for a value of another type, which it skips.
func (r *Reader) StringValue() (string, bool, error) {
	if r.Pos < len(r.Enc) && r.Enc[r.Pos] == TagString {
		r.Pos++
		s, err := r.str()
		return s, err == nil, err
	}
	return "", false, r.Skip()
}

// SeekLast moves r, at a map, to the value of the map's last entry with
// key (a later duplicate key wins, as in the decoded map), or past the
// map, reporting false, when it has none.
func (r *Reader) SeekLast(key string) (bool, error) {
	at := -1
	_, err := r.MapEntries(func(k string) error {
		if k == key {
			at = r.Pos
		}
		return r.Skip()
	})
	if err != nil || at < 0 {
		return false, err
	}
	r.Pos = at
	return true, nil
}
