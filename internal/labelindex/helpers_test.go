package labelindex

import (
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func widget(ns, name string, lbls map[string]string, spec map[string]interface{}) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]interface{}{"namespace": ns, "name": name},
	}}
	if lbls != nil {
		u.SetLabels(lbls)
	}
	if spec != nil {
		u.Object["spec"] = spec
	}
	return u
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}
