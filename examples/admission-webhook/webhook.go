package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/cel-go/common/types"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
)

// validatePathPrefix is the path of the webhook for one policy:
// /validate/<policy name>. One webhook per policy gives each its own
// match rules and failure policy in the ValidatingWebhookConfiguration.
const validatePathPrefix = "/validate/"

// webhook answers AdmissionReview v1 requests with the loaded policies.
// It is safe for concurrent use.
type webhook struct {
	policies func() *policySet
	caches   *caches
	metrics  *metrics
	log      logr.Logger
	observe  func(policy string, d time.Duration) // nil: none
}

func (wh *webhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST an AdmissionReview", http.StatusMethodNotAllowed)
		return
	}
	name := strings.TrimPrefix(r.URL.Path, validatePathPrefix)
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
		http.Error(w, fmt.Sprintf("not an AdmissionReview with a request: %v", err), http.StatusBadRequest)
		return
	}
	resp := wh.review(r.Context(), name, review.Request)
	resp.UID = review.Request.UID
	out := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Response: resp,
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&out)
}

// review decides one request for the named policy and records it.
func (wh *webhook) review(ctx context.Context, name string, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	start := time.Now()
	set := wh.policies()
	p := set.byName[name]
	label := name
	if p == nil {
		label = "unknown"
	}
	wh.metrics.requests.WithLabelValues(label).Inc()
	resp, reason := wh.decide(ctx, p, name, req)
	decision := "allowed"
	if !resp.Allowed {
		decision = "denied"
	}
	wh.metrics.decisions.WithLabelValues(label, decision, reason).Inc()
	elapsed := time.Since(start)
	wh.metrics.latency.WithLabelValues(label).Observe(elapsed.Seconds())
	if wh.observe != nil {
		wh.observe(name, elapsed)
	}
	if wh.log.V(1).Enabled() {
		wh.log.V(1).Info("decided", "policy", name, "operation", req.Operation, "resource", req.Resource.Resource,
			"namespace", req.Namespace, "name", req.Name, "decision", decision, "reason", reason)
	}
	return resp
}

func allow(warnings ...string) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Allowed: true, Warnings: warnings}
}

func deny(msg string) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: msg,
	}}
}

// decide applies p to req: the match rules, then the caches it reads
// (any not Synced: the failure policy answers, saying which cache and
// its state), then its validations, in order; every false validation's
// message is in the denial.
func (wh *webhook) decide(ctx context.Context, p *policy, name string, req *admissionv1.AdmissionRequest) (*admissionv1.AdmissionResponse, string) {
	if p == nil {
		return allow(fmt.Sprintf("admission-webhook: no policy %q is loaded", name)), reasonNoPolicy
	}
	obj, old, err := requestObjects(req)
	if err != nil {
		return wh.failed(p, fmt.Sprintf("policy %s: cannot read the request's object: %v", p.Name, err)), reasonEvalError
	}
	if !p.matches(req, obj, old) {
		return allow(), reasonNoMatch
	}
	for _, ref := range p.lookups {
		st := wh.caches.quickState(ref)
		if st.ready() {
			continue
		}
		wh.metrics.cacheNotReady.WithLabelValues(p.Name, gvrName(st.GVR), string(st.State)).Inc()
		return wh.failed(p, fmt.Sprintf("policy %s cannot decide: %s", p.Name, st)), reasonCacheNotReady
	}

	gvk := schema.GroupVersionKind{Group: req.Kind.Group, Version: req.Kind.Version, Kind: req.Kind.Kind}
	gvr := schema.GroupVersionResource{Group: req.Resource.Group, Version: req.Resource.Version, Resource: req.Resource.Resource}
	userInfo := &user.DefaultInfo{Name: req.UserInfo.Username, UID: req.UserInfo.UID, Groups: req.UserInfo.Groups}
	dryRun := req.DryRun != nil && *req.DryRun
	attrs := admission.NewAttributesRecord(runtimeObject(obj), runtimeObject(old), gvk, req.Namespace, req.Name, gvr,
		req.SubResource, admission.Operation(req.Operation), nil, dryRun, userInfo)
	va := &admission.VersionedAttributes{Attributes: attrs, VersionedKind: gvk}
	if obj != nil {
		va.VersionedObject.Set(obj)
	}
	if old != nil {
		va.VersionedOldObject.Set(old)
	}
	var namespace *corev1.Namespace
	if req.Namespace != "" && slices.Contains(p.lookups, namespacesRef) {
		if namespace, err = wh.caches.namespace(req.Namespace); err != nil {
			return wh.failed(p, fmt.Sprintf("policy %s: namespaceObject: %v", p.Name, err)), reasonEvalError
		}
	}
	results, _, err := p.condition.ForInput(ctx, va, req, plugincel.OptionalVariableBindings{}, namespace, celconfig.RuntimeCELCostBudget)
	if err != nil {
		return wh.failed(p, fmt.Sprintf("policy %s: %v", p.Name, err)), reasonEvalError
	}
	var denials []string
	for i, r := range results {
		if r.Error != nil {
			return wh.failed(p, fmt.Sprintf("policy %s: validations[%d]: %v", p.Name, i, r.Error)), reasonEvalError
		}
		if r.EvalResult != types.True {
			denials = append(denials, p.Validations[i].Message)
		}
	}
	if len(denials) > 0 {
		return deny(strings.Join(denials, "; ")), reasonValidations
	}
	return allow(), reasonValidations
}

// failed answers by the policy's failure policy: Fail denies with msg,
// Ignore admits with msg as a warning.
func (wh *webhook) failed(p *policy, msg string) *admissionv1.AdmissionResponse {
	if p.FailurePolicy == failurePolicyIgnore {
		return allow(msg + " (failurePolicy Ignore: admitted)")
	}
	return deny(msg + " (failurePolicy Fail)")
}

// runtimeObject avoids a typed nil in an interface.
func runtimeObject(u *unstructured.Unstructured) runtime.Object {
	if u == nil {
		return nil
	}
	return u
}

// requestObjects decodes the request's object and old object (nil when
// absent).
func requestObjects(req *admissionv1.AdmissionRequest) (obj, old *unstructured.Unstructured, err error) {
	decode := func(raw runtime.RawExtension) (*unstructured.Unstructured, error) {
		if len(raw.Raw) == 0 {
			return nil, nil
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw.Raw); err != nil {
			return nil, err
		}
		return u, nil
	}
	if obj, err = decode(req.Object); err != nil {
		return nil, nil, err
	}
	if old, err = decode(req.OldObject); err != nil {
		return nil, nil, err
	}
	return obj, old, nil
}

// matches applies the match rules (the API server applies them too, from
// the webhook configuration; they are checked again here so that a
// configuration older than the policy cannot widen it).
func (p *policy) matches(req *admissionv1.AdmissionRequest, obj, old *unstructured.Unstructured) bool {
	if !slices.Contains(p.Match.Operations, "*") && !slices.Contains(p.Match.Operations, string(req.Operation)) {
		return false
	}
	if req.SubResource != "" {
		return false
	}
	if !p.matchesResource(schema.GroupVersionResource{Group: req.Resource.Group, Version: req.Resource.Version, Resource: req.Resource.Resource}) {
		return false
	}
	if len(p.Match.Namespaces) > 0 && !slices.Contains(p.Match.Namespaces, req.Namespace) {
		return false
	}
	if p.selector.Empty() {
		return true
	}
	for _, u := range []*unstructured.Unstructured{obj, old} {
		if u != nil && p.selector.Matches(labels.Set(u.GetLabels())) {
			return true
		}
	}
	return false
}
