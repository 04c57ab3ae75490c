package decode

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// The scanner: moving through JSON and checking its syntax as
// encoding/json does, for both decoders (the one building maps, decode.go,
// and the one writing the tree encoding, tree.go) and for skipping. Errors
// are worded like encoding/json's.

// maxDepth is encoding/json's nesting limit (its scanner's
// maxNestingDepth): 10000 nested arrays and objects are allowed, one more
// is a syntax error.
const maxDepth = 10000

// finish ends the read of a top-level value that gave err: err, else a
// syntax error for anything but whitespace after the value, else the
// first number out of range (reported last, as encoding/json does).
func (d *decoder) finish(err error) error {
	if err != nil {
		return err
	}
	if err := d.end(); err != nil {
		return err
	}
	return d.rangeErr
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

// open moves past the '{' or '[' at d.pos and the space after it, one
// level deeper; close is '}' or ']'. empty: the container closed at once,
// d.pos is past it and the level is left again.
func (d *decoder) open(close byte) (empty bool, err error) {
	if err := d.push(); err != nil {
		return false, err
	}
	d.pos++
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == close {
		d.pos++
		d.depth--
		return true, nil
	}
	return false, nil
}

// next moves past what follows an object's member or an array's element:
// a ',' and the space after it, or close ('}' or ']'), which leaves the
// level (end).
func (d *decoder) next(close byte) (end bool, err error) {
	d.skipSpace()
	if d.pos < len(d.data) {
		if c := d.data[d.pos]; c == ',' {
			d.pos++
			d.skipSpace()
			return false, nil
		} else if c == close {
			d.pos++
			d.depth--
			return true, nil
		}
	}
	return false, d.nextErr(close)
}

// nextErr is next's error at d.pos.
func (d *decoder) nextErr(close byte) error {
	if close == '}' {
		return d.syntaxErr("after object key:value pair")
	}
	return d.syntaxErr("after array element")
}

// memberKey moves past an object member's key and the ':' after it, to
// the value. raw is the key's contents without the quotes; simple: they
// are the key (no escapes, valid UTF-8), else unquote resolves them.
func (d *decoder) memberKey() (raw []byte, simple bool, err error) {
	if d.pos >= len(d.data) || d.data[d.pos] != '"' {
		return nil, false, d.syntaxErr("looking for beginning of object key string")
	}
	if raw, simple, err = d.scanString(); err == nil {
		err = d.colon()
	}
	return raw, simple, err
}

// colon moves past the ':' after a key and the space around it.
func (d *decoder) colon() error {
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == ':' {
		d.pos++
		d.skipSpace()
		if d.pos < len(d.data) {
			return nil
		}
	}
	return d.syntaxErr("after object key")
}

// numKind is what numberValue read.
type numKind uint8

const (
	numInt        numKind = iota // an int64
	numFloat                     // a float64
	numOutOfRange                // out of float64's range: d.rangeErr is set
)

// numberValue moves past the number at d.pos and reads it as
// sigs.k8s.io/json's PreserveInts does: an int64 when it has no '.' and
// fits, a float64 otherwise. A number out of range is not a syntax error:
// like encoding/json the decoders go on (a later syntax error wins), and
// the first such number is d.rangeErr.
func (d *decoder) numberValue() (int64, float64, numKind, error) {
	start := d.pos
	plain, dot, err := d.scanNumber()
	if err != nil {
		return 0, 0, 0, err
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
		return n, 0, numInt, nil
	}
	s := string(lit)
	if !dot {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n, 0, numInt, nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		if d.rangeErr == nil {
			d.rangeErr = &TypeError{Value: "number " + s, Offset: int64(d.pos)}
		}
		return 0, 0, numOutOfRange, nil
	}
	return 0, f, numFloat, nil
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
		if i, err = d.digits(i+1, "after decimal point in numeric literal"); err != nil {
			return false, false, err
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		plain = false
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if i, err = d.digits(i, "in exponent of numeric literal"); err != nil {
			return false, false, err
		}
	}
	d.pos = i
	return plain, dot, nil
}

// digits returns the index after the digits from d.data[i] on, of which
// there must be one at least (context words the error).
func (d *decoder) digits(i int, context string) (int, error) {
	data := d.data
	if i >= len(data) {
		d.pos = i
		return i, d.eofErr()
	}
	if data[i] < '0' || data[i] > '9' {
		d.pos = i
		return i, d.syntaxErr(context)
	}
	for i < len(data) && data[i] >= '0' && data[i] <= '9' {
		i++
	}
	return i, nil
}

// stringContents moves past the string at d.pos and returns what it
// holds, escapes resolved: the input's bytes, or d.unquoted's (valid until
// the next string).
func (d *decoder) stringContents() ([]byte, error) {
	raw, simple, err := d.scanString()
	if err != nil {
		return nil, err
	}
	return d.resolve(raw, simple), nil
}

// resolve returns the contents of a string scanned by scanString: raw
// itself when simple, else raw unquoted into d.unquoted (valid until the
// next string).
func (d *decoder) resolve(raw []byte, simple bool) []byte {
	if simple {
		return raw
	}
	d.unquoted = unquote(d.unquoted[:0], raw)
	return d.unquoted
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
		empty, err := d.open('}')
		if err != nil || empty {
			return err
		}
		for {
			if _, _, err := d.memberKey(); err != nil {
				return err
			}
			if err := d.skip(); err != nil {
				return err
			}
			if end, err := d.next('}'); err != nil || end {
				return err
			}
		}
	case '[':
		empty, err := d.open(']')
		if err != nil || empty {
			return err
		}
		for {
			if err := d.skip(); err != nil {
				return err
			}
			if end, err := d.next(']'); err != nil || end {
				return err
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
			_, _, _, err := d.numberValue()
			return err
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
			case 'b', 'f', 'n', 'r', 't':
				b = append(b, "\b\f\n\r\t"[strings.IndexByte("bfnrt", s[r])])
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
