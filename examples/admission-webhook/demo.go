package main

import (
	"context"
	"embed"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/informerkit/informerkit/test/controlplane"
)

// shippedPolicies are the policies of policies/, which the demo installs.
//
//go:embed policies/*.yaml
var shippedPolicies embed.FS

// The resources the shipped policies judge and look up.
var (
	ingressesGVR  = schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"}
	gatewaysGVR   = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gateways"}
	httproutesGVR = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "httproutes"}
	widgetsGVR    = schema.GroupVersionResource{Group: "xref.example.com", Version: "v1", Resource: "widgets"}
	gadgetsGVR    = schema.GroupVersionResource{Group: "xref.example.com", Version: "v1", Resource: "gadgets"}
	databasesGVR  = schema.GroupVersionResource{Group: "quota.example.com", Version: "v1", Resource: "databases"}
)

// Open-schema CRDs standing in for Gateway API's (the policies read only
// spec.parentRefs), and the example CRDs. A *.k8s.io group needs the
// api-approved annotation, as Gateway API's own CRDs carry.
func gatewayCRD() *apiextensionsv1.CustomResourceDefinition {
	return approved(controlplane.NewCRD("gateway.networking.k8s.io", "Gateway", "gateways", controlplane.ShortNames("gtw")))
}
func httpRouteCRD() *apiextensionsv1.CustomResourceDefinition {
	return approved(controlplane.NewCRD("gateway.networking.k8s.io", "HTTPRoute", "httproutes"))
}
func approved(crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
	crd.Annotations = map[string]string{"api-approved.kubernetes.io": "https://github.com/kubernetes-sigs/gateway-api/pull/1538"}
	return crd
}
func widgetCRD() *apiextensionsv1.CustomResourceDefinition {
	return controlplane.NewCRD("xref.example.com", "Widget", "widgets")
}
func gadgetCRD() *apiextensionsv1.CustomResourceDefinition {
	return controlplane.NewCRD("xref.example.com", "Gadget", "gadgets")
}
func databaseCRD() *apiextensionsv1.CustomResourceDefinition {
	return controlplane.NewCRD("quota.example.com", "Database", "databases")
}

// writeShippedPolicies copies policies/ into dir.
func writeShippedPolicies(dir string) error {
	entries, err := shippedPolicies.ReadDir("policies")
	if err != nil {
		return err
	}
	for _, e := range entries {
		data, err := shippedPolicies.ReadFile("policies/" + e.Name())
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// newObject builds an object of a resource from its apiVersion, kind and
// fields beyond metadata.
func newObject(apiVersion, kind, namespace, name string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": namespace}}}
	for k, v := range fields {
		u.Object[k] = v
	}
	return u
}

func ingress(namespace, name string, hosts ...string) *unstructured.Unstructured {
	rules := []any{}
	for _, h := range hosts {
		rules = append(rules, map[string]any{"host": h})
	}
	return newObject("networking.k8s.io/v1", "Ingress", namespace, name, map[string]any{"spec": map[string]any{
		"defaultBackend": map[string]any{"service": map[string]any{"name": "web", "port": map[string]any{"number": int64(80)}}},
		"rules":          rules,
	}})
}

func httpRoute(namespace, name string, parents ...string) *unstructured.Unstructured {
	refs := []any{}
	for _, p := range parents {
		ref := map[string]any{"name": p}
		if ns, n, ok := strings.Cut(p, "/"); ok {
			ref = map[string]any{"namespace": ns, "name": n}
		}
		refs = append(refs, ref)
	}
	return newObject("gateway.networking.k8s.io/v1", "HTTPRoute", namespace, name, map[string]any{"spec": map[string]any{"parentRefs": refs}})
}

// waitUntil polls cond every 50 ms until it holds or the timeout ends; the
// error says what was awaited and the last reason cond gave.
func waitUntil(ctx context.Context, timeout time.Duration, what string, cond func() (bool, string)) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		ok, why := cond()
		last = why
		return ok, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s (%v); last: %s", what, err, last)
	}
	return nil
}

// waitForWebhook waits until the API server calls the webhook for a
// resource: a dry-run create of obj is denied with want in its message
// (the API server reads webhook configurations from its own informer, so
// a new one takes effect a moment after it is written).
func waitForWebhook(ctx context.Context, client dynamic.Interface, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, want string) error {
	return waitUntil(ctx, 60*time.Second, "the API server to call the webhook for "+gvr.Resource, func() (bool, string) {
		_, err := client.Resource(gvr).Namespace(obj.GetNamespace()).Create(ctx, obj.DeepCopy(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil {
			return false, "admitted"
		}
		return strings.Contains(err.Error(), want), err.Error()
	})
}

// runDemo starts an API server in this process, the webhook with the
// shipped policies and --install, and shows each policy admit and deny.
func runDemo(ctx context.Context, f *flags, stdout io.Writer, log logr.Logger) error {
	step := func(format string, args ...any) { fmt.Fprintf(stdout, "== "+format+"\n", args...) }
	step("starting an API server in this process")
	cp, err := controlplane.Start(ctx, controlplane.Options{})
	if err != nil {
		return err
	}
	defer cp.Stop()
	dir, err := os.MkdirTemp("", "admission-webhook-demo-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	policyDir, certDir := filepath.Join(dir, "policies"), filepath.Join(dir, "certs")
	for _, d := range []string{policyDir, certDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return err
		}
	}
	if f.policyDir != "" {
		policyDir = f.policyDir
	} else if err := writeShippedPolicies(policyDir); err != nil {
		return err
	}
	ca, err := newCertAuthority("admission-webhook-demo-ca")
	if err != nil {
		return err
	}
	if _, err := ca.issue(certDir); err != nil {
		return err
	}
	for _, crd := range []*apiextensionsv1.CustomResourceDefinition{gatewayCRD(), httpRouteCRD(), widgetCRD(), databaseCRD()} {
		if err := cp.InstallCRD(ctx, crd); err != nil {
			return err
		}
	}
	const ns = "demo"
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		return err
	}
	step("starting the webhook with the policies of %s (--install); the Gadget CRD is not installed yet", policyDir)
	s, err := newServer(ctx, cp.Config(), serverOptions{PolicyDir: policyDir, CertFile: filepath.Join(certDir, "tls.crt"), KeyFile: filepath.Join(certDir, "tls.key"),
		Listen: "127.0.0.1:0", ProbeListen: "127.0.0.1:0", Install: &webhookTarget{CABundle: ca.CertPEM}, Log: log})
	if err != nil {
		return err
	}
	defer s.shutdown()
	for _, p := range s.policyStatus().Loaded {
		step("policy %s loaded from %s:%d, reads %v", p.Name, filepath.Base(p.File), p.Line, p.Lookups)
	}
	if ok, notReady := s.readiness(); !ok {
		step("/readyz: not ready: %v", notReady)
	}
	dyn := cp.Dynamic()
	try := func(what string, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) {
		_, err := dyn.Resource(gvr).Namespace(obj.GetNamespace()).Create(ctx, obj, metav1.CreateOptions{})
		if err != nil {
			fmt.Fprintf(stdout, "%-58s denied: %v\n", what, err)
			return
		}
		fmt.Fprintf(stdout, "%-58s admitted\n", what)
	}
	// The Widget policy reads Gadgets, whose CRD is not installed: its
	// failure policy answers, saying so.
	if err := waitForWebhook(ctx, dyn, widgetsGVR, newObject("xref.example.com/v1", "Widget", ns, "probe", map[string]any{"spec": map[string]any{"xRef": "none"}}), "widget-xref"); err != nil {
		return err
	}
	try("create Widget demo/w1 (xRef g1; Gadget CRD absent)", widgetsGVR, newObject("xref.example.com/v1", "Widget", ns, "w1", map[string]any{"spec": map[string]any{"xRef": "g1"}}))
	step("installing the Gadget CRD while the webhook runs")
	if err := cp.InstallCRD(ctx, gadgetCRD()); err != nil {
		return err
	}
	if err := waitUntil(ctx, 60*time.Second, "/readyz", func() (bool, string) { ok, nr := s.readiness(); return ok, fmt.Sprint(nr) }); err != nil {
		return err
	}
	step("/readyz: ready (every cache a policy reads is Synced)")
	try("create Widget demo/w1 (xRef g1; no Gadget g1)", widgetsGVR, newObject("xref.example.com/v1", "Widget", ns, "w1", map[string]any{"spec": map[string]any{"xRef": "g1"}}))
	if _, err := dyn.Resource(gadgetsGVR).Namespace(ns).Create(ctx, newObject("xref.example.com/v1", "Gadget", ns, "g1", nil), metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := waitUntil(ctx, 30*time.Second, "Gadget g1 in the cache", func() (bool, string) {
		st := s.caches.state("gadgets.v1.xref.example.com")
		return st.Objects == 1, st.String()
	}); err != nil {
		return err
	}
	try("create Widget demo/w1 (xRef g1; Gadget g1 created)", widgetsGVR, newObject("xref.example.com/v1", "Widget", ns, "w1", map[string]any{"spec": map[string]any{"xRef": "g1"}}))
	try("create Ingress demo/shop (host shop.example.com)", ingressesGVR, ingress(ns, "shop", "shop.example.com"))
	if err := waitUntil(ctx, 30*time.Second, "Ingress shop in the cache", func() (bool, string) {
		st := s.caches.state("ingresses.networking.k8s.io")
		return st.Objects == 1, st.String()
	}); err != nil {
		return err
	}
	try("create Ingress demo/shop2 (host shop.example.com)", ingressesGVR, ingress(ns, "shop2", "shop.example.com"))
	try("create HTTPRoute demo/r1 (parent Gateway gw)", httproutesGVR, httpRoute(ns, "r1", "gw"))
	for i := 1; i <= 4; i++ {
		try(fmt.Sprintf("create Database demo/db%d", i), databasesGVR, newObject("quota.example.com/v1", "Database", ns, fmt.Sprintf("db%d", i), nil))
		if err := waitUntil(ctx, 30*time.Second, "the Database in the cache", func() (bool, string) {
			st := s.caches.state("databases.v1.quota.example.com")
			return st.Objects >= min(i, 3), st.String()
		}); err != nil {
			return err
		}
	}
	step("metrics at http://%s/metrics, policies at http://%s/policies", s.probeAddr(), s.probeAddr())
	return nil
}
