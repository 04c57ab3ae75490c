package main

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"

	"github.com/informerkit/informerkit/controller"
)

// Event reasons the auditor writes on objects.
const (
	reasonViolation = "AuditViolation" // Warning: the object breaks rules (message lists them)
	reasonPassed    = "AuditPassed"    // Normal: an object that broke rules now passes them all
)

// auditor is the Reconciler: it checks each object against the rules,
// keeps the current findings, writes an Event when an object's findings
// change and tells the summary writer.
type auditor struct {
	rules    ruleSet
	recorder record.EventRecorder
	metrics  *metrics
	log      logr.Logger

	mu sync.Mutex // guards objects, version
	// objects holds every audited object present now with its
	// violations (none: compliant).
	objects map[controller.Key][]Violation
	version uint64        // bumped on every change of objects
	changed chan struct{} // a change since the summary was last written (capacity 1)
}

func newAuditor(rules ruleSet, recorder record.EventRecorder, m *metrics, log logr.Logger) *auditor {
	return &auditor{rules: rules, recorder: recorder, metrics: m, log: log,
		objects: map[controller.Key][]Violation{}, changed: make(chan struct{}, 1)}
}

// resourceName is the kubectl form of a GVR: resource.version.group.
func resourceName(gvr schema.GroupVersionResource) string {
	s := gvr.Resource + "." + gvr.Version
	if gvr.Group != "" {
		s += "." + gvr.Group
	}
	return s
}

// Reconcile implements controller.Reconciler.
func (a *auditor) Reconcile(ctx context.Context, req controller.Request) error {
	if req.Gone() {
		a.forget(req.Key)
		return nil
	}
	u, ok := req.Object.(*unstructured.Unstructured)
	if !ok {
		return nil // metadata-only objects carry no spec to check
	}
	vs := a.rules.check(u)
	a.metrics.checked.WithLabelValues(resourceName(req.GVR)).Inc()
	prev, existed := a.set(req.Key, vs)
	switch {
	case len(vs) > 0 && (!existed || !slices.Equal(prev, vs)):
		a.recorder.Eventf(u, corev1.EventTypeWarning, reasonViolation, "%d audit rule(s) violated: %s", len(vs), describe(vs))
	case len(vs) == 0 && existed && len(prev) > 0:
		a.recorder.Event(u, corev1.EventTypeNormal, reasonPassed, "all audit rules pass")
	}
	return nil
}

func describe(vs []Violation) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = v.Rule + ": " + v.Message
	}
	return strings.Join(parts, "; ")
}

// set records k's violations and returns the previous ones.
func (a *auditor) set(k controller.Key, vs []Violation) (prev []Violation, existed bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	prev, existed = a.objects[k]
	if existed && slices.Equal(prev, vs) {
		return prev, true
	}
	a.metrics.account(k.GVR, prev, existed, -1)
	a.metrics.account(k.GVR, vs, true, +1)
	a.objects[k] = vs
	a.changedLocked()
	return prev, existed
}

// forget drops an object that is gone.
func (a *auditor) forget(k controller.Key) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if prev, ok := a.objects[k]; ok {
		a.metrics.account(k.GVR, prev, true, -1)
		delete(a.objects, k)
		a.changedLocked()
	}
}

// resourceRemoved drops every object of a resource that stopped being
// served (controller.Options.OnRemoved): their keys are not reconciled.
func (a *auditor) resourceRemoved(gvr schema.GroupVersionResource) {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for k, vs := range a.objects {
		if k.GVR == gvr {
			a.metrics.account(k.GVR, vs, true, -1)
			delete(a.objects, k)
			n++
		}
	}
	a.log.Info("resource removed; its objects leave the audit", "gvr", gvr.String(), "objects", n)
	if n > 0 {
		a.changedLocked()
	}
}

func (a *auditor) changedLocked() {
	a.version++
	select {
	case a.changed <- struct{}{}:
	default:
	}
}

// finding is one non-compliant object in the report.
type finding struct {
	Resource   string      `json:"resource"`
	Namespace  string      `json:"namespace,omitempty"`
	Name       string      `json:"name"`
	Violations []Violation `json:"violations"`
}

// report is the summary's content.
type report struct {
	Audited      int       `json:"audited"`
	Compliant    int       `json:"compliant"`
	NonCompliant int       `json:"nonCompliant"`
	Findings     []finding `json:"findings"`
}

// snapshot returns the current report and its version.
func (a *auditor) snapshot() (report, uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := report{Audited: len(a.objects), Findings: []finding{}}
	for k, vs := range a.objects {
		if len(vs) == 0 {
			r.Compliant++
			continue
		}
		r.NonCompliant++
		r.Findings = append(r.Findings, finding{Resource: resourceName(k.GVR), Namespace: k.Namespace, Name: k.Name, Violations: vs})
	}
	sort.Slice(r.Findings, func(i, j int) bool {
		fi, fj := r.Findings[i], r.Findings[j]
		return fi.Resource+" "+fi.Namespace+"/"+fi.Name < fj.Resource+" "+fj.Namespace+"/"+fj.Name
	})
	return r, a.version
}

// summaryData is the summary ConfigMap's data for r.
func summaryData(r report) map[string]string {
	return map[string]string{
		"audited":      strconv.Itoa(r.Audited),
		"compliant":    strconv.Itoa(r.Compliant),
		"noncompliant": strconv.Itoa(r.NonCompliant),
		"report.json":  jsonString(r),
	}
}

// String renders r for a terminal.
func (r report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "audited %d objects: %d compliant, %d non-compliant\n", r.Audited, r.Compliant, r.NonCompliant)
	for _, f := range r.Findings {
		fmt.Fprintf(&b, "  %s %s/%s: %s\n", f.Resource, f.Namespace, f.Name, describe(f.Violations))
	}
	return b.String()
}
