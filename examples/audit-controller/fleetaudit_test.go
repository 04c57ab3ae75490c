package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/informerkit/informerkit/test/controlplane"
)

func TestParseArgsContexts(t *testing.T) {
	base := []string{"-r", "configmaps", "--require-label", "owner"}
	for _, c := range []struct {
		args     []string
		context  string
		contexts []string
		all      bool
		usage    string
	}{
		{args: []string{"--context", "a"}, context: "a"},
		{args: []string{"--context", "a,b", "--context", "c"}, contexts: []string{"a", "b", "c"}},
		{args: []string{"--all-contexts"}, all: true},
		{args: []string{"--all-contexts", "--context", "a"}, usage: "mutually exclusive"},
		{args: []string{"--context", "a,b", "--category", "all"}, usage: "--category is not supported with several contexts"},
		{args: []string{"--demo", "--all-contexts"}, usage: "--demo cannot be combined"},
	} {
		cfg, err := parseArgs(append(append([]string{}, base...), c.args...), new(bytes.Buffer))
		if c.usage != "" {
			var ue *usageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.usage) {
				t.Errorf("%v: error %v, want a usage error saying %q", c.args, err, c.usage)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", c.args, err)
			continue
		}
		if cfg.Context != c.context || !reflect.DeepEqual(cfg.Contexts, c.contexts) || cfg.AllContexts != c.all {
			t.Errorf("%v: Context %q Contexts %v AllContexts %v", c.args, cfg.Context, cfg.Contexts, cfg.AllContexts)
		}
	}
}

// TestFleetAudit (issue 54, item 8): the auditor over two control planes
// (each its own etcd and kube-apiserver), as two contexts of one
// kubeconfig. Each cluster's findings are its own: its violating objects
// get Events in that cluster, its summary ConfigMap counts its objects,
// and the report at exit names the cluster.
func TestFleetAudit(t *testing.T) {
	if testing.Short() {
		t.Skip("starts API servers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	planes := map[string]*controlplane.ControlPlane{}
	for _, name := range []string{"east", "west"} { // one after the other: two starting together can miss the RBAC bootstrap deadline
		cp, err := controlplane.Start(ctx, controlplane.Options{})
		if err != nil {
			t.Fatalf("control plane %s: %v", name, err)
		}
		defer cp.Stop()
		planes[name] = cp
	}
	const ns = "fleet-audit"
	objects := map[string]map[string]bool{ // cluster → configmap → compliant
		"east": {"good": true, "bad": false},
		"west": {"lost": false},
	}
	kc := clientcmdapi.NewConfig()
	for name, cp := range planes {
		if err := cp.CreateNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
		for cm, ok := range objects[name] {
			o := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cm, Namespace: ns}}
			if ok {
				o.Labels = map[string]string{"owner": "team"}
			}
			if _, err := cp.Kube().CoreV1().ConfigMaps(ns).Create(ctx, o, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		one, err := clientcmd.LoadFromFile(cp.Kubeconfig(t))
		if err != nil {
			t.Fatal(err)
		}
		kctx := one.Contexts[one.CurrentContext]
		kc.Clusters[name], kc.AuthInfos[name] = one.Clusters[kctx.Cluster], one.AuthInfos[kctx.AuthInfo]
		kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(runCtx, []string{"--kubeconfig", path, "--all-contexts", "-r", "configmaps", "-n", ns,
			"--require-label", "owner", "--summary-interval", "200ms"}, &stdout, &stderr)
	}()
	for name, cp := range planes {
		want := map[string]string{"audited": fmt.Sprint(len(objects[name])), "noncompliant": "1"}
		var seen map[string]string
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			cm, err := cp.Kube().CoreV1().ConfigMaps("default").Get(ctx, "audit-summary", metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			seen = cm.Data
			return cm.Data["audited"] == want["audited"] && cm.Data["noncompliant"] == want["noncompliant"], nil
		})
		if err != nil {
			t.Fatalf("summary ConfigMap of %s: want %v, last seen %v\nstderr:\n%s", name, want, seen, stderr.String())
		}
		for cm, ok := range objects[name] {
			if ok {
				continue
			}
			var reasons []string
			err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
				evs, err := cp.Kube().CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + cm})
				if err != nil {
					return false, nil
				}
				reasons = reasons[:0]
				for _, e := range evs.Items {
					reasons = append(reasons, e.Reason)
				}
				return len(reasons) == 1 && reasons[0] == reasonViolation, nil
			})
			if err != nil {
				t.Fatalf("Events on %s/%s in %s: want one %s, seen %v", ns, cm, name, reasonViolation, reasons)
			}
		}
	}
	stop()
	select {
	case code := <-done:
		if code != exitOK {
			t.Fatalf("exit %d\nstderr:\n%s", code, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("the auditor did not end within a minute of its context\nstderr:\n%s", stderr.String())
	}
	out := stdout.String()
	t.Logf("stdout:\n%s\nstderr:\n%s", out, stderr.String())
	for _, want := range []string{
		"cluster east: audited 2 objects: 1 compliant, 1 non-compliant\n",
		"configmaps.v1 " + ns + "/bad: label:owner: missing label \"owner\"\n",
		"cluster west: audited 1 objects: 0 compliant, 1 non-compliant\n",
		"configmaps.v1 " + ns + "/lost: label:owner: missing label \"owner\"\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	if i, j := strings.Index(out, "cluster west:"), strings.Index(out, "/lost:"); i < 0 || j < i {
		t.Errorf("west's finding is not under west's report")
	}
}
