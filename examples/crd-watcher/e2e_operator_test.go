package main

// End-to-end tests of what an operator meets when something is off: one
// test per finding of the "tried as an operator would" review, each on the
// built binary against the in-process API server, asserting the exit code,
// the line printed and the /readyz code.

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/informerkit/informerkit/test/controlplane"
)

// kubeconfigAt writes a kubeconfig for server with cp's admin credentials
// (context and user "e2e"); impersonate, if set, makes every request act
// as that user (kubectl --as).
func kubeconfigAt(t *testing.T, cp *controlplane.ControlPlane, server, impersonate string) string {
	t.Helper()
	ai := &clientcmdapi.AuthInfo{Impersonate: impersonate}
	if cp != nil {
		ai.Token = cp.Config().BearerToken
	}
	return controlplane.WriteKubeconfig(t, &clientcmdapi.Cluster{Server: server, InsecureSkipTLSVerify: true}, ai)
}

// exited waits for the watcher to exit and returns its code and output.
func (p *proc) exited(t *testing.T, timeout time.Duration) (code int, stdout, stderr string) {
	t.Helper()
	code = p.wait(t, timeout)
	out, errs := p.lines()
	return code, strings.Join(out, "\n"), strings.Join(errs, "\n")
}

func mustContain(t *testing.T, what, text string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(text, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, text)
		}
	}
}

func mustNotContain(t *testing.T, what, text string, bad ...string) {
	t.Helper()
	for _, b := range bad {
		if strings.Contains(text, b) {
			t.Errorf("%s contains %q:\n%s", what, b, text)
		}
	}
}

// httpGet returns the status code and body of a GET, 0 and the error text
// if the request failed.
func httpGet(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitHTTP polls url until its status code is want.
func waitHTTP(t *testing.T, url string, want int, timeout time.Duration) (time.Duration, string) {
	t.Helper()
	start := time.Now()
	for {
		code, body := httpGet(url)
		if code == want {
			return time.Since(start), body
		}
		if time.Since(start) > timeout {
			t.Fatalf("GET %s = %d %q, want %d within %s", url, code, body, want, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func metricsBase(t *testing.T, p *proc) string {
	t.Helper()
	m := p.waitStderr(t, regexp.MustCompile(`metrics: serving .* on http://(\S+)`), 3*time.Minute)
	return "http://" + m[1]
}

func newConfigMap(name string, labels map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Data: map[string]string{"k": "v"}}
}

// 1. --all: the final status lists every resource the watcher watched
// (the subscription used to release its informers as the run ended, so
// the final snapshot missed some).
func TestE2EAllFinalStatusListsEveryResource(t *testing.T) {
	controlplane.Parallel(t)
	cp := controlPlane(t)
	ctx := context.Background()
	for _, kind := range []string{"Alpha", "Beta", "Gamma", "Delta"} {
		crd := controlplane.NewCRD("final.e2e.example.com", kind, strings.ToLower(kind)+"s", controlplane.Categories("e2e-final"))
		if err := cp.InstallCRD(ctx, crd); err != nil {
			t.Fatal(err)
		}
	}
	p := startWatcher(t, "--kubeconfig", cp.Kubeconfig(t), "--all", "--category", "e2e-final", "-o", "json")
	deadline := time.Now().Add(2 * time.Minute)
	for {
		out, _ := p.lines()
		synced := 0
		for _, l := range out {
			if strings.Contains(l, `"type":"STATUS"`) && strings.Contains(l, `"state":"Synced"`) {
				synced++
			}
		}
		if synced == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not every informer synced:\n%s", strings.Join(out, "\n"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := p.exited(t, time.Minute)
	if code != 0 {
		t.Fatalf("exit code %d after SIGINT, want 0\n%s", code, stderr)
	}
	final := map[string]string{}
	for _, r := range parseJSONLines(t, strings.Split(stdout, "\n")) {
		if r.Type == "STATUS" && r.Final {
			final[r.Resource] = r.State
		}
	}
	for _, res := range []string{"alphas", "betas", "gammas", "deltas"} {
		if final[res] != "Synced" {
			t.Errorf("final status of %s = %q, want Synced (final: %v)", res, final[res], final)
		}
		mustContain(t, "final status table", stderr, res+".v1.final.e2e.example.com")
	}
}

// 2. Nothing to watch is a usage error, said at once: no --resource and no
// --all; --all with a category (or group) the server does not know.
func TestE2ENothingToWatch(t *testing.T) {
	controlplane.Parallel(t)
	cp := controlPlane(t)
	if err := cp.InstallCRD(context.Background(), controlplane.NewCRD("cat.e2e.example.com", "Tabby", "tabbies", controlplane.Categories("e2e-cats"))); err != nil {
		t.Fatal(err)
	}
	kc := cp.Kubeconfig(t)
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"no resource", []string{"--kubeconfig", kc}, []string{"crd-watcher: nothing to watch: name resources with --resource (or resources: in --config), or watch every resource with --all"}},
		{"misspelt category", []string{"--kubeconfig", kc, "--all", "--category", "e2e-catz"}, []string{`crd-watcher: nothing to watch: --category "e2e-catz": the server knows no such category; did you mean e2e-cats?`}},
		{"misspelt group", []string{"--kubeconfig", kc, "--all", "--group", "cat.e2e.example.co"}, []string{`crd-watcher: nothing to watch: --group "cat.e2e.example.co": the server knows no such group; did you mean `, "cat.e2e.example.com"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := startWatcher(t, tc.args...)
			code, stdout, stderr := p.exited(t, time.Minute)
			if code != 2 {
				t.Fatalf("exit code %d, want 2\n%s", code, stderr)
			}
			mustContain(t, "stderr", stderr, tc.want...)
			mustNotContain(t, "stderr", stderr, "SYNC")
			if stdout != "" {
				t.Errorf("stdout: %s", stdout)
			}
		})
	}
}

// 3. Resources named with no cluster configured: exit 1 at once with what
// is missing; the demo server is not started.
func TestE2ENamedResourcesWithoutCluster(t *testing.T) {
	controlplane.Parallel(t)
	watcherBinary(t)
	start := time.Now()
	p := startWatcher(t, "--resource", "gtw")
	code, _, stderr := p.exited(t, 2*time.Minute)
	if code != 1 {
		t.Fatalf("exit code %d, want 1\n%s", code, stderr)
	}
	mustContain(t, "stderr", stderr, "crd-watcher: no cluster configured: no --kubeconfig or --context, KUBECONFIG unset, not in a pod, and no ~/.kube/config; point the watcher at a cluster, or add --demo")
	mustNotContain(t, "stderr", stderr, "demo:", "unknown resource")
	t.Logf("exited in %s", time.Since(start).Round(time.Millisecond))
}

// silentListener accepts connections (the kernel completes the handshake)
// and never answers: a server that hangs.
func silentListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return "https://" + ln.Addr().String()
}

// 4. Ctrl-C while connecting is a normal end: exit 0.
func TestE2EInterruptWhileConnecting(t *testing.T) {
	controlplane.Parallel(t)
	server := silentListener(t)
	p := startWatcher(t, "--kubeconfig", kubeconfigAt(t, nil, server, ""), "--resource", "pods", "--request-timeout", "2m")
	p.waitStderr(t, regexp.MustCompile(`still connecting to `+regexp.QuoteMeta(server)), 2*time.Minute)
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	code, _, stderr := p.exited(t, 30*time.Second)
	if code != 0 {
		t.Fatalf("exit code %d after Ctrl-C while connecting, want 0\n%s", code, stderr)
	}
	mustContain(t, "stderr", stderr, "interrupted while connecting to "+server)
	mustNotContain(t, "stderr", stderr, "interrupt signal received")
	t.Logf("exited %s after SIGINT", time.Since(start).Round(time.Millisecond))
}

// 5. A quiet start: one STATUS line per informer, "Synced (N objects)";
// no "not served", no Pending, no SYNC progress when the caches synced
// before its first interval. A list that takes longer than the status
// grace (1 s; a loaded machine) prints its Syncing once, then the
// "Syncing → Synced" that ends it: a real transition, not noise.
func TestE2EStartIsQuiet(t *testing.T) {
	controlplane.Parallel(t)
	cp := controlPlane(t)
	kc := cp.Kubeconfig(t)
	t.Run("text", func(t *testing.T) {
		p := startWatcher(t, "--kubeconfig", kc, "--resource", "namespaces", "--resource", "clusterroles", "--duration", "5s", "--progress-interval", "4s")
		code, _, stderr := p.exited(t, 2*time.Minute)
		if code != 0 {
			t.Fatalf("exit code %d\n%s", code, stderr)
		}
		var status []string
		perResource := map[string][]string{}
		line := regexp.MustCompile(`STATUS  (namespaces\.v1|clusterroles\.v1\.rbac\.authorization\.k8s\.io) (.*)$`)
		for _, l := range strings.Split(stderr, "\n") {
			if strings.Contains(l, " STATUS ") {
				status = append(status, l)
				if m := line.FindStringSubmatch(l); m != nil {
					perResource[m[1]] = append(perResource[m[1]], m[2])
				}
			}
		}
		synced := regexp.MustCompile(`^Synced \(\d+ objects\)$`)
		slow := regexp.MustCompile(`^Syncing \(\d+ objects\): listing$`)
		slowEnd := regexp.MustCompile(`^Syncing → Synced \(\d+ objects\)$`)
		ok := len(perResource) == 2 && len(status) == len(perResource["namespaces.v1"])+len(perResource["clusterroles.v1.rbac.authorization.k8s.io"])
		for _, states := range perResource {
			switch {
			case len(states) == 1 && synced.MatchString(states[0]):
			case len(states) == 2 && slow.MatchString(states[0]) && slowEnd.MatchString(states[1]):
			default:
				ok = false
			}
		}
		if !ok {
			t.Errorf("STATUS lines at start:\n%s\nwant one \"Synced (N objects)\" per resource (or, for a list slower than the grace, its Syncing and then \"Syncing → Synced\")", strings.Join(status, "\n"))
		}
		mustNotContain(t, "stderr", stderr, "not served", "Pending", "SYNC ")
	})
	t.Run("json", func(t *testing.T) {
		p := startWatcher(t, "--kubeconfig", kc, "--resource", "namespaces", "-o", "json", "--duration", "4s")
		code, stdout, stderr := p.exited(t, 2*time.Minute)
		if code != 0 {
			t.Fatalf("exit code %d\n%s", code, stderr)
		}
		var states []string
		for _, r := range parseJSONLines(t, strings.Split(stdout, "\n")) {
			if r.Type == "STATUS" && !r.Final {
				states = append(states, r.State)
			}
		}
		// One Synced; or, for a list slower than the grace (a loaded
		// machine), its Syncing and then Synced, as in text.
		if got := strings.Join(states, ","); got != "Synced" && got != "Syncing,Synced" {
			t.Errorf("STATUS records at start: %v, want one Synced (or, for a list slower than the grace, Syncing then Synced)", states)
		}
		mustNotContain(t, "stdout", stdout, `"error"`)
	})
}

// 6. Diffs name what changed: list elements by key (name; conditions by
// type), no last-applied-configuration, many changes one per line.
func TestE2EDiffByKey(t *testing.T) {
	controlplane.Parallel(t)
	cp := controlPlane(t)
	ctx := context.Background()
	crd := controlplane.NewCRD("diff.e2e.example.com", "Portal", "portals")
	if err := cp.InstallCRD(ctx, crd); err != nil {
		t.Fatal(err)
	}
	ns := perRun("e2e-diff")
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	gvr := controlplane.GVR(crd)
	client := cp.Dynamic().Resource(gvr).Namespace(ns)
	const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvr.GroupVersion().String(), "kind": "Portal",
		"metadata": map[string]any{"name": "edge", "namespace": ns, "annotations": map[string]any{lastApplied: `{"spec":{"v":1}}`}},
		"spec": map[string]any{
			"listeners": []any{map[string]any{"name": "http", "port": int64(80)}, map[string]any{"name": "https", "port": int64(443)}},
			"image":     "envoy:1",
		},
		"status": map[string]any{"conditions": []any{
			map[string]any{"type": "Accepted", "status": "True"},
			map[string]any{"type": "Ready", "status": "Unknown"},
		}},
	}}
	if _, err := client.Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := startWatcher(t, "--kubeconfig", cp.Kubeconfig(t), "--resource", "portals", "-n", ns)
	p.waitEventLine(t, "ADDED", ns+"/edge")
	update := func(edit func(obj map[string]any)) {
		t.Helper()
		cur, err := client.Get(ctx, "edge", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		edit(cur.Object)
		if _, err := client.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// A listener added in front, the Ready condition flipped (and moved),
	// and kubectl's annotation rewritten: two changes, on the line.
	update(func(obj map[string]any) {
		obj["spec"].(map[string]any)["listeners"] = []any{
			map[string]any{"name": "grpc", "port": int64(9000)},
			map[string]any{"name": "http", "port": int64(80)}, map[string]any{"name": "https", "port": int64(443)},
		}
		obj["status"].(map[string]any)["conditions"] = []any{
			map[string]any{"type": "Ready", "status": "True"},
			map[string]any{"type": "Accepted", "status": "True"},
		}
		obj["metadata"].(map[string]any)["annotations"].(map[string]any)[lastApplied] = `{"spec":{"v":2}}`
	})
	p.waitEventLine(t, "UPDATED", ns+"/edge")
	// Four changes: one per line under the event.
	update(func(obj map[string]any) {
		spec := obj["spec"].(map[string]any)
		spec["image"] = "envoy:2"
		spec["replicas"] = int64(3)
		spec["listeners"].([]any)[2].(map[string]any)["port"] = int64(8443)
		obj["metadata"].(map[string]any)["labels"] = map[string]any{"tier": "edge"}
	})
	p.waitEventLine(t, "4 changes:")
	time.Sleep(200 * time.Millisecond) // the continuation lines are written with it
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := p.exited(t, time.Minute)
	if code != 0 {
		t.Fatalf("exit code %d\n%s", code, stderr)
	}
	lines := strings.Split(stdout, "\n")
	var first string
	multi := -1
	for i, l := range lines {
		if strings.Contains(l, "UPDATED") && first == "" {
			first = l
		}
		if strings.Contains(l, "4 changes:") {
			multi = i
		}
	}
	want := `UPDATED portals.v1.diff.e2e.example.com ` + ns + `/edge  spec.listeners[name="grpc"]: <none> → {"name":"grpc","port":9000}; status.conditions[type="Ready"].status: "Unknown" → "True"`
	if !strings.HasSuffix(first, want) {
		t.Errorf("first update:\n got %s\nwant …%s", first, want)
	}
	mustNotContain(t, "stdout", stdout, "last-applied")
	if multi < 0 || multi+4 >= len(lines) {
		t.Fatalf("no four-change update in:\n%s", stdout)
	}
	got := strings.Join(lines[multi+1:multi+5], "\n")
	wantLines := strings.Join([]string{
		`    metadata.labels: <none> → {"tier":"edge"}`,
		`    spec.image: "envoy:1" → "envoy:2"`,
		`    spec.listeners[name="https"].port: 443 → 8443`,
		`    spec.replicas: <none> → 3`,
	}, "\n")
	if got != wantLines {
		t.Errorf("four-change update:\n got\n%s\nwant\n%s", got, wantLines)
	}
}

// 7. An object relabelled out of -l is not a delete: the line says it no
// longer matches; a real delete stays a plain DELETED.
func TestE2ESelectorDeleteIsNotADelete(t *testing.T) {
	controlplane.Parallel(t)
	cp := controlPlane(t)
	ctx := context.Background()
	ns := perRun("e2e-selector")
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	cms := cp.Kube().CoreV1().ConfigMaps(ns)
	for _, name := range []string{"relabelled", "deleted"} {
		if _, err := cms.Create(ctx, newConfigMap(name, map[string]string{"app": "web"}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	p := startWatcher(t, "--kubeconfig", cp.Kubeconfig(t), "--resource", "configmaps", "-n", ns, "-l", "app=web")
	p.waitEventLine(t, "ADDED", ns+"/relabelled")
	p.waitEventLine(t, "ADDED", ns+"/deleted")
	cm, err := cms.Get(ctx, "relabelled", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Labels["app"] = "other"
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, "deleted", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	p.waitEventLine(t, "DELETED", ns+"/relabelled")
	p.waitEventLine(t, "DELETED", ns+"/deleted")
	out, _ := p.lines()
	for _, l := range out {
		switch {
		case strings.Contains(l, "DELETED") && strings.Contains(l, ns+"/relabelled"):
			if !strings.HasSuffix(l, "configmaps.v1 "+ns+"/relabelled  (no longer matches the selector app=web; the object still exists)") {
				t.Errorf("relabelled object: %s", l)
			}
		case strings.Contains(l, "DELETED") && strings.Contains(l, ns+"/deleted"):
			if !strings.HasSuffix(l, "configmaps.v1 "+ns+"/deleted") {
				t.Errorf("deleted object: %s", l)
			}
		}
	}
}

// 8. Connection failures say what failed in the user's words (server URL,
// context, user), say "still connecting…" while waiting, and honour
// --request-timeout.
func TestE2EConnectionErrors(t *testing.T) {
	controlplane.Parallel(t)
	cp := controlPlane(t)
	silent := silentListener(t)
	notKube := httptest.NewTLSServer(http.NotFoundHandler())
	defer notKube.Close()
	badToken := kubeconfigAt(t, nil, cp.Config().Host, "")
	cfg, err := clientcmd.LoadFromFile(badToken)
	if err != nil {
		t.Fatal(err)
	}
	cfg.AuthInfos["e2e"].Token = "not-a-valid-token"
	if err := clientcmd.WriteToFile(*cfg, badToken); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name       string
		kubeconfig string
		args       []string
		want       string
		within     time.Duration
	}{
		{"refused", kubeconfigAt(t, nil, "https://127.0.0.1:1", ""), nil,
			`crd-watcher: cannot reach the API server at https://127.0.0.1:1 (context "e2e", user "e2e"): connection refused`, 30 * time.Second},
		{"never answers", kubeconfigAt(t, nil, silent, ""), []string{"--request-timeout", "3s"},
			`crd-watcher: no answer from the API server at ` + silent + ` (context "e2e", user "e2e") within 3s (--request-timeout)`, 30 * time.Second},
		{"not kubernetes", kubeconfigAt(t, nil, notKube.URL, ""), nil,
			`crd-watcher: the server at ` + notKube.URL + ` (context "e2e", user "e2e") does not look like a Kubernetes API server`, 30 * time.Second},
		{"unauthorized", badToken, nil,
			`crd-watcher: the API server at ` + cp.Config().Host + ` (context "e2e", user "e2e") rejected the credentials (401 Unauthorized)`, 30 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := startWatcher(t, append([]string{"--kubeconfig", tc.kubeconfig, "--resource", "gtw"}, tc.args...)...)
			start := time.Now()
			code, _, stderr := p.exited(t, 2*time.Minute)
			took := time.Since(start)
			if code != 1 {
				t.Fatalf("exit code %d, want 1\n%s", code, stderr)
			}
			mustContain(t, "stderr", stderr, tc.want)
			mustNotContain(t, "stderr", stderr, "discoveryresolver", "?timeout=", `Get "`, `resource "gtw"`)
			if tc.name == "never answers" {
				mustContain(t, "stderr", stderr, "still connecting to "+silent)
				if took > tc.within {
					t.Errorf("took %s with --request-timeout 3s", took)
				}
			}
			t.Logf("exit %d after %s", code, took.Round(time.Millisecond))
		})
	}
}

// 9. Did you mean: an unknown name gets the closest served names (short
// names shown), without the library's error chain; a Kind under
// --wait-for-crds is told the plural form.
func TestE2EDidYouMean(t *testing.T) {
	controlplane.Parallel(t)
	cp := controlPlane(t)
	if err := cp.InstallCRD(context.Background(), controlplane.NewCRD("gw.e2e.example.com", "Gateway", "gateways", controlplane.ShortNames("gtw"))); err != nil {
		t.Fatal(err)
	}
	kc := cp.Kubeconfig(t)
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"typo", []string{"--resource", "gatewayz"}, []string{`crd-watcher: unknown resource "gatewayz": the server serves no resource of that name; did you mean`, "gateways", "(gtw)"}},
		{"kind under wait-for-crds", []string{"--wait-for-crds", "--resource", "Something.v1.new.example.com"},
			[]string{`"Something" looks like a Kind: --wait-for-crds needs the resource's plural name, most likely somethings.v1.new.example.com`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := startWatcher(t, append([]string{"--kubeconfig", kc}, tc.args...)...)
			code, _, stderr := p.exited(t, time.Minute)
			if code != 2 {
				t.Fatalf("exit code %d, want 2\n%s", code, stderr)
			}
			mustContain(t, "stderr", stderr, tc.want...)
			mustNotContain(t, "stderr", stderr, "discoveryresolver:", "no served resource matches")
		})
	}
}

// 10. A config file mistake names the file, the line and the key, with
// the closest key; no JSON or Go wording.
func TestE2EConfigFileError(t *testing.T) {
	controlplane.Parallel(t)
	cfgFile := filepath.Join(t.TempDir(), "watch.yaml")
	if err := os.WriteFile(cfgFile, []byte("# watch the web tier\nresources: [configmaps]\nnamespace: [default]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startWatcher(t, "--config", cfgFile)
	code, _, stderr := p.exited(t, time.Minute)
	if code != 2 {
		t.Fatalf("exit code %d, want 2\n%s", code, stderr)
	}
	mustContain(t, "stderr", stderr, "crd-watcher: config file "+cfgFile+`:3: namespace: unknown key; did you mean "namespaces"?`)
	mustNotContain(t, "stderr", stderr, "JSON", "Go struct")
}

// 11. Readiness tells the truth: not ready while the only informer is
// forbidden (it recovers once a role is bound) and while the API server is
// gone; ready again when it answers.
func TestE2EReadiness(t *testing.T) {
	// Not parallel: it cuts the shared proxy's connections.
	cp := controlPlane(t)
	ctx := context.Background()
	user := perRun("e2e-ready") // a user no earlier run granted the role
	p := startWatcher(t, "--kubeconfig", kubeconfigAt(t, cp, cp.Config().Host, user), "--resource", "configmaps", "--metrics-addr", "127.0.0.1:0", "--request-timeout", "3s")
	base := metricsBase(t, p)
	p.waitStderr(t, regexp.MustCompile(`STATUS  configmaps\.v1 Failed`), 2*time.Minute)
	code, body := httpGet(base + "/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "configmaps.v1 Failed") {
		t.Errorf("/readyz with a forbidden informer = %d %q, want 503 naming it", code, body)
	}
	if err := cp.Grant(ctx, user, "", "read-configmaps", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}); err != nil {
		t.Fatal(err)
	}
	took, _ := waitHTTP(t, base+"/readyz", http.StatusOK, 2*time.Minute)
	t.Logf("ready %s after the role was bound", took.Round(time.Millisecond))

	// The server goes away (refused, open connections cut): not ready
	// within seconds, the contact metric says 0; back when it returns.
	proxy := cp.Proxy()
	proxy.SetRefuse(true)
	t.Cleanup(func() { proxy.SetRefuse(false) })
	proxy.CutAll()
	took, body = waitHTTP(t, base+"/readyz", http.StatusServiceUnavailable, 30*time.Second)
	t.Logf("not ready %s after the server went away: %s", took.Round(time.Millisecond), strings.TrimSpace(body))
	if took > 10*time.Second {
		t.Errorf("readiness noticed the server gone after %s", took)
	}
	mustContain(t, "/readyz", body, "no contact with the API server")
	mustNotContain(t, "/readyz", body, "Resource=", "?", "/api") // as the CONTACT line says it: no GVR, URL or query
	_, metrics := httpGet(base + "/metrics")
	mustContain(t, "/metrics", metrics, "informerkit_server_contact 0")
	proxy.SetRefuse(false)
	took, _ = waitHTTP(t, base+"/readyz", http.StatusOK, time.Minute)
	t.Logf("ready again %s after the server returned", took.Round(time.Millisecond))
	_, metrics = httpGet(base + "/metrics")
	mustContain(t, "/metrics", metrics, "informerkit_server_contact 1")
}

// Issue 33, item 3: during an outage the state an operator sees says the
// cache is no longer kept current — within 2 s of losing the server, the
// JSON STATUS record, informerkit_informer_state and the status table say
// Stale (its reason the lost contact, no URL), and Synced again once the
// server is back.
func TestE2EOutageShowsStale(t *testing.T) {
	// Not parallel: it cuts the shared proxy's connections.
	cp := controlPlane(t)
	p := startWatcher(t, "--kubeconfig", cp.Kubeconfig(t), "--resource", "namespaces", "-o", "json",
		"--metrics-addr", "127.0.0.1:0", "--request-timeout", "3s")
	base := metricsBase(t, p)
	namespaces := map[string]string{"group": "", "version": "v1", "resource": "namespaces"}
	state := func(s string) map[string]string {
		l := map[string]string{"state": s}
		for k, v := range namespaces {
			l[k] = v
		}
		return l
	}
	// statusLine waits for a JSON STATUS record of namespaces in state s
	// after the first skip stdout lines, and returns it and its index.
	statusLine := func(s string, skip int, timeout time.Duration) (string, int) {
		t.Helper()
		deadline := time.Now().Add(timeout)
		for {
			out, _ := p.lines()
			for i := skip; i < len(out); i++ {
				l := out[i]
				if strings.Contains(l, `"type":"STATUS"`) && strings.Contains(l, `"resource":"namespaces"`) && strings.Contains(l, `"state":"`+s+`"`) {
					return l, i
				}
			}
			if time.Now().After(deadline) {
				_, errs := p.lines()
				t.Fatalf("no STATUS %s for namespaces within %s\nstdout:\n%s\nstderr:\n%s", s, timeout, strings.Join(out, "\n"), strings.Join(errs, "\n"))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	_, at := statusLine("Synced", 0, 2*time.Minute)
	waitHTTP(t, base+"/readyz", http.StatusOK, time.Minute)

	proxy := cp.Proxy()
	proxy.SetRefuse(true)
	t.Cleanup(func() { proxy.SetRefuse(false) })
	proxy.CutAll()
	lost := time.Now()
	line, at := statusLine("Stale", at, 30*time.Second)
	took := time.Since(lost)
	t.Logf("STATUS Stale %s after the server went away: %s", took.Round(time.Millisecond), line)
	if took > 3*time.Second { // about 1 s measured; slack for a loaded machine
		t.Errorf("Stale reported %s after the server went away; want within 3s", took.Round(time.Millisecond))
	}
	mustContain(t, "STATUS record", line, `"reason":"no contact with the API server: `)
	mustNotContain(t, "STATUS record", line, "://", `"error"`)
	fams := scrapeMetrics(t, base+"/metrics")
	if v, w := metricValue(fams, "informerkit_informer_state", state("Stale")), metricValue(fams, "informerkit_informer_state", state("Synced")); v != 1 || w != 0 {
		t.Errorf("during the outage informerkit_informer_state Stale = %v, Synced = %v; want 1 and 0", v, w)
	}
	if err := p.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	row := p.waitStderr(t, regexp.MustCompile(`^namespaces\.v1\s+(\S+)\s.*`), time.Minute)
	if row[1] != "Stale" || !strings.Contains(row[0], "no contact with the API server") {
		t.Errorf("status table row during the outage: %q; want Stale with the lost contact", row[0])
	}

	proxy.SetRefuse(false)
	back := time.Now()
	statusLine("Synced", at, time.Minute)
	t.Logf("STATUS Synced %s after the server returned", time.Since(back).Round(time.Millisecond))
	fams = scrapeMetrics(t, base+"/metrics")
	if v, w := metricValue(fams, "informerkit_informer_state", state("Stale")), metricValue(fams, "informerkit_informer_state", state("Synced")); v != 0 || w != 1 {
		t.Errorf("after the outage informerkit_informer_state Stale = %v, Synced = %v; want 0 and 1", v, w)
	}
	waitHTTP(t, base+"/readyz", http.StatusOK, time.Minute)
}

// 12. A forbidden informer says what was refused: with the access check
// (the default) the verbs and namespaces it lacks, with no list sent;
// with --access-check=false the server's words (user, verb, resource,
// scope). --exit-on-failure ends the run with exit 3 on it, and on a
// server that goes away, which is reported within seconds.
func TestE2EFailuresAreReported(t *testing.T) {
	// Not parallel: it cuts the shared proxy's connections.
	cp := controlPlane(t)
	t.Run("forbidden", func(t *testing.T) {
		p := startWatcher(t, "--kubeconfig", kubeconfigAt(t, cp, cp.Config().Host, "e2e-nobody"), "--resource", "secrets", "--exit-on-failure")
		code, _, stderr := p.exited(t, 2*time.Minute)
		if code != 3 {
			t.Fatalf("exit code %d, want 3\n%s", code, stderr)
		}
		for _, re := range []*regexp.Regexp{
			regexp.MustCompile(`STATUS  secrets\.v1 Failed \(0 objects\): forbidden: access check \(SelfSubjectRulesReview\): user "e2e-nobody" may not list, watch secrets in all namespaces`),
			regexp.MustCompile(`crd-watcher: exiting \(--exit-on-failure\): secrets\.v1 failed: forbidden: access check \(SelfSubjectRulesReview\): user "e2e-nobody" may not list, watch secrets in all namespaces`),
			// Said once at start: what cannot be watched, and what it costs.
			regexp.MustCompile(`note: may not list, watch customresourcedefinitions: CRDs installed or deleted are seen at the next discovery refresh \(every 30s\)`),
		} {
			if !re.MatchString(stderr) {
				t.Errorf("stderr lacks %v:\n%s", re, stderr)
			}
		}
	})
	t.Run("forbidden without the access check", func(t *testing.T) {
		p := startWatcher(t, "--kubeconfig", kubeconfigAt(t, cp, cp.Config().Host, "e2e-nobody"), "--resource", "secrets", "--exit-on-failure", "--access-check=false")
		code, _, stderr := p.exited(t, 2*time.Minute)
		if code != 3 {
			t.Fatalf("exit code %d, want 3\n%s", code, stderr)
		}
		for _, re := range []*regexp.Regexp{
			regexp.MustCompile(`STATUS  secrets\.v1 Failed \(0 objects\): forbidden: secrets is forbidden: User "e2e-nobody" cannot (list|watch) resource "secrets" in API group "" at the cluster scope`),
			regexp.MustCompile(`crd-watcher: exiting \(--exit-on-failure\): secrets\.v1 failed: forbidden: secrets is forbidden: User "e2e-nobody" cannot (list|watch) resource "secrets"`),
		} {
			if !re.MatchString(stderr) {
				t.Errorf("stderr lacks %v:\n%s", re, stderr)
			}
		}
	})
	t.Run("server gone", func(t *testing.T) {
		p := startWatcher(t, "--kubeconfig", cp.Kubeconfig(t), "--resource", "namespaces", "--exit-on-failure", "--request-timeout", "3s")
		p.waitStderr(t, regexp.MustCompile(`STATUS  namespaces\.v1 Synced`), 2*time.Minute)
		proxy := cp.Proxy()
		proxy.SetRefuse(true)
		t.Cleanup(func() { proxy.SetRefuse(false) })
		proxy.CutAll()
		start := time.Now()
		code, _, stderr := p.exited(t, time.Minute)
		took := time.Since(start)
		proxy.SetRefuse(false)
		if code != 3 {
			t.Fatalf("exit code %d, want 3\n%s", code, stderr)
		}
		mustContain(t, "stderr", stderr, "CONTACT lost: ", "crd-watcher: exiting (--exit-on-failure): ")
		if took > 10*time.Second {
			t.Errorf("the server's loss ended the run after %s", took)
		}
		t.Logf("exit 3 %s after the server went away", took.Round(time.Millisecond))
	})
}
