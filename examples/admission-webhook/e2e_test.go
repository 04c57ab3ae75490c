package main

// End-to-end tests on the in-process API server (test/controlplane): the
// webhook runs with --install, so the API server itself calls it through
// a ValidatingWebhookConfiguration with a caBundle and an
// https://127.0.0.1:port URL. Each test has its own namespace, its own
// webhook configuration and policies restricted to its namespace, and runs
// side by side with the others; each checks its goroutines after the
// webhook shut down.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/test/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) { os.Exit(controlplane.RunTests(m, controlplane.Options{}, &cp)) }

// e2eWebhook is a webhook under test and what it was started with.
type e2eWebhook struct {
	*server
	ca         *certAuthority
	certDir    string
	policyDir  string
	stopOnce   sync.Once
	configName string
}

// stop shuts the webhook down and deletes its configuration (once).
func (w *e2eWebhook) stop() {
	w.stopOnce.Do(func() {
		w.shutdown()
		_ = cp.Kube().AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), w.configName, metav1.DeleteOptions{})
	})
}

// stopAndCheck stops the webhook and checks that the goroutines started
// since snap have ended.
func (w *e2eWebhook) stopAndCheck(t *testing.T, snap controlplane.GoroutineSnapshot) {
	t.Helper()
	w.stop()
	snap.VerifyNoLeaks(t)
}

// startWebhook starts the webhook on the test's control plane with the
// policies of policyDir, installed as the configuration aw-<ns>. It is
// shut down, and its configuration deleted, at the test's end.
func startWebhook(t *testing.T, ns, policyDir string) *e2eWebhook {
	t.Helper()
	ctx := context.Background()
	ca, err := newCertAuthority("e2e-ca-" + ns)
	if err != nil {
		t.Fatal(err)
	}
	certDir := t.TempDir()
	if _, err := ca.issue(certDir); err != nil {
		t.Fatal(err)
	}
	s, err := newServer(ctx, cp.Config(), serverOptions{
		PolicyDir: policyDir, CertFile: filepath.Join(certDir, "tls.crt"), KeyFile: filepath.Join(certDir, "tls.key"),
		Listen: "127.0.0.1:0", ProbeListen: "127.0.0.1:0",
		Install: &webhookTarget{CABundle: ca.CertPEM, ConfigName: "aw-" + ns},
		Log:     newLogger(testWriter{t}, 0),
	})
	if err != nil {
		t.Fatal(err)
	}
	w := &e2eWebhook{server: s, ca: ca, certDir: certDir, policyDir: policyDir, configName: "aw-" + ns}
	t.Cleanup(w.stop)
	return w
}

// testWriter sends the webhook's log to the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// restrictTo rewrites a policy to match only namespace ns.
func restrictTo(text, ns string) string {
	return strings.Replace(text, "match:\n", "match:\n  namespaces: ["+ns+"]\n", 1)
}

func writePolicy(t *testing.T, dir, file, text string) {
	t.Helper()
	if err := writeFileAtomic(filepath.Join(dir, file), []byte(text)); err != nil {
		t.Fatal(err)
	}
}

var sharedCRDs = sync.OnceValue(func() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, crd := range []*apiextensionsv1.CustomResourceDefinition{gatewayCRD(), httpRouteCRD(), widgetCRD(), gadgetCRD(), databaseCRD()} {
		if err := cp.InstallCRD(ctx, crd); err != nil {
			return err
		}
	}
	return nil
})

func setupNamespace(t *testing.T, ns string) {
	t.Helper()
	if err := cp.CreateNamespace(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
}

// create creates obj and returns the API server's error (nil: admitted).
func create(t *testing.T, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) error {
	t.Helper()
	_, err := cp.Dynamic().Resource(gvr).Namespace(obj.GetNamespace()).Create(context.Background(), obj, metav1.CreateOptions{})
	return err
}

func update(t *testing.T, gvr schema.GroupVersionResource, ns, name string, edit func(u *unstructured.Unstructured)) error {
	t.Helper()
	c := cp.Dynamic().Resource(gvr).Namespace(ns)
	u, err := c.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	edit(u)
	_, err = c.Update(context.Background(), u, metav1.UpdateOptions{})
	return err
}

// mustAdmit and mustDeny check an API server answer.
func mustAdmit(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: denied, want admitted: %v", what, err)
	}
}

func mustDeny(t *testing.T, what string, err error, webhook, message string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: admitted, want denied by %s with %q", what, webhook, message)
	}
	want := fmt.Sprintf("admission webhook %q denied the request: ", webhook+".admission-webhook.informerkit.io")
	if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), message) {
		t.Fatalf("%s: denied with %q, want %q and %q", what, err, want, message)
	}
	t.Logf("%s: denied: %v", what, err)
}

// waitCached waits until the webhook's cache of ref holds n objects in
// namespace ns (other tests may cache objects of the same resource).
func (w *e2eWebhook) waitCached(t *testing.T, ref, ns string, n int) {
	t.Helper()
	if err := waitUntil(context.Background(), 30*time.Second, fmt.Sprintf("%d objects of %s in the cache of %s", n, ns, ref), func() (bool, string) {
		idx, err := w.caches.indexer(ref)
		if err != nil {
			return false, err.Error()
		}
		objs, err := idx.ByIndex(toolscache.NamespaceIndex, ns)
		return err == nil && len(objs) == n, fmt.Sprintf("%d objects (%v)", len(objs), err)
	}); err != nil {
		t.Fatal(err)
	}
}

// get fetches a probe endpoint.
func (w *e2eWebhook) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + w.probeAddr() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestShippedPolicies: each shipped policy, called by the API server,
// admits and denies creates and updates with its message.
func TestShippedPolicies(t *testing.T) {
	snap := controlplane.Parallel(t)
	const ns = "e2e-shipped"
	if err := sharedCRDs(); err != nil {
		t.Fatal(err)
	}
	setupNamespace(t, ns)
	dir := t.TempDir()
	entries, _ := shippedPolicies.ReadDir("policies")
	for _, e := range entries {
		data, _ := shippedPolicies.ReadFile("policies/" + e.Name())
		writePolicy(t, dir, e.Name(), restrictTo(string(data), ns))
	}
	w := startWebhook(t, ns, dir)
	defer w.stopAndCheck(t, snap)
	if st := w.policyStatus(); len(st.Loaded) != 4 || len(st.Refused) != 0 {
		t.Fatalf("policies: %+v", st)
	}
	if err := waitForWebhook(context.Background(), cp.Dynamic(), widgetsGVR, newObject("xref.example.com/v1", "Widget", ns, "probe", map[string]any{"spec": map[string]any{"xRef": "none"}}), "widget-xref"); err != nil {
		t.Fatal(err)
	}
	if err := waitUntil(context.Background(), 60*time.Second, "/readyz", func() (bool, string) { code, body := w.get(t, "/readyz"); return code == 200, body }); err != nil {
		t.Fatal(err)
	}

	// Ingress host unique across the cluster.
	mustAdmit(t, "Ingress shop (shop.example.com)", create(t, ingressesGVR, ingress(ns, "shop", "shop.example.com")))
	mustAdmit(t, "Ingress blog (blog.example.com)", create(t, ingressesGVR, ingress(ns, "blog", "blog.example.com")))
	w.waitCached(t, "ingresses.networking.k8s.io", ns, 2)
	mustDeny(t, "Ingress shop2 (shop.example.com)", create(t, ingressesGVR, ingress(ns, "shop2", "www.example.com", "shop.example.com")),
		"ingress-host-unique", "an Ingress host must be unique in the cluster")
	mustAdmit(t, "update of Ingress shop keeping its own host", update(t, ingressesGVR, ns, "shop", func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{"v": "2"}) }))
	mustDeny(t, "update of Ingress blog to shop.example.com", update(t, ingressesGVR, ns, "blog", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"host": "shop.example.com"}}, "spec", "rules")
	}), "ingress-host-unique", "an Ingress host must be unique")

	// HTTPRoute whose parent Gateway must exist.
	mustDeny(t, "HTTPRoute r1 (parent gw, absent)", create(t, httproutesGVR, httpRoute(ns, "r1", "gw")),
		"httproute-parent-gateway", "every parentRef of kind Gateway must name an existing Gateway")
	mustAdmit(t, "Gateway gw", create(t, gatewaysGVR, newObject("gateway.networking.k8s.io/v1", "Gateway", ns, "gw", nil)))
	w.waitCached(t, "gateways.v1.gateway.networking.k8s.io", ns, 1)
	mustAdmit(t, "HTTPRoute r1 (parent gw)", create(t, httproutesGVR, httpRoute(ns, "r1", "gw")))
	mustDeny(t, "update of HTTPRoute r1 to parents gw and other/gw", update(t, httproutesGVR, ns, "r1", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "gw"}, map[string]any{"name": "gw", "namespace": "other"}}, "spec", "parentRefs")
	}), "httproute-parent-gateway", "must name an existing Gateway")

	// spec.xRef naming an object of another CRD.
	mustDeny(t, "Widget w1 (xRef g1, absent)", create(t, widgetsGVR, newObject("xref.example.com/v1", "Widget", ns, "w1", map[string]any{"spec": map[string]any{"xRef": "g1"}})),
		"widget-xref", "spec.xRef must name an existing Gadget")
	mustAdmit(t, "Gadget g1", create(t, gadgetsGVR, newObject("xref.example.com/v1", "Gadget", ns, "g1", nil)))
	w.waitCached(t, "gadgets.v1.xref.example.com", ns, 1)
	mustAdmit(t, "Widget w1 (xRef g1)", create(t, widgetsGVR, newObject("xref.example.com/v1", "Widget", ns, "w1", map[string]any{"spec": map[string]any{"xRef": "g1"}})))
	mustDeny(t, "update of Widget w1 to xRef g2", update(t, widgetsGVR, ns, "w1", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, "g2", "spec", "xRef")
	}), "widget-xref", "spec.xRef must name an existing Gadget")

	// A namespace quota on the count of a CRD's objects.
	for i := 1; i <= 3; i++ {
		mustAdmit(t, fmt.Sprintf("Database db%d", i), create(t, databasesGVR, newObject("quota.example.com/v1", "Database", ns, fmt.Sprintf("db%d", i), nil)))
		w.waitCached(t, "databases.v1.quota.example.com", ns, i)
	}
	mustDeny(t, "Database db4", create(t, databasesGVR, newObject("quota.example.com/v1", "Database", ns, "db4", nil)),
		"database-quota", "namespace quota: at most 3 Databases per namespace")

	// Metrics: requests, decisions and latency by policy.
	_, metricsText := w.get(t, "/metrics")
	for _, want := range []string{
		`admission_webhook_decisions_total{decision="denied",policy="database-quota",reason="validations"} 1`,
		`admission_webhook_decisions_total{decision="allowed",policy="database-quota",reason="validations"} 3`,
		`admission_webhook_request_duration_seconds_count{policy="ingress-host-unique"}`,
		`admission_webhook_requests_total{policy="httproute-parent-gateway"}`,
	} {
		if !strings.Contains(metricsText, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// The policy of the CRD lifecycle test: Assemblies must name an existing
// Part; the Part CRD is installed after the webhook starts.
const assemblyPolicy = `name: assembly-part
failurePolicy: Fail
match:
  resources: [assemblies.v1.late.example.com]
validations:
- expression: 'lookup.get("parts.v1.late.example.com", request.namespace, object.spec.partRef) != null'
  message: "spec.partRef must name an existing Part"
`

var (
	assembliesGVR = schema.GroupVersionResource{Group: "late.example.com", Version: "v1", Resource: "assemblies"}
	partsGVR      = schema.GroupVersionResource{Group: "late.example.com", Version: "v1", Resource: "parts"}
)

func assembly(ns, name, part string) *unstructured.Unstructured {
	return newObject("late.example.com/v1", "Assembly", ns, name, map[string]any{"spec": map[string]any{"partRef": part}})
}

// TestCRDInstalledLaterAndRemoved: the CRD a policy reads is installed
// after the webhook starts and removed while it runs. Meanwhile /readyz
// says which cache is not ready, requests are answered by the failure
// policy naming the cache and its state, and the metric counts them.
func TestCRDInstalledLaterAndRemoved(t *testing.T) {
	snap := controlplane.Parallel(t)
	const ns = "e2e-late"
	ctx := context.Background()
	setupNamespace(t, ns)
	if err := cp.InstallCRD(ctx, controlplane.NewCRD("late.example.com", "Assembly", "assemblies")); err != nil {
		t.Fatal(err)
	}
	partCRD := controlplane.NewCRD("late.example.com", "Part", "parts")
	if err := cp.DeleteCRD(ctx, partCRD.Name); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writePolicy(t, dir, "assembly.yaml", restrictTo(assemblyPolicy, ns))
	w := startWebhook(t, ns, dir)
	defer w.stopAndCheck(t, snap)

	const cacheName = "cache parts.v1.late.example.com"
	if err := waitUntil(ctx, 30*time.Second, "/readyz to name the Part cache as Pending", func() (bool, string) {
		code, body := w.get(t, "/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, cacheName+" is Pending"), body
	}); err != nil {
		t.Fatal(err)
	}
	// The API server calls the webhook: the answer is the failure policy's.
	if err := waitForWebhook(ctx, cp.Dynamic(), assembliesGVR, assembly(ns, "probe", "p1"), cacheName+" is Pending"); err != nil {
		t.Fatal(err)
	}
	mustDeny(t, "Assembly a1 before the Part CRD exists", create(t, assembliesGVR, assembly(ns, "a1", "p1")),
		"assembly-part", "policy assembly-part cannot decide: "+cacheName+" is Pending")

	if err := cp.InstallCRD(ctx, partCRD); err != nil {
		t.Fatal(err)
	}
	if err := waitUntil(ctx, 60*time.Second, "/readyz after the Part CRD was installed", func() (bool, string) {
		code, body := w.get(t, "/readyz")
		return code == http.StatusOK, body
	}); err != nil {
		t.Fatal(err)
	}
	mustDeny(t, "Assembly a1 (no Part p1)", create(t, assembliesGVR, assembly(ns, "a1", "p1")), "assembly-part", "spec.partRef must name an existing Part")
	mustAdmit(t, "Part p1", create(t, partsGVR, newObject("late.example.com/v1", "Part", ns, "p1", nil)))
	w.waitCached(t, "parts.v1.late.example.com", ns, 1)
	mustAdmit(t, "Assembly a1 (Part p1)", create(t, assembliesGVR, assembly(ns, "a1", "p1")))

	if err := cp.DeleteCRD(ctx, partCRD.Name); err != nil {
		t.Fatal(err)
	}
	if err := waitUntil(ctx, 60*time.Second, "/readyz to name the Part cache as Removed", func() (bool, string) {
		code, body := w.get(t, "/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, cacheName+" is Removed"), body
	}); err != nil {
		t.Fatal(err)
	}
	mustDeny(t, "Assembly a2 after the Part CRD was removed", create(t, assembliesGVR, assembly(ns, "a2", "p1")),
		"assembly-part", cacheName+" is Removed")
	_, metricsText := w.get(t, "/metrics")
	for _, state := range []string{"Pending", "Removed"} {
		want := fmt.Sprintf(`admission_webhook_cache_not_ready_total{policy="assembly-part",resource="parts.v1.late.example.com",state="%s"}`, state)
		if !strings.Contains(metricsText, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// configMapPolicy forbids a data key in ConfigMaps of the test's namespace.
func configMapPolicy(name, key, message string) string {
	return fmt.Sprintf(`name: %s
match:
  resources: [cm]
  operations: [CREATE, UPDATE]
validations:
- expression: '!has(object.data) || !(%q in object.data)'
  message: %q
`, name, key, message)
}

func configMap(ns, name, key string) *unstructured.Unstructured {
	return newObject("v1", "ConfigMap", ns, name, map[string]any{"data": map[string]any{key: "x"}})
}

var configMapsGVR = corev1.SchemeGroupVersion.WithResource("configmaps")

// TestPolicyReload: an edited policy file is reloaded and the API server's
// requests get the new rules; a bad policy is refused with its line while
// the others keep working; a bad edit keeps the previous version serving.
func TestPolicyReload(t *testing.T) {
	snap := controlplane.Parallel(t)
	const ns = "e2e-reload"
	ctx := context.Background()
	setupNamespace(t, ns)
	dir := t.TempDir()
	writePolicy(t, dir, "cm.yaml", restrictTo(configMapPolicy("cm-keys", "forbidden", "v1: the key forbidden is not allowed"), ns))
	w := startWebhook(t, ns, dir)
	defer w.stopAndCheck(t, snap)
	if err := waitForWebhook(ctx, cp.Dynamic(), configMapsGVR, configMap(ns, "probe", "forbidden"), "v1: the key forbidden"); err != nil {
		t.Fatal(err)
	}
	mustAdmit(t, "ConfigMap c1 (key secret) under v1", create(t, configMapsGVR, configMap(ns, "c1", "secret")))

	gen := w.loader.current.Load().generation
	writePolicy(t, dir, "cm.yaml", restrictTo(configMapPolicy("cm-keys", "secret", "v2: the key secret is not allowed"), ns))
	if err := waitUntil(ctx, 30*time.Second, "the edited policy to be loaded", func() (bool, string) {
		set := w.loader.current.Load()
		return set.generation > gen && set.byName["cm-keys"] != nil && set.byName["cm-keys"].Validations[0].Message == "v2: the key secret is not allowed", fmt.Sprint(set.generation)
	}); err != nil {
		t.Fatal(err)
	}
	mustDeny(t, "ConfigMap c2 (key secret) under v2", create(t, configMapsGVR, configMap(ns, "c2", "secret")), "cm-keys", "v2: the key secret is not allowed")
	mustAdmit(t, "ConfigMap c3 (key forbidden) under v2", create(t, configMapsGVR, configMap(ns, "c3", "forbidden")))

	// A new file with a policy that does not type-check: refused with its
	// file and line; cm-keys keeps working.
	bad := restrictTo(`name: cm-bad
match:
  resources: [cm]
validations:
- expression: |
    has(object.data) &&
    object.data.size() > nosuch
  message: m
`, ns)
	gen = w.loader.current.Load().generation
	writePolicy(t, dir, "bad.yaml", bad)
	if err := waitUntil(ctx, 30*time.Second, "the bad policy to be refused", func() (bool, string) {
		st := w.policyStatus()
		return st.Generation > gen && len(st.Refused) == 1, fmt.Sprint(st.Refused)
	}); err != nil {
		t.Fatal(err)
	}
	refused := w.policyStatus().Refused[0]
	// restrictTo added a line: the fault is on line 8.
	if want := filepath.Join(dir, "bad.yaml") + `:8: policy "cm-bad": validations[0]: CEL: ERROR: <input>:2:`; !strings.HasPrefix(refused, want) || !strings.Contains(refused, "undeclared reference to 'nosuch'") {
		t.Errorf("refused %q, want it to start with %q and name 'nosuch'", refused, want)
	}
	_, body := w.get(t, "/policies")
	if !strings.Contains(body, "bad.yaml:8") {
		t.Errorf("/policies does not name bad.yaml:8:\n%s", body)
	}
	mustDeny(t, "ConfigMap c4 (key secret) beside the bad policy", create(t, configMapsGVR, configMap(ns, "c4", "secret")), "cm-keys", "v2: the key secret")

	// A bad edit of cm-keys: refused, and v2 keeps serving.
	gen = w.loader.current.Load().generation
	writePolicy(t, dir, "cm.yaml", restrictTo(strings.Replace(configMapPolicy("cm-keys", "secret", "v3"), "!has(object.data)", "!has(object.data) ||| ", 1), ns))
	if err := waitUntil(ctx, 30*time.Second, "the bad edit to be refused", func() (bool, string) {
		st := w.policyStatus()
		return st.Generation > gen && len(st.Refused) == 2, fmt.Sprint(st.Refused)
	}); err != nil {
		t.Fatal(err)
	}
	mustDeny(t, "ConfigMap c5 (key secret) after a bad edit", create(t, configMapsGVR, configMap(ns, "c5", "secret")), "cm-keys", "v2: the key secret")
}

// servedSerial dials the webhook and returns the serial of the
// certificate it serves, verified against ca.
func servedSerial(addr string, ca []byte) (*big.Int, error) {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber, nil
}

// TestCertificateRotation: a certificate replaced on disk is served from
// the next handshake, the API server keeps calling the webhook, and a
// broken file leaves the previous certificate serving.
func TestCertificateRotation(t *testing.T) {
	snap := controlplane.Parallel(t)
	const ns = "e2e-certs"
	ctx := context.Background()
	setupNamespace(t, ns)
	dir := t.TempDir()
	writePolicy(t, dir, "cm.yaml", restrictTo(configMapPolicy("cm-certs", "forbidden", "the key forbidden is not allowed"), ns))
	w := startWebhook(t, ns, dir)
	defer w.stopAndCheck(t, snap)
	if err := waitForWebhook(ctx, cp.Dynamic(), configMapsGVR, configMap(ns, "probe", "forbidden"), "the key forbidden"); err != nil {
		t.Fatal(err)
	}
	first, err := servedSerial(w.webhookAddr(), w.ca.CertPEM)
	if err != nil {
		t.Fatal(err)
	}
	second, err := w.ca.issue(w.certDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := waitUntil(ctx, 30*time.Second, "the rotated certificate to be served", func() (bool, string) {
		got, err := servedSerial(w.webhookAddr(), w.ca.CertPEM)
		if err != nil {
			return false, err.Error()
		}
		return got.Cmp(second) == 0, fmt.Sprintf("serving %v (first %v, want %v)", got, first, second)
	}); err != nil {
		t.Fatal(err)
	}
	// The API server's connections to the webhook may be kept alive from
	// before; new ones get the new certificate. Either way it is trusted.
	mustDeny(t, "ConfigMap c1 (key forbidden) after rotation", create(t, configMapsGVR, configMap(ns, "c1", "forbidden")), "cm-certs", "the key forbidden is not allowed")
	mustAdmit(t, "ConfigMap c2 (key other) after rotation", create(t, configMapsGVR, configMap(ns, "c2", "other")))

	// A half-written rotation: the key no longer matches the certificate.
	if err := os.WriteFile(filepath.Join(w.certDir, "tls.key"), []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := servedSerial(w.webhookAddr(), w.ca.CertPEM)
	if err != nil || got.Cmp(second) != 0 {
		t.Fatalf("with a broken key file: serving %v, %v; want the previous certificate %v", got, err, second)
	}
	if n := counterValue(t, w.metrics, "admission_webhook_certificate_loads_total"); n != 2 {
		t.Errorf("certificate loads = %v, want 2", n)
	}
}

// TestDemo runs the demo (no cluster configured): it must exit 0 and
// show each policy admitting and denying.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a second API server")
	}
	snap := controlplane.Parallel(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var stdout, stderr syncBuffer
	if code := run(ctx, []string{"--demo"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	snap.VerifyNoLeaks(t)
	out := stdout.String()
	t.Logf("demo output:\n%s", out)
	if !strings.Contains(out, "== /readyz: ready") {
		t.Errorf("the demo did not print /readyz: ready")
	}
	for _, want := range []struct{ step, answer string }{
		{"create Widget demo/w1 (xRef g1; Gadget CRD absent)", `denied: admission webhook "widget-xref.admission-webhook.informerkit.io" denied the request: policy widget-xref cannot decide: cache gadgets.v1.xref.example.com is Pending`},
		{"create Widget demo/w1 (xRef g1; no Gadget g1)", "denied: "},
		{"create Widget demo/w1 (xRef g1; Gadget g1 created)", "admitted"},
		{"create Ingress demo/shop (host shop.example.com)", "admitted"},
		{"create Ingress demo/shop2 (host shop.example.com)", "an Ingress host must be unique"},
		{"create HTTPRoute demo/r1 (parent Gateway gw)", "must name an existing Gateway"},
		{"create Database demo/db3", "admitted"},
		{"create Database demo/db4", "at most 3 Databases"},
	} {
		found := false
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, want.step+" ") {
				found = true
				if !strings.Contains(line, want.answer) {
					t.Errorf("demo: %q, want %q in it", line, want.answer)
				}
			}
		}
		if !found {
			t.Errorf("the demo did not print %q", want.step)
		}
	}
}

// syncBuffer is a strings.Builder safe for the program and the test at once.
type syncBuffer struct {
	mu sync.Mutex // guards b
	b  strings.Builder
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

// TestRunWithKubeconfig runs the program as a user would against a
// cluster: a kubeconfig, policy and certificate files, --install with
// --webhook-url and --ca-file; the API server calls it until it stops.
func TestRunWithKubeconfig(t *testing.T) {
	snap := controlplane.Parallel(t)
	const ns = "e2e-cli"
	setupNamespace(t, ns)
	dir, certDir := t.TempDir(), t.TempDir()
	writePolicy(t, dir, "cm.yaml", restrictTo(configMapPolicy("cm-cli", "forbidden", "the key forbidden is not allowed (cli)"), ns))
	ca, err := newCertAuthority("e2e-cli-ca")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ca.issue(certDir); err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(certDir, "ca.crt")
	if err := os.WriteFile(caFile, ca.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	// A free port for --listen and --webhook-url.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--kubeconfig", cp.Kubeconfig(t), "--policies", dir,
			"--tls-cert-file", filepath.Join(certDir, "tls.crt"), "--tls-private-key-file", filepath.Join(certDir, "tls.key"),
			"--listen", addr, "--probe-listen", "127.0.0.1:0",
			"--install", "--webhook-url", "https://" + addr, "--ca-file", caFile}, io.Discard, &stderr)
	}()
	defer func() {
		_ = cp.Kube().AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), webhookConfigName, metav1.DeleteOptions{})
	}()
	if err := waitForWebhook(ctx, cp.Dynamic(), configMapsGVR, configMap(ns, "probe", "forbidden"), "(cli)"); err != nil {
		t.Fatalf("%v\nstderr:\n%s", err, stderr.String())
	}
	mustDeny(t, "ConfigMap c1 (key forbidden)", create(t, configMapsGVR, configMap(ns, "c1", "forbidden")), "cm-cli", "the key forbidden is not allowed (cli)")
	mustAdmit(t, "ConfigMap c2 (key other)", create(t, configMapsGVR, configMap(ns, "c2", "other")))
	cancel()
	if code := <-done; code != exitOK {
		t.Errorf("exit %d\nstderr:\n%s", code, stderr.String())
	}
	snap.VerifyNoLeaks(t)
	if !strings.Contains(stderr.String(), `"msg"="ValidatingWebhookConfiguration written" "name"="informerkit-admission-webhook" "webhooks"=1`) {
		t.Errorf("stderr does not say the configuration was written:\n%s", stderr.String())
	}
}
