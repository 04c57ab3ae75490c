package decode

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
	if err := d.finish(err); err != nil {
		return nil, err
	}
	return v, nil
}

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
	if err := d.finish(err); err != nil {
		return nil, err
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

// object decodes the object at d.pos ('{').
func (d *decoder) object(m mode) (map[string]interface{}, error) {
	start := d.pos
	if m == modeRoot {
		d.fields.reset() // sets are shared within one object only
	}
	end, err := d.open('}')
	if err != nil {
		return nil, err
	}
	base := len(d.pending)
	for !end {
		if end, err = d.objectMember(m); err != nil {
			clear(d.pending[base:])
			d.pending = d.pending[:base]
			return nil, err
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
	raw, simple, err := d.memberKey()
	if err != nil {
		return false, err
	}
	raw = d.resolve(raw, simple)
	var st step
	if m != modePlain {
		st = d.opts.step(m, raw)
	}
	if err := d.member(internBytes(raw), st); err != nil {
		return false, err
	}
	return d.next('}')
}

// member decodes the value of key onto d.pending as st says.
func (d *decoder) member(key string, st step) error {
	if st.skip {
		d.dropped = true
		return d.skip()
	}
	var v interface{}
	var err error
	switch c := d.data[d.pos]; {
	case st.child == modeAnnotations && c == '{':
		ann, dropped, err := d.annotations()
		if err != nil {
			return err
		}
		d.pending = append(d.pending, member{key: key, v: ann, drop: dropped && len(ann) == 0})
		return nil
	case st.elem != modePlain && c == '[':
		v, err = d.array(st.elem)
	case st.own && c == '"':
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
		v, err = d.value(st.child)
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
	end, err := d.open(']')
	if err != nil {
		return nil, err
	}
	if end {
		return d.boxSlice([]interface{}{}), nil
	}
	base := len(d.stack)
	for !end {
		v, err := d.value(elem)
		if err == nil {
			d.stack = append(d.stack, v)
			end, err = d.next(']')
		}
		if err != nil {
			clear(d.stack[base:])
			d.stack = d.stack[:base]
			return nil, err
		}
	}
	out := make([]interface{}, len(d.stack)-base)
	copy(out, d.stack[base:])
	clear(d.stack[base:])
	d.stack = d.stack[:base]
	return d.boxSlice(out), nil
}

// number decodes the number at d.pos: int64 when it has no '.' and fits,
// float64 otherwise (sigs.k8s.io/json's PreserveInts).
func (d *decoder) number() (interface{}, error) {
	n, f, kind, err := d.numberValue()
	switch {
	case err != nil:
		return nil, err
	case kind == numInt:
		return n, nil
	case kind == numFloat:
		return f, nil
	}
	return nil, nil // out of range: d.rangeErr
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
