package main

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/informerkit/informerkit/discoveryresolver"
)

func servedForTest() []discoveryresolver.Resource {
	res := func(group, version, plural, kind string, short []string, cats ...string) discoveryresolver.Resource {
		return discoveryresolver.Resource{
			GVR:        schema.GroupVersionResource{Group: group, Version: version, Resource: plural},
			GVK:        schema.GroupVersionKind{Group: group, Version: version, Kind: kind},
			Namespaced: true, Verbs: []string{"list", "watch"}, ShortNames: short, Categories: cats,
		}
	}
	return []discoveryresolver.Resource{
		res("", "v1", "pods", "Pod", []string{"po"}, "all"),
		res("", "v1", "configmaps", "ConfigMap", []string{"cm"}),
		res("gateway.networking.k8s.io", "v1", "gateways", "Gateway", []string{"gtw"}, "gateway-api"),
		res("gateway.networking.k8s.io", "v1", "gatewayclasses", "GatewayClass", []string{"gc"}, "gateway-api"),
		res("networking.istio.io", "v1", "gateways", "Gateway", nil),
	}
}

func notFound(name string) error {
	return &discoveryresolver.ResolveError{Ref: name, Err: discoveryresolver.ErrNotFound}
}

func TestResolveErrorDidYouMean(t *testing.T) {
	cases := map[string]string{
		"gatewayz":  `unknown resource "gatewayz": the server serves no resource of that name; did you mean one of: gateways.gateway.networking.k8s.io (gtw), gateways.networking.istio.io?`,
		"confgmaps": `unknown resource "confgmaps": the server serves no resource of that name; did you mean configmaps (cm)?`,
		"gtv":       `unknown resource "gtv": the server serves no resource of that name; did you mean gateways.gateway.networking.k8s.io (gtw)?`,
		"zzzzzzzz":  `unknown resource "zzzzzzzz": the server serves no resource of that name (kubectl api-resources lists them; --wait-for-crds with resource.version.group waits for a CRD)`,
	}
	for name, want := range cases {
		err := resolveError(name, notFound(name), servedForTest())
		var ue *usageError
		if !errors.As(err, &ue) {
			t.Errorf("%s: %v is not a usage error", name, err)
		}
		if err.Error() != want {
			t.Errorf("resolveError(%q):\n got %s\nwant %s", name, err, want)
		}
		if strings.Contains(err.Error(), "discoveryresolver") {
			t.Errorf("resolveError(%q) shows the library's chain: %s", name, err)
		}
	}
}

func TestWaitNameError(t *testing.T) {
	err := waitNameError("Something.v1.new.example.com", nil)
	want := `resource "Something.v1.new.example.com" is not served, and "Something" looks like a Kind: --wait-for-crds needs the resource's plural name, most likely somethings.v1.new.example.com (the CRD's spec.names.plural)`
	if err == nil || err.Error() != want {
		t.Fatalf("waitNameError:\n got %v\nwant %s", err, want)
	}
	err = waitNameError("crontabs.stable.example.com", nil)
	if err == nil || !strings.Contains(err.Error(), "resource.version.group") {
		t.Fatalf("waitNameError for a name without version: %v", err)
	}
	for kind, plural := range map[string]string{"Policy": "policies", "Gateway": "gateways", "Ingress": "ingresses", "Box": "boxes", "Key": "keys"} {
		if got := guessPlural(kind); got != plural {
			t.Errorf("guessPlural(%s) = %s, want %s", kind, got, plural)
		}
	}
}

func TestGroupOrCategoryError(t *testing.T) {
	err := groupOrCategoryError(nil, []string{"gatway-api"}, servedForTest())
	want := `nothing to watch: --category "gatway-api": the server knows no such category; did you mean gateway-api?`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
	err = groupOrCategoryError([]string{"gateway.networking.k8s.oi"}, []string{"qqqqqqqq"}, servedForTest())
	for _, w := range []string{`--group "gateway.networking.k8s.oi"`, "did you mean gateway.networking.k8s.io?", `--category "qqqqqqqq"`, "categories it knows: all, gateway-api"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v lacks %q", err, w)
		}
	}
}
