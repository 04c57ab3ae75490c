package main

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informerkit/informerkit/test/controlplane"
)

// oneOfTwoNamespaces makes two namespaces (ok, denied) with a configmap
// "web" each, and a user (named after prefix) who may read configmaps in
// ok only; kc is the user's kubeconfig.
func oneOfTwoNamespaces(t *testing.T, cp *controlplane.ControlPlane, prefix string) (ok, denied, kc string) {
	t.Helper()
	ctx := context.Background()
	user := perRun(prefix)
	ok, denied = perRun(prefix+"-ok"), perRun(prefix+"-denied")
	for _, ns := range []string{ok, denied} {
		if err := cp.CreateNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
		if _, err := cp.Kube().CoreV1().ConfigMaps(ns).Create(ctx, newConfigMap("web", nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cp.Grant(ctx, user, ok, "read-configmaps", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}); err != nil {
		t.Fatal(err)
	}
	return ok, denied, kubeconfigAt(t, cp, cp.Config().Host, user)
}

// Two namespaces, the user allowed in one: with the access check on and
// off the allowed namespace's objects are printed, /readyz answers 503
// naming the denied namespace, and --exit-on-failure exits 3 saying so.
func TestE2ESeveralNamespacesOneDenied(t *testing.T) {
	controlplane.Parallel(t)
	cp := controlPlane(t)
	for _, check := range []string{"true", "false"} {
		t.Run("access-check="+check, func(t *testing.T) {
			ok, denied, kc := oneOfTwoNamespaces(t, cp, "e2e-twons")
			p := startWatcher(t, "--kubeconfig", kc, "--resource", "configmaps", "-n", ok+","+denied, "--metrics-addr", "127.0.0.1:0", "--access-check="+check)
			base := metricsBase(t, p)
			p.waitEventLine(t, "ADDED", ok+"/web")
			start := time.Now()
			for {
				code, body := httpGet(base + "/readyz")
				if code == http.StatusServiceUnavailable && strings.Contains(body, "configmaps.v1 denied in namespace "+denied+": ") {
					break
				}
				if time.Since(start) > time.Minute {
					t.Fatalf("/readyz = %d %q, want 503 naming %s as denied", code, body, denied)
				}
				time.Sleep(100 * time.Millisecond)
			}
			q := startWatcher(t, "--kubeconfig", kc, "--resource", "configmaps", "-n", ok+","+denied, "--exit-on-failure", "--access-check="+check)
			code, _, stderr := q.exited(t, 2*time.Minute)
			if code != 3 {
				t.Fatalf("--exit-on-failure: exit code %d, want 3\n%s", code, stderr)
			}
			mustContain(t, "stderr", stderr, "crd-watcher: exiting (--exit-on-failure): configmaps.v1 not ready: denied in namespace "+denied+": ")
		})
	}
}

// --permitted-namespaces over two candidate namespaces, the user allowed
// in one: the allowed namespace's objects are printed, the STATUS line
// and /readyz (200: the watcher holds what the user may see) name the
// other namespace as not permitted with the missing verbs.
func TestE2EPermittedNamespacesNamed(t *testing.T) {
	controlplane.Parallel(t)
	cp := controlPlane(t)
	ok, denied, kc := oneOfTwoNamespaces(t, cp, "e2e-perm")
	p := startWatcher(t, "--kubeconfig", kc, "--resource", "configmaps", "-n", ok+","+denied, "--permitted-namespaces", "--metrics-addr", "127.0.0.1:0")
	base := metricsBase(t, p)
	p.waitEventLine(t, "ADDED", ok+"/web")
	p.waitStderr(t, regexp.MustCompile(`STATUS  configmaps\.v1 .*Synced \(1 objects\).*; permitted in 1 namespace \(`+regexp.QuoteMeta(ok)+`\); not permitted in 1: may not list, watch in `+regexp.QuoteMeta(denied)+`; next access check at \d\d:\d\d:\d\d$`), time.Minute)
	code, body := httpGet(base + "/readyz")
	if code != http.StatusOK || !strings.Contains(body, "ok\nconfigmaps.v1 not permitted in 1 namespace: may not list, watch in "+denied+"\n") {
		t.Fatalf("/readyz = %d %q, want 200 naming %s as not permitted (may not list, watch)", code, body, denied)
	}
	stdout, _ := p.lines()
	for _, l := range stdout {
		if strings.Contains(l, denied+"/") {
			t.Fatalf("an object of the namespace not permitted was printed: %s", l)
		}
	}
}
