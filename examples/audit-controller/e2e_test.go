package main

// End-to-end tests: the whole program (run) in demo mode, and against a
// control plane started here, reached through a kubeconfig file; the
// Events, the summary ConfigMap and the metrics it wrote are read back
// from the API server and the metrics endpoint.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/informerkit/informerkit/test/controlplane"
)

func TestMain(m *testing.M) {
	setupLogging(os.Getenv("AUDIT_E2E_VERBOSE") != "", os.Stderr) // before any API server logs
	os.Exit(m.Run())
}

// syncBuffer is a bytes.Buffer safe for the program and the test at once.
type syncBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestDemo runs the demo: it must exit 0 and print what it found — the
// findings before and after the fix, the Events and the summary it read
// back from the API server, and the summary emptied after the CRD went.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var stdout, stderr syncBuffer
	if code := run(ctx, []string{"--demo"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	out := stdout.String()
	t.Logf("demo output:\n%s", out)
	for _, want := range []string{
		"== findings after the widgets were created\naudited 3 objects: 1 compliant, 2 non-compliant\n",
		"widgets.v1.audit.example.com demo/batch: label:owner: missing label \"owner\"\n",
		"widgets.v1.audit.example.com demo/cache: annotation:description: missing annotation \"description\"; replicas-at-most-3: spec.replicas must be at most 3\n",
		"== findings after the fix\naudited 3 objects: 2 compliant, 1 non-compliant\n",
		"Normal AuditPassed Widget/batch: all audit rules pass",
		"Warning AuditViolation Widget/batch: 1 audit rule(s) violated: label:owner",
		"Warning AuditViolation Widget/cache: 2 audit rule(s) violated:",
		"== summary ConfigMap default/audit-summary: audited=3 compliant=2 noncompliant=1\n",
		"== summary ConfigMap after the CRD was deleted default/audit-summary: audited=0 compliant=0 noncompliant=0\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the demo did not print %q", want)
		}
	}
	if strings.Contains(out, "Widget/frontend") {
		t.Errorf("an Event was written for the compliant widget")
	}
}

// TestEventsSummaryAndMetrics runs the auditor against a cluster through
// a kubeconfig and checks, on the API server, the Events on the violating
// objects and the summary ConfigMap, and on /metrics the gauges — before
// and after an object is fixed.
func TestEventsSummaryAndMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	const ns, group, category = "e2e", "e2e.audit.example.com", "e2e-audit"
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	if err := cp.InstallCRD(ctx, controlplane.NewCRD(group, "Gadget", "gadgets", controlplane.Categories(category))); err != nil {
		t.Fatal(err)
	}
	gvr := controlplane.GVR(controlplane.NewCRD(group, "Gadget", "gadgets"))
	gadgets := cp.Dynamic().Resource(gvr).Namespace(ns)
	create := func(name string, labels map[string]string, replicas int64) {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": group + "/v1", "kind": "Gadget",
			"metadata": map[string]any{"name": name, "namespace": ns},
			"spec":     map[string]any{"replicas": replicas},
		}}
		u.SetLabels(labels)
		if _, err := gadgets.Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create("good", map[string]string{"owner": "a"}, 1)
	create("unowned", nil, 1)
	create("huge", map[string]string{"owner": "b"}, 50)

	runCtx, stop := context.WithCancel(ctx)
	var stdout, stderr syncBuffer
	exit := make(chan int, 1)
	go func() {
		exit <- run(runCtx, []string{"--kubeconfig", cp.Kubeconfig(t), "--category", category,
			"--require-label", "owner", "--rule", "small=!has(object.spec.replicas) || object.spec.replicas <= 3",
			"--summary-namespace", ns, "--summary-interval", "200ms", "--metrics-addr", "127.0.0.1:0"}, &stdout, &stderr)
	}()
	defer stop()

	kube := cp.Kube()
	events := func() map[string]string { // "reason name" -> message
		out := map[string]string{}
		list, err := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "source=audit-controller"})
		if err != nil {
			return out
		}
		for _, e := range list.Items {
			out[e.Reason+" "+e.InvolvedObject.Kind+"/"+e.InvolvedObject.Name] = e.Message
		}
		return out
	}
	summary := func() map[string]string {
		cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "audit-summary", metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return cm.Data
	}
	eventually := func(what string, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
			t.Fatalf("timed out waiting for %s\nevents: %v\nsummary: %v\nstderr:\n%s", what, events(), summary(), stderr.String())
		}
	}

	eventually("Events on both violating objects", func() bool { return len(events()) == 2 })
	ev := events()
	if m := ev["AuditViolation Gadget/unowned"]; !strings.Contains(m, `label:owner: missing label "owner"`) {
		t.Errorf("Event on unowned: %q", m)
	}
	if m := ev["AuditViolation Gadget/huge"]; !strings.Contains(m, "small: fails !has(object.spec.replicas) || object.spec.replicas <= 3") {
		t.Errorf("Event on huge: %q", m)
	}
	eventually("the summary with 2 non-compliant objects", func() bool { return summary()["noncompliant"] == "2" })
	var rep report
	if err := json.Unmarshal([]byte(summary()["report.json"]), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Audited != 3 || rep.Compliant != 1 || len(rep.Findings) != 2 ||
		rep.Findings[0].Name != "huge" || rep.Findings[0].Violations[0].Rule != "small" ||
		rep.Findings[1].Name != "unowned" || rep.Findings[1].Violations[0].Rule != "label:owner" {
		t.Errorf("summary report: %+v", rep)
	}

	addr := regexp.MustCompile(`metrics: serving /metrics and /healthz on http://(\S+)`).FindStringSubmatch(stderr.String())
	if addr == nil {
		t.Fatalf("no metrics address in stderr:\n%s", stderr.String())
	}
	metrics := func() string {
		resp, err := http.Get("http://" + addr[1] + "/metrics")
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	res := "gadgets.v1." + group
	for _, want := range []string{
		fmt.Sprintf(`audit_noncompliant_objects{resource=%q} 2`, res),
		fmt.Sprintf(`audit_objects{resource=%q} 3`, res),
		fmt.Sprintf(`audit_violations{resource=%q,rule="small"} 1`, res),
		"audit_controller_reconciles_total 3",
		// The library's informer metrics (prometheusmetrics).
		fmt.Sprintf(`informerkit_objects_cached{group=%q,resource="gadgets",version="v1"} 3`, group),
		fmt.Sprintf(`informerkit_informer_state{group=%q,resource="gadgets",state="Synced",version="v1"} 1`, group),
	} {
		if m := metrics(); !strings.Contains(m, want) {
			t.Errorf("metrics lack %q:\n%s", want, m)
		}
	}

	// Fix one: a Normal Event, the summary and the gauges follow.
	u, err := gadgets.Get(ctx, "unowned", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.SetLabels(map[string]string{"owner": "c"})
	if _, err := gadgets.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually("AuditPassed on the fixed object", func() bool { _, ok := events()["AuditPassed Gadget/unowned"]; return ok })
	eventually("the summary with 1 non-compliant object", func() bool { return summary()["noncompliant"] == "1" })
	if m := metrics(); !strings.Contains(m, fmt.Sprintf(`audit_noncompliant_objects{resource=%q} 1`, res)) {
		t.Errorf("metrics after the fix:\n%s", m)
	}
	if _, ok := events()["AuditViolation Gadget/good"]; ok {
		t.Errorf("an Event was written for the compliant object")
	}

	stop()
	select {
	case code := <-exit:
		if code != exitOK {
			t.Errorf("exit %d\nstderr:\n%s", code, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("the auditor did not exit within a minute of SIGTERM's equivalent")
	}
	if out := stdout.String(); !strings.Contains(out, "audited 3 objects: 2 compliant, 1 non-compliant") {
		t.Errorf("final report on stdout:\n%s", out)
	}
}
