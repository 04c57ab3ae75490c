package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

// Every config file mistake names the file, the line and the key, in the
// file's own terms (no Go struct or JSON wording), with the closest known
// key for a misspelt one.
func TestConfigFileErrorMessages(t *testing.T) {
	cases := []struct {
		name, content string
		line          int
		key           string
		want          string
	}{
		{"misspelt key", "resources: [ct]\nnamespace: [default]\n", 2, "namespace", `unknown key; did you mean "namespaces"?`},
		{"case", "resources: [ct]\nLabelSelector: a=b\n", 2, "LabelSelector", `unknown key; did you mean "labelSelector"?`},
		{"far off key", "resources: [ct]\nzzz: 1\n", 2, "zzz", "unknown key (known keys: accessCheck, all, cacheDir, cacheSecrets, categories,"},
		{"string for a list", "resources: [ct]\nnamespaces: default\n", 2, "namespaces", `want a list of strings, e.g. namespaces: [default], got "default"`},
		{"number in a list", "namespaces:\n  - a\n  - {x: 1}\n", 3, "namespaces[1]", "want a string, got a mapping"},
		{"bad bool", "all: sometimes\n", 1, "all", `want true or false, got "sometimes"`},
		{"bad duration", "resources: [ct]\n\nduration: soon\n", 3, "duration", `want a duration such as "30s" or "5m", got "soon"`},
		{"twice", "output: json\noutput: text\n", 2, "output", "given twice (first on line 1)"},
		{"resource key", "resources:\n  - ct\n  - name: pods\n    namespace: x\n", 4, "resources[1].namespace", `unknown key; did you mean "namespaces"?`},
		{"resource without name", "resources:\n  - namespaces: [a]\n", 2, "resources[0]", "a resource without a name"},
		{"resource list", "resources: ct\n", 1, "resources", "want a list of resources, e.g. resources: [ct]"},
		{"not yaml", "resources: [ct\n", 1, "", "did not find expected ',' or ']'"},
		{"not a mapping", "- ct\n", 1, "", "want a mapping of keys"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := parseConfigFile("watch.yaml", []byte(tc.content))
			var ce *ConfigFileError
			if !errors.As(err, &ce) {
				t.Fatalf("error = %v, want a *ConfigFileError", err)
			}
			if ce.File != "watch.yaml" || ce.Line != tc.line || ce.Key != tc.key {
				t.Errorf("error at %s:%d key %q, want line %d key %q (%v)", ce.File, ce.Line, ce.Key, tc.line, tc.key, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q lacks %q", err, tc.want)
			}
			for _, jargon := range []string{"JSON", "Go struct", "unmarshal"} {
				if strings.Contains(err.Error(), jargon) {
					t.Errorf("error %q speaks of %s", err, jargon)
				}
			}
		})
	}
}

// parseArgs reports the file's mistake as a usage error starting with the
// file name and line, the way compilers do.
func TestConfigFileErrorThroughParseArgs(t *testing.T) {
	p := writeFile(t, "resources: [ct]\nnamespace: [default]\n")
	_, err := parseArgs([]string{"--config", p}, new(bytes.Buffer))
	var ue *usageError
	if !errors.As(err, &ue) {
		t.Fatalf("error = %v, want a usage error", err)
	}
	if want := "config file " + p + `:2: namespace: unknown key; did you mean "namespaces"?`; err.Error() != want {
		t.Fatalf("error = %q, want %q", err, want)
	}
}

func TestConfigFileNewKeys(t *testing.T) {
	c, set, err := parseConfigFile("w.yaml", []byte("requestTimeout: 3s\nexitOnFailure: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.RequestTimeout != 3*time.Second || !c.ExitOnFailure || !set["requestTimeout"] || !set["exitOnFailure"] || len(set) != 2 {
		t.Fatalf("config = %+v, set %v", c, set)
	}
	// Every file key has a flag that overrides it.
	fs := newFlagSet(&Config{}, new(bytes.Buffer))
	for key := range fileKeys {
		if fs.Lookup(fileKeyFlags[key]) == nil {
			t.Errorf("config file key %q has no flag", key)
		}
	}
	// An empty file (or one with only comments) sets nothing.
	for _, content := range []string{"", "# nothing\n", "---\n"} {
		if _, set, err := parseConfigFile("w.yaml", []byte(content)); err != nil || len(set) != 0 {
			t.Errorf("parseConfigFile(%q) = %v, %v", content, set, err)
		}
	}
}

func TestSuggest(t *testing.T) {
	cands := []candidate{
		{Label: "gateways (gtw)", Names: []string{"gateways", "gateway", "gtw", "Gateway"}},
		{Label: "gatewayclasses (gc)", Names: []string{"gatewayclasses", "gatewayclass", "gc", "GatewayClass"}},
		{Label: "pods (po)", Names: []string{"pods", "pod", "po", "Pod"}},
	}
	for typed, want := range map[string][]string{
		"gatewayz":      {"gateways (gtw)"},
		"gatway":        {"gateways (gtw)"},
		"gatewayclass2": {"gatewayclasses (gc)"},
		"pds":           {"pods (po)"},
		"xyzzy":         nil,
	} {
		got := suggest(typed, cands, 3)
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("suggest(%q) = %q, want %q", typed, got, want)
		}
	}
	if got := didYouMean([]string{"a", "b"}); got != "; did you mean one of: a, b?" {
		t.Errorf("didYouMean = %q", got)
	}
}
