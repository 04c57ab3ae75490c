package decode

// WatchEvent splits data, the JSON of one watch event as an API server
// writes it ({"type":"ADDED","object":{...}}, members in either order),
// into its type and the bytes of its object (nil for null or absent),
// without decoding the object. ok is false when data is valid JSON but not
// exactly that shape (another or a repeated member, an escaped key, a type
// that is not a string without escapes): such events are for a general
// decoder. err is a *SyntaxError when data is not one valid JSON value;
// numbers are not checked for range (the object's decoder does that).
// object shares data's bytes.
func WatchEvent(data []byte) (typ string, object []byte, ok bool, err error) {
	d := decoder{data: data}
	d.skipSpace()
	if d.pos >= len(data) || data[d.pos] != '{' {
		if err := d.check(); err != nil {
			return "", nil, false, err
		}
		return "", nil, false, nil
	}
	ok = true
	seenType, seenObject := false, false
	end, err := d.open('}')
	if err != nil {
		return "", nil, false, err
	}
	if end {
		return "", nil, false, d.end()
	}
	for !end {
		key, simple, err := d.memberKey()
		if err != nil {
			return "", nil, false, err
		}
		vstart := d.pos
		if err := d.skip(); err != nil {
			return "", nil, false, err
		}
		value := data[vstart:d.pos]
		switch {
		case !simple:
			ok = false
		case string(key) == "type" && !seenType:
			seenType = true
			if len(value) < 2 || value[0] != '"' {
				ok = false
				break
			}
			raw, simpleValue, _ := (&decoder{data: value}).scanString()
			if !simpleValue {
				ok = false
				break
			}
			typ = string(raw)
		case string(key) == "object" && !seenObject:
			seenObject = true
			if string(value) != "null" {
				object = value
			}
		default:
			ok = false
		}
		if end, err = d.next('}'); err != nil {
			return "", nil, false, err
		}
	}
	if err := d.end(); err != nil {
		return "", nil, false, err
	}
	if !ok {
		return "", nil, false, nil
	}
	return typ, object, true, nil
}

// check reports whether d.data is one valid JSON value (syntax only).
func (d *decoder) check() error {
	d.skipSpace()
	if err := d.skip(); err != nil {
		return err
	}
	return d.end()
}

// WatchEventObject is WatchEvent that also decodes the event's object in
// the same pass, into what Object(object, opts) returns for it, instead
// of scanning the object once to find its end and again to decode it.
// decoded reports whether it did: it is false whenever the one pass cannot
// promise Object's result and errors (data that WatchEvent would not
// accept as ok, a syntax error, an object that is not a JSON object or
// null, a number out of range, a repeated member), and the caller then
// decodes the event as before, with WatchEvent and Object. With decoded
// true, typ and object are WatchEvent's and obj is Object(object, opts)
// (nil for a null or absent object).
func WatchEventObject(data []byte, opts Options) (typ string, object []byte, obj map[string]interface{}, decoded bool) {
	d := decoder{data: data}
	d.skipSpace()
	if d.pos >= len(data) || data[d.pos] != '{' {
		return "", nil, nil, false
	}
	seenType, seenObject := false, false
	end, err := d.open('}')
	if err != nil || end {
		return "", nil, nil, false
	}
	for !end {
		key, simple, err := d.memberKey()
		if err != nil || !simple {
			return "", nil, nil, false
		}
		vstart := d.pos
		switch {
		case string(key) == "type" && !seenType:
			seenType = true
			if d.pos >= len(data) || data[d.pos] != '"' {
				return "", nil, nil, false
			}
			raw, simpleValue, err := d.scanString()
			if err != nil || !simpleValue {
				return "", nil, nil, false
			}
			typ = string(raw)
		case string(key) == "object" && !seenObject:
			seenObject = true
			if d.pos >= len(data) {
				return "", nil, nil, false
			}
			switch data[d.pos] {
			case 'n':
				if d.literal("null") != nil {
					return "", nil, nil, false
				}
			case '{':
				// As Object decodes the object alone: its own depth, its
				// own working memory and boxes.
				od := decoder{data: data, pos: d.pos, opts: opts, boxes: true}
				od.getScratch()
				m, err := od.object(modeRoot)
				od.putScratch()
				if err != nil || od.rangeErr != nil {
					return "", nil, nil, false
				}
				d.pos = od.pos
				object, obj = data[vstart:d.pos], m
			default:
				return "", nil, nil, false
			}
		default:
			return "", nil, nil, false
		}
		if end, err = d.next('}'); err != nil {
			return "", nil, nil, false
		}
	}
	if d.end() != nil {
		return "", nil, nil, false
	}
	return typ, object, obj, true
}
