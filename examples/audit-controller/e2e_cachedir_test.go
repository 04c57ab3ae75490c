package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/informerkit/informerkit/test/controlplane"
)

// TestE2ECacheDirRestart runs the auditor with --cache-dir, stops it,
// changes the audited objects while it is down (one fixed, one new and
// non-compliant, one deleted), and starts it again: the second run sends
// no list of the audited resource (it restores the stored objects and
// resumes the watch), says so ("3 restored"), and its summary is the
// cluster's state after the changes, not the state it stored.
func TestE2ECacheDirRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	const ns, group = "e2e", "cache.audit.example.com"
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	crd := controlplane.NewCRD(group, "Gadget", "gadgets")
	if err := cp.InstallCRD(ctx, crd); err != nil {
		t.Fatal(err)
	}
	gadgets := cp.Dynamic().Resource(controlplane.GVR(crd)).Namespace(ns)
	create := func(name string, labels map[string]string) {
		t.Helper()
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": group + "/v1", "kind": "Gadget",
			"metadata": map[string]any{"name": name, "namespace": ns},
			"spec":     map[string]any{"replicas": int64(1)},
		}}
		u.SetLabels(labels)
		if _, err := gadgets.Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create("good", map[string]string{"owner": "a"})
	create("unowned", nil)
	create("gone", map[string]string{"owner": "c"})

	kubeconfig, lists := cp.ListCountingProxy(t, "/namespaces/"+ns+"/gadgets")
	dir := t.TempDir()
	summary := func() (report, bool) {
		cm, err := cp.Kube().CoreV1().ConfigMaps(ns).Get(ctx, "audit-summary", metav1.GetOptions{})
		if err != nil {
			return report{}, false
		}
		var rep report
		return rep, json.Unmarshal([]byte(cm.Data["report.json"]), &rep) == nil
	}
	// auditRun runs the auditor until want(summary) holds and its cache
	// report is printed, then stops it; it returns what it reported.
	auditRun := func(want func(report) bool) string {
		t.Helper()
		runCtx, stop := context.WithCancel(ctx)
		defer stop()
		var stdout, stderr syncBuffer
		exit := make(chan int, 1)
		go func() {
			exit <- run(runCtx, []string{"--kubeconfig", kubeconfig, "--resource", "gadgets." + group, "-n", ns,
				"--require-label", "owner", "--summary-namespace", ns, "--summary-interval", "200ms", "--cache-dir", dir}, &stdout, &stderr)
		}()
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
			rep, ok := summary()
			return ok && want(rep) && strings.Contains(stderr.String(), "\ncache "), nil
		})
		if err != nil {
			rep, _ := summary()
			t.Fatalf("no expected summary (last %+v)\nstdout:\n%s\nstderr:\n%s", rep, stdout.String(), stderr.String())
		}
		stop()
		select {
		case code := <-exit:
			if code != exitOK {
				t.Fatalf("exit %d\nstderr:\n%s", code, stderr.String())
			}
		case <-time.After(time.Minute):
			t.Fatal("the auditor did not stop within 1m")
		}
		return stderr.String() // where it reports (stdout is for --help)
	}
	names := func(rep report) []string {
		var out []string
		for _, f := range rep.Findings {
			out = append(out, f.Name)
		}
		return out
	}

	out1 := auditRun(func(rep report) bool { return rep.Audited == 3 && rep.Compliant == 2 })
	if !strings.Contains(out1, "cold start") {
		t.Errorf("first run: no cold start reported:\n%s", out1)
	}
	if n := lists.Load(); n != 1 {
		t.Errorf("first run: %d lists of gadgets, want 1", n)
	}

	// While it is down: unowned is fixed, orphan is new without an
	// owner, gone is deleted.
	u, err := gadgets.Get(ctx, "unowned", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.SetLabels(map[string]string{"owner": "fixed"})
	if _, err := gadgets.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	create("orphan", nil)
	if err := gadgets.Delete(ctx, "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	lists.Reset()
	out2 := auditRun(func(rep report) bool {
		return rep.Audited == 3 && rep.Compliant == 2 && len(rep.Findings) == 1 && rep.Findings[0].Name == "orphan"
	})
	t.Logf("second run:\n%s", out2)
	if !strings.Contains(out2, "3 restored from "+dir) {
		t.Errorf("second run: no \"3 restored\" report:\n%s", out2)
	}
	if n := lists.Load(); n != 0 {
		t.Errorf("second run: %d lists of gadgets, want 0 (restored, then resumed)", n)
	}
	if rep, _ := summary(); rep.Audited != 3 || strings.Join(names(rep), ",") != "orphan" {
		t.Errorf("summary after the restart: %+v", rep)
	}
}
