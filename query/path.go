package query

import (
	"strconv"
	"strings"
)

// stepKind says how one step of a field path selects from a value.
type stepKind uint8

const (
	stepField stepKind = iota // a key of a JSON object
	stepAll                   // [*]: every element of a list
	stepIndex                 // [n]: element n of a list
)

type step struct {
	kind  stepKind
	name  string
	index int
}

// Path is a parsed field path (see ParsePath). The zero Path is not valid.
type Path struct {
	text  string // canonical spelling
	steps []step
}

// String returns the canonical spelling of the path.
func (p Path) String() string { return p.text }

// maxPathIndex bounds [n].
const maxPathIndex = 1 << 20

// ParsePath parses a field path in the syntax of informerkit's field
// indexes (cache.FieldIndexers): dot-separated field names with optional
// selectors [*] (every element of a list), [n] (element n) and ['name'] or
// ["name"] (a field whose name holds dots or brackets), with an optional
// leading dot: "spec.replicas", "status.conditions[*].type",
// "metadata.labels['app.kubernetes.io/name']". Errors wrap ErrInvalidPath.
func ParsePath(s string) (Path, error) {
	bad := func(pos int, why string) (Path, error) {
		return Path{}, newError(ErrInvalidPath, "", s, "offset "+strconv.Itoa(pos)+": "+why)
	}
	if s == "" || s == "." {
		return bad(0, "empty path")
	}
	var steps []step
	i := 0
	if s[0] == '.' {
		i = 1
	}
	expectName := true
	for i < len(s) {
		c := s[i]
		switch {
		case c == '[':
			if expectName && len(steps) > 0 {
				return bad(i, "expected a field name after '.'")
			}
			j := i + 1
			if j >= len(s) {
				return bad(j, "unterminated '['")
			}
			switch d := s[j]; {
			case d == '*':
				if j+1 >= len(s) || s[j+1] != ']' {
					return bad(j+1, "expected ']' after '[*'")
				}
				steps = append(steps, step{kind: stepAll})
				i = j + 2
			case d >= '0' && d <= '9':
				k := j
				for k < len(s) && s[k] >= '0' && s[k] <= '9' {
					k++
				}
				if k >= len(s) || s[k] != ']' {
					return bad(k, "expected ']' after index")
				}
				n, err := strconv.Atoi(s[j:k])
				if k-j > 7 || err != nil || n > maxPathIndex {
					return bad(j, "index too large")
				}
				steps = append(steps, step{kind: stepIndex, index: n})
				i = k + 1
			case d == '\'' || d == '"':
				end := strings.IndexByte(s[j+1:], d)
				if end < 0 {
					return bad(j, "unterminated quoted name")
				}
				name := s[j+1 : j+1+end]
				k := j + 2 + end
				if name == "" {
					return bad(j, "empty quoted name")
				}
				if k >= len(s) || s[k] != ']' {
					return bad(k, "expected ']' after quoted name")
				}
				steps = append(steps, step{kind: stepField, name: name})
				i = k + 1
			default:
				return bad(j, "expected '*', an index or a quoted name after '['")
			}
			expectName = false
		case c == '.':
			if expectName {
				return bad(i, "empty field name")
			}
			i++
			if i == len(s) {
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
			for j < len(s) && s[j] != '.' && s[j] != '[' && s[j] != ']' {
				j++
			}
			steps = append(steps, step{kind: stepField, name: s[i:j]})
			i = j
			expectName = false
		}
	}
	if expectName {
		return bad(i, "path ends without a field")
	}
	return Path{text: spell(steps), steps: steps}, nil
}

// spell is the canonical spelling of steps.
func spell(steps []step) string {
	var b strings.Builder
	for i, s := range steps {
		switch s.kind {
		case stepField:
			// Quoted: names the path grammar or the string form of a
			// query would read otherwise (see Parse).
			if strings.ContainsAny(s.name, ".[]=!<>,() \t\n\r\v\f") || s.name == "" ||
				(i == 0 && (s.name[0] == '-' || s.name[0] == '+')) {
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

// collect calls emit for every value the steps reach in v (a JSON-like
// value), stopping when emit returns false; it reports whether to go on.
func collect(steps []step, v interface{}, emit func(interface{}) bool) bool {
	for i, s := range steps {
		switch s.kind {
		case stepField:
			m, ok := v.(map[string]interface{})
			if !ok {
				return true
			}
			if v, ok = m[s.name]; !ok {
				return true
			}
		case stepIndex:
			l, ok := v.([]interface{})
			if !ok || s.index >= len(l) {
				return true
			}
			v = l[s.index]
		case stepAll:
			l, ok := v.([]interface{})
			if !ok {
				return true
			}
			for _, e := range l {
				if !collect(steps[i+1:], e, emit) {
					return false
				}
			}
			return true
		}
	}
	return emit(v)
}
