package crds

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apimachinery/pkg/version"
)

func decodeAll(t *testing.T, name string) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	data, err := YAML(name)
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*apiextensionsv1.CustomResourceDefinition
	for {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := dec.Decode(crd); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out = append(out, crd)
	}
}

// preferred returns the version discovery prefers: the highest served one
// in Kubernetes version order.
func preferred(crd *apiextensionsv1.CustomResourceDefinition) string {
	var best string
	for _, v := range crd.Spec.Versions {
		if v.Served && (best == "" || version.CompareKubeAwareVersionStrings(v.Name, best) > 0) {
			best = v.Name
		}
	}
	return best
}

func storage(crd *apiextensionsv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
}

// TestProjectCRDs checks that every project CRD passes the API server's own
// CRD validation (structural schemas included) and has the properties the
// package documentation promises the suites.
func TestProjectCRDs(t *testing.T) {
	type props struct {
		scope              apiextensionsv1.ResourceScope
		shortNames         []string
		storage, preferred string
		unserved           []string
	}
	want := map[string]props{
		"gatewayclasses." + Group: {apiextensionsv1.ClusterScoped, []string{"egc"}, "v1", "v1", nil},
		"gateways." + Group:       {apiextensionsv1.NamespaceScoped, []string{"egw"}, "v1", "v1", nil},
		"routes." + Group:         {apiextensionsv1.NamespaceScoped, []string{"ert"}, "v1", "v1", []string{"v1alpha2"}},
		"backendgrants." + Group:  {apiextensionsv1.NamespaceScoped, []string{"ebg"}, "v1beta1", "v1", nil},
		"edgeproxies." + Group:    {apiextensionsv1.NamespaceScoped, []string{"eprx"}, "v1", "v1", nil},
	}
	seen := map[string]bool{}
	for _, file := range []string{Edge, EdgeProxy} {
		for _, crd := range decodeAll(t, file) {
			seen[crd.Name] = true
			w, ok := want[crd.Name]
			if !ok {
				t.Errorf("%s: unexpected CRD %s", file, crd.Name)
				continue
			}
			var unserved []string
			for _, v := range crd.Spec.Versions {
				if !v.Served {
					unserved = append(unserved, v.Name)
				}
			}
			got := props{crd.Spec.Scope, crd.Spec.Names.ShortNames, storage(crd), preferred(crd), unserved}
			if crd.Spec.Group != Group || got.scope != w.scope || !slices.Equal(got.shortNames, w.shortNames) ||
				got.storage != w.storage || got.preferred != w.preferred || !slices.Equal(got.unserved, w.unserved) ||
				!slices.Equal(crd.Spec.Names.Categories, []string{"edge"}) {
				t.Errorf("%s: %+v (group %s, categories %v), want %+v, group %s, categories [edge]",
					crd.Name, got, crd.Spec.Group, crd.Spec.Names.Categories, w, Group)
			}

			apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(crd)
			var internal apiextensions.CustomResourceDefinition
			if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(crd, &internal, nil); err != nil {
				t.Fatal(err)
			}
			if errs := validation.ValidateCustomResourceDefinition(context.Background(), &internal); len(errs) > 0 {
				t.Errorf("%s: the API server would reject it: %v", crd.Name, errs.ToAggregate())
			}
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("%s missing from the project CRDs", name)
		}
	}

	// The large schema: several hundred KB, as the real data-plane CRDs.
	data, err := YAML(EdgeProxy)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) < 300<<10 {
		t.Errorf("%s is %d bytes; the large-schema case wants several hundred KB", EdgeProxy, len(data))
	}
	t.Logf("%s: %d bytes", EdgeProxy, len(data))
}

func TestYAMLUnknownFile(t *testing.T) {
	if _, err := YAML("nope.yaml"); err == nil {
		t.Fatal("YAML(nope.yaml) did not fail")
	}
}
