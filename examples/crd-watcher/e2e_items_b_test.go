package main

// End-to-end tests of the smaller operator findings, on the built binary
// against the in-process API server: an --all --category nobody serves
// yet under --wait-for-crds, a finalizer-held delete, the build info
// metric, and flag values checked before the API server is contacted.

import (
	"context"
	"net/http"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/informerkit/informerkit/test/controlplane"
)

// --all --category C --wait-for-crds where no served resource has C yet:
// one line says what is waited for (with the closest category), and a CRD
// of that category installed later is watched. Without --wait-for-crds, a
// misspelt category next to a known one is exit 2, as an unknown name is.
func TestE2EItemsBCategoryWaitForCRDs(t *testing.T) {
	controlplane.Parallel(t)
	cp := controlPlane(t)
	ctx := context.Background()
	known := perRun("e2e-known")
	if err := cp.InstallCRD(ctx, controlplane.NewCRD(known+".e2e.example.com", "Known", "knowns", controlplane.Categories(known))); err != nil {
		t.Fatal(err)
	}
	kc := cp.Kubeconfig(t)

	t.Run("typo beside a known category", func(t *testing.T) {
		p := startWatcher(t, "--kubeconfig", kc, "--all", "--category", known+","+known+"x")
		code, stdout, stderr := p.exited(t, time.Minute)
		if code != 2 {
			t.Fatalf("exit code %d, want 2\n%s", code, stderr)
		}
		mustContain(t, "stderr", stderr, `crd-watcher: --all: --category "`+known+`x": the server knows no such category; did you mean `+known+"?")
		if stdout != "" {
			t.Errorf("stdout: %s", stdout)
		}
	})

	t.Run("wait-for-crds", func(t *testing.T) {
		later := perRun("e2e-later")
		p := startWatcher(t, "--kubeconfig", kc, "--all", "--category", later, "--wait-for-crds", "--progress-interval", "200ms", "--metrics-addr", "127.0.0.1:0")
		base := metricsBase(t, p)
		p.waitStderr(t, regexp.MustCompile(`^waiting \(--wait-for-crds\): --category "`+regexp.QuoteMeta(later)+`": the server knows no such category`), 2*time.Minute)
		time.Sleep(1500 * time.Millisecond) // progress ticks meanwhile: nothing more to say
		crd := controlplane.NewCRD(later+".e2e.example.com", "Later", "laters", controlplane.Categories(later))
		if err := cp.InstallCRD(ctx, crd); err != nil {
			t.Fatal(err)
		}
		ns := perRun("e2e-later")
		if err := cp.CreateNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
		gvr := controlplane.GVR(crd)
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": gvr.GroupVersion().String(), "kind": "Later",
			"metadata": map[string]any{"name": "first", "namespace": ns},
		}}
		if _, err := cp.Dynamic().Resource(gvr).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		p.waitEventLine(t, "ADDED", gvrString(gvr), ns+"/first")
		// The initial list's adds reach the handlers before the informer
		// is Synced (under a CPU hog the final status once said Syncing,
		// "listing", with the ADDED line printed): stop once /readyz says
		// every informer is synced.
		waitHTTP(t, base+"/readyz", http.StatusOK, 2*time.Minute)
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := p.exited(t, time.Minute)
		if code != 0 {
			t.Fatalf("exit code %d\n%s", code, stderr)
		}
		if n := strings.Count(stderr, "waiting (--wait-for-crds)"); n != 1 {
			t.Errorf("%d waiting lines, want 1:\n%s", n, stderr)
		}
		if !regexp.MustCompile(regexp.QuoteMeta(gvrString(gvr)) + `\s+Synced\s+1\s`).MatchString(stderr) {
			t.Errorf("final status lacks %s Synced with 1 object:\n%s\nstdout:\n%s", gvrString(gvr), stderr, stdout)
		}
		mustNotContain(t, "stderr", stderr, "(no informers)")
	})
}

// A delete held by a finalizer: one UPDATED line marking the object
// Terminating and naming the finalizer (not two metadata changes), and
// the DELETED line when the finalizer is released. In JSON the record
// says terminating and the finalizers, beside the diff.
func TestE2EItemsBTerminating(t *testing.T) {
	controlplane.Parallel(t)
	cp := controlPlane(t)
	ctx := context.Background()
	crd := controlplane.NewCRD("held.e2e.example.com", "Held", "helds")
	if err := cp.InstallCRD(ctx, crd); err != nil {
		t.Fatal(err)
	}
	gvr := controlplane.GVR(crd)
	for _, mode := range []string{"text", "json"} {
		t.Run(mode, func(t *testing.T) {
			ns := perRun("e2e-held")
			if err := cp.CreateNamespace(ctx, ns); err != nil {
				t.Fatal(err)
			}
			client := cp.Dynamic().Resource(gvr).Namespace(ns)
			obj := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": gvr.GroupVersion().String(), "kind": "Held",
				"metadata": map[string]any{"name": "vault", "namespace": ns, "finalizers": []any{"e2e.example.com/hold"}},
				"spec":     map[string]any{"size": int64(1)},
			}}
			if _, err := client.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			p := startWatcher(t, "--kubeconfig", cp.Kubeconfig(t), "--resource", "helds", "-n", ns, "-o", mode)
			if mode == "text" {
				p.waitEventLine(t, "ADDED", ns+"/vault")
			} else {
				p.waitEventLine(t, `"type":"ADDED"`, `"name":"vault"`)
			}
			if err := client.Delete(ctx, "vault", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			if mode == "text" {
				p.waitEventLine(t, "UPDATED", ns+"/vault", "Terminating (finalizers: e2e.example.com/hold)")
			} else {
				p.waitEventLine(t, `"type":"UPDATED"`, `"terminating":true`, `"finalizers":["e2e.example.com/hold"]`)
			}
			if _, err := client.Patch(ctx, "vault", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			if mode == "text" {
				p.waitEventLine(t, "DELETED", ns+"/vault")
			} else {
				p.waitEventLine(t, `"type":"DELETED"`, `"name":"vault"`)
			}
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			code, stdout, stderr := p.exited(t, time.Minute)
			if code != 0 {
				t.Fatalf("exit code %d\n%s", code, stderr)
			}
			if mode == "text" {
				var updates []string
				for _, l := range strings.Split(stdout, "\n") {
					if strings.Contains(l, "UPDATED") {
						updates = append(updates, l)
					}
				}
				if len(updates) != 1 || !strings.HasSuffix(updates[0], ns+"/vault  Terminating (finalizers: e2e.example.com/hold)") {
					t.Errorf("UPDATED lines:\n%s\nwant one ending in the Terminating mark", strings.Join(updates, "\n"))
				}
				mustNotContain(t, "stdout", stdout, "deletionTimestamp", "deletionGracePeriodSeconds")
			}
		})
	}
}

// /metrics has informerkit_build_info 1 with the versions built in: the
// watcher's module ("(devel)" from a work tree), Go's and client-go's.
func TestE2EItemsBBuildInfo(t *testing.T) {
	controlplane.Parallel(t)
	cp := controlPlane(t)
	p := startWatcher(t, "--kubeconfig", cp.Kubeconfig(t), "--resource", "namespaces", "--metrics-addr", "127.0.0.1:0")
	base := metricsBase(t, p)
	fams := scrapeMetrics(t, base+"/metrics")
	f := fams["informerkit_build_info"]
	if f == nil || f.GetType() != dto.MetricType_GAUGE || len(f.Metric) != 1 {
		t.Fatalf("informerkit_build_info = %v, want one gauge", f)
	}
	labels := map[string]string{}
	for _, l := range f.Metric[0].Label {
		labels[l.GetName()] = l.GetValue()
	}
	if v := f.Metric[0].GetGauge().GetValue(); v != 1 {
		t.Errorf("value %v, want 1", v)
	}
	if labels["version"] != "(devel)" || labels["go_version"] != runtime.Version() ||
		!regexp.MustCompile(`^v0\.\d+\.\d+`).MatchString(labels["client_go_version"]) || labels["informerkit_version"] == "" {
		t.Errorf("labels %v, want version (devel), go_version %s, client_go_version v0.x.y, informerkit_version", labels, runtime.Version())
	}
}

// Flag values are checked before the API server is contacted: a bad
// --metrics-addr is exit 2 even when the cluster cannot be reached (it was
// exit 1, found only after connecting).
func TestE2EItemsBFlagsBeforeContact(t *testing.T) {
	controlplane.Parallel(t)
	watcherBinary(t)
	server := silentListener(t) // would hang until --request-timeout
	for _, args := range [][]string{
		{"--metrics-addr", "9090x"},
		{"-l", "app in (web"},
		{"--progress-interval", "-1s"},
	} {
		start := time.Now()
		p := startWatcher(t, append([]string{"--kubeconfig", kubeconfigAt(t, nil, server, ""), "--resource", "pods", "--request-timeout", "30s"}, args...)...)
		code, _, stderr := p.exited(t, time.Minute)
		if code != 2 {
			t.Errorf("%q: exit code %d, want 2\n%s", args, code, stderr)
		}
		mustNotContain(t, "stderr", stderr, "connecting", "cannot reach")
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("%q: exited after %s: it waited for the server", args, d)
		}
	}
}
