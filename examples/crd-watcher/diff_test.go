package main

import (
	"encoding/json"
	"reflect"
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
		{Path: "spec.args", Old: []any{"a"}, New: []any{"a", "b"}, HasOld: true, HasNew: true},
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
