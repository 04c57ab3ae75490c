package main

// Unit tests of the watcher's smaller operator findings: flag values
// checked before the API server is contacted, an unknown --category
// under --wait-for-crds, the Terminating mark, --ignore-paths,
// informerkit_build_info and folded lists in the config file.

import (
	"bytes"
	"context"
	"errors"
	"net"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Flag values are checked when they are parsed: a bad one is a usage
// error before anything talks to a server.
func TestParseArgsRejectsBadValuesEarly(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"metrics addr without port", []string{"--resource", "ct", "--metrics-addr", "9090x"}, `--metrics-addr "9090x": want host:port or :port, e.g. :9090 or 127.0.0.1:0`},
		{"metrics port not a number", []string{"--resource", "ct", "--metrics-addr", ":90x"}, `port "90x" is not a number from 0 to 65535`},
		{"metrics port too large", []string{"--resource", "ct", "--metrics-addr", ":99999"}, `port "99999"`},
		{"metrics host", []string{"--resource", "ct", "--metrics-addr", "local_host!:9090"}, `host "local_host!" is neither an IP address nor a host name`},
		{"negative progress", []string{"--resource", "ct", "--progress-interval", "-1s"}, "--progress-interval must not be negative"},
		{"label selector", []string{"--resource", "ct", "-l", "app in (web"}, `invalid label selector "app in (web"`},
		{"field selector", []string{"--resource", "ct", "--field-selector", "metadata.name"}, `invalid field selector "metadata.name"`},
		{"namespace", []string{"--resource", "ct", "-n", "Team_A"}, `-n: "Team_A" is not a namespace name`},
		{"name with spaces", []string{"--resource", "wdg - cm"}, `resource "wdg - cm": a resource name has no spaces`},
		{"ignore path", []string{"--resource", "ct", "--ignore-paths", "status,,spec"}, `--ignore-paths: "" is not a field path`},
		{"ignore path with space", []string{"--resource", "ct", "--ignore-paths", "spec .x"}, `--ignore-paths: "spec .x" is not a field path`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseArgs(tc.args, new(bytes.Buffer))
			var ue *usageError
			if !errors.As(err, &ue) {
				t.Fatalf("parseArgs(%q) error = %v, want a usage error", tc.args, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q lacks %q", err, tc.want)
			}
		})
	}
	for _, addr := range []string{":9090", "127.0.0.1:0", "localhost:9090", "[::1]:0", "0.0.0.0:8080"} {
		if _, err := parseArgs([]string{"--resource", "ct", "--metrics-addr", addr}, new(bytes.Buffer)); err != nil {
			t.Errorf("--metrics-addr %s: %v", addr, err)
		}
	}
	c, err := parseArgs([]string{"--resource", "ct", "--ignore-paths", "status, metadata.labels", "-n", "team-a,"}, new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.IgnorePaths, "|") != "status|metadata.labels" {
		t.Errorf("IgnorePaths = %q", c.IgnorePaths)
	}
	// A per-resource selector or namespace of the config file too.
	p := writeFile(t, "resources:\n  - name: ct\n    labelSelector: \"a in (b\"\n")
	if _, err := parseArgs([]string{"--config", p}, new(bytes.Buffer)); err == nil || !strings.Contains(err.Error(), `resource "ct": invalid label selector`) {
		t.Errorf("a resource's bad selector: %v", err)
	}
}

// A metrics address that cannot be listened on is exit 2 before the API
// server is contacted: here the server accepts connections and never
// answers, and the watcher must not even try it.
func TestRunMetricsAddrBeforeContact(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			select {
			case accepted <- struct{}{}:
			default:
			}
		}
	}()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["x"] = &clientcmdapi.Cluster{Server: "https://" + silent.Addr().String(), InsecureSkipTLSVerify: true}
	kc.AuthInfos["x"] = &clientcmdapi.AuthInfo{Token: "t"}
	kc.Contexts["x"] = &clientcmdapi.Context{Cluster: "x", AuthInfo: "x"}
	kc.CurrentContext = "x"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ addr, want string }{
		{busy.Addr().String(), "crd-watcher: --metrics-addr: listen tcp " + busy.Addr().String()},
		{"9090x", `crd-watcher: --metrics-addr "9090x": want host:port`},
	} {
		var stdout, stderr bytes.Buffer
		start := time.Now()
		code := run(context.Background(), []string{"--kubeconfig", path, "--resource", "pods", "--metrics-addr", tc.addr, "--request-timeout", "20s"}, &stdout, &stderr)
		if code != exitUsage {
			t.Errorf("--metrics-addr %s: exit %d, want %d\n%s", tc.addr, code, exitUsage, stderr.String())
		}
		if !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("--metrics-addr %s: stderr lacks %q:\n%s", tc.addr, tc.want, stderr.String())
		}
		if strings.Contains(stderr.String(), "connecting") || time.Since(start) > 5*time.Second {
			t.Errorf("--metrics-addr %s: the watcher connected first (%s):\n%s", tc.addr, time.Since(start), stderr.String())
		}
	}
	select {
	case <-accepted:
		t.Error("the watcher contacted the API server before checking --metrics-addr")
	default:
	}
}

// --all with a --group or --category no served resource has: exit 2
// without --wait-for-crds (also when another one matches), one line
// saying what is waited for with it.
func TestCheckSelection(t *testing.T) {
	var notes []string
	note := func(format string, args ...any) { notes = append(notes, format) }
	err := checkSelection(nil, []string{"gatway-api"}, 0, false, servedForTest(), note)
	var ue *usageError
	if !errors.As(err, &ue) || err.Error() != `nothing to watch: --category "gatway-api": the server knows no such category; did you mean gateway-api?` {
		t.Errorf("typo, nothing matched: %v", err)
	}
	err = checkSelection(nil, []string{"all", "gatway-api"}, 1, false, servedForTest(), note)
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), `--all: --category "gatway-api": the server knows no such category; did you mean gateway-api?`) {
		t.Errorf("typo beside a known category: %v", err)
	}
	if len(notes) != 0 {
		t.Errorf("notes without --wait-for-crds: %q", notes)
	}
	if err := checkSelection(nil, []string{"all"}, 1, false, servedForTest(), note); err != nil || len(notes) != 0 {
		t.Errorf("known category: %v, notes %q", err, notes)
	}

	var lines []string
	info := func(format string, args ...any) {
		var b bytes.Buffer
		p := newPrinter(&b, &b, false, false)
		p.info(format, args...)
		lines = append(lines, strings.TrimSuffix(b.String(), "\n"))
	}
	if err := checkSelection(nil, []string{"gatway-api"}, 0, true, servedForTest(), info); err != nil {
		t.Fatalf("--wait-for-crds: %v", err)
	}
	want := `waiting (--wait-for-crds): --category "gatway-api": the server knows no such category; did you mean gateway-api?; no served resource has it yet, resources that join it are watched when they are served`
	if len(lines) != 1 || lines[0] != want {
		t.Errorf("--wait-for-crds lines: %q\nwant one: %s", lines, want)
	}
	lines = nil
	if err := checkSelection([]string{"gateway.networking.k8s.io"}, []string{"all"}, 0, true, servedForTest(), info); err != nil {
		t.Fatal(err)
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "no served resource matches --group gateway.networking.k8s.io --category all yet") {
		t.Errorf("known group and category matching nothing together, waiting: %q", lines)
	}
}

// A delete held by finalizers is one Terminating mark naming them, not
// two metadata changes; a finalizer released later says what still holds
// the object.
func TestUpdateTerminating(t *testing.T) {
	live := map[string]any{
		"metadata": map[string]any{"name": "a", "resourceVersion": "1", "finalizers": []any{"example.com/hold", "example.com/audit"}},
		"spec":     map[string]any{"size": int64(3)},
	}
	deleting := map[string]any{
		"metadata": map[string]any{"name": "a", "resourceVersion": "2", "finalizers": []any{"example.com/hold", "example.com/audit"},
			"deletionTimestamp": "2026-12-02T05:00:00Z", "deletionGracePeriodSeconds": int64(0)},
		"spec": map[string]any{"size": int64(3)},
	}
	u := diffUpdate(live, deleting, nil)
	if !u.Terminating || strings.Join(u.Finalizers, ",") != "example.com/hold,example.com/audit" {
		t.Fatalf("update = %+v, want Terminating with both finalizers", u)
	}
	if got := u.text(inlineChanges, maxValueLen); got != "Terminating (finalizers: example.com/hold, example.com/audit)" {
		t.Errorf("text = %q", got)
	}
	if len(u.Changes) != 2 { // JSON keeps the diff itself
		t.Errorf("changes = %v, want deletionTimestamp and deletionGracePeriodSeconds", u.Changes)
	}

	released := map[string]any{
		"metadata": map[string]any{"name": "a", "resourceVersion": "3", "finalizers": []any{"example.com/audit"},
			"deletionTimestamp": "2026-12-02T05:00:00Z", "deletionGracePeriodSeconds": int64(0)},
		"spec":   map[string]any{"size": int64(3)},
		"status": map[string]any{"phase": "Cleaning"},
	}
	u = diffUpdate(deleting, released, nil)
	if got := u.text(inlineChanges, maxValueLen); got != `Terminating (finalizers: example.com/audit); status: <none> → {"phase":"Cleaning"}` {
		t.Errorf("finalizer released: %q", got)
	}
	// A pod in its grace period, no finalizers.
	pod := map[string]any{"metadata": map[string]any{"name": "p"}}
	podDeleting := map[string]any{"metadata": map[string]any{"name": "p", "deletionTimestamp": "2026-12-02T05:00:30Z", "deletionGracePeriodSeconds": int64(30)}}
	if got := diffUpdate(pod, podDeleting, nil).text(inlineChanges, maxValueLen); got != "Terminating (grace period 30s)" {
		t.Errorf("pod: %q", got)
	}
	// Other updates of an object being deleted are plain diffs.
	more := map[string]any{
		"metadata": map[string]any{"name": "a", "resourceVersion": "4", "finalizers": []any{"example.com/audit"},
			"deletionTimestamp": "2026-12-02T05:00:00Z", "deletionGracePeriodSeconds": int64(0)},
		"spec":   map[string]any{"size": int64(3)},
		"status": map[string]any{"phase": "Done"},
	}
	if u := diffUpdate(released, more, nil); u.Terminating || u.text(inlineChanges, maxValueLen) != `status.phase: "Cleaning" → "Done"` {
		t.Errorf("status update while deleting: %+v %q", u, u.text(inlineChanges, maxValueLen))
	}
}

// --ignore-paths: changes at or under the paths are counted, not shown;
// an update with only those is one short line.
func TestUpdateIgnorePaths(t *testing.T) {
	oldObj := map[string]any{
		"metadata": map[string]any{"name": "a", "labels": map[string]any{"x": "1"}},
		"spec":     map[string]any{"template": "t1", "templateRef": "r1"},
		"status": map[string]any{"replicas": int64(1), "ready": int64(0), "observedGeneration": int64(1),
			"conditions": []any{map[string]any{"type": "Ready", "status": "False"}}},
	}
	newObj := map[string]any{
		"metadata": map[string]any{"name": "a", "labels": map[string]any{"x": "2"}},
		"spec":     map[string]any{"template": "t2", "templateRef": "r2"},
		"status": map[string]any{"replicas": int64(2), "ready": int64(2), "observedGeneration": int64(2),
			"conditions": []any{map[string]any{"type": "Ready", "status": "True"}}},
	}
	u := diffUpdate(oldObj, newObj, []string{"status", "spec.template"})
	if u.Ignored != 5 || len(u.Changes) != 2 {
		t.Fatalf("update = %+v, want 5 ignored (status, spec.template), 2 shown", u)
	}
	if got := u.text(inlineChanges, maxValueLen); got != `metadata.labels.x: "1" → "2"; spec.templateRef: "r1" → "r2" (+5 changes under --ignore-paths)` {
		t.Errorf("text = %q", got)
	}
	statusOnly := map[string]any{"metadata": oldObj["metadata"], "spec": oldObj["spec"], "status": newObj["status"]}
	if got := diffUpdate(oldObj, statusOnly, []string{"status"}).text(inlineChanges, maxValueLen); got != "(4 changes under --ignore-paths)" {
		t.Errorf("status-only update: %q", got)
	}
	if got := diffUpdate(oldObj, statusOnly, nil).text(inlineChanges, maxValueLen); !strings.HasPrefix(got, "4 changes:\n    status.conditions[type=\"Ready\"].status") {
		t.Errorf("no --ignore-paths (the default): %q", got)
	}
	if got := diffUpdate(oldObj, oldObj, []string{"status"}).text(inlineChanges, maxValueLen); got != "(no change)" {
		t.Errorf("no change: %q", got)
	}
	for path, prefix := range map[string]string{"status": "status", "status.a": "status", `status.conditions[type="Ready"].status`: "status.conditions", `metadata.labels["app.kubernetes.io/name"]`: "metadata.labels"} {
		if !underPath(path, prefix) {
			t.Errorf("underPath(%q, %q) = false", path, prefix)
		}
	}
	for path, prefix := range map[string]string{"statuses": "status", "spec.templateRef": "spec.template", "spec": "spec.x"} {
		if underPath(path, prefix) {
			t.Errorf("underPath(%q, %q) = true", path, prefix)
		}
	}
}

// informerkit_build_info's labels come from the binary's build
// information.
func TestBuildLabels(t *testing.T) {
	bi := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/informerkit/informerkit/examples/crd-watcher", Version: "v0.3.0"},
		Deps: []*debug.Module{
			{Path: "k8s.io/client-go", Version: "v0.0.0", Replace: &debug.Module{Path: "k8s.io/client-go", Version: "v0.37.2"}},
			{Path: "github.com/informerkit/informerkit", Version: "v0.0.0", Replace: &debug.Module{Path: "../.."}},
		},
	}
	want := buildLabels{Version: "v0.3.0", Informerkit: "(devel)", GoVersion: "go1.26.8", ClientGo: "v0.37.2"}
	if got := buildLabelsOf(bi, "go0"); got != want {
		t.Errorf("buildLabelsOf = %+v, want %+v", got, want)
	}
	bi.Main.Version = ""
	if got := buildLabelsOf(bi, "go0"); got.Version != "(devel)" {
		t.Errorf("no main version: %+v", got)
	}
	if got := buildLabelsOf(nil, "go0"); got != (buildLabels{Version: "(devel)", Informerkit: "unknown", GoVersion: "go0", ClientGo: "unknown"}) {
		t.Errorf("no build information: %+v", got)
	}
}

// An indentation slip that folds list items into one value is a config
// error at the slipped line, with a hint, not an unknown resource later.
func TestConfigFileFoldedList(t *testing.T) {
	cases := []struct {
		name, content string
		line          int
		key, want     string
	}{
		{"resources", "# watch\nresources:\n  - wdg\n   - cm\n", 4, "resources[0]", `"wdg - cm" reads as one value: this "- " is indented deeper than the one on line 3`},
		{"three items", "resources:\n  - wdg\n    - cm\n    - pods\n", 3, "resources[0]", `"wdg - cm - pods" reads as one value`},
		{"namespaces", "resources: [ct]\nnamespaces:\n- a\n  - b\n", 4, "namespaces[0]", "start every \"- \" of a list in the same column"},
		{"in a resource", "resources:\n  - name: ct\n    namespaces:\n      - a\n       - b\n", 5, "resources[0].namespaces[0]", `"a - b" reads as one value`},
		{"mapping for a list", "resources:\n  name: ct\n", 2, "resources", `want a list of resources, got a mapping: a list item starts with "- "`},
		{"syntax", "resources:\n  - name: ct\n     namespaces: [a]\n", 3, "", "mapping values are not allowed in this context (check the indentation"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := parseConfigFile("watch.yaml", []byte(tc.content))
			var ce *ConfigFileError
			if !errors.As(err, &ce) {
				t.Fatalf("error = %v, want a *ConfigFileError", err)
			}
			if ce.Line != tc.line || ce.Key != tc.key || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q at line %d key %q, want line %d key %q containing %q", err, ce.Line, ce.Key, tc.line, tc.key, tc.want)
			}
		})
	}
	// Meant so: a quoted value, or one on one line, is left alone.
	for _, content := range []string{"labelSelector: \"a - b\"\n", "resources:\n  - \"wdg\n    - cm\"\n", "labelSelector: x - y\n"} {
		if _, _, err := parseConfigFile("watch.yaml", []byte(content)); err != nil {
			t.Errorf("parseConfigFile(%q): %v", content, err)
		}
	}
	c, set, err := parseConfigFile("watch.yaml", []byte("ignorePaths: [status, metadata.labels]\n"))
	if err != nil || !set["ignorePaths"] || strings.Join(c.IgnorePaths, ",") != "status,metadata.labels" {
		t.Errorf("ignorePaths: %+v %v %v", c, set, err)
	}
}
