package decode

import (
	"strconv"
	"unicode/utf8"
)

// Options says which fields to skip while decoding. The zero value decodes
// everything.
type Options struct {
	// SkipManagedFields leaves out metadata.managedFields, as
	// cache.StripManagedFields would remove it.
	SkipManagedFields bool
	// SkipLastApplied leaves out the annotation
	// kubectl.kubernetes.io/last-applied-configuration, and the
	// annotations map when that was its only entry, as
	// cache.DropLastAppliedConfiguration would.
	SkipLastApplied bool
}

// LastAppliedAnnotation is the annotation SkipLastApplied leaves out.
const LastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// maxDepth is encoding/json's nesting limit (its scanner's
// maxNestingDepth): 10000 nested arrays and objects are allowed, one more
// is a syntax error.
const maxDepth = 10000

// Object decodes data, the JSON of one object, into a map as
// json.Unmarshal(data, &m) with m a map[string]interface{} would under
// apimachinery's settings (see the package documentation). A top-level
// null gives a nil map and no error. The result shares nothing with data.
func Object(data []byte, opts Options) (map[string]interface{}, error) {
	d := decoder{data: data, opts: opts, boxes: true}
	d.getScratch()
	defer d.putScratch()
	return d.top()
}

// List decodes data, the JSON of a list (an object with an "items"
// array), as Object does, applying opts to each element of the top-level
// "items" array instead of to the list itself.
func List(data []byte, opts Options) (map[string]interface{}, error) {
	d := decoder{data: data, opts: opts}
	d.getScratch()
	defer d.putScratch()
	return d.topAs(modeList)
}

// Value decodes data, any JSON value, as json.Unmarshal(data, &v) with v
// an interface{} would under apimachinery's settings.
func Value(data []byte) (interface{}, error) {
	d := decoder{data: data}
	d.skipSpace()
	v, err := d.value(modePlain)
	if err != nil {
		return nil, err
	}
	if err := d.end(); err != nil {
		return nil, err
	}
	if d.rangeErr != nil {
		return nil, d.rangeErr
	}
	return v, nil
}

// mode tells the decoder where in the object it is, for skipping.
type mode uint8

const (
	modePlain       mode = iota
	modeRoot             // the top-level object
	modeMetadata         // the object under the top-level "metadata"
	modeAnnotations      // the object under metadata.annotations
	modeList             // a top-level list: its "items" are objects in modeRoot
	modeManaged          // an element of metadata.managedFields
	modeFields           // an object in a managedFields entry's fieldsV1
)

type decoder struct {
	data  []byte
	pos   int
	depth int
	opts  Options
	// rangeErr is the first number out of range; like encoding/json the
	// decoder goes on, so that a later syntax error wins.
	rangeErr error
	// stack collects array elements before they are copied into a slice
	// of the exact length; pending collects an object's members before
	// they go into a map made for their number. Both come from
	// scratchPool and are empty between values.
	stack   []interface{}
	pending []member
	// unquoted is scratch for strings with escapes.
	unquoted []byte
	// scratch, when set, is where the three above go back to.
	scratch *scratch
	// boxes: the interface values of long strings and of slices point
	// into strs and slices, allocated a few at a time, instead of each
	// into an allocation of its own (set only when one object is decoded,
	// so that objects never share an allocation). nStrs and nSlices count
	// the boxes used.
	// arena holds the bytes of boxed strings (its spare capacity is for
	// the next ones); nText counts them.
	boxes                 bool
	strs                  []string
	slices                [][]interface{}
	arena                 []byte
	nStrs, nSlices, nText int
	// fields holds the maps of the managed-fields sets decoded so far in
	// the current top-level object, by their JSON.
	fields consTable
	// dropped records that the object being decoded in modeAnnotations
	// had the last-applied annotation.
	dropped bool
}

func (d *decoder) top() (map[string]interface{}, error) { return d.topAs(modeRoot) }

// topAs decodes a top-level object in mode root.
func (d *decoder) topAs(root mode) (map[string]interface{}, error) {
	d.skipSpace()
	if d.pos >= len(d.data) {
		return nil, d.eofErr()
	}
	var m map[string]interface{}
	var err error
	var typeErr error
	switch d.data[d.pos] {
	case '{':
		m, err = d.object(root)
	case 'n':
		err = d.literal("null")
	default:
		// A value that cannot go into a map: encoding/json reports it only
		// when the whole input is valid JSON.
		_, err = d.value(modePlain)
		typeErr = &TypeError{Value: d.kindAt(), Offset: int64(d.pos)}
	}
	if err != nil {
		return nil, err
	}
	if err := d.end(); err != nil {
		return nil, err
	}
	if d.rangeErr != nil {
		return nil, d.rangeErr
	}
	if typeErr != nil {
		return nil, typeErr
	}
	return m, nil
}

// kindAt names the JSON type of the top-level value, for a TypeError.
func (d *decoder) kindAt() string {
	i := 0
	for i < len(d.data) && isSpace(d.data[i]) {
		i++
	}
	switch d.data[i] {
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "bool"
	default:
		return "number"
	}
}

// end checks that only whitespace follows the value.
func (d *decoder) end() error {
	d.skipSpace()
	if d.pos < len(d.data) {
		return d.syntaxErr("after top-level value")
	}
	return nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func (d *decoder) skipSpace() {
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		if c > ' ' || !isSpace(c) {
			return
		}
		d.pos++
	}
}

// value decodes the value at d.pos (no leading whitespace).
func (d *decoder) value(m mode) (interface{}, error) {
	if d.pos >= len(d.data) {
		return nil, d.eofErr()
	}
	switch c := d.data[d.pos]; c {
	case '{':
		obj, err := d.object(m)
		if err != nil {
			return nil, err
		}
		return obj, nil
	case '[':
		return d.array(modePlain)
	case '"':
		return d.stringValue()
	case 't':
		return true, d.literal("true")
	case 'f':
		return false, d.literal("false")
	case 'n':
		return nil, d.literal("null")
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			return d.number()
		}
		return nil, d.syntaxErr("looking for beginning of value")
	}
}

func (d *decoder) literal(lit string) error {
	for i := 0; i < len(lit); i++ {
		if d.pos >= len(d.data) {
			return d.eofErr()
		}
		if d.data[d.pos] != lit[i] {
			return d.syntaxErr("in literal " + lit + " (expecting " + quoteChar(lit[i]) + ")")
		}
		d.pos++
	}
	return nil
}

func (d *decoder) push() error {
	d.depth++
	if d.depth > maxDepth {
		return &SyntaxError{Msg: "exceeded max depth", Offset: int64(d.pos)}
	}
	return nil
}

// object decodes the object at d.pos ('{').
func (d *decoder) object(m mode) (map[string]interface{}, error) {
	start := d.pos
	if m == modeRoot {
		d.fields.reset() // sets are shared within one object only
	}
	if err := d.push(); err != nil {
		return nil, err
	}
	d.pos++
	d.skipSpace()
	base := len(d.pending)
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		d.depth--
	} else {
		for {
			end, err := d.objectMember(m)
			if err != nil {
				clear(d.pending[base:])
				d.pending = d.pending[:base]
				return nil, err
			}
			if end {
				break
			}
		}
	}
	var h uint64
	if m == modeFields {
		var obj map[string]interface{}
		if obj, h = d.fields.find(d.data, start, d.pos); obj != nil {
			clear(d.pending[base:])
			d.pending = d.pending[:base]
			return obj, nil
		}
	}
	// The members in order (a repeated key: the last wins, as in
	// encoding/json), into a map made for their number so that it never
	// grows.
	obj := make(map[string]interface{}, len(d.pending)-base)
	for _, mb := range d.pending[base:] {
		if mb.drop {
			delete(obj, mb.key)
		} else {
			obj[mb.key] = mb.v
		}
	}
	clear(d.pending[base:])
	d.pending = d.pending[:base]
	if m == modeFields {
		d.fields.add(h, start, d.pos, obj)
	}
	return obj, nil
}

// member is an object member decoded but not yet in its map; drop: the
// key is removed instead (an annotations map left empty by
// SkipLastApplied).
type member struct {
	key  string
	v    interface{}
	drop bool
}

// objectMember decodes one member of an object in mode m onto
// d.pending and the ',' or '}' after it; end says it was the '}'.
func (d *decoder) objectMember(m mode) (end bool, err error) {
	if d.pos >= len(d.data) {
		return false, d.eofErr()
	}
	if d.data[d.pos] != '"' {
		return false, d.syntaxErr("looking for beginning of object key string")
	}
	key, err := d.key()
	if err != nil {
		return false, err
	}
	d.skipSpace()
	if d.pos >= len(d.data) {
		return false, d.eofErr()
	}
	if d.data[d.pos] != ':' {
		return false, d.syntaxErr("after object key")
	}
	d.pos++
	d.skipSpace()
	if d.pos >= len(d.data) {
		return false, d.eofErr()
	}
	if err := d.member(key, m); err != nil {
		return false, err
	}
	d.skipSpace()
	if d.pos >= len(d.data) {
		return false, d.eofErr()
	}
	switch d.data[d.pos] {
	case ',':
		d.pos++
		d.skipSpace()
		return false, nil
	case '}':
		d.pos++
		d.depth--
		return true, nil
	default:
		return false, d.syntaxErr("after object key:value pair")
	}
}

// member decodes the value of key onto d.pending, skipping what the
// options say.
func (d *decoder) member(key string, m mode) error {
	// The value: an object in mode child, or an array with elements in
	// mode elem, or a string not interned (own), or the annotations
	// without the last-applied one.
	child, elem, own := modePlain, modePlain, false
	switch m {
	case modeList:
		if key == "items" {
			elem = modeRoot
		}
	case modeRoot:
		if key == "metadata" {
			child = modeMetadata
		}
	case modeMetadata:
		switch key {
		case "managedFields":
			if d.opts.SkipManagedFields {
				return d.skip()
			}
			elem = modeManaged
		case "annotations":
			if d.opts.SkipLastApplied && d.data[d.pos] == '{' {
				ann, dropped, err := d.annotations()
				if err != nil {
					return err
				}
				d.pending = append(d.pending, member{key: key, v: ann, drop: dropped && len(ann) == 0})
				return nil
			}
		case "name", "uid", "resourceVersion":
			// Unique to the object: interning would only cost a lookup.
			own = true
		}
	case modeManaged:
		if key == "fieldsV1" {
			child = modeFields
		}
	case modeFields:
		child = modeFields
	case modeAnnotations:
		if key == LastAppliedAnnotation {
			d.dropped = true
			return d.skip()
		}
	}
	var v interface{}
	var err error
	switch c := d.data[d.pos]; {
	case elem != modePlain && c == '[':
		v, err = d.array(elem)
	case own && c == '"':
		// The name's bytes are an allocation of their own: a
		// cluster-scoped object's cache key is its name, kept by the
		// store beyond the object (a map keeps the first key of an
		// entry), and it must not keep the bytes of all the object's
		// strings.
		var raw []byte
		if raw, err = d.stringContents(); err == nil {
			v = d.box(raw, key != "name")
		}
	default:
		v, err = d.value(child)
	}
	if err != nil {
		return err
	}
	d.pending = append(d.pending, member{key: key, v: v})
	return nil
}

// annotations decodes metadata.annotations without the last-applied
// annotation; dropped says whether it was there.
func (d *decoder) annotations() (map[string]interface{}, bool, error) {
	d.dropped = false
	ann, err := d.object(modeAnnotations)
	if err != nil {
		return nil, false, err
	}
	return ann, d.dropped, nil
}

// array decodes the array at d.pos ('['), its elements in mode elem.
func (d *decoder) array(elem mode) (interface{}, error) {
	if err := d.push(); err != nil {
		return nil, err
	}
	d.pos++
	base := len(d.stack)
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		d.depth--
		return d.boxSlice([]interface{}{}), nil
	}
	for {
		v, err := d.value(elem)
		if err != nil {
			d.stack = d.stack[:base]
			return nil, err
		}
		d.stack = append(d.stack, v)
		d.skipSpace()
		if d.pos >= len(d.data) {
			d.stack = d.stack[:base]
			return nil, d.eofErr()
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
			d.skipSpace()
		case ']':
			d.pos++
			d.depth--
			out := make([]interface{}, len(d.stack)-base)
			copy(out, d.stack[base:])
			clear(d.stack[base:])
			d.stack = d.stack[:base]
			return d.boxSlice(out), nil
		default:
			d.stack = d.stack[:base]
			return nil, d.syntaxErr("after array element")
		}
	}
}

// number decodes the number at d.pos: int64 when it has no '.' and fits,
// float64 otherwise (sigs.k8s.io/json's PreserveInts).
func (d *decoder) number() (interface{}, error) {
	start := d.pos
	plain, dot, err := d.scanNumber()
	if err != nil {
		return nil, err
	}
	lit := d.data[start:d.pos]
	if plain && len(lit) <= 18 {
		var n int64
		i := 0
		neg := lit[0] == '-'
		if neg {
			i = 1
		}
		for ; i < len(lit); i++ {
			n = n*10 + int64(lit[i]-'0')
		}
		if neg {
			n = -n
		}
		return n, nil
	}
	s := string(lit)
	if !dot {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n, nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		if d.rangeErr == nil {
			d.rangeErr = &TypeError{Value: "number " + s, Offset: int64(d.pos)}
		}
		return nil, nil
	}
	return f, nil
}

// scanNumber moves past a number, checking its syntax. plain: only
// digits (and a sign); dot: it has a fraction.
func (d *decoder) scanNumber() (plain, dot bool, err error) {
	data := d.data
	i := d.pos
	if data[i] == '-' {
		i++
		if i >= len(data) {
			d.pos = i
			return false, false, d.eofErr()
		}
	}
	plain = true
	switch c := data[i]; {
	case c == '0':
		i++
	case c >= '1' && c <= '9':
		i++
		for i < len(data) && data[i] >= '0' && data[i] <= '9' {
			i++
		}
	default:
		d.pos = i
		return false, false, d.syntaxErr("in numeric literal")
	}
	if i < len(data) && data[i] == '.' {
		plain, dot = false, true
		i++
		if i >= len(data) {
			d.pos = i
			return false, false, d.eofErr()
		}
		if data[i] < '0' || data[i] > '9' {
			d.pos = i
			return false, false, d.syntaxErr("after decimal point in numeric literal")
		}
		for i < len(data) && data[i] >= '0' && data[i] <= '9' {
			i++
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		plain = false
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if i >= len(data) {
			d.pos = i
			return false, false, d.eofErr()
		}
		if data[i] < '0' || data[i] > '9' {
			d.pos = i
			return false, false, d.syntaxErr("in exponent of numeric literal")
		}
		for i < len(data) && data[i] >= '0' && data[i] <= '9' {
			i++
		}
	}
	d.pos = i
	return plain, dot, nil
}

// stringValue decodes the string at d.pos.
func (d *decoder) stringValue() (interface{}, error) {
	raw, err := d.stringContents()
	if err != nil {
		return nil, err
	}
	if len(raw) > maxInternValue {
		return d.box(raw, true), nil
	}
	return internValue(raw), nil
}

// key decodes the object key at d.pos, interned.
func (d *decoder) key() (string, error) {
	raw, err := d.stringContents()
	if err != nil {
		return "", err
	}
	return internBytes(raw), nil
}

// stringContents moves past the string at d.pos and returns what it
// holds, escapes resolved: the input's bytes, or d.unquoted's (valid until
// the next string).
func (d *decoder) stringContents() ([]byte, error) {
	raw, simple, err := d.scanString()
	if err != nil {
		return nil, err
	}
	if !simple {
		d.unquoted = unquote(d.unquoted[:0], raw)
		raw = d.unquoted
	}
	return raw, nil
}

// scanString moves past the string at d.pos ('"'), checking its syntax,
// and returns its contents without the quotes. simple: the contents are
// the string (no escapes, valid UTF-8).
func (d *decoder) scanString() (raw []byte, simple bool, err error) {
	data := d.data
	start := d.pos + 1
	i := start
	simple = true
	for {
		// The common case: printable ASCII without escapes.
		for i < len(data) {
			c := data[i]
			if c == '"' || c == '\\' || c < ' ' || c >= utf8.RuneSelf {
				break
			}
			i++
		}
		if i >= len(data) {
			d.pos = i
			return nil, false, d.eofErr()
		}
		switch c := data[i]; {
		case c == '"':
			d.pos = i + 1
			return data[start:i], simple, nil
		case c == '\\':
			simple = false
			i++
			if i >= len(data) {
				d.pos = i
				return nil, false, d.eofErr()
			}
			switch data[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				i++
				for k := 0; k < 4; k++ {
					if i >= len(data) {
						d.pos = i
						return nil, false, d.eofErr()
					}
					if !isHex(data[i]) {
						d.pos = i
						return nil, false, d.syntaxErr("in \\u hexadecimal character escape")
					}
					i++
				}
			default:
				d.pos = i
				return nil, false, d.syntaxErr("in string escape code")
			}
		case c < ' ':
			d.pos = i
			return nil, false, d.syntaxErr("in string literal")
		default: // non-ASCII
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size == 1 {
				simple = false
			}
			i += size
		}
	}
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// skip moves past the value at d.pos, checking it as decoding would
// (syntax, nesting depth, numbers in range) without building it.
func (d *decoder) skip() error {
	if d.pos >= len(d.data) {
		return d.eofErr()
	}
	switch c := d.data[d.pos]; c {
	case '{':
		if err := d.push(); err != nil {
			return err
		}
		d.pos++
		d.skipSpace()
		if d.pos < len(d.data) && d.data[d.pos] == '}' {
			d.pos++
			d.depth--
			return nil
		}
		for {
			if d.pos >= len(d.data) {
				return d.eofErr()
			}
			if d.data[d.pos] != '"' {
				return d.syntaxErr("looking for beginning of object key string")
			}
			if _, _, err := d.scanString(); err != nil {
				return err
			}
			d.skipSpace()
			if d.pos >= len(d.data) {
				return d.eofErr()
			}
			if d.data[d.pos] != ':' {
				return d.syntaxErr("after object key")
			}
			d.pos++
			d.skipSpace()
			if err := d.skip(); err != nil {
				return err
			}
			d.skipSpace()
			if d.pos >= len(d.data) {
				return d.eofErr()
			}
			switch d.data[d.pos] {
			case ',':
				d.pos++
				d.skipSpace()
			case '}':
				d.pos++
				d.depth--
				return nil
			default:
				return d.syntaxErr("after object key:value pair")
			}
		}
	case '[':
		if err := d.push(); err != nil {
			return err
		}
		d.pos++
		d.skipSpace()
		if d.pos < len(d.data) && d.data[d.pos] == ']' {
			d.pos++
			d.depth--
			return nil
		}
		for {
			if err := d.skip(); err != nil {
				return err
			}
			d.skipSpace()
			if d.pos >= len(d.data) {
				return d.eofErr()
			}
			switch d.data[d.pos] {
			case ',':
				d.pos++
				d.skipSpace()
			case ']':
				d.pos++
				d.depth--
				return nil
			default:
				return d.syntaxErr("after array element")
			}
		}
	case '"':
		_, _, err := d.scanString()
		return err
	case 't':
		return d.literal("true")
	case 'f':
		return d.literal("false")
	case 'n':
		return d.literal("null")
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			start := d.pos
			plain, _, err := d.scanNumber()
			if err != nil {
				return err
			}
			// Only a number with an exponent or many digits can be out of
			// float64's range; decoding would report it.
			if !plain || d.pos-start > 18 {
				if _, err := strconv.ParseFloat(string(d.data[start:d.pos]), 64); err != nil && d.rangeErr == nil {
					d.rangeErr = &TypeError{Value: "number " + string(d.data[start:d.pos]), Offset: int64(d.pos)}
				}
			}
			return nil
		}
		return d.syntaxErr("looking for beginning of value")
	}
}

// unquote returns the contents of a JSON string (without quotes, syntax
// already checked) with escapes resolved and invalid UTF-8 replaced, as
// encoding/json does, appended to b.
func unquote(b, s []byte) []byte {
	for r := 0; r < len(s); {
		switch c := s[r]; {
		case c == '\\':
			r++
			switch s[r] {
			case '"', '\\', '/':
				b = append(b, s[r])
				r++
			case 'b':
				b = append(b, '\b')
				r++
			case 'f':
				b = append(b, '\f')
				r++
			case 'n':
				b = append(b, '\n')
				r++
			case 'r':
				b = append(b, '\r')
				r++
			case 't':
				b = append(b, '\t')
				r++
			case 'u':
				rr := hex4(s[r+1 : r+5])
				r += 5
				if rr >= 0xD800 && rr < 0xE000 { // a surrogate
					if r+6 <= len(s) && s[r] == '\\' && s[r+1] == 'u' {
						rr1 := hex4(s[r+2 : r+6])
						if rr < 0xDC00 && rr1 >= 0xDC00 && rr1 < 0xE000 {
							r += 6
							b = utf8.AppendRune(b, (rr-0xD800)<<10|(rr1-0xDC00)+0x10000)
							break
						}
					}
					rr = utf8.RuneError
				}
				b = utf8.AppendRune(b, rr)
			}
		case c < utf8.RuneSelf:
			b = append(b, c)
			r++
		default:
			rr, size := utf8.DecodeRune(s[r:])
			r += size
			b = utf8.AppendRune(b, rr)
		}
	}
	return b
}

func hex4(s []byte) rune {
	var r rune
	for _, c := range s {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		default:
			c = c - 'A' + 10
		}
		r = r*16 + rune(c)
	}
	return r
}
