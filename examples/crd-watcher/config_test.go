package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestParseArgsFlags(t *testing.T) {
	c, err := parseArgs([]string{
		"--resource", "ct", "-r", "deployments.apps,pods", "--resource=crontabs.v1.stable.example.com",
		"-n", "a,b", "-n", "c", "-l", "app=web", "--field-selector", "metadata.name=x",
		"-o", "json", "--show-object", "--wait-for-crds", "--duration", "3s", "--metrics-addr", ":0",
	}, new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	wantRes := []ResourceSpec{{Name: "ct"}, {Name: "deployments.apps"}, {Name: "pods"}, {Name: "crontabs.v1.stable.example.com"}}
	if !reflect.DeepEqual(c.Resources, wantRes) {
		t.Errorf("Resources = %v, want %v", c.Resources, wantRes)
	}
	if !reflect.DeepEqual(c.Namespaces, []string{"a", "b", "c"}) {
		t.Errorf("Namespaces = %v", c.Namespaces)
	}
	if c.LabelSelector != "app=web" || c.FieldSelector != "metadata.name=x" || c.Output != "json" ||
		!c.ShowObject || !c.WaitForCRDs || c.Duration != 3*time.Second || c.MetricsAddr != ":0" {
		t.Errorf("parsed config = %+v", c)
	}
}

func TestParseArgsAll(t *testing.T) {
	c, err := parseArgs([]string{"--all", "--group", "apps,core", "--category", "all"}, new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	if !c.All || !reflect.DeepEqual(c.Groups, []string{"apps", ""}) || !reflect.DeepEqual(c.Categories, []string{"all"}) {
		t.Errorf("parsed config = %+v", c)
	}
}

func TestParseArgsErrors(t *testing.T) {
	cases := map[string][]string{
		"unknown flag":         {"--nope"},
		"bad output":           {"-o", "yaml"},
		"all and resource":     {"--all", "--resource", "ct"},
		"group without all":    {"--group", "apps"},
		"demo and kubeconfig":  {"--demo", "--kubeconfig", "/x"},
		"show-object text":     {"--show-object"},
		"positional":           {"ct"},
		"subresource":          {"--resource", "pods/status"},
		"missing config file":  {"--config", "/does/not/exist.yaml"},
		"bad duration":         {"--duration", "soon"},
		"negative duration":    {"--duration", "-1s"},
		"zero request timeout": {"--request-timeout", "0"},
		"shard not i/n":        {"--shard", "half"},
		"shard out of range":   {"--shard", "3/3"},
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := parseArgs(args, new(bytes.Buffer))
			var ue *usageError
			if !errors.As(err, &ue) {
				t.Fatalf("parseArgs(%q) error = %v, want a usage error", args, err)
			}
		})
	}
}

func TestParseArgsHelp(t *testing.T) {
	var buf bytes.Buffer
	c, err := parseArgs([]string{"--help"}, &buf)
	if err != nil || !c.Help {
		t.Fatalf("parseArgs(--help) = %+v, %v", c, err)
	}
	if !strings.Contains(buf.String(), "--wait-for-crds") || !strings.Contains(buf.String(), "Exit codes") {
		t.Fatalf("help text lacks flags or exit codes:\n%s", buf.String())
	}
}

// --help lists every flag once, under a heading, events and status
// outputs named.
func TestHelpGroupsEveryFlag(t *testing.T) {
	fs := newFlagSet(&Config{}, io.Discard)
	inGroups := map[string]int{}
	for _, g := range flagGroups {
		for _, n := range g.names {
			inGroups[n]++
			if fs.Lookup(n) == nil {
				t.Errorf("group %q names --%s, which is not a flag", g.title, n)
			}
		}
	}
	var buf bytes.Buffer
	if _, err := parseArgs([]string{"--help"}, &buf); err != nil {
		t.Fatal(err)
	}
	help := buf.String()
	fs.VisitAll(func(f *pflag.Flag) {
		if inGroups[f.Name] != 1 {
			t.Errorf("--%s is in %d groups, want 1", f.Name, inGroups[f.Name])
		}
		if n := strings.Count(help, "--"+f.Name+" ") + strings.Count(help, "--"+f.Name+"\n"); n < 1 {
			t.Errorf("--help does not list --%s", f.Name)
		}
	})
	if strings.Contains(help, "Other flags:") {
		t.Errorf("--help has ungrouped flags:\n%s", help)
	}
	for _, want := range []string{"Cluster:", "Resources to watch:", "Namespaces, selectors and shards:", "Output:", "Access, restarts and operation:", "Events go to stdout", "go to stderr"} {
		if !strings.Contains(help, want) {
			t.Errorf("--help lacks %q", want)
		}
	}
	if i, j := strings.Index(help, "--resource deploy"), strings.Index(help, "demo mode"); i < 0 || j < 0 || i > j {
		t.Errorf("--help does not lead with a real-cluster command before the demo:\n%s", help[:min(len(help), 600)])
	}
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "watch.yaml")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConfigFile(t *testing.T) {
	p := writeFile(t, `
resources:
  - ct
  - name: deployments.apps
    namespaces: [team-a, team-b]
    labelSelector: tier=web
    fieldSelector: metadata.name!=x
namespaces: [default]
labelSelector: app=demo
waitForCRDs: true
output: json
showObject: true
metricsAddr: 127.0.0.1:9090
duration: 1m
`)
	c, err := parseArgs([]string{"--config", p}, new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	wantRes := []ResourceSpec{
		{Name: "ct"},
		{Name: "deployments.apps", Namespaces: []string{"team-a", "team-b"}, LabelSelector: "tier=web", FieldSelector: "metadata.name!=x"},
	}
	if !reflect.DeepEqual(c.Resources, wantRes) {
		t.Errorf("Resources = %+v, want %+v", c.Resources, wantRes)
	}
	if !reflect.DeepEqual(c.Namespaces, []string{"default"}) || c.LabelSelector != "app=demo" || !c.WaitForCRDs ||
		c.Output != "json" || !c.ShowObject || c.MetricsAddr != "127.0.0.1:9090" || c.Duration != time.Minute {
		t.Errorf("config = %+v", c)
	}

	// Flags given on the command line win; --resource replaces the file's list.
	c, err = parseArgs([]string{"--config", p, "-o", "text", "--show-object=false", "-r", "pods", "-n", "x"}, new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	if c.Output != "text" || c.ShowObject || !reflect.DeepEqual(c.Resources, []ResourceSpec{{Name: "pods"}}) ||
		!reflect.DeepEqual(c.Namespaces, []string{"x"}) || c.LabelSelector != "app=demo" {
		t.Errorf("config with flags = %+v", c)
	}
}

func TestConfigFileErrors(t *testing.T) {
	for name, content := range map[string]string{
		"unknown key":          "resourcez: [ct]\n",
		"unknown resource key": "resources:\n  - name: ct\n    namespace: x\n",
		"bad duration":         "duration: soon\n",
		"not yaml":             "resources: [ct\n",
		"bad output":           "output: xml\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parseArgs([]string{"--config", writeFile(t, content)}, new(bytes.Buffer))
			var ue *usageError
			if !errors.As(err, &ue) {
				t.Fatalf("error = %v, want a usage error", err)
			}
		})
	}
}

func TestNoCluster(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	none := func(string) bool { return false }
	homeConfig := func(p string) bool { return p == "/home/u/.kube/config" }
	cases := []struct {
		name   string
		cfg    Config
		getenv func(string) string
		exists func(string) bool
		want   bool
	}{
		{"nothing configured", Config{}, env("HOME", "/home/u"), none, true},
		{"no HOME", Config{}, env(), none, true},
		{"--demo wins over everything", Config{Demo: true}, env("KUBECONFIG", "/k", "HOME", "/home/u"), homeConfig, true},
		{"--kubeconfig", Config{Kubeconfig: "/k"}, env("HOME", "/home/u"), none, false},
		{"--context", Config{Context: "prod"}, env("HOME", "/home/u"), none, false},
		{"KUBECONFIG", Config{}, env("KUBECONFIG", "/k", "HOME", "/home/u"), none, false},
		{"in cluster", Config{}, env("KUBERNETES_SERVICE_HOST", "10.0.0.1", "KUBERNETES_SERVICE_PORT", "443", "HOME", "/"), none, false},
		{"half in-cluster env", Config{}, env("KUBERNETES_SERVICE_HOST", "10.0.0.1", "HOME", "/"), none, true},
		{"~/.kube/config exists", Config{}, env("HOME", "/home/u"), homeConfig, false},
	}
	for _, tc := range cases {
		if got := noCluster(&tc.cfg, tc.getenv, tc.exists); got != tc.want {
			t.Errorf("%s: noCluster = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestParseQualifiedGVR(t *testing.T) {
	ok := map[string]schema.GroupVersionResource{
		"crontabs.v1.stable.example.com":        {Group: "stable.example.com", Version: "v1", Resource: "crontabs"},
		"widgets.v1beta2.demo.example.com":      {Group: "demo.example.com", Version: "v1beta2", Resource: "widgets"},
		"gateways.v1.gateway.networking.k8s.io": {Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gateways"},
	}
	for in, want := range ok {
		got, good := parseQualifiedGVR(in)
		if !good || got != want {
			t.Errorf("parseQualifiedGVR(%q) = %v, %v; want %v", in, got, good, want)
		}
	}
	for _, in := range []string{"ct", "crontabs", "crontabs.stable.example.com", "deployments.apps", "pods.v1", "CronTab.v1.stable.example.com", ".v1.x", "crontabs.v1."} {
		if got, good := parseQualifiedGVR(in); good {
			t.Errorf("parseQualifiedGVR(%q) = %v, want not qualified", in, got)
		}
	}
}
