package access

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// Attributes is one question: may the user do Verb on Group/Resource in
// Namespace ("" = all namespaces)? Group and Resource "*" ask for every
// group and resource at once.
type Attributes struct {
	Namespace string
	Verb      string
	Group     string
	Resource  string
}

// Client makes the two reviews. An error means no answer (the request
// failed or the answer did not parse), not a denial.
type Client interface {
	// AccessReview answers one question (a SelfSubjectAccessReview).
	AccessReview(ctx context.Context, a Attributes) (allowed bool, err error)
	// RulesReview lists what the user may do in namespace (a
	// SelfSubjectRulesReview; namespace is not "").
	RulesReview(ctx context.Context, namespace string) (Rules, error)
	// User is the user's name as the server authenticates it (a
	// SelfSubjectReview).
	User(ctx context.Context) (string, error)
}

// The request budget of a client from NewClient: kubectl's budget for
// discovery, another burst of small requests at start. Reviews are
// bounded without it (at most two per informer and namespace per check,
// re-checks on a back-off of at least a second).
const (
	ReviewQPS   = 50
	ReviewBurst = 300
)

var (
	ssarGVR = schema.GroupVersionResource{Group: "authorization.k8s.io", Version: "v1", Resource: "selfsubjectaccessreviews"}
	ssrrGVR = schema.GroupVersionResource{Group: "authorization.k8s.io", Version: "v1", Resource: "selfsubjectrulesreviews"}
	ssrGVR  = schema.GroupVersionResource{Group: "authentication.k8s.io", Version: "v1", Resource: "selfsubjectreviews"}
)

// NewClient returns a Client on cfg with a request budget of its own
// (ReviewQPS, ReviewBurst, or cfg's if higher), so reviews neither wait
// behind the informers' requests nor spend their budget.
func NewClient(cfg *rest.Config) (Client, error) {
	c := rest.CopyConfig(cfg)
	qps, burst := max(c.QPS, ReviewQPS), max(c.Burst, ReviewBurst)
	c.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(qps, burst)
	d, err := dynamic.NewForConfig(c)
	if err != nil {
		return nil, err
	}
	return DynamicClient(d), nil
}

// DynamicClient makes the reviews through a dynamic client (and so within
// its request budget). Every authenticated user may create both reviews
// by default.
func DynamicClient(client dynamic.Interface) Client { return dynamicClient{client} }

type dynamicClient struct{ client dynamic.Interface }

func (d dynamicClient) AccessReview(ctx context.Context, a Attributes) (bool, error) {
	attrs := map[string]interface{}{"verb": a.Verb, "group": a.Group, "resource": a.Resource}
	if a.Namespace != "" {
		attrs["namespace"] = a.Namespace
	}
	req := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "authorization.k8s.io/v1",
		"kind":       "SelfSubjectAccessReview",
		"spec":       map[string]interface{}{"resourceAttributes": attrs},
	}}
	out, err := d.client.Resource(ssarGVR).Create(ctx, req, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	allowed, found, err := unstructured.NestedBool(out.Object, "status", "allowed")
	if err != nil || !found {
		return false, fmt.Errorf("SelfSubjectAccessReview answer without status.allowed")
	}
	return allowed, nil
}

func (d dynamicClient) RulesReview(ctx context.Context, namespace string) (Rules, error) {
	req := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "authorization.k8s.io/v1",
		"kind":       "SelfSubjectRulesReview",
		"spec":       map[string]interface{}{"namespace": namespace},
	}}
	out, err := d.client.Resource(ssrrGVR).Create(ctx, req, metav1.CreateOptions{})
	if err != nil {
		return Rules{}, err
	}
	return parseRules(out.Object)
}

func (d dynamicClient) User(ctx context.Context) (string, error) {
	req := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "authentication.k8s.io/v1",
		"kind":       "SelfSubjectReview",
	}}
	out, err := d.client.Resource(ssrGVR).Create(ctx, req, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	name, _, _ := unstructured.NestedString(out.Object, "status", "userInfo", "username")
	if name == "" {
		return "", fmt.Errorf("SelfSubjectReview answer without status.userInfo.username")
	}
	return name, nil
}

// parseRules reads a SelfSubjectRulesReview's status. An answer without
// status.incomplete is no answer; one with an evaluationError is
// incomplete.
func parseRules(obj map[string]interface{}) (Rules, error) {
	incomplete, found, err := unstructured.NestedBool(obj, "status", "incomplete")
	if err != nil || !found {
		return Rules{}, fmt.Errorf("SelfSubjectRulesReview answer without status.incomplete")
	}
	if e, _, _ := unstructured.NestedString(obj, "status", "evaluationError"); e != "" {
		incomplete = true
	}
	items, _, err := unstructured.NestedSlice(obj, "status", "resourceRules")
	if err != nil {
		return Rules{}, fmt.Errorf("SelfSubjectRulesReview answer: status.resourceRules: %w", err)
	}
	r := Rules{Incomplete: incomplete, Resource: make([]Rule, 0, len(items))}
	for _, it := range items {
		m, ok := it.(map[string]interface{})
		if !ok {
			return Rules{}, fmt.Errorf("SelfSubjectRulesReview answer: a resource rule is not an object")
		}
		var rule Rule
		for _, f := range []struct {
			name string
			into *[]string
		}{{"verbs", &rule.Verbs}, {"apiGroups", &rule.APIGroups}, {"resources", &rule.Resources}, {"resourceNames", &rule.ResourceNames}} {
			v, _, err := unstructured.NestedStringSlice(m, f.name)
			if err != nil {
				return Rules{}, fmt.Errorf("SelfSubjectRulesReview answer: %s: %w", f.name, err)
			}
			*f.into = v
		}
		r.Resource = append(r.Resource, rule)
	}
	return r, nil
}
