package decode

import (
	"errors"
	"fmt"
	"strconv"
)

// SyntaxError is malformed JSON: what encoding/json and sigs.k8s.io/json
// report as a syntax error (including nesting deeper than 10000).
type SyntaxError struct {
	Msg    string
	Offset int64 // bytes read before the error
}

func (e *SyntaxError) Error() string { return e.Msg }

// TypeError is well-formed JSON that cannot be decoded into an object: a
// number out of float64's range, or a top level that is neither an object
// nor null (encoding/json's UnmarshalTypeError).
type TypeError struct {
	Value  string // "number 1e400", "array", ...
	Offset int64
}

func (e *TypeError) Error() string {
	return "json: cannot unmarshal " + e.Value + " into Go value of type map[string]interface {}"
}

// IsSyntaxError reports whether err is, or wraps, a *SyntaxError.
func IsSyntaxError(err error) bool {
	var s *SyntaxError
	return errors.As(err, &s)
}

// IsTypeError reports whether err is, or wraps, a *TypeError.
func IsTypeError(err error) bool {
	var t *TypeError
	return errors.As(err, &t)
}

func (d *decoder) eofErr() error {
	return &SyntaxError{Msg: "unexpected end of JSON input", Offset: int64(len(d.data))}
}

// syntaxErr reports the byte at d.pos, worded like encoding/json.
func (d *decoder) syntaxErr(context string) error {
	if d.pos >= len(d.data) {
		return d.eofErr()
	}
	return &SyntaxError{Msg: fmt.Sprintf("invalid character %s %s", quoteChar(d.data[d.pos]), context), Offset: int64(d.pos + 1)}
}

func quoteChar(c byte) string {
	if c == '\'' {
		return `'\''`
	}
	if c == '"' {
		return `'"'`
	}
	s := strconv.Quote(string(rune(c)))
	return "'" + s[1:len(s)-1] + "'"
}
