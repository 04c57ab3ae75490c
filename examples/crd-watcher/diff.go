package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"
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

// ignoredPaths change on every write and say nothing about what changed.
var ignoredPaths = map[string]bool{
	"metadata.resourceVersion": true,
	"metadata.managedFields":   true,
	"metadata.generation":      true,
}

// Diff lists the leaves that differ between two object trees (as
// unstructured.Unstructured.Object holds them), sorted by path. Maps are
// compared key by key; lists of the same length element by element; lists
// whose length changed are one change. metadata.resourceVersion,
// metadata.managedFields and metadata.generation are ignored.
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
		if aok && bok && len(al) == len(bl) {
			for i := range al {
				diffValue(fmt.Sprintf("%s[%d]", path, i), al[i], bl[i], true, true, out)
			}
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
func FormatChanges(changes []Change, maxLen int) string {
	parts := make([]string, 0, len(changes))
	for _, c := range changes {
		parts = append(parts, fmt.Sprintf("%s: %s → %s", c.Path, formatValue(c.Old, c.HasOld, maxLen), formatValue(c.New, c.HasNew, maxLen)))
	}
	return strings.Join(parts, "; ")
}

func formatValue(v any, present bool, maxLen int) string {
	if !present {
		return "<none>"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	s := string(b)
	if maxLen > 0 && len(s) > maxLen {
		s = s[:maxLen] + "…"
	}
	return s
}
