package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"
)

// Change is one changed leaf of an object. Old is absent (HasOld false) for
// an added field, New for a removed one.
type Change struct {
	Path   string `json:"path"`
	Old    any    `json:"old,omitempty"`
	New    any    `json:"new,omitempty"`
	HasOld bool   `json:"-"`
	HasNew bool   `json:"-"`
}

// MarshalJSON writes "old"/"new" only when the field existed on that side,
// so that a field changed to null is told apart from an added field.
func (c Change) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(c.Path)
	if err != nil {
		return nil, err
	}
	out := append([]byte(`{"path":`), b...)
	for _, f := range []struct {
		name    string
		v       any
		present bool
	}{{"old", c.Old, c.HasOld}, {"new", c.New, c.HasNew}} {
		if !f.present {
			continue
		}
		b, err := json.Marshal(f.v)
		if err != nil {
			return nil, err
		}
		out = append(append(out, `,"`+f.name+`":`...), b...)
	}
	return append(out, '}'), nil
}

// ignoredPaths change on every write (or restate the object) and say
// nothing about what changed: kubectl apply rewrites
// last-applied-configuration on every apply, as the server rewrites
// managedFields.
var ignoredPaths = map[string]bool{
	"metadata.resourceVersion": true,
	"metadata.managedFields":   true,
	"metadata.generation":      true,
	`metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"]`: true,
}

// listKeys are the fields that identify an element of a list of objects,
// tried in order: containers, ports, volumes, listeners ... by name;
// conditions by type. A list is diffed by key when every element on both
// sides is an object holding a distinct string value of the key.
var listKeys = []string{"name", "type"}

// Diff lists the leaves that differ between two object trees (as
// unstructured.Unstructured.Object holds them), sorted by path. Maps are
// compared key by key. Lists of objects that carry a "name" (else a
// "type", as conditions do) are compared element by element matched on
// that key (spec.listeners[name="https"].port), so an element added,
// removed or moved anywhere in the list is one change naming it; other
// lists element by element by index, with added or removed elements at
// the end as one change each. metadata.resourceVersion,
// metadata.managedFields, metadata.generation and the
// kubectl.kubernetes.io/last-applied-configuration annotation are ignored.
func Diff(oldObj, newObj map[string]any) []Change {
	var out []Change
	diffValue("", oldObj, newObj, true, true, &out)
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

func diffValue(path string, a, b any, hasA, hasB bool, out *[]Change) {
	if ignoredPaths[path] {
		return
	}
	if hasA && hasB {
		am, aok := a.(map[string]any)
		bm, bok := b.(map[string]any)
		if aok && bok {
			keys := map[string]bool{}
			for k := range am {
				keys[k] = true
			}
			for k := range bm {
				keys[k] = true
			}
			for k := range keys {
				av, ina := am[k]
				bv, inb := bm[k]
				diffValue(joinPath(path, k), av, bv, ina, inb, out)
			}
			return
		}
		al, aok := a.([]any)
		bl, bok := b.([]any)
		if aok && bok {
			diffList(path, al, bl, out)
			return
		}
		if equalJSON(a, b) {
			return
		}
	}
	if !hasA && !hasB {
		return
	}
	*out = append(*out, Change{Path: path, Old: a, New: b, HasOld: hasA, HasNew: hasB})
}

// diffList compares two lists by element key when they have one, else by
// index.
func diffList(path string, al, bl []any, out *[]Change) {
	for _, key := range listKeys {
		ai, aok := indexByKey(al, key)
		bi, bok := indexByKey(bl, key)
		if !aok || !bok {
			continue
		}
		for k, av := range ai {
			bv, inb := bi[k]
			diffValue(keyedPath(path, key, k), av, bv, true, inb, out)
		}
		for k, bv := range bi {
			if _, ina := ai[k]; !ina {
				diffValue(keyedPath(path, key, k), nil, bv, false, true, out)
			}
		}
		return
	}
	for i := 0; i < max(len(al), len(bl)); i++ {
		var av, bv any
		if i < len(al) {
			av = al[i]
		}
		if i < len(bl) {
			bv = bl[i]
		}
		diffValue(fmt.Sprintf("%s[%d]", path, i), av, bv, i < len(al), i < len(bl), out)
	}
}

// indexByKey maps each element of l by its string field key; false if an
// element is not an object, lacks the key, or two elements share a value.
// An empty list qualifies (every element has the key).
func indexByKey(l []any, key string) (map[string]any, bool) {
	m := make(map[string]any, len(l))
	for _, e := range l {
		obj, ok := e.(map[string]any)
		if !ok {
			return nil, false
		}
		k, ok := obj[key].(string)
		if !ok {
			return nil, false
		}
		if _, dup := m[k]; dup {
			return nil, false
		}
		m[k] = e
	}
	return m, true
}

func keyedPath(path, key, value string) string {
	q, _ := json.Marshal(value)
	return fmt.Sprintf("%s[%s=%s]", path, key, q)
}

// equalJSON compares leaves, treating int64(1) and float64(1) alike (the
// JSON decoder in client-go yields int64 for integers; objects built in Go
// may hold other numeric types).
func equalJSON(a, b any) bool {
	if reflect.DeepEqual(a, b) {
		return true
	}
	na, aok := toFloat(a)
	nb, bok := toFloat(b)
	return aok && bok && na == nb
}

func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case int64:
		return float64(n), true
	case float32:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

var plainKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// joinPath appends a map key: "spec.replicas", or
// metadata.labels["app.kubernetes.io/name"] for keys that are not plain
// identifiers.
func joinPath(path, key string) string {
	if !plainKey.MatchString(key) {
		q, _ := json.Marshal(key)
		return path + "[" + string(q) + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// FormatChanges renders changes compactly for the text output:
// spec.cronSpec: "* * * * */5" → "*/10 * * * *"; metadata.labels.tier: <none> → "batch".
// Values longer than maxLen are cut; when both sides are cut, both show the
// part around their first difference, so that two long values that differ
// late do not look alike.
func FormatChanges(changes []Change, maxLen int) string {
	parts := make([]string, 0, len(changes))
	for _, c := range changes {
		parts = append(parts, FormatChange(c, maxLen))
	}
	return strings.Join(parts, "; ")
}

// FormatChange renders one change as FormatChanges does.
func FormatChange(c Change, maxLen int) string {
	o, n := formatValue(c.Old, c.HasOld), formatValue(c.New, c.HasNew)
	start := 0
	if maxLen > 0 && c.HasOld && c.HasNew && len(o) > maxLen && len(n) > maxLen {
		p := commonPrefix(o, n)
		if p > maxLen/2 {
			start = p - maxLen/4 // keep a little context before the difference
		}
	}
	return fmt.Sprintf("%s: %s → %s", c.Path, clip(o, start, maxLen), clip(n, start, maxLen))
}

func commonPrefix(a, b string) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}

// clip cuts s to maxLen bytes from start, marking each cut with "…" and
// never splitting a UTF-8 sequence.
func clip(s string, start, maxLen int) string {
	if maxLen <= 0 || len(s) <= maxLen {
		return s
	}
	for start > 0 && start < len(s) && !utf8.RuneStart(s[start]) {
		start--
	}
	end := min(len(s), start+maxLen)
	for end < len(s) && end > start && !utf8.RuneStart(s[end]) {
		end--
	}
	out := s[start:end]
	if start > 0 {
		out = "…" + out
	}
	if end < len(s) {
		out += "…"
	}
	return out
}

func formatValue(v any, present bool) string {
	if !present {
		return "<none>"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
