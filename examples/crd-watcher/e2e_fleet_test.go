package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/informerkit/informerkit/test/controlplane"
)

// fleetKubeconfigFile writes one kubeconfig with a context per control
// plane, named by the map's keys.
func fleetKubeconfigFile(t *testing.T, planes map[string]*controlplane.ControlPlane) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	for name, cp := range planes {
		one, err := clientcmd.LoadFromFile(cp.Kubeconfig(t))
		if err != nil {
			t.Fatal(err)
		}
		kctx := one.Contexts[one.CurrentContext]
		kc.Clusters[name] = one.Clusters[kctx.Cluster]
		kc.AuthInfos[name] = one.AuthInfos[kctx.AuthInfo]
		kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
		kc.CurrentContext = name
	}
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// waitLines waits until the lines of one stream (stdout: true) satisfy
// ok, which says what it still misses.
func (p *proc) waitLines(t *testing.T, stdout bool, what string, timeout time.Duration, ok func([]string) (bool, string)) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		out, errs := p.lines()
		lines := errs
		if stdout {
			lines = out
		}
		done, missing := ok(lines)
		if done {
			return
		}
		select {
		case <-p.notify:
		case <-p.done:
			out, errs = p.lines()
			lines = errs
			if stdout {
				lines = out
			}
			if done, _ := ok(lines); done {
				return
			}
			t.Fatalf("crd-watcher exited (%d) before %s (%s)\nstdout:\n%s\nstderr:\n%s", p.exit, what, missing, strings.Join(out, "\n"), strings.Join(errs, "\n"))
		case <-deadline:
			t.Fatalf("%s: not within %v (%s)\nstdout:\n%s\nstderr:\n%s", what, timeout, missing, strings.Join(out, "\n"), strings.Join(errs, "\n"))
		}
	}
}

// fleetRecord is a -o json line with its cluster.
type fleetRecord struct {
	Type     string `json:"type"`
	Cluster  string `json:"cluster"`
	Resource string `json:"resource"`
	Name     string `json:"name"`
	State    string `json:"state"`
	Reason   string `json:"reason"`
	Initial  bool   `json:"initial"`
	Final    bool   `json:"final"`
}

func fleetRecords(t *testing.T, lines []string) []fleetRecord {
	t.Helper()
	var recs []fleetRecord
	for _, l := range lines {
		var r fleetRecord
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("stdout line is not JSON: %q: %v", l, err)
		}
		recs = append(recs, r)
	}
	return recs
}

// TestE2EFleet (issue 54, item 8): crd-watcher over two control planes,
// each its own etcd and kube-apiserver, as two contexts of one kubeconfig.
// With --context east,west and -o json every record names its cluster; a
// CRD installed in east only is Synced there and Pending in west
// (--wait-for-crds) while west's configmaps sync, and starts in west when
// its CRD is installed there. With --all-contexts the text output has a
// CLUSTER column and the final status table one per row.
func TestE2EFleet(t *testing.T) {
	east := controlPlane(t) // started first: two starting together on a loaded machine can miss the RBAC bootstrap deadline
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	west, err := controlplane.Start(ctx, controlplane.Options{})
	if err != nil {
		t.Fatalf("second control plane: %v", err)
	}
	t.Cleanup(west.Stop)
	watcherBinary(t)

	group := perRun("fleet") + ".e2e.example.com"
	crd := controlplane.NewCRD(group, "Widget", "widgets")
	gvr := controlplane.GVR(crd)
	if err := east.InstallCRD(ctx, crd); err != nil {
		t.Fatal(err)
	}
	ns := perRun("e2e-fleet")
	for _, cp := range []*controlplane.ControlPlane{east, west} {
		if err := cp.CreateNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	widget := func(cp *controlplane.ControlPlane, name string) {
		t.Helper()
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": gvr.GroupVersion().String(), "kind": "Widget",
			"metadata": map[string]any{"name": name, "namespace": ns},
		}}
		if _, err := cp.Dynamic().Resource(gvr).Namespace(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	configMap := func(cp *controlplane.ControlPlane, name string) {
		t.Helper()
		if _, err := cp.Kube().CoreV1().ConfigMaps(ns).Create(ctx, newConfigMap(name, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	widget(east, "e1")
	configMap(west, "w-cm")
	kc := fleetKubeconfigFile(t, map[string]*controlplane.ControlPlane{"east": east, "west": west})

	t.Run("json", func(t *testing.T) {
		p := startWatcher(t, "--kubeconfig", kc, "--context", "east,west", "-o", "json", "-n", ns,
			"--wait-for-crds", "-r", gvrString(gvr), "-r", "configmaps")
		has := func(recs []fleetRecord, typ, cluster, resource, name, state string) bool {
			for _, r := range recs {
				if r.Type == typ && r.Cluster == cluster && r.Resource == resource && (name == "" || r.Name == name) && (state == "" || r.State == state) {
					return true
				}
			}
			return false
		}
		p.waitLines(t, true, "east's widget, west's configmap, widgets Synced in east and Pending in west", 3*time.Minute, func(lines []string) (bool, string) {
			recs := fleetRecords(t, lines)
			for _, w := range []struct{ typ, cluster, resource, name, state string }{
				{"ADDED", "east", "widgets", "e1", ""},
				{"ADDED", "west", "configmaps", "w-cm", ""},
				{"STATUS", "east", "widgets", "", "Synced"},
				{"STATUS", "west", "widgets", "", "Pending"},
				{"STATUS", "west", "configmaps", "", "Synced"},
			} {
				if !has(recs, w.typ, w.cluster, w.resource, w.name, w.state) {
					return false, "no " + strings.Join([]string{w.typ, w.cluster, w.resource, w.name, w.state}, " ")
				}
			}
			return true, ""
		})
		// The CRD arrives in west: its informer starts there.
		if err := west.InstallCRD(ctx, crd); err != nil {
			t.Fatal(err)
		}
		widget(west, "w1")
		widget(east, "e2")
		p.waitLines(t, true, "widgets Synced in west and the new widgets of both clusters", 3*time.Minute, func(lines []string) (bool, string) {
			recs := fleetRecords(t, lines)
			switch {
			case !has(recs, "STATUS", "west", "widgets", "", "Synced"):
				return false, "widgets not Synced in west"
			case !has(recs, "ADDED", "west", "widgets", "w1", ""):
				return false, "no ADDED west widgets w1"
			case !has(recs, "ADDED", "east", "widgets", "e2", ""):
				return false, "no ADDED east widgets e2"
			}
			return true, ""
		})
		if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := p.exited(t, time.Minute)
		if code != 0 {
			t.Fatalf("exit code %d after SIGINT\nstderr:\n%s", code, stderr)
		}
		recs := fleetRecords(t, strings.Split(strings.TrimSpace(stdout), "\n"))
		finals := map[string]string{}
		for _, r := range recs {
			if r.Cluster != "east" && r.Cluster != "west" {
				t.Errorf("record without its cluster: %+v", r)
			}
			if r.Type == "ADDED" && r.Resource == "widgets" && (r.Cluster == "east") != strings.HasPrefix(r.Name, "e") {
				t.Errorf("widget %s reported in cluster %s", r.Name, r.Cluster)
			}
			if r.Final {
				finals[r.Cluster+"/"+r.Resource] = r.State
			}
		}
		want := map[string]string{"east/widgets": "Synced", "west/widgets": "Synced", "east/configmaps": "Synced", "west/configmaps": "Synced"}
		for k, v := range want {
			if finals[k] != v {
				t.Errorf("final STATUS of %s: %q, want %q (all finals: %v)", k, finals[k], v, finals)
			}
		}
		mustContain(t, "stderr", stderr, "watching 2 contexts", "CLUSTER")
		t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
	})

	t.Run("black-holed context", func(t *testing.T) {
		// A context whose server accepts connections and never answers:
		// east's events come at once, and dead's CONTACT record says it is
		// lost.
		two, err := clientcmd.LoadFromFile(kc)
		if err != nil {
			t.Fatal(err)
		}
		two.Clusters["dead"] = &clientcmdapi.Cluster{Server: silentListener(t), InsecureSkipTLSVerify: true}
		two.AuthInfos["dead"] = &clientcmdapi.AuthInfo{Token: "x"}
		two.Contexts["dead"] = &clientcmdapi.Context{Cluster: "dead", AuthInfo: "dead"}
		path := filepath.Join(t.TempDir(), "kubeconfig")
		if err := clientcmd.WriteToFile(*two, path); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		p := startWatcher(t, "--kubeconfig", path, "--context", "east,dead", "-o", "json", "-n", ns, "--wait-for-crds", "-r", gvrString(gvr))
		p.waitLines(t, true, "east's widgets while dead does not answer", time.Minute, func(lines []string) (bool, string) {
			n := 0
			for _, r := range fleetRecords(t, lines) {
				if r.Type == "ADDED" && r.Cluster == "east" && r.Resource == "widgets" {
					n++
				}
			}
			return n == 2, "east's ADDED widgets: " + strconv.Itoa(n) + " of 2"
		})
		tookEast := time.Since(start)
		p.waitLines(t, true, "a CONTACT record of dead", 2*time.Minute, func(lines []string) (bool, string) {
			for _, l := range lines {
				var c jsonContact
				if err := json.Unmarshal([]byte(l), &c); err == nil && c.Type == "CONTACT" && c.Cluster == "dead" && !c.Contact && c.Error != "" {
					return true, ""
				}
			}
			return false, "no CONTACT record with cluster dead and contact false"
		})
		t.Logf("east's 2 widgets %v after the start, dead's lost contact %v after it", tookEast.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
		if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := p.exited(t, time.Minute)
		if code != 0 {
			t.Fatalf("exit code %d after SIGINT\nstderr:\n%s", code, stderr)
		}
		for _, r := range fleetRecords(t, strings.Split(strings.TrimSpace(stdout), "\n")) {
			if r.Cluster != "east" && r.Cluster != "dead" {
				t.Errorf("record without its cluster: %+v", r)
			}
		}
		mustContain(t, "stderr", stderr, "CONTACT dead lost: cannot reach the API server at https://127.0.0.1:", `NO CONTACT with the API server of context "dead"`)
		t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
	})

	t.Run("table", func(t *testing.T) {
		p := startWatcher(t, "--kubeconfig", kc, "--context", "east,west", "-o", "table", "-n", ns, "-r", "configmaps")
		header := regexp.MustCompile(`^EVENT\s+CLUSTER\s+NAME\s+DATA\s+AGE$`)
		row := regexp.MustCompile(`^ADDED\s+west\s+w-cm\s+\d+\s+\S+$`)
		p.waitLines(t, true, "west's configmap as a table row under a CLUSTER column", 3*time.Minute, func(lines []string) (bool, string) {
			var h, r bool
			for _, l := range lines {
				h = h || header.MatchString(l)
				r = r || row.MatchString(l)
			}
			return h && r, fmt.Sprintf("header %v, row %v", h, r)
		})
		configMap(east, "e-cm")
		p.waitLines(t, true, "east's new configmap as a row", time.Minute, func(lines []string) (bool, string) {
			for _, l := range lines {
				if regexp.MustCompile(`^ADDED\s+east\s+e-cm\s+\d+\s+\S+$`).MatchString(l) {
					return true, ""
				}
			}
			return false, "no row of east's e-cm"
		})
		if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := p.exited(t, time.Minute)
		if code != 0 {
			t.Fatalf("exit code %d after SIGINT\nstderr:\n%s", code, stderr)
		}
		mustContain(t, "stderr", stderr, "CLUSTER  RESOURCE")
		t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
	})

	t.Run("text all contexts", func(t *testing.T) {
		p := startWatcher(t, "--kubeconfig", kc, "--all-contexts", "-n", ns, "-r", "configmaps")
		added := regexp.MustCompile(`ADDED\s+west\s+configmaps\.v1\s+` + regexp.QuoteMeta(ns) + `/w-cm\s+\(initial list\)`)
		status := regexp.MustCompile(`STATUS\s+east\s+configmaps\.v1\s+.*Synced`)
		p.waitLines(t, true, "west's configmap with its CLUSTER column", 3*time.Minute, func(lines []string) (bool, string) {
			for _, l := range lines {
				if added.MatchString(l) {
					return true, ""
				}
			}
			return false, "no line matching " + added.String()
		})
		p.waitLines(t, false, "a STATUS line of east with its CLUSTER column", time.Minute, func(lines []string) (bool, string) {
			for _, l := range lines {
				if status.MatchString(l) {
					return true, ""
				}
			}
			return false, "no line matching " + status.String()
		})
		if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		code, _, stderr := p.exited(t, time.Minute)
		if code != 0 {
			t.Fatalf("exit code %d after SIGINT\nstderr:\n%s", code, stderr)
		}
		table := regexp.MustCompile(`(?m)^CLUSTER\s+RESOURCE\s+STATE\s+OBJECTS[^\n]*\neast\s+configmaps\.v1\s+Synced\s+\d+\s[^\n]*\nwest\s+configmaps\.v1\s+Synced\s+1\s`)
		if !table.MatchString(stderr) {
			t.Errorf("final status table lacks a row per cluster:\n%s", stderr)
		}
		stdout, _ := p.lines()
		t.Logf("stdout:\n%s\nstderr:\n%s", strings.Join(stdout, "\n"), stderr)
	})
}
