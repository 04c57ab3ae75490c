package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/informerkit/informerkit/shard"
	"github.com/informerkit/informerkit/test/controlplane"
)

func TestParseArgsShard(t *testing.T) {
	c, err := parseArgs([]string{"-r", "pods", "--require-label", "a", "--shard", "1/3"}, new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := shard.Static(1, 3)
	if !c.shard.Equal(want) || c.SummaryName != "audit-summary-1-of-3" {
		t.Errorf("--shard 1/3: shard %v, summary %q", c.shard, c.SummaryName)
	}
	c, err = parseArgs([]string{"-r", "pods", "--require-label", "a", "--shard-group", "auditors", "--shard-namespace", "ops",
		"--shard-identity", "r1", "--shard-lease-duration", "4s", "-n", "team-a"}, new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	if c.ShardGroup != "auditors" || c.ShardNamespace != "ops" || c.ShardIdentity != "r1" || c.ShardLeaseDuration != 4*time.Second || c.SummaryName != "audit-summary-r1" {
		t.Errorf("--shard-group: %+v", c)
	}
	c, err = parseArgs([]string{"-r", "pods", "--require-label", "a", "--shard-group", "auditors", "--summary-name", "mine"}, new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	if c.SummaryName != "mine" || c.ShardIdentity == "" || c.ShardLeaseDuration != 15*time.Second {
		t.Errorf("--summary-name given: %q; identity %q; lease %s", c.SummaryName, c.ShardIdentity, c.ShardLeaseDuration)
	}
}

func TestParseArgsShardErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--shard", "2/2"}, "--shard"},
		{[]string{"--shard", "x"}, "--shard"},
		{[]string{"--shard", "0/2", "--shard-group", "g"}, "mutually exclusive"},
		{[]string{"--shard-namespace", "ops"}, "needs --shard-group"},
		{[]string{"--shard-identity", "a"}, "needs --shard-group"},
		{[]string{"--shard-lease-duration", "3s"}, "needs --shard-group"},
		{[]string{"--shard-group", "Bad Group"}, "--shard-group"},
		{[]string{"--shard-group", "g", "--shard-namespace", "Bad_NS"}, "--shard-namespace"},
		{[]string{"--shard-group", "g", "--shard-identity", "a b"}, "--shard-identity"},
		{[]string{"--shard-group", "g", "--shard-lease-duration", "10ms"}, "at least 1s"},
		{[]string{"--shard-group", "g", "-n", "a,b"}, "one"},
	} {
		_, err := parseArgs(append([]string{"-r", "pods", "--require-label", "a"}, tc.args...), new(bytes.Buffer))
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseArgs(%q) = %v, want a usage error with %q", tc.args, err, tc.want)
		}
	}
}

func TestDemoRefusesStaticShard(t *testing.T) {
	var out, errb syncBuffer
	if code := run(t.Context(), []string{"--demo", "--shard", "0/2"}, &out, &errb); code != exitUsage {
		t.Fatalf("exit %d, want %d; stderr %s", code, exitUsage, errb.String())
	}
	if !strings.Contains(errb.String(), "--shard audits only part") {
		t.Errorf("stderr: %s", errb.String())
	}
}

// TestShardedAuditors runs two auditors with --shard 0/2 and 1/2, then one
// with --shard-group, against a control plane: each static replica audits
// exactly the objects whose UID hashes into its shard (its own summary
// ConfigMap, Events only on those objects), and the group of one audits
// everything and deletes its Lease when it stops; a group of two splits
// the objects between its members, and the one that stays takes all of
// them when the other leaves.
func TestShardedAuditors(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	const ns, group, n = "e2e-shard", "shard.audit.example.com", 16
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	crd := controlplane.NewCRD(group, "Part", "parts")
	if err := cp.InstallCRD(ctx, crd); err != nil {
		t.Fatal(err)
	}
	parts := cp.Dynamic().Resource(controlplane.GVR(crd)).Namespace(ns)
	uids := map[string]string{}
	for i := 0; i < n; i++ {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": group + "/v1", "kind": "Part",
			"metadata": map[string]any{"name": fmt.Sprintf("part-%02d", i), "namespace": ns},
		}}
		got, err := parts.Create(ctx, u, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		uids[got.GetName()] = string(got.GetUID())
	}
	kc := cp.Kubeconfig(t)
	kube := cp.Kube()
	summary := func(name string) (report, bool) {
		cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return report{}, false
		}
		var r report
		if err := json.Unmarshal([]byte(cm.Data["report.json"]), &r); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return r, true
	}
	type runner struct {
		stop   context.CancelFunc
		exit   chan int
		stderr *syncBuffer
	}
	start := func(extra ...string) runner {
		rctx, stop := context.WithCancel(ctx)
		r := runner{stop: stop, exit: make(chan int, 1), stderr: &syncBuffer{}}
		args := append([]string{"--kubeconfig", kc, "-r", "parts." + group, "-n", ns, "--require-label", "owner",
			"--summary-namespace", ns, "--summary-interval", "200ms"}, extra...)
		go func() { r.exit <- run(rctx, args, &syncBuffer{}, r.stderr) }()
		return r
	}
	end := func(r runner) {
		t.Helper()
		r.stop()
		select {
		case code := <-r.exit:
			if code != exitOK {
				t.Errorf("exit %d\nstderr:\n%s", code, r.stderr.String())
			}
		case <-time.After(time.Minute):
			t.Fatalf("the auditor did not stop within a minute\nstderr:\n%s", r.stderr.String())
		}
	}

	r0, r1 := start("--shard", "0/2"), start("--shard", "1/2")
	union := map[string]int{}
	for i, r := range []runner{r0, r1} {
		s, _ := shard.Static(i, 2)
		want := map[string]bool{}
		for name, uid := range uids {
			if s.ContainsValue(uid) {
				want[name] = true
			}
		}
		name := fmt.Sprintf("audit-summary-%d-of-2", i)
		var rep report
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
			var ok bool
			rep, ok = summary(name)
			return ok && rep.Audited == len(want), nil
		}); err != nil {
			t.Fatalf("%s: audited %d, want %d (its shard)\nstderr:\n%s", name, rep.Audited, len(want), r.stderr.String())
		}
		got := map[string]bool{}
		for _, f := range rep.Findings {
			got[f.Name] = true
			union[f.Name]++
		}
		if len(got) != len(want) {
			t.Errorf("%s: findings on %d objects, want the %d of its shard", name, len(got), len(want))
		}
		for name := range got {
			if !want[name] {
				t.Errorf("shard %d/2 reported %s, which is outside its shard", i, name)
			}
		}
	}
	if len(union) != n {
		t.Errorf("the two shards reported %d distinct objects, want %d", len(union), n)
	}
	for name, c := range union {
		if c != 1 {
			t.Errorf("%s reported by %d shards", name, c)
		}
	}
	end(r0)
	end(r1)

	// A group of one holds everything, and leaves no Lease behind.
	g := start("--shard-group", "auditors", "--shard-namespace", ns, "--shard-identity", "solo", "--shard-lease-duration", "3s")
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		rep, ok := summary("audit-summary-solo")
		return ok && rep.Audited == n, nil
	}); err != nil {
		t.Fatalf("the group's only member did not audit all %d objects\nstderr:\n%s", n, g.stderr.String())
	}
	if _, err := kube.CoordinationV1().Leases(ns).Get(ctx, "auditors-solo", metav1.GetOptions{}); err != nil {
		t.Errorf("the member's Lease: %v", err)
	}
	end(g)
	if !strings.Contains(g.stderr.String(), "shard group auditors: left after") {
		t.Errorf("no graceful leave on stderr:\n%s", g.stderr.String())
	}
	if _, err := kube.CoordinationV1().Leases(ns).Get(ctx, "auditors-solo", metav1.GetOptions{}); err == nil {
		t.Errorf("the Lease is still there after the member left")
	}

	// A group of two splits the objects: once both have settled, each
	// audits its part and together they audit every object exactly once.
	// When one leaves, the other audits everything.
	a := start("--shard-group", "pair", "--shard-namespace", ns, "--shard-identity", "a", "--shard-lease-duration", "3s")
	b := start("--shard-group", "pair", "--shard-namespace", ns, "--shard-identity", "b", "--shard-lease-duration", "3s")
	var split [2]report
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		ra, okA := summary("audit-summary-a")
		rb, okB := summary("audit-summary-b")
		if !okA || !okB || ra.Audited == 0 || rb.Audited == 0 || ra.Audited+rb.Audited != n {
			return false, nil
		}
		seen := map[string]bool{}
		for _, f := range append(append([]finding{}, ra.Findings...), rb.Findings...) {
			if seen[f.Name] {
				return false, nil // held by both for a moment: a hand-over in progress
			}
			seen[f.Name] = true
		}
		split = [2]report{ra, rb}
		return len(seen) == n, nil
	}); err != nil {
		ra, _ := summary("audit-summary-a")
		rb, _ := summary("audit-summary-b")
		t.Fatalf("the pair did not split the %d objects: a audits %d, b %d\nstderr a:\n%s\nstderr b:\n%s",
			n, ra.Audited, rb.Audited, a.stderr.String(), b.stderr.String())
	}
	t.Logf("group of two: a audits %d objects, b %d", split[0].Audited, split[1].Audited)
	end(b)
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		ra, ok := summary("audit-summary-a")
		return ok && ra.Audited == n && len(ra.Findings) == n, nil
	}); err != nil {
		ra, _ := summary("audit-summary-a")
		t.Fatalf("after b left, a audits %d objects, want all %d\nstderr a:\n%s", ra.Audited, n, a.stderr.String())
	}
	end(a)
	for _, id := range []string{"a", "b"} {
		if _, err := kube.CoordinationV1().Leases(ns).Get(ctx, "pair-"+id, metav1.GetOptions{}); err == nil {
			t.Errorf("member %s's Lease is still there after it left", id)
		}
	}
}
