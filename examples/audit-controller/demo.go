package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/informerkit/informerkit/test/controlplane"
)

const (
	demoNamespace = "demo"
	demoCategory  = "audit-demo"
	demoCRD       = "widgets.audit.example.com"
)

var demoWidgets = schema.GroupVersionResource{Group: "audit.example.com", Version: "v1", Resource: "widgets"}

// demoDefaults fills in what the user left out in demo mode: the demo's
// category, and rules the demo objects exercise.
func demoDefaults(c *Config) {
	if len(c.Resources) == 0 && len(c.Groups) == 0 && len(c.Categories) == 0 {
		c.Categories = []string{demoCategory}
	}
	r := &c.Rules
	if len(r.RequiredLabels)+len(r.RequiredAnnotations)+len(r.CEL) == 0 {
		r.RequiredLabels = []string{"owner"}
		r.RequiredAnnotations = []string{"description"}
		r.CEL = []RuleSpec{{
			Name:       "replicas-at-most-3",
			Expression: "!has(object.spec.replicas) || object.spec.replicas <= 3",
			Message:    "spec.replicas must be at most 3",
		}}
	}
	if c.SummaryInterval == 2*time.Second {
		c.SummaryInterval = 250 * time.Millisecond
	}
}

// demoPrepare creates the demo namespace before the auditor starts.
func demoPrepare(ctx context.Context, cp *controlplane.ControlPlane) error {
	return cp.CreateNamespace(ctx, demoNamespace)
}

func demoWidget(name string, labels, annotations map[string]string, replicas int64) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "audit.example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": name, "namespace": demoNamespace},
		"spec":     map[string]any{"replicas": replicas},
	}}
	u.SetLabels(labels)
	u.SetAnnotations(annotations)
	return u
}

// runDemo drives the workload and prints what the auditor found: a CRD
// installed while the auditor runs, compliant and non-compliant objects,
// one fixed, the Events and the summary on the server, the CRD deleted.
func runDemo(ctx context.Context, cp *controlplane.ControlPlane, a *audit, stdout, stderr io.Writer) error {
	step := func(format string, args ...any) {
		fmt.Fprintf(stderr, "%s DEMO  "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
	}
	waitFor := func(what string, cond func() bool) error {
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) { return cond(), nil })
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		return nil
	}
	findings := func(cond func(report) bool) func() bool {
		return func() bool { r, _ := a.auditor.snapshot(); return cond(r) }
	}

	step("install CRD %s (category %s) while the auditor runs", demoCRD, demoCategory)
	if err := cp.InstallCRD(ctx, controlplane.NewCRD("audit.example.com", "Widget", "widgets", controlplane.Categories(demoCategory))); err != nil {
		return err
	}
	widgets := cp.Dynamic().Resource(demoWidgets).Namespace(demoNamespace)
	for _, w := range []*unstructured.Unstructured{
		demoWidget("frontend", map[string]string{"owner": "web-team"}, map[string]string{"description": "the web frontend"}, 2),
		demoWidget("batch", nil, map[string]string{"description": "nightly jobs"}, 1),
		demoWidget("cache", map[string]string{"owner": "platform"}, nil, 10),
	} {
		step("create widget %s/%s", demoNamespace, w.GetName())
		if _, err := widgets.Create(ctx, w, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	if err := waitFor("3 audited widgets, 2 non-compliant", findings(func(r report) bool { return r.Audited == 3 && r.NonCompliant == 2 })); err != nil {
		return err
	}
	r, _ := a.auditor.snapshot()
	fmt.Fprintf(stdout, "== findings after the widgets were created\n%s", r)

	step("fix widget %s/batch: add the owner label", demoNamespace)
	u, err := widgets.Get(ctx, "batch", metav1.GetOptions{})
	if err != nil {
		return err
	}
	u.SetLabels(map[string]string{"owner": "data-team"})
	if _, err := widgets.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		return err
	}
	if err := waitFor("batch compliant", findings(func(r report) bool { return r.Audited == 3 && r.NonCompliant == 1 })); err != nil {
		return err
	}
	r, _ = a.auditor.snapshot()
	fmt.Fprintf(stdout, "== findings after the fix\n%s", r)

	var events []string
	if err := waitFor("the Events on the server", func() bool {
		events, err = auditEvents(ctx, a.kube, demoNamespace)
		return err == nil && len(events) >= 3
	}); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "== Events written (kubectl get events -n %s)\n", demoNamespace)
	for _, e := range events {
		fmt.Fprintf(stdout, "  %s\n", e)
	}
	if err := printSummary(ctx, a, stdout, waitFor, "== summary ConfigMap"); err != nil {
		return err
	}

	step("delete CRD %s: its objects leave the audit", demoCRD)
	if err := cp.DeleteCRD(ctx, demoCRD); err != nil {
		return err
	}
	if err := waitFor("the removed resource's objects dropped", findings(func(r report) bool { return r.Audited == 0 })); err != nil {
		return err
	}
	if err := printSummary(ctx, a, stdout, waitFor, "== summary ConfigMap after the CRD was deleted"); err != nil {
		return err
	}
	st := a.ctrl.Stats()
	fmt.Fprintf(stdout, "== controller: %d reconciles, %d failed, %d keys dropped with their resource, %d panics\n",
		st.Reconciled, st.Failed, st.Dropped, st.ReconcilePanics+st.HandlerPanics)
	step("done")
	return nil
}

// printSummary waits until the summary on the server is current and
// prints it.
func printSummary(ctx context.Context, a *audit, stdout io.Writer, waitFor func(string, func() bool) error, title string) error {
	if err := waitFor("the summary written", a.summaryWritten); err != nil {
		return err
	}
	cm, err := a.kube.CoreV1().ConfigMaps(a.cfg.SummaryNamespace).Get(ctx, a.cfg.SummaryName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s %s/%s: audited=%s compliant=%s noncompliant=%s\n%s", title, cm.Namespace, cm.Name,
		cm.Data["audited"], cm.Data["compliant"], cm.Data["noncompliant"], indent(cm.Data["report.json"]))
	return nil
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := range lines {
		lines[i] = "  " + lines[i]
	}
	return strings.Join(lines, "\n") + "\n"
}

// auditEvents lists the auditor's Events in ns as "REASON kind/name:
// message", sorted.
func auditEvents(ctx context.Context, kube kubernetes.Interface, ns string) ([]string, error) {
	list, err := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "source=audit-controller"})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range list.Items {
		out = append(out, fmt.Sprintf("%s %s %s/%s: %s", e.Type, e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message))
	}
	sort.Strings(out)
	return out, nil
}
