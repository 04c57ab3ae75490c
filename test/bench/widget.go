package bench

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// WidgetGroupVersion is the group and version of the suite's custom
// resource (Run installs its CRD, kind Widget, plural widgets).
var WidgetGroupVersion = schema.GroupVersion{Group: "bench.informerkit.io", Version: "v1"}

// Widget is the Go type of the suite's custom resource, as a controller
// author would write it for the objects of object(): ObjectMeta, and a
// spec whose template is a core PodTemplateSpec (containers, env,
// resource quantities). The typed implementations read it; the suite
// writes the objects as JSON, so the type must decode every field they
// carry. Its DeepCopy methods are hand-written (what controller-gen would
// generate).
type Widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              WidgetSpec `json:"spec,omitempty"`
}

// WidgetSpec is a Widget's spec.
type WidgetSpec struct {
	Replicas int32                  `json:"replicas,omitempty"`
	Paused   bool                   `json:"paused,omitempty"`
	Template corev1.PodTemplateSpec `json:"template,omitempty"`
	Config   map[string]string      `json:"config,omitempty"`
}

// WidgetList is a list of Widgets.
type WidgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Widget `json:"items"`
}

// DeepCopyInto copies in into out.
func (in *WidgetSpec) DeepCopyInto(out *WidgetSpec) {
	*out = *in
	in.Template.DeepCopyInto(&out.Template)
	if in.Config != nil {
		out.Config = make(map[string]string, len(in.Config))
		for k, v := range in.Config {
			out.Config[k] = v
		}
	}
}

// DeepCopyInto copies in into out.
func (in *Widget) DeepCopyInto(out *Widget) {
	out.TypeMeta = in.TypeMeta
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	in.Spec.DeepCopyInto(&out.Spec)
}

// DeepCopy returns a deep copy of in (nil for nil).
func (in *Widget) DeepCopy() *Widget {
	if in == nil {
		return nil
	}
	out := new(Widget)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *Widget) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// DeepCopyInto copies in into out.
func (in *WidgetList) DeepCopyInto(out *WidgetList) {
	out.TypeMeta = in.TypeMeta
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]Widget, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopy returns a deep copy of in (nil for nil).
func (in *WidgetList) DeepCopy() *WidgetList {
	if in == nil {
		return nil
	}
	out := new(WidgetList)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *WidgetList) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// Scheme holds client-go's built-in types and Widget, WidgetList: the
// scheme of the typed implementations.
var Scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	s.AddKnownTypes(WidgetGroupVersion, &Widget{}, &WidgetList{})
	metav1.AddToGroupVersion(s, WidgetGroupVersion)
	return s
}()
