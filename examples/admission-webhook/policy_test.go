package main

// Unit tests of loading, compiling and deciding, with a fake dynamic
// client behind the caches (no API server): the shipped policies compile,
// refusals name their file and line, the lookup functions read the cache,
// and a cache that is not Synced is answered by the failure policy.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/informerkit/informerkit/dynamicinformer"
)

// fakeResolve knows the shipped policies' names as discovery would.
func fakeResolve(_ context.Context, ref string) (schema.GroupVersionResource, error) {
	switch ref {
	case "ingresses.networking.k8s.io", "ing":
		return ingressesGVR, nil
	}
	if gvr, ok := fullName(ref); ok {
		return gvr, nil
	}
	return schema.GroupVersionResource{}, fmt.Errorf("the server doesn't have a resource type %q", ref)
}

// unitEnv is a loader over a fake client holding objs.
type unitEnv struct {
	factory *dynamicinformer.Factory
	caches  *caches
	loader  *policyLoader
	webhook *webhook
	metrics *metrics
	client  *dynamicfake.FakeDynamicClient
}

func newUnitEnv(t *testing.T, dir string, objs ...*unstructured.Unstructured) *unitEnv {
	t.Helper()
	kinds := map[schema.GroupVersionResource]string{
		ingressesGVR: "IngressList", gatewaysGVR: "GatewayList", httproutesGVR: "HTTPRouteList",
		widgetsGVR: "WidgetList", gadgetsGVR: "GadgetList", databasesGVR: "DatabaseList",
		{Group: "nowhere.example.com", Version: "v1", Resource: "things"}: "ThingList",
		{Version: "v1", Resource: "namespaces"}:                           "NamespaceList",
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), kinds)
	// Created through the client by GVR: the fake's guess of a resource
	// from a kind loses some (Gateway).
	for _, o := range objs {
		var gvr schema.GroupVersionResource
		for r, list := range kinds {
			if list == o.GetKind()+"List" {
				gvr = r
			}
		}
		if _, err := client.Resource(gvr).Namespace(o.GetNamespace()).Create(context.Background(), o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	f := dynamicinformer.NewSharedInformerFactory(client, dynamicinformer.Options{DisableCRDTracking: true})
	e := &unitEnv{factory: f, caches: newCaches(f), metrics: newMetrics(), client: client}
	envSet, err := newCELEnvSet(e.caches)
	if err != nil {
		t.Fatal(err)
	}
	e.loader = &policyLoader{dir: dir, compiler: newCompiler(envSet, fakeResolve), caches: e.caches, metrics: e.metrics, log: logr.Discard()}
	e.webhook = &webhook{policies: e.loader.current.Load, caches: e.caches, metrics: e.metrics, log: logr.Discard()}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); e.caches.releaseAll(); f.Shutdown() })
	f.Start(ctx)
	return e
}

func shippedDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := writeShippedPolicies(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestShippedPoliciesCompile(t *testing.T) {
	e := newUnitEnv(t, shippedDir(t))
	set := e.loader.load(context.Background())
	if len(set.errors) > 0 {
		t.Fatalf("refused: %v", set.errors)
	}
	want := map[string][]string{
		"ingress-host-unique":      {"ingresses.networking.k8s.io"},
		"httproute-parent-gateway": {"gateways.v1.gateway.networking.k8s.io"},
		"widget-xref":              {"gadgets.v1.xref.example.com"},
		"database-quota":           {"databases.v1.quota.example.com"},
	}
	for name, lookups := range want {
		p := set.byName[name]
		if p == nil {
			t.Errorf("policy %s not loaded", name)
			continue
		}
		if fmt.Sprint(p.lookups) != fmt.Sprint(lookups) {
			t.Errorf("policy %s reads %v, want %v", name, p.lookups, lookups)
		}
	}
}

// TestRefusedWithLine: each bad policy is refused with its file, the line
// of the fault and the CEL error; the good policy beside it loads.
func TestRefusedWithLine(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		line       int
		want       string
	}{
		{"undeclared", "name: bad\nmatch:\n  resources: [ing]\nvalidations:\n- expression: |\n    object.spec.replicas > 1 &&\n    nosuchvar == 2\n  message: m\n", 7, "undeclared reference to 'nosuchvar'"},
		{"syntax", "name: bad\nmatch:\n  resources: [ing]\nvalidations:\n- expression: 'object.spec.('\n  message: m\n", 5, "Syntax error"},
		{"not-bool", "name: bad\nmatch:\n  resources: [ing]\nvalidations:\n- expression: '1 + 2'\n  message: m\n", 5, "must evaluate to bool"},
		{"lookup-not-literal", "name: bad\nmatch:\n  resources: [ing]\nvalidations:\n- expression: |\n    true &&\n    lookup.count(object.kind, \"\", \"\") > 0\n  message: m\n", 7, "must be a string literal"},
		{"unknown-resource", "name: bad\nmatch:\n  resources:\n  - ing\n  - nosuchthing\nvalidations:\n- expression: 'true'\n  message: m\n", 5, "nosuchthing"},
		{"yaml", "name: bad\nmatch: [\n", 2, "yaml"},
		{"failure-policy", "name: bad\nfailurePolicy: Sometimes\nmatch:\n  resources: [ing]\nvalidations:\n- expression: 'true'\n  message: m\n", 1, "must be Fail or Ignore"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			good := "name: good\nmatch:\n  resources: [ing]\nvalidations:\n- expression: 'true'\n  message: m\n"
			if err := os.WriteFile(filepath.Join(dir, "a-good.yaml"), []byte(good), 0o644); err != nil {
				t.Fatal(err)
			}
			bad := filepath.Join(dir, "b-bad.yaml")
			if err := os.WriteFile(bad, []byte(tc.text), 0o644); err != nil {
				t.Fatal(err)
			}
			e := newUnitEnv(t, dir)
			set := e.loader.load(context.Background())
			if set.byName["good"] == nil {
				t.Errorf("the good policy was not loaded beside the bad one")
			}
			if set.byName["bad"] != nil {
				t.Errorf("the bad policy was loaded")
			}
			if len(set.errors) != 1 {
				t.Fatalf("errors: %v, want 1", set.errors)
			}
			pe := set.errors[0]
			if pe.File != bad || pe.Line != tc.line || !strings.Contains(pe.Error(), tc.want) {
				t.Errorf("error %q (file %s line %d), want file %s line %d containing %q", pe, pe.File, pe.Line, bad, tc.line, tc.want)
			}
			t.Logf("refused: %v", pe)
		})
	}
}

func admissionRequest(t *testing.T, op admissionv1.Operation, gvr schema.GroupVersionResource, obj, old *unstructured.Unstructured) *admissionv1.AdmissionRequest {
	t.Helper()
	req := &admissionv1.AdmissionRequest{
		UID: "1", Operation: op,
		Resource: metav1.GroupVersionResource{Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource},
	}
	for _, o := range []struct {
		u   *unstructured.Unstructured
		raw *runtime.RawExtension
	}{{obj, &req.Object}, {old, &req.OldObject}} {
		if o.u == nil {
			continue
		}
		gvk := o.u.GroupVersionKind()
		req.Kind = metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind}
		req.Namespace, req.Name = o.u.GetNamespace(), o.u.GetName()
		data, err := json.Marshal(o.u.Object)
		if err != nil {
			t.Fatal(err)
		}
		o.raw.Raw = data
	}
	return req
}

func waitSynced(t *testing.T, e *unitEnv) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for gvr, ok := range e.factory.WaitForCacheSync(ctx) {
		if !ok {
			t.Fatalf("cache %s did not sync", gvr)
		}
	}
	// Requests read the published states, which may follow HasSynced.
	if err := waitUntil(ctx, 30*time.Second, "the published states", func() (bool, string) {
		for _, st := range e.caches.states() {
			if q := e.caches.quickState(st.Ref); !q.ready() {
				return false, q.String()
			}
		}
		return true, ""
	}); err != nil {
		t.Fatal(err)
	}
}

// TestDecide runs each shipped policy's lookups against a cache.
func TestDecide(t *testing.T) {
	e := newUnitEnv(t, shippedDir(t),
		ingress("a", "shop", "shop.example.com"),
		newObject("gateway.networking.k8s.io/v1", "Gateway", "a", "gw", nil),
		newObject("xref.example.com/v1", "Gadget", "a", "g1", nil),
		newObject("quota.example.com/v1", "Database", "a", "db1", nil),
		newObject("quota.example.com/v1", "Database", "a", "db2", nil),
		newObject("quota.example.com/v1", "Database", "a", "db3", nil),
	)
	set := e.loader.load(context.Background())
	if len(set.errors) > 0 {
		t.Fatal(set.errors)
	}
	waitSynced(t, e)
	for _, tc := range []struct {
		policy string
		req    *admissionv1.AdmissionRequest
		allow  bool
		msg    string
	}{
		{"ingress-host-unique", admissionRequest(t, admissionv1.Create, ingressesGVR, ingress("b", "other", "shop.example.com"), nil), false, "an Ingress host must be unique"},
		{"ingress-host-unique", admissionRequest(t, admissionv1.Create, ingressesGVR, ingress("b", "other", "blog.example.com"), nil), true, ""},
		{"ingress-host-unique", admissionRequest(t, admissionv1.Update, ingressesGVR, ingress("a", "shop", "shop.example.com"), ingress("a", "shop", "shop.example.com")), true, ""},
		{"httproute-parent-gateway", admissionRequest(t, admissionv1.Create, httproutesGVR, httpRoute("a", "r", "gw"), nil), true, ""},
		{"httproute-parent-gateway", admissionRequest(t, admissionv1.Create, httproutesGVR, httpRoute("a", "r", "nogw"), nil), false, "must name an existing Gateway"},
		{"httproute-parent-gateway", admissionRequest(t, admissionv1.Create, httproutesGVR, httpRoute("b", "r", "a/gw"), nil), true, ""},
		{"httproute-parent-gateway", admissionRequest(t, admissionv1.Create, httproutesGVR, httpRoute("b", "r", "gw"), nil), false, "must name an existing Gateway"},
		{"widget-xref", admissionRequest(t, admissionv1.Create, widgetsGVR, newObject("xref.example.com/v1", "Widget", "a", "w", map[string]any{"spec": map[string]any{"xRef": "g1"}}), nil), true, ""},
		{"widget-xref", admissionRequest(t, admissionv1.Create, widgetsGVR, newObject("xref.example.com/v1", "Widget", "a", "w", map[string]any{"spec": map[string]any{"xRef": "g2"}}), nil), false, "spec.xRef must name an existing Gadget"},
		{"database-quota", admissionRequest(t, admissionv1.Create, databasesGVR, newObject("quota.example.com/v1", "Database", "a", "db4", nil), nil), false, "at most 3 Databases"},
		{"database-quota", admissionRequest(t, admissionv1.Create, databasesGVR, newObject("quota.example.com/v1", "Database", "b", "db1", nil), nil), true, ""},
	} {
		resp := e.webhook.review(context.Background(), tc.policy, tc.req)
		msg := ""
		if resp.Result != nil {
			msg = resp.Result.Message
		}
		if resp.Allowed != tc.allow || !strings.Contains(msg, tc.msg) {
			t.Errorf("%s %s %s/%s: allowed %v %q, want %v %q", tc.policy, tc.req.Operation, tc.req.Namespace, tc.req.Name, resp.Allowed, msg, tc.allow, tc.msg)
		}
	}
}

// TestCacheNotSyncedFailurePolicy: a cache that is not Synced is named in
// the answer, with its state, and the failure policy decides: Fail denies,
// Ignore admits with a warning; the metric counts both.
func TestCacheNotSyncedFailurePolicy(t *testing.T) {
	dir := t.TempDir()
	// The fake client refuses to list this resource: its informer cannot
	// sync.
	text := `name: strict
failurePolicy: %s
match:
  resources: [ing]
validations:
- expression: 'lookup.get("things.v1.nowhere.example.com", "", "x") == null'
  message: m
`
	for _, fp := range []string{"Fail", "Ignore"} {
		if err := os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(strings.Replace(fmt.Sprintf(text, fp), "name: strict", "name: strict-"+strings.ToLower(fp), 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		e := newUnitEnv(t, dir)
		e.client.PrependReactor("list", "things", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "nowhere.example.com", Resource: "things"}, "", fmt.Errorf("no"))
		})
		set := e.loader.load(context.Background())
		if len(set.errors) > 0 {
			t.Fatal(set.errors)
		}
		resp := e.webhook.review(context.Background(), "strict-"+strings.ToLower(fp), admissionRequest(t, admissionv1.Create, ingressesGVR, ingress("a", "x", "h"), nil))
		var msg string
		if resp.Result != nil {
			msg = resp.Result.Message
		}
		msg += strings.Join(resp.Warnings, ";")
		if resp.Allowed != (fp == "Ignore") || !strings.Contains(msg, "cache things.v1.nowhere.example.com is ") || !strings.Contains(msg, "failurePolicy "+fp) {
			t.Errorf("failurePolicy %s: allowed %v, message %q", fp, resp.Allowed, msg)
		}
		t.Logf("failurePolicy %s: allowed %v, message %q", fp, resp.Allowed, msg)
		if n := counterValue(t, e.metrics, "admission_webhook_cache_not_ready_total"); n != 1 {
			t.Errorf("cache_not_ready_total = %v, want 1", n)
		}
	}
}

// counterValue sums a counter family's samples.
func counterValue(t *testing.T, m *metrics, name string) float64 {
	t.Helper()
	mfs, err := m.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, s := range mf.GetMetric() {
			if s.GetCounter() != nil {
				sum += s.GetCounter().GetValue()
			}
		}
	}
	return sum
}

func TestFullName(t *testing.T) {
	for ref, want := range map[string]string{
		"widgets.v1.example.com": "example.com/v1, Resource=widgets",
		"pods.v1":                "/v1, Resource=pods",
		"gadgets.v2beta1.x.io":   "x.io/v2beta1, Resource=gadgets",
		"deployments.apps":       "",
		"ing":                    "",
	} {
		gvr, ok := fullName(ref)
		got := ""
		if ok {
			got = gvr.String()
		}
		if got != want {
			t.Errorf("fullName(%q) = %q, want %q", ref, got, want)
		}
	}
}

// TestNamespaceObject: namespaceObject is the request's Namespace, read
// from a cache that starts because the policy reads it.
func TestNamespaceObject(t *testing.T) {
	dir := t.TempDir()
	writePolicy(t, dir, "ns.yaml", `name: prod-only
match:
  resources: [ing]
validations:
- expression: 'namespaceObject.metadata.labels["env"] == "prod"'
  message: "Ingresses only in prod namespaces"
`)
	prod := newObject("v1", "Namespace", "", "shop", nil)
	prod.SetLabels(map[string]string{"env": "prod"})
	e := newUnitEnv(t, dir, prod, newObject("v1", "Namespace", "", "dev", nil))
	set := e.loader.load(context.Background())
	if len(set.errors) > 0 {
		t.Fatal(set.errors)
	}
	if got := set.byName["prod-only"].lookups; fmt.Sprint(got) != "[namespaces.v1]" {
		t.Fatalf("lookups %v, want [namespaces.v1]", got)
	}
	waitSynced(t, e)
	for ns, allow := range map[string]bool{"shop": true, "dev": false} {
		resp := e.webhook.review(context.Background(), "prod-only", admissionRequest(t, admissionv1.Create, ingressesGVR, ingress(ns, "x", "h"), nil))
		if resp.Allowed != allow {
			t.Errorf("namespace %s: allowed %v (%v), want %v", ns, resp.Allowed, resp.Result, allow)
		}
	}
}
