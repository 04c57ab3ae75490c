package main

// End-to-end test of -o table and -o wide: the built binary against the
// test's control plane, a CRD with additionalPrinterColumns and a built-in
// kind whose columns only the server's printers compute.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/informerkit/informerkit/test/controlplane"
)

// printerColumns sets the CRD's additionalPrinterColumns (every version).
func printerColumns(cols ...apiextensionsv1.CustomResourceColumnDefinition) controlplane.CRDOption {
	return func(c *apiextensionsv1.CustomResourceDefinition) {
		for i := range c.Spec.Versions {
			c.Spec.Versions[i].AdditionalPrinterColumns = cols
		}
	}
}

// waitRow waits for a stdout line whose fields are want followed by extra
// more fields (the AGE cell, say), and returns its index.
func (p *proc) waitRow(t *testing.T, after int, extra int, want ...string) int {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		out, _ := p.lines()
		for i := after; i < len(out); i++ {
			f := strings.Fields(out[i])
			if len(f) == len(want)+extra && strings.Join(f[:len(want)], " ") == strings.Join(want, " ") {
				return i
			}
		}
		select {
		case <-p.notify:
		case <-p.done:
			out, errs := p.lines()
			t.Fatalf("crd-watcher exited (%d) before printing %q\nstdout:\n%s\nstderr:\n%s", p.exit, want, strings.Join(out, "\n"), strings.Join(errs, "\n"))
		case <-deadline:
			_, errs := p.lines()
			t.Fatalf("no stdout line %q (+%d fields) after line %d within 1m\nstdout:\n%s\nstderr:\n%s", want, extra, after, strings.Join(out, "\n"), strings.Join(errs, "\n"))
		}
	}
}

func TestE2ETableOutput(t *testing.T) {
	controlplane.Parallel(t)
	cp := controlPlane(t)
	ctx := context.Background()
	ns := perRun("e2e-table")
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	age := apiextensionsv1.CustomResourceColumnDefinition{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"}
	size := apiextensionsv1.CustomResourceColumnDefinition{Name: "Size", Type: "integer", JSONPath: ".spec.size"}
	color := apiextensionsv1.CustomResourceColumnDefinition{Name: "Color", Type: "string", JSONPath: ".spec.color"}
	owner := apiextensionsv1.CustomResourceColumnDefinition{Name: "Owner", Type: "string", JSONPath: ".spec.owner", Priority: 1}
	shape := apiextensionsv1.CustomResourceColumnDefinition{Name: "Shape", Type: "string", JSONPath: ".spec.shape"}
	crd := controlplane.NewCRD("tables.e2e.example.com", "Gear", "gears", printerColumns(size, color, owner, age))
	if err := cp.InstallCRD(ctx, crd); err != nil {
		t.Fatal(err)
	}
	// The test changes the CRD's columns and resolves "gears" by its
	// plural: the next run must find neither this CRD nor its objects.
	t.Cleanup(func() {
		if err := cp.DeleteCRD(context.Background(), crd.Name); err != nil {
			t.Error(err)
		}
	})
	gears := cp.Dynamic().Resource(controlplane.GVR(crd)).Namespace(ns)
	createGear := func(name string, n int64, c, o string) {
		t.Helper()
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "tables.e2e.example.com/v1", "kind": "Gear",
			"metadata": map[string]any{"name": name, "namespace": ns},
			"spec":     map[string]any{"size": n, "color": c, "owner": o},
		}}
		if _, err := gears.Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	patchGear := func(name, patch string) {
		t.Helper()
		if _, err := gears.Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	deployments := cp.Kube().AppsV1().Deployments(ns)
	createDeployment := func(name, image string, replicas int32) {
		t.Helper()
		labels := map[string]string{"app": name}
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appsv1.DeploymentSpec{
				Replicas: &replicas,
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: name, Image: image}}},
				},
			},
		}
		if _, err := deployments.Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	createGear("g1", 3, "red", "alice")
	createDeployment("web", "nginx:1.27", 2)
	kc := cp.Kubeconfig(t)

	// -o table, all namespaces, two resources: NAMESPACE, kind/name.
	p := startWatcher(t, "--kubeconfig", kc, "-o", "table", "--resource", "gears", "--resource", "deployments.apps")
	const gear, deploy = "gear.tables.e2e.example.com/", "deployment.apps/"
	h := p.waitRow(t, 0, 0, "EVENT", "NAMESPACE", "NAME", "SIZE", "COLOR", "AGE")
	p.waitRow(t, h, 1, "ADDED", ns, gear+"g1", "3", "red")
	h = p.waitRow(t, 0, 0, "EVENT", "NAMESPACE", "NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE")
	p.waitRow(t, h, 1, "ADDED", ns, deploy+"web", "0/2", "0", "0")

	patchGear("g1", `{"spec":{"size":5}}`)
	n := p.waitRow(t, 0, 1, "MODIFIED", ns, gear+"g1", "5", "red")
	createGear("g2", 1, "blue", "bob")
	n = p.waitRow(t, n, 1, "ADDED", ns, gear+"g2", "1", "blue")
	if err := gears.Delete(ctx, "g1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	p.waitRow(t, n, 1, "DELETED", ns, gear+"g1", "5", "red") // the last row known

	// The CRD's printer columns change: the next row comes under a new header.
	crd = controlplane.NewCRD("tables.e2e.example.com", "Gear", "gears", printerColumns(size, color, shape, owner, age))
	if err := cp.InstallCRD(ctx, crd); err != nil {
		t.Fatal(err)
	}
	patchGear("g2", `{"spec":{"shape":"round"}}`)
	deadline := time.Now().Add(time.Minute)
	for i := 0; ; i++ {
		out, _ := p.lines()
		if strings.Contains(strings.Join(out, "\n"), "SHAPE") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no header with SHAPE after the CRD's columns changed:\n%s", strings.Join(out, "\n"))
		}
		// The API server rebuilds the CRD's table convertor a moment
		// after the update: touch the object until a row shows it.
		time.Sleep(500 * time.Millisecond)
		patchGear("g2", `{"metadata":{"labels":{"touch":"`+strings.Repeat("x", i%5+1)+`"}}}`)
	}
	h = p.waitRow(t, 0, 0, "EVENT", "NAMESPACE", "NAME", "SIZE", "COLOR", "SHAPE", "AGE")
	p.waitRow(t, h, 1, "MODIFIED", ns, gear+"g2", "1", "blue", "round")

	// A built-in kind: the server's deployment printer.
	if _, err := deployments.Patch(ctx, "web", types.StrategicMergePatchType,
		[]byte(`{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:1.28"}]}}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	n = p.waitRow(t, 0, 1, "MODIFIED", ns, deploy+"web", "0/2", "0", "0")
	if err := deployments.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	p.waitRow(t, n, 1, "DELETED", ns, deploy+"web", "0/2", "0", "0")

	// A burst: every object gets its row, with its own values.
	const burst = 40
	start := time.Now()
	for i := range burst {
		createGear(fmt.Sprintf("burst-%02d", i), int64(100+i), "green", "carol")
	}
	created := time.Since(start)
	for i := range burst {
		p.waitRow(t, 0, 1, "ADDED", ns, fmt.Sprintf("%sburst-%02d", gear, i), strconv.Itoa(100+i), "green")
	}
	t.Logf("%d objects created in %s; every row printed %s after the first create", burst, created.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, time.Minute); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d, want 0", code)
	}
	out, errs := p.lines()
	t.Logf("-o table stdout:\n%s", strings.Join(out, "\n"))
	if s := strings.Join(out, "\n"); strings.Contains(s, "OWNER") || strings.Contains(s, "alice") {
		t.Errorf("-o table shows the priority-1 column OWNER:\n%s", s)
	}
	if s := strings.Join(errs, "\n"); strings.Contains(s, "as a Table") || strings.Contains(s, "cannot fetch table rows") {
		t.Errorf("stderr warns about Table rows:\n%s", s)
	}

	// -o wide, one namespace: no NAMESPACE; the priority>0 columns.
	createDeployment("api", "busybox:1.37", 1)
	p = startWatcher(t, "--kubeconfig", kc, "-o", "wide", "-n", ns, "--resource", "gears", "--resource", "deployments.apps")
	h = p.waitRow(t, 0, 0, "EVENT", "NAME", "SIZE", "COLOR", "SHAPE", "OWNER", "AGE")
	p.waitRow(t, h, 1, "ADDED", gear+"g2", "1", "blue", "round", "bob")
	h = p.waitRow(t, 0, 0, "EVENT", "NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE", "CONTAINERS", "IMAGES", "SELECTOR")
	i := p.waitRow(t, h, 4, "ADDED", deploy+"api", "0/1", "0", "0")
	out, _ = p.lines()
	t.Logf("-o wide stdout:\n%s", strings.Join(out, "\n"))
	if f := strings.Fields(out[i]); strings.Join(f[6:], " ") != "api busybox:1.37 app=api" {
		t.Errorf("wide deployment row %q: want CONTAINERS api, IMAGES busybox:1.37, SELECTOR app=api", out[i])
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, time.Minute); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d, want 0", code)
	}
}
