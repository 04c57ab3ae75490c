package decode

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"sync"

	"github.com/informerkit/informerkit/internal/treecodec"
)

// treeBuffers holds scratch buffers for encodings.
var treeBuffers = sync.Pool{New: func() interface{} { return new([]byte) }}

// TreeObject and TreeList write internal/treecodec's encoding (the form
// cache.Compact keeps) straight from JSON.

// Tree is an object in the compact tree encoding, written straight from
// its JSON by TreeObject or TreeList. It is not a JSON value: it only
// travels, under TreeKey, inside the envelope those functions return, from
// informerkit's decoder to the cache.Compactor that turns the envelope
// into a cache.Compact (see cache.Compactor).
type Tree struct {
	// Enc is the encoding with its trailer; nobody else holds it.
	Enc []byte
}

// TreeKey is the key of an envelope's *Tree.
const TreeKey = "informerkit.io/compact-tree"

// ErrNotPlain is returned by TreeObject and TreeList for valid objects the
// compact path leaves to ordinary decoding: no metadata object or no
// metadata.uid (bookmarks), keys differing from "kind" or "apiVersion"
// only in case, or a duplicated metadata.annotations whose last copy held
// only the skipped last-applied annotation.
var ErrNotPlain = errors.New("object left to ordinary decoding")

// EnvelopeMetadata are the metadata fields an envelope carries: what a
// cache.Compact keeps, and what key functions, shard filters and the
// reflector read.
var EnvelopeMetadata = []string{"name", "namespace", "uid", "resourceVersion", "generation",
	"labels", "ownerReferences", "deletionTimestamp"}

func isEnvelopeMetadata(k []byte) bool {
	switch string(k) {
	case "name", "namespace", "uid", "resourceVersion", "generation",
		"labels", "ownerReferences", "deletionTimestamp":
		return true
	}
	return false
}

// TreeObject decodes data, the JSON of one object, to the compact tree
// encoding of the object decode.Object(data, opts) returns, in one pass
// and without building the object's maps. It returns an envelope: a map
// with the object's apiVersion and kind, a metadata map holding only the
// fields in EnvelopeMetadata (each as Object would decode it), and the
// *Tree under TreeKey. Errors: those of Object for malformed input (a
// *SyntaxError or *TypeError), ErrNotPlain for objects the compact path
// leaves to Object.
func TreeObject(data []byte, opts Options) (map[string]interface{}, error) {
	d := decoder{data: data, opts: opts}
	d.getScratch()
	defer d.putScratch()
	bp := treeBuffers.Get().(*[]byte)
	defer treeBuffers.Put(bp)
	d.skipSpace()
	if d.pos >= len(d.data) || d.data[d.pos] != '{' {
		return nil, ErrNotPlain
	}
	env, err := d.treeTop(bp)
	if err := d.finish(err); err != nil {
		return nil, err
	}
	return env, nil
}

// TreeList decodes data, the JSON of a list, as List(data, opts) would,
// except that each element of the top-level "items" array is an envelope
// as TreeObject returns. An element that is not an object, or that
// TreeObject would leave to ordinary decoding, gives ErrNotPlain.
func TreeList(data []byte, opts Options) (map[string]interface{}, error) {
	d := decoder{data: data, opts: opts}
	d.getScratch()
	defer d.putScratch()
	d.skipSpace()
	if d.pos >= len(d.data) || d.data[d.pos] != '{' {
		return nil, ErrNotPlain
	}
	bp := treeBuffers.Get().(*[]byte)
	defer treeBuffers.Put(bp)
	out := make(map[string]interface{})
	err := d.members(modeList, func(key string, st step) error {
		if st.elem != modeRoot || d.data[d.pos] != '[' {
			v, err := d.value(modePlain)
			out[key] = v
			return err
		}
		end, err := d.open(']')
		if err != nil {
			return err
		}
		items := []interface{}{}
		for !end {
			if d.pos >= len(d.data) {
				return d.eofErr()
			}
			if d.data[d.pos] != '{' {
				if err := d.skip(); err != nil {
					return err
				}
				return ErrNotPlain
			}
			env, err := d.treeTop(bp)
			if err != nil {
				return err
			}
			items = append(items, env)
			if end, err = d.next(']'); err != nil {
				return err
			}
		}
		out[key] = items
		return nil
	})
	if err := d.finish(err); err != nil {
		return nil, err
	}
	return out, nil
}

// members walks the object at d.pos ('{') in mode m, calling f with each
// key (interned), the step for it and d.pos at its value; f must move
// past the value.
func (d *decoder) members(m mode, f func(key string, st step) error) error {
	end, err := d.open('}')
	for err == nil && !end {
		var raw []byte
		var simple bool
		if raw, simple, err = d.memberKey(); err != nil {
			return err
		}
		raw = d.resolve(raw, simple)
		st := d.opts.step(m, raw)
		if err = f(internBytes(raw), st); err != nil {
			return err
		}
		end, err = d.next('}')
	}
	return err
}

// treeWriter is the state of one object's encoding.
type treeWriter struct {
	b       []byte
	strings uint32 // non-empty string values written
	env     map[string]interface{}
	meta    map[string]interface{} // the envelope's metadata, of the last "metadata" key
	hasUID  bool
}

// treeTop encodes the object at d.pos ('{') into *scratch's memory and
// returns its envelope with an exact-size copy of the encoding; *scratch
// keeps the memory for the next object unless it grew past 1 MiB.
func (d *decoder) treeTop(scratch *[]byte) (map[string]interface{}, error) {
	w := treeWriter{b: (*scratch)[:0], env: make(map[string]interface{}, 4)}
	err := d.treeObject(&w, modeRoot)
	if cap(w.b) <= 1<<20 {
		*scratch = w.b[:0]
	}
	if err != nil {
		return nil, err
	}
	if w.meta == nil || !w.hasUID {
		return nil, ErrNotPlain
	}
	w.b = binary.LittleEndian.AppendUint32(w.b, w.strings)
	w.env["metadata"] = w.meta
	w.env[TreeKey] = &Tree{Enc: append(make([]byte, 0, len(w.b)), w.b...)}
	return w.env, nil
}

// treeObject encodes the object at d.pos ('{') in mode m (modeRoot,
// modeMetadata, modeAnnotations or modePlain), leaving out what the
// options skip (see Options.step).
func (d *decoder) treeObject(w *treeWriter, m mode) error {
	end, err := d.open('}')
	if err != nil {
		return err
	}
	w.b = append(w.b, treecodec.TagMap, 0)
	at := len(w.b) - 1 // the count byte, patched at the end
	n := 0
	annotations := 0 // metadata.annotations entries written
	for !end {
		raw, simple, err := d.memberKey()
		if err != nil {
			return err
		}
		if !simple {
			// Its own buffer: raw is used after the value is decoded.
			raw = unquote(make([]byte, 0, len(raw)+8), raw)
		}
		if m == modePlain {
			// Most members: no rule applies.
			w.b = binary.AppendUvarint(w.b, uint64(len(raw)))
			w.b = append(w.b, raw...)
			n++
			err = d.treeValue(w, modePlain)
		} else if st := d.opts.step(m, raw); st.skip {
			d.dropped = true
			err = d.skip()
		} else {
			err = d.treeMember(w, m, raw, st, &n, &annotations)
		}
		if err != nil {
			return err
		}
		if end, err = d.next('}'); err != nil {
			return err
		}
	}
	if n > 0 {
		w.b = patchCount(w.b, at, n)
		if m != modeRoot {
			w.b = treecodec.SizeContainer(w.b, at-1)
		}
	}
	return nil
}

// treeMember encodes the member key (raw) of an object in mode m, its
// value at d.pos read as st says; n counts the object's entries written,
// annotations the metadata.annotations entries among them.
func (d *decoder) treeMember(w *treeWriter, m mode, raw []byte, st step, n, annotations *int) error {
	mark, marks := len(w.b), w.strings
	w.b = binary.AppendUvarint(w.b, uint64(len(raw)))
	w.b = append(w.b, raw...)
	*n++
	collect := false // also decode the value into the envelope
	switch m {
	case modeRoot:
		switch {
		case st.child == modeMetadata:
			if d.data[d.pos] != '{' {
				return ErrNotPlain
			}
			w.meta = make(map[string]interface{}, len(EnvelopeMetadata))
			w.hasUID = false
		case string(raw) == "kind" || string(raw) == "apiVersion":
			collect = true
		case len(raw) == 4 && strings.EqualFold(string(raw), "kind") ||
			len(raw) == 10 && strings.EqualFold(string(raw), "apiVersion"):
			return ErrNotPlain
		}
	case modeMetadata:
		if st.child == modeAnnotations {
			*annotations++
		}
		collect = isEnvelopeMetadata(raw)
	}
	if collect {
		start := d.pos
		v, err := d.value(modePlain)
		if err != nil {
			return err
		}
		if m == modeRoot {
			w.env[internBytes(raw)] = v
		} else {
			w.meta[internBytes(raw)] = v
			if string(raw) == "uid" {
				s, _ := v.(string)
				w.hasUID = s != ""
			}
		}
		d.pos = start
	}
	if st.child != modeAnnotations || d.data[d.pos] != '{' {
		return d.treeValue(w, st.child)
	}
	d.dropped = false
	entries := len(w.b)
	if err := d.treeObject(w, modeAnnotations); err != nil {
		return err
	}
	// The map is empty when its count byte is 0 (it is patched before
	// return; an empty map's is 0): left out, as Object leaves it.
	if d.dropped && w.b[entries] == treecodec.TagMap && w.b[entries+1] == 0 {
		if *annotations > 1 {
			return ErrNotPlain // an earlier copy would have been deleted too
		}
		w.b, w.strings, *n = w.b[:mark], marks, *n-1
		*annotations--
	}
	return nil
}

// patchCount writes n as the uvarint at b[at], where one byte was
// reserved, moving what follows when n needs more.
func patchCount(b []byte, at, n int) []byte {
	if n < 0x80 {
		b[at] = byte(n)
		return b
	}
	var tmp [binary.MaxVarintLen64]byte
	k := binary.PutUvarint(tmp[:], uint64(n))
	b = append(b, tmp[:k-1]...)
	copy(b[at+k:], b[at+1:len(b)-(k-1)])
	copy(b[at:], tmp[:k])
	return b
}

// treeValue encodes the value at d.pos.
func (d *decoder) treeValue(w *treeWriter, m mode) error {
	if d.pos >= len(d.data) {
		return d.eofErr()
	}
	switch c := d.data[d.pos]; c {
	case '{':
		return d.treeObject(w, m)
	case '[':
		end, err := d.open(']')
		if err != nil {
			return err
		}
		w.b = append(w.b, treecodec.TagList, 0)
		at := len(w.b) - 1
		n := 0
		for ; !end; n++ {
			if err := d.treeValue(w, modePlain); err != nil {
				return err
			}
			if end, err = d.next(']'); err != nil {
				return err
			}
		}
		if n > 0 {
			w.b = patchCount(w.b, at, n)
			w.b = treecodec.SizeContainer(w.b, at-1)
		}
		return nil
	case '"':
		raw, err := d.stringContents()
		if err != nil {
			return err
		}
		if len(raw) > 0 {
			w.strings++
		}
		w.b = binary.AppendUvarint(append(w.b, treecodec.TagString), uint64(len(raw)))
		w.b = append(w.b, raw...)
		return nil
	case 't':
		w.b = append(w.b, treecodec.TagTrue)
		return d.literal("true")
	case 'f':
		w.b = append(w.b, treecodec.TagFalse)
		return d.literal("false")
	case 'n':
		w.b = append(w.b, treecodec.TagNull)
		return d.literal("null")
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			return d.treeNumber(w)
		}
		return d.syntaxErr("looking for beginning of value")
	}
}

// treeNumber encodes the number at d.pos as number() decodes it.
func (d *decoder) treeNumber(w *treeWriter) error {
	n, f, kind, err := d.numberValue()
	switch {
	case err != nil:
		return err
	case kind == numInt:
		w.b = binary.AppendVarint(append(w.b, treecodec.TagInt), n)
	case kind == numFloat:
		w.b = binary.LittleEndian.AppendUint64(append(w.b, treecodec.TagFloat), math.Float64bits(f))
	default: // out of range: d.rangeErr
		w.b = append(w.b, treecodec.TagNull)
	}
	return nil
}

// SetTreeMembers sets top-level string members of an envelope and of its
// encoding (the kind and apiVersion a list gives items that have neither),
// as u.SetKind and u.SetAPIVersion would on the decoded object. It returns
// false when env is not an envelope.
func SetTreeMembers(env map[string]interface{}, kv ...string) bool {
	t, ok := env[TreeKey].(*Tree)
	if !ok || len(t.Enc) < 5 || t.Enc[0] != treecodec.TagMap {
		return false
	}
	n, k := binary.Uvarint(t.Enc[1:])
	if k <= 0 {
		return false
	}
	body := t.Enc[1+k : len(t.Enc)-4]
	strs := binary.LittleEndian.Uint32(t.Enc[len(t.Enc)-4:])
	b := make([]byte, 0, len(t.Enc)+len(kv)*16)
	b = binary.AppendUvarint(append(b, treecodec.TagMap), n+uint64(len(kv)/2))
	b = append(b, body...)
	for i := 0; i+1 < len(kv); i += 2 {
		env[kv[i]] = kv[i+1]
		b = binary.AppendUvarint(b, uint64(len(kv[i])))
		b = append(b, kv[i]...)
		b = binary.AppendUvarint(append(b, treecodec.TagString), uint64(len(kv[i+1])))
		b = append(b, kv[i+1]...)
		if kv[i+1] != "" {
			strs++
		}
	}
	t.Enc = binary.LittleEndian.AppendUint32(b, strs)
	return true
}
