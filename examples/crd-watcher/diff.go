package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
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

// fieldPathForms shows, in messages, the path forms the diff prints.
const fieldPathForms = `status, spec.replicas, metadata.labels["app.kubernetes.io/name"], spec.args[0], spec.containers[name="web"].image, status.conditions[type="Ready"]`

// canonicalPath checks a field path given to --ignore-paths against the
// forms the diff prints (joinPath, keyedPath, an index) and returns it as
// the diff spells it, or an error saying why no change's path can be at
// or under it. A key after a dot is a plain key (letters, digits, _ and
// -, not first a digit or -); other keys are quoted in brackets
// (["app.kubernetes.io/name"]); a bracket holds an index ([0]), a quoted
// key or a list element matched by name or type ([name="web"],
// [type="Ready"]). A plain key given in brackets, or a quoted string
// escaped otherwise than the diff escapes it, is the same path and is
// returned as the diff prints it.
func canonicalPath(p string) (string, error) {
	switch {
	case p == "":
		return "", fmt.Errorf("an empty path")
	case p[0] == '.':
		return "", fmt.Errorf("it starts with a dot")
	}
	out := ""
	for i := 0; i < len(p); {
		switch {
		case p[i] == '[':
			seg, n, err := pathBracket(out, p[i:])
			if err != nil {
				return "", err
			}
			out, i = seg, i+n
		case i == 0 || p[i] == '.':
			if p[i] == '.' {
				i++
			}
			j := i
			for j < len(p) && p[j] != '.' && p[j] != '[' {
				j++
			}
			key := p[i:j]
			switch {
			case key == "":
				return "", fmt.Errorf("an empty key after %q", p[:i])
			case !plainKey.MatchString(key):
				q, _ := json.Marshal(key)
				return "", fmt.Errorf("the key %q has characters the diff prints only quoted in brackets ([%s])", key, q)
			}
			out, i = joinPath(out, key), j
		default:
			return "", fmt.Errorf("%q follows %q: after ] comes . or [", p[i:], p[:i])
		}
	}
	return out, nil
}

// pathBracket reads the bracket at the start of s, after the path out (as
// the diff spells it), and returns the path with it and the length read.
func pathBracket(out, s string) (string, int, error) {
	end := strings.IndexByte(s, ']')
	switch {
	case len(s) > 1 && s[1] == '"':
		key, n, err := pathString(s[1:])
		if err != nil {
			return "", 0, err
		}
		if 1+n >= len(s) || s[1+n] != ']' {
			return "", 0, fmt.Errorf("%s: the quoted key is not followed by ]", s)
		}
		return joinPath(out, key), n + 2, nil
	case end > 1 && strings.Trim(s[1:end], "0123456789") == "":
		if out == "" {
			return "", 0, fmt.Errorf("it starts with an index; a path starts with a field")
		}
		i, err := strconv.Atoi(s[1:end])
		if err != nil {
			return "", 0, fmt.Errorf("%s: the index is out of range", s[:end+1])
		}
		return fmt.Sprintf("%s[%d]", out, i), end + 1, nil
	}
	for _, key := range listKeys {
		if !strings.HasPrefix(s[1:], key+`="`) {
			continue
		}
		if out == "" {
			return "", 0, fmt.Errorf("it starts with a list element; a path starts with a field")
		}
		v, n, err := pathString(s[1+len(key)+1:])
		if err != nil {
			return "", 0, err
		}
		at := 1 + len(key) + 1 + n
		if at >= len(s) || s[at] != ']' {
			return "", 0, fmt.Errorf("%s: the quoted %s is not followed by ]", s, key)
		}
		return keyedPath(out, key, v), at + 1, nil
	}
	bracket := s
	if end >= 0 {
		bracket = s[:end+1]
	}
	return "", 0, fmt.Errorf("%s is neither an index, a quoted key nor a list element matched by name or type with its value quoted", bracket)
}

// pathString reads the JSON string at the start of s and returns its
// value and length.
func pathString(s string) (string, int, error) {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			var v string
			if err := json.Unmarshal([]byte(s[:i+1]), &v); err != nil {
				return "", 0, fmt.Errorf("%s: not a quoted string: %v", s[:i+1], err)
			}
			return v, i + 1, nil
		}
	}
	return "", 0, fmt.Errorf("%s: the quote is not closed", s)
}

// splitPaths splits a --ignore-paths value at its commas, but not at those
// in brackets or quotes (metadata.annotations["a,b"]).
func splitPaths(s string) []string {
	var out []string
	depth, quoted, start := 0, false, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case quoted:
		case c == '[':
			depth++
		case c == ']' && depth > 0:
			depth--
		case c == ',' && depth == 0:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// underPath reports whether a change at path lies at or under prefix, a
// field path as the diff spells it: "status" holds status.replicas and
// status.conditions[type="Ready"].status; "spec.template" does not hold
// spec.templateRef.
func underPath(path, prefix string) bool {
	if !strings.HasPrefix(path, prefix) {
		return false
	}
	rest := path[len(prefix):]
	return rest == "" || rest[0] == '.' || rest[0] == '['
}

// update is what an UPDATED event shows: the changes not under
// --ignore-paths, how many were hidden, and whether the update marks the
// object Terminating (its deletion was requested and finalizers, or a
// grace period, hold it).
type update struct {
	Changes []Change // sorted by path, those under --ignore-paths left out
	Ignored int      // changes left out

	// Terminating: the update set metadata.deletionTimestamp, or changed
	// the finalizers of an object whose deletion is pending.
	Terminating bool
	Finalizers  []string // what holds the object (metadata.finalizers after the update)
	GracePeriod int64    // metadata.deletionGracePeriodSeconds, if above 0
}

// diffUpdate compares the two states of an updated object.
func diffUpdate(oldObj, newObj map[string]any, ignore []string) update {
	var u update
	for _, c := range Diff(oldObj, newObj) {
		if slices.ContainsFunc(ignore, func(p string) bool { return underPath(c.Path, p) }) {
			u.Ignored++
			continue
		}
		u.Changes = append(u.Changes, c)
	}
	_, wasDeleting := nestedField(oldObj, "metadata", "deletionTimestamp")
	_, deleting := nestedField(newObj, "metadata", "deletionTimestamp")
	if !deleting {
		return u
	}
	finalizersChanged := slices.ContainsFunc(u.Changes, func(c Change) bool { return underPath(c.Path, "metadata.finalizers") })
	if wasDeleting && !finalizersChanged {
		return u // an ordinary update of an object being deleted: its diff says it
	}
	u.Terminating = true
	if fs, ok := nestedField(newObj, "metadata", "finalizers"); ok {
		if l, ok := fs.([]any); ok {
			for _, f := range l {
				if s, ok := f.(string); ok {
					u.Finalizers = append(u.Finalizers, s)
				}
			}
		}
	}
	if g, ok := nestedField(newObj, "metadata", "deletionGracePeriodSeconds"); ok {
		if n, ok := toFloat(g); ok && n > 0 {
			u.GracePeriod = int64(n)
		}
	}
	return u
}

func nestedField(obj map[string]any, fields ...string) (any, bool) {
	var cur any = obj
	for _, f := range fields {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[f]; !ok {
			return nil, false
		}
	}
	return cur, cur != nil
}

// terminatingPaths are the changes a Terminating mark says by itself.
var terminatingPaths = []string{"metadata.deletionTimestamp", "metadata.deletionGracePeriodSeconds", "metadata.finalizers"}

// text renders the update for the text output: up to inline changes on
// the line, more one per line below it (indented); a Terminating mark
// first, as kubectl shows an object whose deletion is pending:
//
//	Terminating (finalizers: example.com/hold)
//	Terminating (grace period 30s); status.phase: "Running" → "Succeeded"
//
// Changes under --ignore-paths are counted, not shown; an update that
// changed nothing else is one short line, "(3 changes under --ignore-paths)".
func (u update) text(inline, maxLen int) string {
	changes := u.Changes
	var head string
	if u.Terminating {
		changes = slices.DeleteFunc(slices.Clone(changes), func(c Change) bool {
			return slices.ContainsFunc(terminatingPaths, func(p string) bool { return underPath(c.Path, p) })
		})
		var why []string
		if u.GracePeriod > 0 {
			why = append(why, fmt.Sprintf("grace period %ds", u.GracePeriod))
		}
		if len(u.Finalizers) > 0 {
			why = append(why, "finalizers: "+strings.Join(u.Finalizers, ", "))
		}
		head = "Terminating"
		if len(why) > 0 {
			head += " (" + strings.Join(why, "; ") + ")"
		}
	}
	var ignored string
	if u.Ignored > 0 {
		ignored = fmt.Sprintf("%d change", u.Ignored)
		if u.Ignored > 1 {
			ignored += "s"
		}
		ignored += " under --ignore-paths"
	}
	switch {
	case len(changes) == 0 && head != "":
		if ignored != "" {
			return head + " (+" + ignored + ")"
		}
		return head
	case len(changes) == 0 && ignored != "":
		return "(" + ignored + ")"
	case len(changes) == 0:
		return "(no change)"
	}
	var b strings.Builder
	if head != "" {
		b.WriteString(head + "; ")
	}
	if len(changes) <= inline {
		b.WriteString(FormatChanges(changes, maxLen))
		if ignored != "" {
			b.WriteString(" (+" + ignored + ")")
		}
		return b.String()
	}
	fmt.Fprintf(&b, "%d changes", len(changes))
	if ignored != "" {
		b.WriteString(" (+" + ignored + ")")
	}
	b.WriteString(":")
	for _, c := range changes {
		b.WriteString("\n    " + FormatChange(c, maxLen))
	}
	return b.String()
}
