package main

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/shard"
)

func TestParseArgsShardGroup(t *testing.T) {
	c, err := parseArgs([]string{"-r", "ct", "--shard-group", "watchers", "--shard-namespace", "ops",
		"--shard-identity", "replica-1", "--shard-lease-duration", "5s", "-n", "team-a"}, new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	if c.ShardGroup != "watchers" || c.ShardNamespace != "ops" || c.ShardIdentity != "replica-1" || c.ShardLeaseDuration != 5*time.Second {
		t.Errorf("parsed config = %+v", c)
	}
	c, err = parseArgs([]string{"-r", "ct", "--shard-group", "watchers"}, new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	if c.ShardNamespace != "" || c.ShardIdentity != "" || c.ShardLeaseDuration != 15*time.Second {
		t.Errorf("defaults: namespace %q identity %q lease %s; want both filled in at join, lease 15s", c.ShardNamespace, c.ShardIdentity, c.ShardLeaseDuration)
	}
}

func TestParseArgsShardGroupErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"with --shard", []string{"--shard", "0/2", "--shard-group", "g"}, "--shard and --shard-group are mutually exclusive"},
		{"namespace without group", []string{"--shard-namespace", "ops"}, "--shard-namespace needs --shard-group"},
		{"identity without group", []string{"--shard-identity", "a"}, "--shard-identity needs --shard-group"},
		{"lease without group", []string{"--shard-lease-duration", "3s"}, "--shard-lease-duration needs --shard-group"},
		{"bad group", []string{"--shard-group", "My Group"}, `--shard-group "My Group"`},
		{"upper-case group", []string{"--shard-group", "Watchers"}, `--shard-group "Watchers"`},
		{"bad namespace", []string{"--shard-group", "g", "--shard-namespace", "Ops_1"}, `--shard-namespace "Ops_1"`},
		{"bad identity", []string{"--shard-group", "g", "--shard-identity", "a b"}, `--shard-identity "a b"`},
		{"short lease", []string{"--shard-group", "g", "--shard-lease-duration", "100ms"}, "at least 1s"},
		{"two namespaces", []string{"--shard-group", "g", "-n", "a,b"}, "all namespaces or one"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseArgs(append([]string{"-r", "ct"}, tc.args...), new(bytes.Buffer))
			var ue *usageError
			if !errors.As(err, &ue) {
				t.Fatalf("parseArgs(%q) error = %v, want a usage error", tc.args, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q lacks %q", err, tc.want)
			}
		})
	}
}

func TestConfigFileShardKeys(t *testing.T) {
	p := filepath.Join(t.TempDir(), "w.yaml")
	if err := os.WriteFile(p, []byte("resources: [ct]\nshardGroup: watchers\nshardNamespace: ops\nshardIdentity: r1\nshardLeaseDuration: 6s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := parseArgs([]string{"--config", p, "--shard-identity", "r2"}, new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	if c.ShardGroup != "watchers" || c.ShardNamespace != "ops" || c.ShardIdentity != "r2" || c.ShardLeaseDuration != 6*time.Second {
		t.Errorf("config = %+v (the flag must win over the file's shardIdentity)", c)
	}
	// A file giving both a static shard and a group is refused like the flags.
	if err := os.WriteFile(p, []byte("resources: [ct]\nshard: 0/2\nshardGroup: watchers\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := parseArgs([]string{"--config", p}, new(bytes.Buffer)); err == nil || !strings.Contains(err.Error(), "mutually exclusive") {
		t.Errorf("shard and shardGroup in a file: error %v", err)
	}
}

func TestSelectorSummary(t *testing.T) {
	for n := 1; n <= 5; n++ {
		for i := 0; i < n; i++ {
			s, err := shard.Static(i, n)
			if err != nil {
				t.Fatal(err)
			}
			f, ranges, field, ok := selectorSummary(s.Selector())
			if !ok || ranges != 1 || field != "object.metadata.uid" || math.Abs(f-1/float64(n)) > 1e-9 || math.Abs(f-s.Size()) > 1e-9 {
				t.Errorf("Static(%d,%d): selectorSummary = %v %d %q %v, want %v, 1 range", i, n, f, ranges, field, ok, 1/float64(n))
			}
		}
	}
	// A member of a group: many ranges; the fraction is their sum.
	s, err := shard.Assign(shard.UID, []string{"a", "b", "c"}, "b", 0)
	if err != nil {
		t.Fatal(err)
	}
	f, ranges, _, ok := selectorSummary(s.Selector())
	if !ok || ranges != len(s.Ranges()) || ranges < 2 || math.Abs(f-s.Size()) > 1e-9 {
		t.Errorf("Assign: selectorSummary = %v %d %v; want %v in %d ranges", f, ranges, ok, s.Size(), len(s.Ranges()))
	}
	for _, bad := range []string{"", "nonsense", "shardRange(object.metadata.uid, '0x10', '0x08')"} {
		if _, _, _, ok := selectorSummary(bad); ok {
			t.Errorf("selectorSummary(%q) ok", bad)
		}
	}
	if got := shardCell(mustStatic(t, 1, 3).Selector()); got != "33.3% of uid, 1 range" {
		t.Errorf("shardCell = %q", got)
	}
}

func mustStatic(t *testing.T, i, n int) shard.Shard {
	t.Helper()
	s, err := shard.Static(i, n)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStatusTableShowsShards(t *testing.T) {
	var out bytes.Buffer
	p := newPrinter(&out, &out, false, false)
	p.now = func() time.Time { return time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC) }
	sel := mustStatic(t, 0, 4).Selector()
	sts := []dynamicinformer.Status{
		{GVR: schema.GroupVersionResource{Group: "stable.example.com", Version: "v1", Resource: "crontabs"}, State: dynamicinformer.Synced, Objects: 17, Shard: sel, Since: p.now()},
		{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, State: dynamicinformer.Synced, Objects: 3, Shard: sel, OutsideShard: 9, Since: p.now()},
	}
	view := groupView{Group: "g", Namespace: "ops", Identity: "a", Members: []string{"a", "b", "c", "d"}, Shard: mustStatic(t, 0, 4)}
	p.statusTable("status", "", "shard "+view.String(), sts, nil)
	text := out.String()
	for _, want := range []string{
		"shard group g (Leases in ops): 4 members [a b c d]; this replica a holds 25.0% of the keyspace in 1 range",
		"SHARD", "25.0% of uid, 1 range", "17", "server sent 9 objects outside the shard",
		"shard selector of configmaps.v1, crontabs.v1.stable.example.com: " + sel,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("status table lacks %q:\n%s", want, text)
		}
	}
	if strings.Count(text, "shard selector") != 1 {
		t.Errorf("a selector shared by every informer should be printed once:\n%s", text)
	}
	out.Reset()
	crontabs := sts[0]
	if crontabs.GVR.Resource != "crontabs" {
		crontabs = sts[1] // statusTable sorts its argument
	}
	p.status(crontabs, dynamicinformer.Syncing)
	if want := "crontabs.v1.stable.example.com Syncing → Synced (17 objects, shard 25.0% of uid, 1 range)"; !strings.Contains(out.String(), want) {
		t.Errorf("STATUS line %q lacks %q", out.String(), want)
	}
}

func TestDefaultShardNamespace(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts:
- {name: with-ns, context: {cluster: c, user: u, namespace: ops}}
- {name: without, context: {cluster: c, user: u}}
current-context: with-ns
`), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := defaultShardNamespace(&Config{Kubeconfig: kc}); got != "ops" {
		t.Errorf("current context with namespace ops: %q", got)
	}
	if got := defaultShardNamespace(&Config{Kubeconfig: kc, Context: "without"}); got != "default" {
		t.Errorf("context without a namespace: %q, want default", got)
	}
}

func TestDemoRefusesStaticShard(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(t.Context(), []string{"--demo", "--shard", "0/2"}, &out, &errb); code != exitUsage {
		t.Fatalf("exit %d, want %d; stderr %s", code, exitUsage, errb.String())
	}
	if !strings.Contains(errb.String(), "--shard holds only part of the objects") {
		t.Errorf("stderr: %s", errb.String())
	}
}
