package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/subscription"
)

func TestParseArgsContexts(t *testing.T) {
	for _, c := range []struct {
		args     []string
		context  string
		contexts []string
		all      bool
		usage    string // "" no error, else a part of the usage error
	}{
		{args: []string{"-r", "ct", "--context", "a"}, context: "a"},
		{args: []string{"-r", "ct", "--context", "a,b", "--context", "c"}, contexts: []string{"a", "b", "c"}},
		{args: []string{"-r", "ct", "--context", "a,a"}, context: "a"},
		{args: []string{"-r", "ct", "--all-contexts"}, all: true},
		{args: []string{"-r", "ct", "--all-contexts", "--context", "a"}, usage: "mutually exclusive"},
		{args: []string{"-r", "ct", "--context", "a,b", "--metrics-addr", ":0"}, usage: "--metrics-addr is not supported with several contexts"},
		{args: []string{"--all", "--all-contexts"}, usage: "--all is not supported with several contexts"},
		{args: []string{"-r", "ct", "--demo", "--context", "a,b"}, usage: "--demo runs its own API server"},
	} {
		cfg, err := parseArgs(c.args, new(bytes.Buffer))
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
		if cfg.Context != c.context || !reflect.DeepEqual(cfg.Contexts, c.contexts) || cfg.AllContexts != c.all || cfg.fleet() != (c.contexts != nil || c.all) {
			t.Errorf("%v: Context %q Contexts %v AllContexts %v fleet %v", c.args, cfg.Context, cfg.Contexts, cfg.AllContexts, cfg.fleet())
		}
	}
}

func TestFleetContexts(t *testing.T) {
	kc := clientcmdapi.NewConfig()
	for _, n := range []string{"west", "east"} {
		kc.Clusters[n] = &clientcmdapi.Cluster{Server: "https://" + n + ".example.com"}
		kc.AuthInfos[n] = &clientcmdapi.AuthInfo{Token: "t"}
		kc.Contexts[n] = &clientcmdapi.Context{Cluster: n, AuthInfo: n}
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	names, servers, err := fleetContexts(&Config{AllContexts: true}, path)
	if err != nil || !reflect.DeepEqual(names, []string{"east", "west"}) || servers["west"] != "https://west.example.com" {
		t.Errorf("--all-contexts: %v %v %v", names, servers, err)
	}
	if _, _, err := fleetContexts(&Config{Contexts: []string{"east", "north"}}, path); err == nil || !strings.Contains(err.Error(), `no context "north"`) || !strings.Contains(err.Error(), "east, west") {
		t.Errorf("unknown context: %v", err)
	}
	env := map[string]string{"KUBECONFIG": path + string(os.PathListSeparator) + path}
	if _, err := fleetKubeconfig(&Config{}, func(k string) string { return env[k] }); err == nil {
		t.Error("KUBECONFIG naming two files: no error")
	}
}

// With a cluster, JSON records carry it and text lines have a CLUSTER
// column; without one (a single context) neither changes.
func TestPrinterCluster(t *testing.T) {
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "cm", "namespace": "ns"},
	}}
	at := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	for _, cluster := range []string{"", "east"} {
		var out, errOut bytes.Buffer
		p := newPrinter(&out, &errOut, true, false)
		p.now = func() time.Time { return at }
		if cluster != "" {
			p.clusterWidth = 5
		}
		p.eventIn(cluster, subscription.Event{Type: subscription.Added, GVR: gvr, Object: obj}, "")
		p.statusLine(cluster, dynamicinformer.Status{GVR: gvr, State: dynamicinformer.Synced}, "", false)
		p.contactIn(cluster, "https://x", "refused", 0)
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) != 3 {
			t.Fatalf("cluster %q: %d records: %s", cluster, len(lines), out.String())
		}
		for _, l := range lines {
			var rec map[string]any
			if err := json.Unmarshal([]byte(l), &rec); err != nil {
				t.Fatal(err)
			}
			got, has := rec["cluster"]
			if (cluster == "") == has || has && got != cluster {
				t.Errorf("cluster %q: record %s", cluster, l)
			}
		}
		var text bytes.Buffer
		p = newPrinter(&text, &text, false, false)
		p.now = func() time.Time { return at }
		if cluster != "" {
			p.clusterWidth = 5
		}
		p.eventIn(cluster, subscription.Event{Type: subscription.Added, GVR: gvr, Object: obj}, "")
		want := "10:00:00.000 ADDED   configmaps.v1 ns/cm\n"
		if cluster != "" {
			want = "10:00:00.000 ADDED   east  configmaps.v1 ns/cm\n"
		}
		if text.String() != want {
			t.Errorf("text line %q, want %q", text.String(), want)
		}
	}
}
