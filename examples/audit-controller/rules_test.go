package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestRules(t *testing.T) {
	rules, err := compileRules(Rules{
		RequiredLabels:      []string{"owner"},
		RequiredAnnotations: []string{"description"},
		CEL: []RuleSpec{
			{Name: "small", Expression: "!has(object.spec.replicas) || object.spec.replicas <= 3", Message: "too many replicas"},
			{Name: "named", Expression: "object.spec.image.startsWith('registry.example.com/')"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	obj := func(labels, annotations map[string]string, spec map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "x"}, "spec": spec}}
		u.SetLabels(labels)
		u.SetAnnotations(annotations)
		return u
	}
	for _, tc := range []struct {
		name string
		u    *unstructured.Unstructured
		want []string // rule names violated
	}{
		{"compliant", obj(map[string]string{"owner": "a"}, map[string]string{"description": "d"}, map[string]any{"replicas": int64(2), "image": "registry.example.com/app"}), nil},
		{"everything wrong", obj(nil, nil, map[string]any{"replicas": int64(9), "image": "docker.io/app"}), []string{"annotation:description", "label:owner", "named", "small"}},
		{"missing field the rule needs", obj(map[string]string{"owner": "a"}, map[string]string{"description": "d"}, map[string]any{}), []string{"named"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, v := range rules.check(tc.u) {
				got = append(got, v.Rule)
				if v.Message == "" {
					t.Errorf("%s: no message", v.Rule)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("violations %v, want %v", got, tc.want)
			}
		})
	}
}

func TestBadRulesAreUsageErrors(t *testing.T) {
	for _, r := range []Rules{
		{CEL: []RuleSpec{{Name: "broken", Expression: "object.("}}},
		{CEL: []RuleSpec{{Name: "not-bool", Expression: "1 + 2"}}},
		{CEL: []RuleSpec{{Name: "twice", Expression: "true"}, {Name: "twice", Expression: "true"}}},
	} {
		_, err := compileRules(r)
		var ue *usageError
		if !errors.As(err, &ue) {
			t.Errorf("%+v: %v, want a usage error", r, err)
		}
	}
}

// TestExitCodes: bad flags and rules exit 2 before any cluster is used.
func TestExitCodes(t *testing.T) {
	rulesFile := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rulesFile, []byte("requiredLabels: [owner]\nunknownKey: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--kubeconfig", "/nonexistent", "--category", "x", "--rule", "bad=object.("},
		{"--kubeconfig", "/nonexistent", "--category", "x", "--rule", "no-equals-sign"},
		{"--kubeconfig", "/nonexistent", "--category", "x"},                       // no rules
		{"--kubeconfig", "/nonexistent", "--require-label", "owner"},              // nothing to audit
		{"--kubeconfig", "/nonexistent", "--category", "x", "--rules", rulesFile}, // unknown key
		{"--kubeconfig", "/nonexistent", "--demo", "--category", "x"},             // demo with a kubeconfig
		{"--kubeconfig", "/nonexistent", "--category", "x", "--require-label", "o", "--workers", "0"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "audit-controller:") {
			t.Errorf("%q: exit %d, stderr %q; want %d with a message", args, code, stderr.String(), exitUsage)
		}
	}
}
