package main

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/subscription"
	"github.com/informerkit/informerkit/test/controlplane"
)

// The demo's resources: a sample CRD installed before the watcher starts,
// and one installed while it runs.
const demoNamespace = "demo"

var (
	cronTabs = schema.GroupVersionResource{Group: "stable.example.com", Version: "v1", Resource: "crontabs"}
	widgets  = schema.GroupVersionResource{Group: "demo.example.com", Version: "v1", Resource: "widgets"}
)

// demoDefaults fills in what to watch in demo mode when the user said
// nothing: the sample CRD by its short name, and the CRD that the demo
// installs mid-run by its fully qualified name (which --wait-for-crds
// needs).
func demoDefaults(c *Config) {
	if len(c.Resources) == 0 && !c.All {
		c.Resources = []ResourceSpec{{Name: "ct"}, {Name: gvrString(widgets)}}
		c.WaitForCRDs = true
	}
}

// startDemoCluster starts the embedded control plane and installs the
// sample CRD and its first objects.
func startDemoCluster(ctx context.Context, out *printer, verbose bool) (*controlplane.ControlPlane, error) {
	opts := controlplane.Options{}
	if verbose {
		opts.Logf = func(f string, a ...any) { out.info("controlplane: "+f, a...) }
	}
	t0 := time.Now()
	out.info("demo: no cluster configured (or --demo): starting an embedded kube-apiserver + etcd…")
	cp, err := controlplane.Start(ctx, opts)
	if err != nil && ctx.Err() == nil {
		// On a loaded machine etcd can be slow enough for the API server's
		// first health check to time out: try once more.
		out.info("demo: the control plane did not start (%v); retrying once", err)
		cp, err = controlplane.Start(ctx, opts)
	}
	if err != nil {
		return nil, fmt.Errorf("start embedded control plane: %w", err)
	}
	out.info("demo: control plane ready in %s; installing CRD crontabs.stable.example.com (short name ct)", time.Since(t0).Round(100*time.Millisecond))
	if err := cp.InstallCRD(ctx, controlplane.NewCRD("stable.example.com", "CronTab", "crontabs",
		controlplane.ShortNames("ct"), controlplane.Categories("informerkit-demo"))); err != nil {
		cp.Stop()
		return nil, err
	}
	if err := cp.CreateNamespace(ctx, demoNamespace); err != nil {
		cp.Stop()
		return nil, err
	}
	for _, name := range []string{"nightly", "hourly"} {
		if err := createObj(ctx, cp, cronTabs, "CronTab", name, map[string]any{"cronSpec": "0 * * * *", "image": "busybox:1.36"}); err != nil {
			cp.Stop()
			return nil, err
		}
	}
	return cp, nil
}

func createObj(ctx context.Context, cp *controlplane.ControlPlane, gvr schema.GroupVersionResource, kind, name string, spec map[string]any) error {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvr.GroupVersion().String(),
		"kind":       kind,
		"metadata":   map[string]any{"name": name, "namespace": demoNamespace, "labels": map[string]any{"app": "demo"}},
		"spec":       spec,
	}}
	_, err := cp.Dynamic().Resource(gvr).Namespace(demoNamespace).Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create %s %s: %w", gvrString(gvr), name, err)
	}
	return nil
}

func updateObj(ctx context.Context, cp *controlplane.ControlPlane, gvr schema.GroupVersionResource, name string, edit func(u *unstructured.Unstructured)) error {
	c := cp.Dynamic().Resource(gvr).Namespace(demoNamespace)
	u, err := c.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get %s %s: %w", gvrString(gvr), name, err)
	}
	edit(u)
	if _, err := c.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update %s %s: %w", gvrString(gvr), name, err)
	}
	return nil
}

func deleteObj(ctx context.Context, cp *controlplane.ControlPlane, gvr schema.GroupVersionResource, name string) error {
	if err := cp.Dynamic().Resource(gvr).Namespace(demoNamespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("delete %s %s: %w", gvrString(gvr), name, err)
	}
	return nil
}

// runDemo drives the workload: creates, updates and deletes of the sample
// resources, a CRD installed mid-run and used, and the sample CRD deleted.
// After each step it waits until the watcher has printed the event (when
// it watches that resource), so the output reads in order.
func runDemo(ctx context.Context, cp *controlplane.ControlPlane, w *watcher) error {
	step := func(format string, args ...any) {
		w.out.info("%s DEMO    "+format, append([]any{time.Now().Format("15:04:05.000")}, args...)...)
	}
	wait := func(typ subscription.EventType, gvr schema.GroupVersionResource, name string) error {
		if !w.watches(gvr) {
			time.Sleep(300 * time.Millisecond)
			return nil
		}
		wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		return w.waitEvent(wctx, typ, gvr, demoNamespace, name)
	}
	waitState := func(gvr schema.GroupVersionResource, states ...dynamicinformer.State) error {
		if !w.watches(gvr) {
			return nil
		}
		wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		return w.waitState(wctx, gvr, states...)
	}
	type action struct {
		say  string
		do   func() error
		typ  subscription.EventType
		gvr  schema.GroupVersionResource
		name string
	}
	ct, wd := cronTabs, widgets
	actions := []action{
		{"create crontab demo/minutely", func() error {
			return createObj(ctx, cp, ct, "CronTab", "minutely", map[string]any{"cronSpec": "* * * * *", "image": "busybox:1.36"})
		}, subscription.Added, ct, "minutely"},
		{"update crontab demo/nightly (schedule, image, a label)", func() error {
			return updateObj(ctx, cp, ct, "nightly", func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, "30 2 * * *", "spec", "cronSpec")
				_ = unstructured.SetNestedField(u.Object, "busybox:1.37", "spec", "image")
				_ = unstructured.SetNestedField(u.Object, "batch", "metadata", "labels", "tier")
			})
		}, subscription.Updated, ct, "nightly"},
		{"delete crontab demo/hourly", func() error { return deleteObj(ctx, cp, ct, "hourly") }, subscription.Deleted, ct, "hourly"},
	}
	if err := waitState(ct, dynamicinformer.Synced); err != nil {
		return err
	}
	for _, a := range actions {
		step("%s", a.say)
		if err := a.do(); err != nil {
			return err
		}
		if err := wait(a.typ, a.gvr, a.name); err != nil {
			return err
		}
	}

	step("install CRD widgets.demo.example.com mid-run")
	if err := cp.InstallCRD(ctx, controlplane.NewCRD("demo.example.com", "Widget", "widgets",
		controlplane.ShortNames("wd"), controlplane.Categories("informerkit-demo"))); err != nil {
		return err
	}
	if err := waitState(wd, dynamicinformer.Synced); err != nil {
		// With --all the subscription adds widgets once discovery shows it.
		if !w.cfg.All {
			return err
		}
	}
	actions = []action{
		{"create widget demo/gizmo", func() error {
			return createObj(ctx, cp, wd, "Widget", "gizmo", map[string]any{"size": int64(3), "color": "blue"})
		}, subscription.Added, wd, "gizmo"},
		{"update widget demo/gizmo (size 3 → 5, color removed)", func() error {
			return updateObj(ctx, cp, wd, "gizmo", func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, int64(5), "spec", "size")
				unstructured.RemoveNestedField(u.Object, "spec", "color")
			})
		}, subscription.Updated, wd, "gizmo"},
		{"create widget demo/gadget", func() error {
			return createObj(ctx, cp, wd, "Widget", "gadget", map[string]any{"size": int64(1)})
		}, subscription.Added, wd, "gadget"},
		{"delete widget demo/gizmo", func() error { return deleteObj(ctx, cp, wd, "gizmo") }, subscription.Deleted, wd, "gizmo"},
	}
	for _, a := range actions {
		if w.cfg.All && !w.watches(a.gvr) {
			// give the subscription a moment to pick the new CRD up
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			for !w.watches(a.gvr) && wctx.Err() == nil {
				time.Sleep(100 * time.Millisecond)
			}
			cancel()
		}
		step("%s", a.say)
		if err := a.do(); err != nil {
			return err
		}
		if err := wait(a.typ, a.gvr, a.name); err != nil {
			return err
		}
	}

	step("delete CRD crontabs.stable.example.com: its informer empties (a DELETED per object) and goes Removed")
	if err := cp.DeleteCRD(ctx, "crontabs.stable.example.com"); err != nil {
		return err
	}
	for _, name := range []string{"nightly", "minutely"} {
		if err := wait(subscription.Deleted, ct, name); err != nil {
			return err
		}
	}
	if !w.cfg.All {
		if err := waitState(ct, dynamicinformer.Removed); err != nil {
			return err
		}
	}
	step("done")
	return nil
}
