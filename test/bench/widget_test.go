package bench

import (
	"bytes"
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

// The typed implementations' numbers mean something only if Widget holds
// every field of the suite's objects: decoding one with unknown fields
// refused must succeed, and the fields must arrive.
func TestWidgetDecodesEveryField(t *testing.T) {
	r := Resource{GVK: WidgetGroupVersion.WithKind("Widget")}
	data, err := json.Marshal(object(r, "bench-3", "obj-000123", 123, nil))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var w Widget
	if err := dec.Decode(&w); err != nil {
		t.Fatalf("decoding a suite object into Widget: %v", err)
	}
	c := w.Spec.Template.Spec.Containers
	if len(c) != 3 || len(c[2].Env) != 4 || c[2].Env[3].Value != "value-123-2-3" || len(w.Spec.Config) != 20 ||
		w.Labels["app"] != "app-23" || w.Spec.Replicas != 4 || !c[1].Resources.Limits.Memory().Equal(resource.MustParse("512Mi")) {
		t.Errorf("decoded Widget lacks fields: %+v", w)
	}
	cp := w.DeepCopy()
	cp.Spec.Config["setting00"] = "changed"
	cp.Spec.Template.Spec.Containers[0].Env[0].Value = "changed"
	if w.Spec.Config["setting00"] == "changed" || w.Spec.Template.Spec.Containers[0].Env[0].Value == "changed" {
		t.Error("DeepCopy shares memory with the original")
	}
	if gvks, _, err := Scheme.ObjectKinds(&WidgetList{}); err != nil || len(gvks) != 1 || gvks[0].Kind != "WidgetList" {
		t.Errorf("Scheme kinds of WidgetList: %v, %v", gvks, err)
	}
}
