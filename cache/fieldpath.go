package cache

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrInvalidFieldPath is wrapped by every error about a malformed field
// path; test for it with errors.Is.
var ErrInvalidFieldPath = errors.New("invalid field path")

// stepKind says how one step of a field path selects from a value.
type stepKind uint8

const (
	stepField stepKind = iota // a key of a JSON object
	stepAll                   // [*]: every element of a list (or value of an object)
	stepIndex                 // [n]: element n of a list
)

type step struct {
	kind  stepKind
	name  string // stepField
	index int    // stepIndex
}

// fieldPath is a parsed field path: the steps from the object's root.
type fieldPath []step

// maxPathIndex bounds [n] so that parsing never builds absurd integers.
const maxPathIndex = 1 << 20

// parseFieldPath parses the field path syntax shared by field indexes and
// projection:
//
//	path    = ["."] segment { "." segment }
//	segment = name { selector } | selector { selector }   (only the first segment may start with a selector)
//	name    = one or more characters other than ".", "[", "]"
//	selector= "[*]" | "[" digits "]" | "['" chars "']" | "[\"" chars "\"]"
//
// Examples: "spec.nodeName", "status.phase",
// "metadata.ownerReferences[*].uid", "spec.containers[0].image",
// "metadata.labels['app.kubernetes.io/name']".
func parseFieldPath(path string) (fieldPath, error) {
	bad := func(pos int, why string) (fieldPath, error) {
		return nil, fmt.Errorf("%w %q at offset %d: %s", ErrInvalidFieldPath, path, pos, why)
	}
	if path == "" {
		return bad(0, "empty path")
	}
	var out fieldPath
	i := 0
	if path[0] == '.' {
		i = 1
		if len(path) == 1 {
			return bad(1, "empty path")
		}
	}
	// expectName: at the start of a segment (after "." or at the start).
	expectName := true
	for i < len(path) {
		c := path[i]
		switch {
		case c == '[':
			if expectName && len(out) > 0 {
				return bad(i, "expected a field name after '.'")
			}
			s, n, err := parseSelector(path, i)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
			i = n
			expectName = false
		case c == '.':
			if expectName {
				return bad(i, "empty field name")
			}
			i++
			if i == len(path) {
				return bad(i, "path ends with '.'")
			}
			expectName = true
		case c == ']':
			return bad(i, "unexpected ']'")
		default:
			if !expectName {
				return bad(i, "expected '.' or '[' after ']'")
			}
			j := i
			for j < len(path) && path[j] != '.' && path[j] != '[' && path[j] != ']' {
				j++
			}
			out = append(out, step{kind: stepField, name: path[i:j]})
			i = j
			expectName = false
		}
	}
	if expectName {
		return bad(i, "path ends without a field")
	}
	return out, nil
}

// parseSelector parses the bracketed selector at path[i] == '[' and returns
// it with the offset just past its ']'.
func parseSelector(path string, i int) (step, int, error) {
	bad := func(pos int, why string) (step, int, error) {
		return step{}, 0, fmt.Errorf("%w %q at offset %d: %s", ErrInvalidFieldPath, path, pos, why)
	}
	j := i + 1
	if j >= len(path) {
		return bad(j, "unterminated '['")
	}
	switch c := path[j]; {
	case c == '*':
		if j+1 >= len(path) || path[j+1] != ']' {
			return bad(j+1, "expected ']' after '[*'")
		}
		return step{kind: stepAll}, j + 2, nil
	case c >= '0' && c <= '9':
		k := j
		for k < len(path) && path[k] >= '0' && path[k] <= '9' {
			k++
		}
		if k >= len(path) || path[k] != ']' {
			return bad(k, "expected ']' after index")
		}
		if k-j > 7 {
			return bad(j, "index too large")
		}
		n, err := strconv.Atoi(path[j:k])
		if err != nil || n > maxPathIndex {
			return bad(j, "index too large")
		}
		return step{kind: stepIndex, index: n}, k + 1, nil
	case c == '\'' || c == '"':
		end := strings.IndexByte(path[j+1:], c)
		if end < 0 {
			return bad(j, "unterminated quoted name")
		}
		name := path[j+1 : j+1+end]
		k := j + 1 + end + 1
		if name == "" {
			return bad(j, "empty quoted name")
		}
		if k >= len(path) || path[k] != ']' {
			return bad(k, "expected ']' after quoted name")
		}
		return step{kind: stepField, name: name}, k + 1, nil
	default:
		return bad(j, "expected '*', an index or a quoted name after '['")
	}
}

// String returns the canonical spelling of the path (quoted names where
// the name needs them).
func (p fieldPath) String() string {
	var b strings.Builder
	for i, s := range p {
		switch s.kind {
		case stepField:
			if strings.ContainsAny(s.name, ".[]") {
				q := byte('\'')
				if strings.IndexByte(s.name, '\'') >= 0 {
					q = '"'
				}
				b.WriteByte('[')
				b.WriteByte(q)
				b.WriteString(s.name)
				b.WriteByte(q)
				b.WriteByte(']')
				continue
			}
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.name)
		case stepAll:
			b.WriteString("[*]")
		case stepIndex:
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(s.index))
			b.WriteByte(']')
		}
	}
	return b.String()
}

// collect calls emit for every value the path reaches in v (a JSON-like
// value: map[string]interface{}, []interface{} and scalars). [*] fans out.
func (p fieldPath) collect(v interface{}, emit func(interface{})) {
	for i, s := range p {
		switch s.kind {
		case stepField:
			m, ok := v.(map[string]interface{})
			if !ok {
				return
			}
			if v, ok = m[s.name]; !ok {
				return
			}
		case stepIndex:
			l, ok := v.([]interface{})
			if !ok || s.index >= len(l) {
				return
			}
			v = l[s.index]
		case stepAll:
			rest := p[i+1:]
			switch c := v.(type) {
			case []interface{}:
				for _, e := range c {
					rest.collect(e, emit)
				}
			case map[string]interface{}:
				for _, e := range c {
					rest.collect(e, emit)
				}
			}
			return
		}
	}
	emit(v)
}

// scalarString formats a JSON scalar as an index value. Objects, lists and
// null have no index value.
func scalarString(v interface{}) (string, bool) {
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
