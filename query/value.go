package query

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// valueKind is the type of a Value or of a field's value.
type valueKind uint8

// The order of the kinds is the order of values of different types in a
// sort: missing fields first, then null, booleans, numbers and strings.
const (
	kindMissing valueKind = iota
	kindNull
	kindBool
	kindNumber
	kindString
	kindTime // literals only: a field holds a timestamp as a string
)

// Value is a literal of a predicate: a string, a number, a boolean or a
// timestamp. Make one with String, Number, Int, Bool or Time (or let Parse
// read it). The zero Value is the empty string.
//
// How a literal meets a field's value: a number literal compares
// numerically with a number field, a boolean with a boolean, a timestamp
// with a string field that parses as RFC 3339 (compared as instants);
// anything else compares the field's value, formatted as text (numbers
// in their shortest form, booleans as true/false), with the literal's
// text. So "spec.replicas=3" matches the number 3 and "metadata.name=3"
// the name "3". Objects, lists and null match no comparison.
type Value struct {
	kind valueKind
	text string // the literal as written (canonical for built values)
	num  float64
	b    bool
	t    time.Time
}

// String returns a string literal.
func String(s string) Value { return Value{kind: kindString, text: s} }

// Number returns a number literal. NaN and the infinities are not numbers
// a Kubernetes object can hold; Validate refuses them.
func Number(f float64) Value {
	return Value{kind: kindNumber, text: strconv.FormatFloat(f, 'g', -1, 64), num: f}
}

// Int returns a number literal.
func Int(i int64) Value {
	return Value{kind: kindNumber, text: strconv.FormatInt(i, 10), num: float64(i)}
}

// Bool returns a boolean literal.
func Bool(b bool) Value { return Value{kind: kindBool, text: strconv.FormatBool(b), b: b} }

// Time returns a timestamp literal.
func Time(t time.Time) Value {
	return Value{kind: kindTime, text: t.UTC().Format(time.RFC3339Nano), t: t}
}

// Text is the literal as written.
func (v Value) Text() string { return v.text }

// parseLiteral types a literal of the string form: "quoted" or 'quoted'
// is a string (a doubled quote inside stands for one); true and false are booleans; a number is a number; an RFC
// 3339 timestamp is a timestamp; anything else is a string.
func parseLiteral(s string) Value {
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
		q := s[:1]
		return String(strings.ReplaceAll(s[1:len(s)-1], q+q, q))
	}
	switch s {
	case "true":
		return Value{kind: kindBool, text: s, b: true}
	case "false":
		return Value{kind: kindBool, text: s}
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) && looksNumeric(s) {
		return Value{kind: kindNumber, text: s, num: f}
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return Value{kind: kindTime, text: s, t: t}
	}
	return Value{kind: kindString, text: s}
}

// looksNumeric refuses what ParseFloat takes but JSON does not (hex,
// underscores, "Inf").
func looksNumeric(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E') {
			return false
		}
	}
	return true
}

// literalText is how the string form spells v: quoted when the bare text
// would read back as another type or would not survive the grammar.
func literalText(v Value) string {
	if v.kind != kindString {
		return v.text
	}
	if parseLiteral(v.text).kind == kindString && v.text != "" && !strings.ContainsAny(v.text, ",()'\" \t\n\r\v\f=!<>") &&
		!(len(v.text) >= 2 && (v.text[0] == '"' || v.text[0] == '\'')) {
		return v.text
	}
	return "'" + strings.ReplaceAll(v.text, "'", "''") + "'"
}

// fieldKind classifies a field's value.
func fieldKind(v interface{}) valueKind {
	switch v.(type) {
	case nil:
		return kindNull
	case bool:
		return kindBool
	case int64, int, int32, float64, float32:
		return kindNumber
	case string:
		return kindString
	}
	return kindMissing // maps and lists: not scalars
}

func toFloat(v interface{}) float64 {
	switch x := v.(type) {
	case int64:
		return float64(x)
	case int:
		return float64(x)
	case int32:
		return float64(x)
	case float64:
		return x
	case float32:
		return float64(x)
	}
	return 0
}

// scalarText formats a scalar field value as text.
func scalarText(v interface{}) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case bool:
		return strconv.FormatBool(x), true
	case int64:
		return strconv.FormatInt(x, 10), true
	case int:
		return strconv.Itoa(x), true
	case int32:
		return strconv.FormatInt(int64(x), 10), true
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), true
	case float32:
		return strconv.FormatFloat(float64(x), 'g', -1, 32), true
	}
	return "", false
}

func cmp3[T int | float64 | string](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// compareLiteral compares a field's value with a literal (see Value) and
// reports whether they are comparable at all.
func compareLiteral(field interface{}, lit Value) (int, bool) {
	switch lit.kind {
	case kindNumber:
		if fieldKind(field) == kindNumber {
			return cmp3(toFloat(field), lit.num), true
		}
	case kindBool:
		if b, ok := field.(bool); ok {
			return cmp3(boolInt(b), boolInt(lit.b)), true
		}
	case kindTime:
		if s, ok := field.(string); ok {
			if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
				return t.Compare(lit.t), true
			}
		}
	}
	s, ok := scalarText(field)
	if !ok {
		return 0, false
	}
	return strings.Compare(s, lit.text), true
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// sortValue is a field's value as a sort key: missing, null, a boolean
// (num 0 or 1), a number or a string.
type sortValue struct {
	kind valueKind
	num  float64
	str  string
}

func toSortValue(v interface{}, found bool) sortValue {
	if !found {
		return sortValue{}
	}
	switch k := fieldKind(v); k {
	case kindNull:
		return sortValue{kind: kindNull}
	case kindBool:
		return sortValue{kind: kindBool, num: float64(boolInt(v.(bool)))}
	case kindNumber:
		return sortValue{kind: kindNumber, num: toFloat(v)}
	case kindString:
		return sortValue{kind: kindString, str: v.(string)}
	}
	return sortValue{} // objects and lists sort as missing
}

func compareSortValues(a, b sortValue) int {
	if a.kind != b.kind {
		return cmp3(int(a.kind), int(b.kind))
	}
	switch a.kind {
	case kindBool, kindNumber:
		return cmp3(a.num, b.num)
	case kindString:
		return strings.Compare(a.str, b.str)
	}
	return 0
}

// encode spells a sort value in a continue token.
func (s sortValue) encode() string {
	switch s.kind {
	case kindNull:
		return "z"
	case kindBool:
		if s.num != 0 {
			return "b1"
		}
		return "b0"
	case kindNumber:
		return "n" + strconv.FormatFloat(s.num, 'g', -1, 64)
	case kindString:
		return "s" + s.str
	}
	return "m"
}

func decodeSortValue(s string) (sortValue, bool) {
	if s == "" {
		return sortValue{}, false
	}
	switch s[0] {
	case 'm':
		return sortValue{}, len(s) == 1
	case 'z':
		return sortValue{kind: kindNull}, len(s) == 1
	case 'b':
		switch s {
		case "b0":
			return sortValue{kind: kindBool}, true
		case "b1":
			return sortValue{kind: kindBool, num: 1}, true
		}
	case 'n':
		f, err := strconv.ParseFloat(s[1:], 64)
		if err != nil || math.IsNaN(f) {
			return sortValue{}, false
		}
		return sortValue{kind: kindNumber, num: f}, true
	case 's':
		return sortValue{kind: kindString, str: s[1:]}, true
	}
	return sortValue{}, false
}
