package cache

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"unsafe"

	"github.com/informerkit/informerkit/internal/decode"
)

// objectCodec turns the JSON-like content of an Unstructured into the
// bytes a Compact keeps and back. It is the one place compact mode decodes,
// kept behind this interface so that another form (JSON read by a faster
// decoder, for example) can replace it without touching the cache.
type objectCodec interface {
	// encode appends obj's encoding to dst. It fails on values that are
	// not JSON-like (see errNotJSONLike); obj is only read.
	encode(dst []byte, obj map[string]interface{}) ([]byte, error)
	// decode returns a new object tree from an encoding made by encode.
	// The tree may share immutable memory (strings) with enc.
	decode(enc []byte) (map[string]interface{}, error)
}

// errNotJSONLike is returned by treeCodec.encode for a value of a type
// JSON decoding never produces (int, []string, a struct …).
var errNotJSONLike = errors.New("value is not JSON-like")

// errCorruptEncoding is returned by treeCodec.decode for bytes encode did
// not write.
var errCorruptEncoding = errors.New("corrupt compact encoding")

// treeCodec is a pre-parsed binary form of the object tree: a tag byte per
// value, lengths as uvarints, integers as zigzag varints, floats as 8
// bytes, strings as their bytes, and a 4-byte trailer counting the
// non-empty string values. Decoding it does no scanning, unescaping or
// number parsing: maps and slices are made at their final size, and
// strings are not copied — each decoded string points into the encoding,
// which is never modified once built — and the interface boxes of all
// string values are one allocation, so the decoded tree costs little more
// than its maps and slices.
type treeCodec struct{}

// The tags are internal/decode's, which writes the same encoding straight
// from JSON (decode.TreeObject).
const (
	tagNull   = decode.TagNull
	tagFalse  = decode.TagFalse
	tagTrue   = decode.TagTrue
	tagInt    = decode.TagInt
	tagFloat  = decode.TagFloat
	tagString = decode.TagString
	tagMap    = decode.TagMap
	tagList   = decode.TagList
	tagNumber = decode.TagNumber // json.Number, kept as such
	tagSized  = decode.TagSized  // a large map or list's length, before it
)

func (treeCodec) encode(dst []byte, obj map[string]interface{}) ([]byte, error) {
	var e treeEncoder
	b, err := e.appendMap(dst, obj)
	if err != nil {
		return nil, err
	}
	return binary.LittleEndian.AppendUint32(b, e.strings), nil
}

// treeEncoder counts the string values it writes (the trailer).
type treeEncoder struct {
	strings uint32
}

func (e *treeEncoder) appendMap(b []byte, m map[string]interface{}) ([]byte, error) {
	b = append(b, tagMap)
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

func (e *treeEncoder) appendValue(b []byte, v interface{}) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, tagNull), nil
	case bool:
		if x {
			return append(b, tagTrue), nil
		}
		return append(b, tagFalse), nil
	case int64:
		return binary.AppendVarint(append(b, tagInt), x), nil
	case float64:
		return binary.LittleEndian.AppendUint64(append(b, tagFloat), math.Float64bits(x)), nil
	case string:
		if x != "" {
			e.strings++
		}
		b = binary.AppendUvarint(append(b, tagString), uint64(len(x)))
		return append(b, x...), nil
	case map[string]interface{}:
		at := len(b)
		b, err := e.appendMap(b, x)
		if err != nil {
			return nil, err
		}
		return decode.SizeContainer(b, at), nil
	case []interface{}:
		at := len(b)
		b = binary.AppendUvarint(append(b, tagList), uint64(len(x)))
		var err error
		for _, el := range x {
			if b, err = e.appendValue(b, el); err != nil {
				return nil, err
			}
		}
		return decode.SizeContainer(b, at), nil
	case json.Number:
		b = binary.AppendUvarint(append(b, tagNumber), uint64(len(x)))
		return append(b, x...), nil
	}
	return nil, fmt.Errorf("%w: %T", errNotJSONLike, v)
}

func (treeCodec) decode(enc []byte) (map[string]interface{}, error) {
	if len(enc) < 4 {
		return nil, errCorruptEncoding
	}
	body := enc[:len(enc)-4]
	n := binary.LittleEndian.Uint32(enc[len(enc)-4:])
	if uint64(n) > uint64(len(body)) { // every string value takes bytes
		return nil, errCorruptEncoding
	}
	r := treeReader{b: body, boxes: make([]string, n)}
	v, err := r.value()
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]interface{})
	if !ok || r.i != len(body) {
		return nil, errCorruptEncoding
	}
	return m, nil
}

// treeReader decodes a treeCodec encoding. Every read is bounds-checked:
// bad bytes give errCorruptEncoding, never a panic.
type treeReader struct {
	b []byte
	i int
	// boxes holds the decoded string values, so that their interface
	// values point into it rather than each into an allocation of its own.
	boxes []string
}

// eface is the layout of an empty interface value.
type eface struct {
	typ, data unsafe.Pointer
}

// stringType is the type word of an interface holding a string.
var stringType = func() unsafe.Pointer {
	var v interface{} = "x"
	return (*eface)(unsafe.Pointer(&v)).typ
}()

// box returns s as an interface value whose data points at a slot of
// r.boxes (a string held by an interface is read-only to the runtime and
// to every reader, so sharing one backing array is safe).
func (r *treeReader) box(s string) interface{} {
	if s == "" || len(r.boxes) == 0 {
		return s // "" needs no allocation; a bad count only costs one
	}
	p := &r.boxes[0]
	r.boxes = r.boxes[1:]
	*p = s
	v := eface{typ: stringType, data: unsafe.Pointer(p)}
	return *(*interface{})(unsafe.Pointer(&v))
}

func (r *treeReader) uvarint() (int, error) {
	if r.i < len(r.b) && r.b[r.i] < 0x80 { // the common one-byte case
		n := int(r.b[r.i])
		r.i++
		return n, nil
	}
	u, n := binary.Uvarint(r.b[r.i:])
	if n <= 0 || u > uint64(len(r.b)) {
		return 0, errCorruptEncoding
	}
	r.i += n
	return int(u), nil
}

// str returns the next length-prefixed string, sharing the encoding's
// memory.
func (r *treeReader) str() (string, error) {
	n, err := r.uvarint()
	if err != nil {
		return "", err
	}
	if n > len(r.b)-r.i {
		return "", errCorruptEncoding
	}
	if n == 0 {
		return "", nil
	}
	s := unsafe.String(&r.b[r.i], n)
	r.i += n
	return s, nil
}

func (r *treeReader) value() (interface{}, error) {
	if r.i >= len(r.b) {
		return nil, errCorruptEncoding
	}
	tag := r.b[r.i]
	r.i++
	switch tag {
	case tagNull:
		return nil, nil
	case tagFalse:
		return false, nil
	case tagTrue:
		return true, nil
	case tagInt:
		v, n := binary.Varint(r.b[r.i:])
		if n <= 0 {
			return nil, errCorruptEncoding
		}
		r.i += n
		return v, nil
	case tagFloat:
		if len(r.b)-r.i < 8 {
			return nil, errCorruptEncoding
		}
		v := math.Float64frombits(binary.LittleEndian.Uint64(r.b[r.i:]))
		r.i += 8
		return v, nil
	case tagString:
		s, err := r.str()
		return r.box(s), err
	case tagNumber:
		s, err := r.str()
		return json.Number(s), err
	case tagMap:
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
			v, err := r.value()
			if err != nil {
				return nil, err
			}
			m[k] = v
		}
		return m, nil
	case tagSized:
		n, err := r.sized()
		if err != nil {
			return nil, err
		}
		end := r.i + n
		if r.b[r.i] != tagMap && r.b[r.i] != tagList {
			return nil, errCorruptEncoding
		}
		v, err := r.value()
		if err == nil && r.i != end {
			err = errCorruptEncoding
		}
		return v, err
	case tagList:
		n, err := r.uvarint()
		if err != nil {
			return nil, err
		}
		l := make([]interface{}, n)
		for i := range l {
			if l[i], err = r.value(); err != nil {
				return nil, err
			}
		}
		return l, nil
	}
	return nil, errCorruptEncoding
}

// skip moves past one value.
func (r *treeReader) skip() error {
	if r.i >= len(r.b) {
		return errCorruptEncoding
	}
	tag := r.b[r.i]
	r.i++
	switch tag {
	case tagNull, tagFalse, tagTrue:
		return nil
	case tagInt:
		if _, n := binary.Varint(r.b[r.i:]); n > 0 {
			r.i += n
			return nil
		}
		return errCorruptEncoding
	case tagFloat:
		if len(r.b)-r.i < 8 {
			return errCorruptEncoding
		}
		r.i += 8
		return nil
	case tagString, tagNumber:
		_, err := r.str()
		return err
	case tagSized:
		n, err := r.sized()
		r.i += n
		return err
	case tagMap, tagList:
		n, err := r.uvarint()
		if err != nil {
			return err
		}
		for ; n > 0; n-- {
			if tag == tagMap {
				if _, err := r.str(); err != nil {
					return err
				}
			}
			if err := r.skip(); err != nil {
				return err
			}
		}
		return nil
	}
	return errCorruptEncoding
}

// sized reads the length after a TagSized tag (at r.i-1): the length of
// the map or list that follows, which must fit in the encoding and start
// with its tag.
func (r *treeReader) sized() (int, error) {
	if len(r.b)-r.i < 4 {
		return 0, errCorruptEncoding
	}
	n := int(r.b[r.i]) | int(r.b[r.i+1])<<8 | int(r.b[r.i+2])<<16
	r.i += 3
	if n < 2 || n > len(r.b)-r.i {
		return 0, errCorruptEncoding
	}
	return n, nil
}

// unsized moves past a TagSized prefix at r's position, if there is one.
func (r *treeReader) unsized() error {
	if r.i < len(r.b) && r.b[r.i] == tagSized {
		r.i++
		_, err := r.sized()
		return err
	}
	return nil
}

// mapEntries calls f for each entry of the map that starts at r's
// position (after a TagSized prefix, if any); f reads or skips the value.
// A value that is not a map is skipped and reported as false.
func (r *treeReader) mapEntries(f func(key string) error) (bool, error) {
	start := r.i
	if err := r.unsized(); err != nil {
		return false, err
	}
	if r.i >= len(r.b) || r.b[r.i] != tagMap {
		r.i = start
		return false, r.skip()
	}
	r.i++
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

// stringValue reads a string value (sharing the encoding's memory), and
// reports false for a value of another type, which it skips.
func (r *treeReader) stringValue() (string, bool, error) {
	if r.i < len(r.b) && r.b[r.i] == tagString {
		r.i++
		s, err := r.str()
		return s, err == nil, err
	}
	return "", false, r.skip()
}

// compactMeta is what a Compact keeps outside its encoding, read from the
// encoding so that its strings share the encoding's memory.
type compactMeta struct {
	name, uid, resourceVersion string
	labels                     map[string]string
	labelsOK                   bool // metadata.labels is absent or a map of strings and nulls
}

// readCompactMeta reads metadata.name, uid, resourceVersion and labels
// from a treeCodec encoding.
func readCompactMeta(enc []byte) (compactMeta, error) {
	var m compactMeta
	if len(enc) < 4 {
		return m, errCorruptEncoding
	}
	r := treeReader{b: enc[:len(enc)-4]}
	m.labelsOK = true
	_, err := r.mapEntries(func(k string) error {
		if k != "metadata" {
			return r.skip()
		}
		// A later metadata replaces an earlier one (an encoding written
		// straight from JSON keeps duplicate keys; see decode.TreeObject).
		m = compactMeta{labelsOK: true}
		_, err := r.mapEntries(func(k string) error {
			var err error
			switch k {
			case "name":
				m.name, _, err = r.stringValue()
			case "uid":
				m.uid, _, err = r.stringValue()
			case "resourceVersion":
				m.resourceVersion, _, err = r.stringValue()
			case "labels":
				m.labels = map[string]string{}
				var isMap bool
				isMap, err = r.mapEntries(func(k string) error {
					if r.i < len(r.b) && r.b[r.i] == tagNull {
						r.i++
						m.labels[k] = ""
						return nil
					}
					v, ok, err := r.stringValue()
					if !ok {
						m.labelsOK = false
					}
					m.labels[k] = v
					return err
				})
				if !isMap {
					m.labels = nil
				}
			default:
				err = r.skip()
			}
			return err
		})
		return err
	})
	return m, err
}
