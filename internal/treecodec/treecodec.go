package treecodec

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
)

// The tags: the first byte of each value's encoding.
const (
	TagNull byte = iota
	TagFalse
	TagTrue
	TagInt
	TagFloat
	TagString
	TagMap
	TagList
	TagNumber // a json.Number, kept as its text
	// TagSized prefixes a map or list (not the top-level map) whose
	// encoding, from its tag on, takes at least SizedMin bytes: three
	// little-endian bytes give that length, so a reader looking for one
	// field skips the container without visiting its values.
	TagSized
)

// SizedMin is the smallest container encoding SizeContainer prefixes with
// its length: smaller ones are cheap to walk and would grow by a third.
const SizedMin = 128

// maxSized is the largest length the three bytes of TagSized hold.
const maxSized = 1<<24 - 1

// SizeContainer prefixes the map or list encoded in b[at:] (b's end) with
// TagSized and its length when that length is at least SizedMin.
func SizeContainer(b []byte, at int) []byte {
	n := len(b) - at
	if n < SizedMin || n > maxSized {
		return b
	}
	b = append(b, 0, 0, 0, 0)
	copy(b[at+4:], b[at:len(b)-4])
	b[at], b[at+1], b[at+2], b[at+3] = TagSized, byte(n), byte(n>>8), byte(n>>16)
	return b
}

// ErrNotJSONLike is wrapped by Encode's error for a value of a type JSON
// decoding never produces (int, []string, a struct …).
var ErrNotJSONLike = errors.New("value is not JSON-like")

// ErrCorrupt is returned for bytes Encode did not write.
var ErrCorrupt = errors.New("corrupt compact encoding")

// Holder is a value that keeps an object in this encoding: package
// cache's *Compact.
type Holder interface {
	// TreeEncoding returns the encoding, shared: it must not be
	// modified.
	TreeEncoding(Sealed) []byte
}

// Sealed is the argument of Holder.TreeEncoding: a type no other module
// can name or make, so that the method, exported to satisfy Holder, is
// this module's alone.
type Sealed struct{ _ [0]func() }

// Encoding returns the encoding obj keeps when it is a Holder (shared: it
// must not be modified), and false for any other value.
func Encoding(obj interface{}) ([]byte, bool) {
	if h, ok := obj.(Holder); ok {
		return h.TreeEncoding(Sealed{}), true
	}
	return nil, false
}

// Encode appends obj's encoding to dst. It fails for a value JSON
// decoding never produces (an int, a []string, a struct: an error
// wrapping ErrNotJSONLike); obj is only read.
func Encode(dst []byte, obj map[string]interface{}) ([]byte, error) {
	var e encoder
	b, err := e.appendMap(dst, obj)
	if err != nil {
		return nil, err
	}
	return binary.LittleEndian.AppendUint32(b, e.strings), nil
}

// encoder counts the string values it writes (the trailer).
type encoder struct {
	strings uint32
}

func (e *encoder) appendMap(b []byte, m map[string]interface{}) ([]byte, error) {
	b = append(b, TagMap)
	b = binary.AppendUvarint(b, uint64(len(m)))
	var err error
	for k, v := range m {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		if b, err = e.appendValue(b, v); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func (e *encoder) appendValue(b []byte, v interface{}) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, TagNull), nil
	case bool:
		if x {
			return append(b, TagTrue), nil
		}
		return append(b, TagFalse), nil
	case int64:
		return binary.AppendVarint(append(b, TagInt), x), nil
	case float64:
		return binary.LittleEndian.AppendUint64(append(b, TagFloat), math.Float64bits(x)), nil
	case string:
		if x != "" {
			e.strings++
		}
		b = binary.AppendUvarint(append(b, TagString), uint64(len(x)))
		return append(b, x...), nil
	case map[string]interface{}:
		at := len(b)
		b, err := e.appendMap(b, x)
		if err != nil {
			return nil, err
		}
		return SizeContainer(b, at), nil
	case []interface{}:
		at := len(b)
		b = binary.AppendUvarint(append(b, TagList), uint64(len(x)))
		var err error
		for _, el := range x {
			if b, err = e.appendValue(b, el); err != nil {
				return nil, err
			}
		}
		return SizeContainer(b, at), nil
	case json.Number:
		b = binary.AppendUvarint(append(b, TagNumber), uint64(len(x)))
		return append(b, x...), nil
	}
	return nil, fmt.Errorf("%w: %T", ErrNotJSONLike, v)
}

// Decode returns a new tree from an encoding made by Encode (or written
// from JSON by internal/decode); bytes Encode did not write give an error
// wrapping ErrCorrupt, never a panic. Decoded strings share memory with
// enc, which must not be modified afterwards.
func Decode(enc []byte) (map[string]interface{}, error) {
	if len(enc) < 4 {
		return nil, ErrCorrupt
	}
	body := enc[:len(enc)-4]
	n := binary.LittleEndian.Uint32(enc[len(enc)-4:])
	if uint64(n) > uint64(len(body)) { // every string value takes bytes
		return nil, ErrCorrupt
	}
	r := Reader{Enc: body, boxes: make([]string, n)}
	v, err := r.Value()
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]interface{})
	if !ok || r.Pos != len(body) {
		return nil, ErrCorrupt
	}
	return m, nil
}
