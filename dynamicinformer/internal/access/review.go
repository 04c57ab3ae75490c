package access

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// Attributes is one question: may the user do Verb on Group/Resource in
// Namespace ("" = all namespaces)?
type Attributes struct {
	Namespace string
	Verb      string
	Group     string
	Resource  string
}

// Review answers one question. An error means no answer (the request
// failed or the answer did not parse), not a denial.
type Review func(ctx context.Context, a Attributes) (allowed bool, err error)

// ssarGVR is authorization.k8s.io/v1 SelfSubjectAccessReviews.
var ssarGVR = schema.GroupVersionResource{Group: "authorization.k8s.io", Version: "v1", Resource: "selfsubjectaccessreviews"}

// DynamicReview asks the server through a dynamic client: it creates a
// SelfSubjectAccessReview (which every authenticated user may do by
// default) and reads status.allowed. The dynamic client is what every
// factory has, whichever constructor built it.
func DynamicReview(client dynamic.Interface) Review {
	return func(ctx context.Context, a Attributes) (bool, error) {
		attrs := map[string]interface{}{"verb": a.Verb, "group": a.Group, "resource": a.Resource}
		if a.Namespace != "" {
			attrs["namespace"] = a.Namespace
		}
		req := &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "authorization.k8s.io/v1",
			"kind":       "SelfSubjectAccessReview",
			"spec":       map[string]interface{}{"resourceAttributes": attrs},
		}}
		out, err := client.Resource(ssarGVR).Create(ctx, req, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		allowed, found, err := unstructured.NestedBool(out.Object, "status", "allowed")
		if err != nil || !found {
			return false, fmt.Errorf("SelfSubjectAccessReview answer without status.allowed")
		}
		return allowed, nil
	}
}
