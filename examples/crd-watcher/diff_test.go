package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestDiff(t *testing.T) {
	oldObj := map[string]any{
		"apiVersion": "stable.example.com/v1",
		"metadata": map[string]any{
			"name": "a", "resourceVersion": "10", "generation": int64(1),
			"managedFields": []any{map[string]any{"manager": "kubectl"}},
			"labels":        map[string]any{"app": "web", "app.kubernetes.io/name": "x"},
		},
		"spec": map[string]any{
			"replicas": int64(1),
			"image":    "nginx:1",
			"ports":    []any{map[string]any{"port": int64(80)}},
			"args":     []any{"a"},
			"gone":     "bye",
		},
	}
	newObj := map[string]any{
		"apiVersion": "stable.example.com/v1",
		"metadata": map[string]any{
			"name": "a", "resourceVersion": "11", "generation": int64(2),
			"managedFields": []any{map[string]any{"manager": "other"}},
			"labels":        map[string]any{"app": "web", "app.kubernetes.io/name": "y", "tier": "batch"},
		},
		"spec": map[string]any{
			"replicas": float64(1), // same number, another Go type: no change
			"image":    "nginx:2",
			"ports":    []any{map[string]any{"port": int64(8080)}},
			"args":     []any{"a", "b"},
			"null":     nil,
		},
	}
	got := Diff(oldObj, newObj)
	want := []Change{
		{Path: "metadata.labels.tier", New: "batch", HasNew: true},
		{Path: `metadata.labels["app.kubernetes.io/name"]`, Old: "x", New: "y", HasOld: true, HasNew: true},
		{Path: "spec.args[1]", New: "b", HasNew: true},
		{Path: "spec.gone", Old: "bye", HasOld: true},
		{Path: "spec.image", Old: "nginx:1", New: "nginx:2", HasOld: true, HasNew: true},
		{Path: "spec.null", New: nil, HasNew: true},
		{Path: "spec.ports[0].port", Old: int64(80), New: int64(8080), HasOld: true, HasNew: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Diff:\n got %#v\nwant %#v", got, want)
	}
}

func TestDiffIgnoresBookkeeping(t *testing.T) {
	a := map[string]any{"metadata": map[string]any{"resourceVersion": "1", "generation": int64(1), "managedFields": []any{}}}
	b := map[string]any{"metadata": map[string]any{"resourceVersion": "2", "generation": int64(2)}}
	if got := Diff(a, b); len(got) != 0 {
		t.Fatalf("Diff = %v, want no changes", got)
	}
	if got := Diff(a, a); len(got) != 0 {
		t.Fatalf("Diff(a, a) = %v, want no changes", got)
	}
}

func TestDiffTypeChange(t *testing.T) {
	got := Diff(map[string]any{"spec": map[string]any{"x": "1"}}, map[string]any{"spec": map[string]any{"x": map[string]any{"y": int64(1)}}})
	if len(got) != 1 || got[0].Path != "spec.x" || got[0].Old != "1" {
		t.Fatalf("Diff = %#v, want one change of spec.x from \"1\"", got)
	}
}

func TestChangeJSON(t *testing.T) {
	cases := []struct {
		c    Change
		want string
	}{
		{Change{Path: "a", Old: int64(1), New: int64(2), HasOld: true, HasNew: true}, `{"path":"a","old":1,"new":2}`},
		{Change{Path: "a", New: "x", HasNew: true}, `{"path":"a","new":"x"}`},
		{Change{Path: "a", Old: "x", HasOld: true}, `{"path":"a","old":"x"}`},
		{Change{Path: "a", Old: "x", New: nil, HasOld: true, HasNew: true}, `{"path":"a","old":"x","new":null}`},
	}
	for _, tc := range cases {
		b, err := json.Marshal(tc.c)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tc.want {
			t.Errorf("json %+v = %s, want %s", tc.c, b, tc.want)
		}
	}
}

func TestFormatChanges(t *testing.T) {
	got := FormatChanges([]Change{
		{Path: "spec.cronSpec", Old: "0 * * * *", New: "30 2 * * *", HasOld: true, HasNew: true},
		{Path: "metadata.labels.tier", New: "batch", HasNew: true},
		{Path: "spec.color", Old: "blue", HasOld: true},
		{Path: "spec.blob", Old: strings.Repeat("x", 100), New: "y", HasOld: true, HasNew: true},
	}, 12)
	want := `spec.cronSpec: "0 * * * *" → "30 2 * * *"; metadata.labels.tier: <none> → "batch"; spec.color: "blue" → <none>; spec.blob: "xxxxxxxxxxx… → "y"`
	if got != want {
		t.Fatalf("FormatChanges:\n got %s\nwant %s", got, want)
	}
}

// A listener added in front of the list is one change naming it, not a
// change of every element (lists of objects with a name are keyed by it).
func TestDiffListByName(t *testing.T) {
	l := func(name string, port int64) any { return map[string]any{"name": name, "port": port} }
	oldObj := map[string]any{"spec": map[string]any{"listeners": []any{l("http", 80), l("https", 443)}}}
	newObj := map[string]any{"spec": map[string]any{"listeners": []any{l("grpc", 9000), l("http", 80), l("https", 8443)}}}
	got := Diff(oldObj, newObj)
	want := []Change{
		{Path: `spec.listeners[name="grpc"]`, New: l("grpc", 9000), HasNew: true},
		{Path: `spec.listeners[name="https"].port`, Old: int64(443), New: int64(8443), HasOld: true, HasNew: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Diff:\n got %#v\nwant %#v", got, want)
	}
	// Removing one is one change too.
	got = Diff(newObj, oldObj)
	if len(got) != 2 || got[0].Path != `spec.listeners[name="grpc"]` || got[0].HasNew {
		t.Fatalf("Diff of a removed listener = %#v", got)
	}
}

// Conditions have no name: they are keyed by type, so a condition that
// moved in the list but did not change is no change.
func TestDiffConditionsByType(t *testing.T) {
	c := func(typ, status string) any { return map[string]any{"type": typ, "status": status} }
	oldObj := map[string]any{"status": map[string]any{"conditions": []any{c("Accepted", "True"), c("Ready", "Unknown")}}}
	newObj := map[string]any{"status": map[string]any{"conditions": []any{c("Ready", "True"), c("Accepted", "True")}}}
	got := Diff(oldObj, newObj)
	want := []Change{{Path: `status.conditions[type="Ready"].status`, Old: "Unknown", New: "True", HasOld: true, HasNew: true}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Diff:\n got %#v\nwant %#v", got, want)
	}
}

// Lists whose elements share a name, or are not objects, fall back to the
// index.
func TestDiffListWithoutKey(t *testing.T) {
	dup := map[string]any{"name": "a", "v": int64(1)}
	oldObj := map[string]any{"l": []any{dup, dup}}
	newObj := map[string]any{"l": []any{dup, map[string]any{"name": "a", "v": int64(2)}}}
	got := Diff(oldObj, newObj)
	if len(got) != 1 || got[0].Path != "l[1].v" {
		t.Fatalf("Diff = %#v, want l[1].v", got)
	}
}

func TestDiffIgnoresLastApplied(t *testing.T) {
	const key = "kubectl.kubernetes.io/last-applied-configuration"
	oldObj := map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: `{"spec":{"a":1}}`, "team": "x"}}, "spec": map[string]any{"a": int64(1)}}
	newObj := map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: `{"spec":{"a":2}}`, "team": "x"}}, "spec": map[string]any{"a": int64(2)}}
	got := Diff(oldObj, newObj)
	if len(got) != 1 || got[0].Path != "spec.a" {
		t.Fatalf("Diff = %#v, want only spec.a", got)
	}
}

// Two long values that differ late are both shown around their first
// difference, not cut at the same prefix.
func TestFormatChangeLongValues(t *testing.T) {
	prefix := strings.Repeat("p", 80)
	got := FormatChange(Change{Path: "x", Old: prefix + "OLD", New: prefix + "NEW", HasOld: true, HasNew: true}, 20)
	if !strings.Contains(got, "OLD") || !strings.Contains(got, "NEW") {
		t.Fatalf("FormatChange = %s: the difference is cut off", got)
	}
	if !strings.HasPrefix(got, "x: …") {
		t.Fatalf("FormatChange = %s: want the cut marked", got)
	}
}

// --ignore-paths takes the paths the diff prints, and each path it takes
// hides a change the diff reports (given through the flag: quotes as
// typed, commas in brackets kept). Paths no change's path can be at or
// under are refused when the flags are parsed, naming the path, why, and
// the forms the diff prints.
func TestIgnorePathsForms(t *testing.T) {
	oldObj := map[string]any{
		"metadata": map[string]any{
			"labels":      map[string]any{"app.kubernetes.io/name": "a", "tier": "web"},
			"annotations": map[string]any{"a,b": "1", "a<b": "1", "my key": "1"},
		},
		"spec": map[string]any{
			"replicas":   int64(1),
			"args":       []any{"a", "b", "c", "d", "e", "f", "g", "h"},
			"containers": []any{map[string]any{"name": "web", "image": "v1"}},
		},
		"status": map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "False"}}},
	}
	newObj := map[string]any{
		"metadata": map[string]any{
			"labels":      map[string]any{"app.kubernetes.io/name": "b", "tier": "db"},
			"annotations": map[string]any{"a,b": "2", "a<b": "2", "my key": "2"},
		},
		"spec": map[string]any{
			"replicas":   int64(2),
			"args":       []any{"A", "b", "c", "d", "e", "f", "g", "H"},
			"containers": []any{map[string]any{"name": "web", "image": "v2"}},
		},
		"status": map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True"}}},
	}
	changes := Diff(oldObj, newObj)
	accepted := []struct{ given, want string }{
		{"status", "status"},
		{" spec.replicas ", "spec.replicas"},
		{"metadata.labels", "metadata.labels"},
		{`metadata.labels["app.kubernetes.io/name"]`, `metadata.labels["app.kubernetes.io/name"]`},
		{`metadata["labels"].tier`, "metadata.labels.tier"},
		{`metadata.annotations["a,b"]`, `metadata.annotations["a,b"]`},
		{`metadata.annotations["a<b"]`, `metadata.annotations["a\u003cb"]`},
		{`metadata.annotations["my key"]`, `metadata.annotations["my key"]`},
		{"spec.args[0]", "spec.args[0]"},
		{"spec.args[07]", "spec.args[7]"},
		{`spec.containers[name="web"].image`, `spec.containers[name="web"].image`},
		{`status.conditions[type="Ready"]`, `status.conditions[type="Ready"]`},
		{`status.conditions[type="Ready"].status`, `status.conditions[type="Ready"].status`},
	}
	var given, want []string
	for _, a := range accepted {
		given = append(given, a.given)
		want = append(want, a.want)
	}
	c, err := parseArgs([]string{"--resource", "ct", "--ignore-paths", strings.Join(given[:5], ","), "--ignore-paths", strings.Join(given[5:], ",")}, new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.IgnorePaths, want) {
		t.Fatalf("IgnorePaths =\n%q\nwant\n%q", c.IgnorePaths, want)
	}
	for _, p := range c.IgnorePaths {
		if !slices.ContainsFunc(changes, func(ch Change) bool { return underPath(ch.Path, p) }) {
			t.Errorf("%s hides none of the changes %v", p, changes)
		}
	}
	if c, err := parseArgs([]string{"--resource", "ct", "--ignore-paths="}, new(bytes.Buffer)); err != nil || len(c.IgnorePaths) != 0 {
		t.Errorf("--ignore-paths= : %q, %v; want none", c.IgnorePaths, err)
	}

	for _, r := range []struct{ path, why string }{
		{"spec..x", `an empty key after "spec."`},
		{"spec.", `an empty key after "spec."`},
		{".spec", "it starts with a dot"},
		{"status.conditions[Ready]", `[Ready] is neither an index, a quoted key nor a list element matched by name or type with its value quoted (forms: status, spec.replicas, metadata.labels["app.kubernetes.io/name"], spec.args[0], spec.containers[name="web"].image, status.conditions[type="Ready"])`},
		{"status.conditions[type=Ready]", "[type=Ready] is neither an index"},
		{`status.conditions[reason="x"]`, `[reason="x"] is neither an index`},
		{"spec.args[-1]", "[-1] is neither an index"},
		{"spec.args[0]x", `"x" follows "spec.args[0]": after ] comes . or [`},
		{"metadata.labels.app.kubernetes.io/name", `the key "io/name" has characters the diff prints only quoted in brackets (["io/name"])`},
		{"spec.*", `the key "*" has characters`},
		{"spec .x", `the key "spec " has characters`},
		{"[0].x", "it starts with an index"},
		{`metadata.labels["app`, "the quote is not closed"},
		{`metadata.labels["app"`, "the quoted key is not followed by ]"},
	} {
		_, err := parseArgs([]string{"--resource", "ct", "--ignore-paths", "status," + r.path}, new(bytes.Buffer))
		var ue *usageError
		head := fmt.Sprintf("--ignore-paths: %q is not a field path as the diff prints them: ", r.path)
		tail := " (forms: " + fieldPathForms + ")"
		if !errors.As(err, &ue) || !strings.HasPrefix(err.Error(), head) || !strings.Contains(err.Error(), r.why) || !strings.HasSuffix(err.Error(), tail) {
			t.Errorf("--ignore-paths %s: %v\nwant a usage error %s…%s…%s", r.path, err, head, r.why, tail)
		}
	}
}
