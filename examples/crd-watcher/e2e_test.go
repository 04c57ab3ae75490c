package main

// End-to-end tests: build the crd-watcher binary (with -race: that build
// cache is the warm one) and run it — in demo mode, and against a control
// plane started here through a kubeconfig file.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/informerkit/informerkit/test/controlplane"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	tmpRoot   string

	cpOnce sync.Once
	cp     *controlplane.ControlPlane
	cpErr  error
)

func TestMain(m *testing.M) {
	controlplane.SideBySide()
	if os.Getenv("CONTROLPLANE_VERBOSE") == "" {
		setupLogging(false, io.Discard) // the test's own control plane logs through klog
	}
	var err error
	tmpRoot, err = os.MkdirTemp("", "crd-watcher-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if cp != nil {
		cp.Stop()
	}
	_ = os.RemoveAll(tmpRoot)
	os.Exit(code)
}

// watcherBinary builds the binary once per test process.
func watcherBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test builds the binary; skipped with -short")
	}
	buildOnce.Do(func() {
		binPath = filepath.Join(tmpRoot, "crd-watcher")
		start := time.Now()
		cmd := exec.Command("go", "build", "-race", "-o", binPath, ".")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build -race: %v\n%s", err, out)
		}
		t.Logf("built %s in %s", binPath, time.Since(start).Round(time.Second))
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// controlPlane starts one control plane for the tests that need one.
func controlPlane(t *testing.T) *controlplane.ControlPlane {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test starts a control plane; skipped with -short")
	}
	cpOnce.Do(func() {
		cp, cpErr = controlplane.Start(context.Background(), controlplane.Options{})
	})
	if cpErr != nil {
		t.Fatalf("control plane: %v", cpErr)
	}
	return cp
}

var runSeq atomic.Int64 // suffixes of perRun

// perRun returns name with a suffix no other call in this process gets:
// -count=N runs every test N times against the one control plane, so the
// objects, namespaces and CRDs a run leaves must not meet the next run's.
func perRun(name string) string { return fmt.Sprintf("%s-%d", name, runSeq.Add(1)) }

// proc is a running crd-watcher whose output is captured line by line.
type proc struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	stdout []string
	stderr []string
	notify chan struct{}
	done   chan struct{}
	exit   int
}

// cleanEnv is the environment without anything that points at a cluster,
// with HOME in an empty directory: the no-cluster rule holds.
func cleanEnv(t *testing.T) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "HOME":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+t.TempDir())
}

func startWatcher(t *testing.T, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(watcherBinary(t), args...), notify: make(chan struct{}, 1), done: make(chan struct{})}
	p.cmd.Env = cleanEnv(t)
	outPipe, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errPipe, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var readers sync.WaitGroup
	read := func(r io.Reader, dst *[]string) {
		defer readers.Done()
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			p.mu.Lock()
			*dst = append(*dst, sc.Text())
			p.mu.Unlock()
			select {
			case p.notify <- struct{}{}:
			default:
			}
		}
	}
	readers.Add(2)
	go read(outPipe, &p.stdout)
	go read(errPipe, &p.stderr)
	go func() {
		readers.Wait()
		err := p.cmd.Wait()
		p.exit = p.cmd.ProcessState.ExitCode()
		_ = err
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

func (p *proc) lines() (stdout, stderr []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.stdout...), append([]string(nil), p.stderr...)
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.exit
	case <-time.After(timeout):
		out, errs := p.lines()
		t.Fatalf("crd-watcher did not exit within %s\nstdout:\n%s\nstderr:\n%s", timeout, strings.Join(out, "\n"), strings.Join(errs, "\n"))
		return -1
	}
}

// waitStderr waits for a stderr line matching re and returns its submatches.
func (p *proc) waitStderr(t *testing.T, re *regexp.Regexp, timeout time.Duration) []string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		_, errs := p.lines()
		for _, l := range errs {
			if m := re.FindStringSubmatch(l); m != nil {
				return m
			}
		}
		select {
		case <-p.notify:
		case <-p.done:
			_, errs = p.lines()
			for _, l := range errs {
				if m := re.FindStringSubmatch(l); m != nil {
					return m
				}
			}
			t.Fatalf("crd-watcher exited (%d) before printing %v; stderr:\n%s", p.exit, re, strings.Join(errs, "\n"))
		case <-deadline:
			t.Fatalf("no stderr line matching %v within %s; stderr:\n%s", re, timeout, strings.Join(errs, "\n"))
		}
	}
}

type record struct {
	jsonEvent
	State string `json:"state"`
	Final bool   `json:"final"`
}

func parseJSONLines(t *testing.T, lines []string) []record {
	t.Helper()
	var recs []record
	for _, l := range lines {
		var r record
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("stdout line is not JSON: %q: %v", l, err)
		}
		if r.Time == "" || r.Type == "" {
			t.Fatalf("JSON line without time or type: %q", l)
		}
		recs = append(recs, r)
	}
	return recs
}

func has(recs []record, typ, resource, name string) bool {
	for _, r := range recs {
		if r.Type == typ && r.Resource == resource && (name == "" || r.Name == name) {
			return true
		}
	}
	return false
}

func TestE2EHelpDocumentsEveryFlag(t *testing.T) {
	controlplane.Parallel(t)
	p := startWatcher(t, "--help")
	if code := p.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("--help exit code %d", code)
	}
	out, _ := p.lines()
	help := strings.Join(out, "\n")
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	fs := newFlagSet(&Config{}, io.Discard)
	n := 0
	fs.VisitAll(func(f *pflag.Flag) {
		n++
		if !strings.Contains(help, "--"+f.Name) {
			t.Errorf("--help does not document --%s", f.Name)
		}
		if !strings.Contains(string(readme), "--"+f.Name) {
			t.Errorf("README.md does not document --%s", f.Name)
		}
		if f.Shorthand != "" && !strings.Contains(help, "-"+f.Shorthand+", --"+f.Name) {
			t.Errorf("--help does not show -%s for --%s", f.Shorthand, f.Name)
		}
	})
	if n < 15 {
		t.Fatalf("only %d flags visited", n)
	}
}

func TestE2EDemo(t *testing.T) {
	controlplane.Parallel(t)
	// No flags that point at a cluster, no KUBECONFIG, HOME without
	// .kube/config: the no-cluster rule selects the demo by itself.
	// Progress lines appear only while some cache has not settled at a
	// tick: at the default 1 s a fast run can settle everything between two
	// ticks. widgets stays unsettled until its CRD, installed mid-run, has
	// been served and synced — far longer than 20 ms — so a SYNC line must
	// appear.
	p := startWatcher(t, "-o", "json", "--progress-interval", "20ms")
	if code := p.wait(t, 8*time.Minute); code != 0 {
		out, errs := p.lines()
		t.Fatalf("demo exit code %d\nstdout:\n%s\nstderr:\n%s", code, strings.Join(out, "\n"), strings.Join(errs, "\n"))
	}
	out, errs := p.lines()
	recs := parseJSONLines(t, out)
	for _, want := range []struct{ typ, resource, name string }{
		{"ADDED", "crontabs", "nightly"}, // initial list
		{"ADDED", "crontabs", "minutely"},
		{"UPDATED", "crontabs", "nightly"},
		{"DELETED", "crontabs", "hourly"},
		{"DELETED", "crontabs", "minutely"}, // the CRD removed
		{"ADDED", "widgets", "gizmo"},       // the CRD added mid-run
		{"UPDATED", "widgets", "gizmo"},
		{"DELETED", "widgets", "gizmo"},
		{"STATUS", "widgets", ""},
		{"STATUS", "crontabs", ""},
	} {
		if !has(recs, want.typ, want.resource, want.name) {
			t.Errorf("demo output has no %s %s %s", want.typ, want.resource, want.name)
		}
	}
	states := map[string]map[string]bool{}
	for _, r := range recs {
		if r.Type == "STATUS" {
			if states[r.Resource] == nil {
				states[r.Resource] = map[string]bool{}
			}
			states[r.Resource][r.State] = true
		}
		if r.Type == "UPDATED" && r.Resource == "crontabs" && r.Name == "nightly" {
			paths := map[string]Change{}
			for _, c := range r.Diff {
				paths[c.Path] = c
			}
			if c, ok := paths["spec.cronSpec"]; !ok || c.Old != "0 * * * *" || c.New != "30 2 * * *" {
				t.Errorf("update of nightly: diff %+v lacks spec.cronSpec 0 * * * * → 30 2 * * *", r.Diff)
			}
			if _, ok := paths["metadata.resourceVersion"]; ok {
				t.Errorf("diff reports metadata.resourceVersion: %+v", r.Diff)
			}
		}
		if r.Type == "UPDATED" && r.Resource == "widgets" && r.Name == "gizmo" {
			if len(r.Diff) == 0 {
				t.Errorf("update of gizmo has an empty diff")
			}
		}
	}
	if !states["widgets"]["Pending"] || !states["widgets"]["Synced"] {
		t.Errorf("widgets states %v: want Pending then Synced", states["widgets"])
	}
	if !states["crontabs"]["Synced"] || !states["crontabs"]["Removed"] {
		t.Errorf("crontabs states %v: want Synced and Removed", states["crontabs"])
	}
	stderr := strings.Join(errs, "\n")
	for _, want := range []string{"final status", "SYNC", "DEMO"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}

func TestE2EUnknownAndAmbiguousResource(t *testing.T) {
	controlplane.Parallel(t)
	cp := controlPlane(t)
	ctx := context.Background()
	for _, g := range []string{"a.e2e.example.com", "b.e2e.example.com"} {
		if err := cp.InstallCRD(ctx, controlplane.NewCRD(g, "Twin", "twins")); err != nil {
			t.Fatal(err)
		}
	}
	kc := cp.Kubeconfig(t)
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"unknown", []string{"--resource", "pods", "--resource", "nosuchthings"}, []string{`"nosuchthings"`, "unknown resource"}},
		{"ambiguous", []string{"--resource", "twins"}, []string{`"twins"`, "ambiguous", "twins.v1.a.e2e.example.com", "twins.v1.b.e2e.example.com"}},
		{"wait needs qualified name", []string{"--wait-for-crds", "--resource", "nosuchthings.e2e.example.com"}, []string{`"nosuchthings.e2e.example.com"`, "resource.version.group"}},
		{"namespace on cluster-scoped", []string{"--resource", "namespaces", "-n", "default"}, []string{`"namespaces"`, "cluster-scoped"}},
		{"invalid selector", []string{"--resource", "pods", "-l", "a in (("}, []string{"invalid label selector"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := startWatcher(t, append([]string{"--kubeconfig", kc}, tc.args...)...)
			code := p.wait(t, 2*time.Minute)
			out, errs := p.lines()
			stderr := strings.Join(errs, "\n")
			if code != 2 {
				t.Fatalf("exit code %d, want 2\nstdout:\n%s\nstderr:\n%s", code, strings.Join(out, "\n"), stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if len(out) != 0 {
				t.Errorf("nothing should have started, but stdout has:\n%s", strings.Join(out, "\n"))
			}
		})
	}
}

func TestE2EMetricsAndSignals(t *testing.T) {
	controlplane.Parallel(t)
	cp := controlPlane(t)
	ctx := context.Background()
	crd := controlplane.NewCRD("metrics.e2e.example.com", "Gadget", "gadgets", controlplane.ShortNames("gd"))
	if err := cp.InstallCRD(ctx, crd); err != nil {
		t.Fatal(err)
	}
	ns := perRun("e2e-metrics")
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	gvr := controlplane.GVR(crd)
	create := func(name string) {
		t.Helper()
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": gvr.GroupVersion().String(), "kind": "Gadget",
			"metadata": map[string]any{"name": name, "namespace": ns},
			"spec":     map[string]any{"n": int64(1)},
		}}
		if _, err := cp.Dynamic().Resource(gvr).Namespace(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create("one")
	create("two")
	// A CRD group of this run's own: the CRD must not exist yet.
	later := schema.GroupVersionResource{Group: perRun("later") + ".e2e.example.com", Version: "v1", Resource: "sprockets"}

	p := startWatcher(t, "--kubeconfig", cp.Kubeconfig(t), "-o", "json",
		"--resource", "gd", "--resource", "configmaps", "-n", ns,
		"--wait-for-crds", "--resource", gvrString(later),
		"--metrics-addr", "127.0.0.1:0")
	m := p.waitStderr(t, regexp.MustCompile(`metrics: serving .* on http://(\S+)`), 3*time.Minute)
	base := "http://" + m[1]

	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != 200 {
		t.Errorf("/healthz = %d %s", code, body)
	}
	// sprockets waits for its CRD (Pending): not ready. /metrics is parsed
	// with Prometheus's text parser; the handlers' counts follow the
	// cache, so the checks are retried until they all hold.
	gvrOf := func(g schema.GroupVersionResource, kv ...string) map[string]string {
		l := map[string]string{"group": g.Group, "version": g.Version, "resource": g.Resource}
		for i := 0; i+1 < len(kv); i += 2 {
			l[kv[i]] = kv[i+1]
		}
		return l
	}
	gadgets := schema.GroupVersionResource{Group: "metrics.e2e.example.com", Version: "v1", Resource: "gadgets"}
	configmaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	wants := []struct {
		name   string
		labels map[string]string
		value  float64 // -2: any value, the series exists
	}{
		{"informerkit_informer_state", gvrOf(gadgets, "state", "Synced"), 1},
		{"informerkit_objects_cached", gvrOf(gadgets), 2},
		{"informerkit_events_total", gvrOf(gadgets, "type", "ADDED"), 2},
		{"informerkit_events_total", gvrOf(gadgets, "type", "UPDATED"), 0},
		{"informerkit_objects_cached", gvrOf(configmaps), -2},
		{"informerkit_informer_state", gvrOf(later, "state", "Pending"), 1},
		{"informerkit_informers_wanted", nil, 3},
	}
	var missing []string
	deadline := time.Now().Add(2 * time.Minute)
	for {
		fams := scrapeMetrics(t, base+"/metrics")
		missing = missing[:0]
		for _, w := range wants {
			got := metricValue(fams, w.name, w.labels)
			if got == -1 || w.value != -2 && got != w.value {
				missing = append(missing, fmt.Sprintf("%s%v = %v, want %v", w.name, w.labels, got, w.value))
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			_, metrics := get("/metrics")
			t.Fatalf("/metrics after 2m: %s\n%s", strings.Join(missing, "; "), metrics)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "sprockets") {
		t.Errorf("/readyz with a Pending informer = %d %q, want 503 naming sprockets", code, body)
	}

	// The CRD arrives: the waiting informer syncs and the watcher is ready.
	laterCRD := controlplane.NewCRD(later.Group, "Sprocket", "sprockets")
	if err := cp.InstallCRD(ctx, laterCRD); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(2 * time.Minute)
	for {
		code, body := get("/readyz")
		if code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz never became ready: %d %s", code, body)
		}
		time.Sleep(200 * time.Millisecond)
	}

	create("three")
	p.waitEventLine(t, `"type":"ADDED"`, `"name":"three"`)

	if err := p.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	p.waitStderr(t, regexp.MustCompile(`status \(SIGUSR1\)`), time.Minute)

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, time.Minute); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d, want 0", code)
	}
	out, errs := p.lines()
	recs := parseJSONLines(t, out)
	if !has(recs, "ADDED", "gadgets", "one") || !has(recs, "ADDED", "gadgets", "three") {
		t.Errorf("events missing from stdout:\n%s", strings.Join(out, "\n"))
	}
	finals := 0
	for _, r := range recs {
		if r.Type == "STATUS" && r.Final {
			finals++
		}
	}
	if finals != 3 {
		t.Errorf("%d final STATUS lines, want 3 (one per informer)", finals)
	}
	if !strings.Contains(strings.Join(errs, "\n"), "final status") {
		t.Errorf("no final status table on stderr")
	}
}

// waitEventLine waits for a stdout line containing every part.
func (p *proc) waitEventLine(t *testing.T, parts ...string) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		out, _ := p.lines()
		for _, l := range out {
			ok := true
			for _, part := range parts {
				ok = ok && strings.Contains(l, part)
			}
			if ok {
				return
			}
		}
		select {
		case <-p.notify:
		case <-deadline:
			t.Fatalf("no stdout line with %q:\n%s", parts, strings.Join(out, "\n"))
		}
	}
}

func TestE2EConfigFileAndDuration(t *testing.T) {
	controlplane.Parallel(t)
	cp := controlPlane(t)
	cfgFile := filepath.Join(t.TempDir(), "watch.yaml")
	if err := os.WriteFile(cfgFile, []byte(`
resources:
  - name: configmaps
    namespaces: [default]
  - namespaces
output: json
`), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	p := startWatcher(t, "--kubeconfig", cp.Kubeconfig(t), "--config", cfgFile, "--duration", "4s")
	if code := p.wait(t, 2*time.Minute); code != 0 {
		_, errs := p.lines()
		t.Fatalf("exit code %d, want 0 after --duration; stderr:\n%s", code, strings.Join(errs, "\n"))
	}
	if d := time.Since(start); d < 4*time.Second {
		t.Errorf("exited after %s, before --duration 4s", d)
	}
	out, _ := p.lines()
	recs := parseJSONLines(t, out)
	if !has(recs, "ADDED", "namespaces", "default") {
		t.Errorf("no initial ADDED for namespace default:\n%s", strings.Join(out, "\n"))
	}
	final := map[string]string{}
	for _, r := range recs {
		if r.Type == "STATUS" && r.Final {
			final[r.Resource] = r.State
		}
	}
	if final["configmaps"] != "Synced" || final["namespaces"] != "Synced" {
		t.Errorf("final states %v, want configmaps and namespaces Synced", final)
	}
}
