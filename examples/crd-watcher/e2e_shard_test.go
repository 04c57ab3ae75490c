package main

// End-to-end test of --shard-group: two crd-watcher processes share one
// resource through Lease membership on the test's control plane. The
// server's ShardedListAndWatch gate is off here (the control plane is
// shared with the other end-to-end tests), so the server sends every
// object and the watchers filter by themselves: the part of sharding
// that must hold on any server.

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/informerkit/informerkit/shard"
	"github.com/informerkit/informerkit/test/controlplane"
)

// shardRecord is a SHARD line of -o json output.
type shardRecord struct {
	Type     string   `json:"type"`
	Identity string   `json:"identity"`
	Members  []string `json:"members"`
	Fraction float64  `json:"fraction"`
	Selector string   `json:"selector"`
}

// watcherView is what one watcher's -o json output says it holds: the
// objects of its ADDED minus DELETED lines, and its last SHARD line.
type watcherView struct {
	held  map[string]bool // names
	group shardRecord
	final *record // its final STATUS line, once it exited
}

func viewOf(t *testing.T, p *proc) watcherView {
	t.Helper()
	out, _ := p.lines()
	v := watcherView{held: map[string]bool{}}
	for _, l := range out {
		recs := parseJSONLines(t, []string{l})
		r := recs[0]
		switch r.Type {
		case "ADDED":
			v.held[r.Name] = true
		case "DELETED":
			delete(v.held, r.Name)
		case "SHARD":
			var sr shardRecord
			mustUnmarshal(t, l, &sr)
			v.group = sr
		case "STATUS":
			if r.Final {
				rc := r
				v.final = &rc
			}
		}
	}
	return v
}

// selectorContains tells whether hash h is in one of the selector's ranges
// (parsed here independently of the watcher's own code).
func selectorContains(t *testing.T, sel string, h uint64) bool {
	t.Helper()
	re := regexp.MustCompile(`'0x([0-9a-f]+)', '0x([0-9a-f]+)'`)
	ms := re.FindAllStringSubmatch(sel, -1)
	if len(ms) == 0 {
		t.Fatalf("selector without ranges: %q", sel)
	}
	hb := new(big.Int).SetUint64(h)
	for _, m := range ms {
		start, _ := new(big.Int).SetString(m[1], 16)
		end, _ := new(big.Int).SetString(m[2], 16)
		if start.Cmp(hb) <= 0 && hb.Cmp(end) < 0 {
			return true
		}
	}
	return false
}

func TestE2EShardGroup(t *testing.T) {
	controlplane.Parallel(t)
	cp := controlPlane(t)
	ctx := context.Background()
	crd := controlplane.NewCRD("shard.e2e.example.com", "Piece", "pieces")
	if err := cp.InstallCRD(ctx, crd); err != nil {
		t.Fatal(err)
	}
	ns := perRun("e2e-shard")
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	gvr := controlplane.GVR(crd)
	const n = 60
	uid := map[string]string{} // name → uid
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("piece-%02d", i)
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": gvr.GroupVersion().String(), "kind": "Piece",
			"metadata": map[string]any{"name": name, "namespace": ns},
		}}
		got, err := cp.Dynamic().Resource(gvr).Namespace(ns).Create(ctx, u, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		uid[name] = string(got.GetUID())
	}
	kc := cp.Kubeconfig(t)
	args := func(id string) []string {
		return []string{"--kubeconfig", kc, "-o", "json", "-r", gvrString(gvr), "-n", ns, "--progress-interval", "0",
			"--shard-group", "pieces", "--shard-namespace", ns, "--shard-identity", id, "--shard-lease-duration", "3s"}
	}

	a := startWatcher(t, args("a")...)
	waitView(t, a, "a alone holds all 60", func(v watcherView) bool {
		return slices.Equal(v.group.Members, []string{"a"}) && len(v.held) == n
	})
	b := startWatcher(t, args("b")...)
	joined := time.Now()

	// Converged: both see [a b], each holds only objects of its shard,
	// together every object exactly once.
	check := func(va, vb watcherView) error {
		if !slices.Equal(va.group.Members, []string{"a", "b"}) || !slices.Equal(vb.group.Members, []string{"a", "b"}) {
			return fmt.Errorf("members a=%v b=%v", va.group.Members, vb.group.Members)
		}
		for name, id := range uid {
			inA, inB := va.held[name], vb.held[name]
			if inA == inB {
				return fmt.Errorf("%s held by a: %v, by b: %v", name, inA, inB)
			}
			h := shard.Hash(id)
			if inA != selectorContains(t, va.group.Selector, h) || inB != selectorContains(t, vb.group.Selector, h) {
				return fmt.Errorf("%s (uid %s) held outside its member's shard (a: %v, b: %v)", name, id, inA, inB)
			}
		}
		if len(va.held)+len(vb.held) != n {
			return fmt.Errorf("a holds %d, b %d: objects that do not exist", len(va.held), len(vb.held))
		}
		return nil
	}
	var last error
	deadline := time.Now().Add(3 * time.Minute)
	for {
		va, vb := viewOf(t, a), viewOf(t, b)
		if last = check(va, vb); last == nil {
			t.Logf("converged %s after b started: a holds %d (%.1f%% of the keyspace), b holds %d (%.1f%%)", roundDuration(time.Since(joined)), len(va.held), 100*va.group.Fraction, len(vb.held), 100*vb.group.Fraction)
			if len(va.held) == 0 || len(vb.held) == 0 {
				t.Errorf("one member holds nothing: a %d, b %d", len(va.held), len(vb.held))
			}
			break
		}
		if time.Now().After(deadline) {
			dump(t, a, b)
			t.Fatalf("not converged after 3m: %v", last)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// The status table on SIGUSR1 shows the group and the shard column.
	if err := a.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	a.waitStderr(t, regexp.MustCompile(`^shard group pieces \(Leases in `+ns+`\): 2 members \[a b\]; this replica a holds`), time.Minute)
	a.waitStderr(t, regexp.MustCompile(`pieces\.v1\.shard\.e2e\.example\.com\s+Synced\s+\d+\s+\d+\.\d% of uid, \d+ ranges?`), time.Minute)

	// b leaves (SIGTERM): it hands its objects to a and exits 0; a then
	// holds all of them.
	left := time.Now()
	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := b.wait(t, 2*time.Minute); code != 0 {
		dump(t, a, b)
		t.Fatalf("b exit code %d after SIGTERM", code)
	}
	b.waitStderr(t, regexp.MustCompile(`SHARD   left shard group pieces after`), time.Second)
	waitView(t, a, "a holds all 60 again after b left", func(v watcherView) bool {
		return slices.Equal(v.group.Members, []string{"a"}) && v.group.Fraction == 1 && len(v.held) == n
	})
	t.Logf("a holds all %d objects %s after b got SIGTERM", n, roundDuration(time.Since(left)))
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := a.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("a exit code %d after SIGTERM", code)
	}
	if v := viewOf(t, a); v.final == nil || v.final.State != "Synced" {
		t.Errorf("a's final STATUS: %+v", v.final)
	}
	out, _ := a.lines()
	var final string
	for _, l := range out {
		if strings.Contains(l, `"final":true`) {
			final = l
		}
	}
	if !strings.Contains(final, `"objects":60`) || !strings.Contains(final, `"shardFraction":1`) {
		t.Errorf("a's final STATUS line %q: want 60 objects and shardFraction 1", final)
	}
	// Leases are gone: both left gracefully.
	leases, err := cp.Kube().CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{LabelSelector: "informerkit.io/shard-group=pieces"})
	if err != nil {
		t.Fatal(err)
	}
	if len(leases.Items) != 0 {
		t.Errorf("%d Leases left after both watchers left", len(leases.Items))
	}
}

func mustUnmarshal(t *testing.T, line string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(line), v); err != nil {
		t.Fatalf("%q: %v", line, err)
	}
}

func waitView(t *testing.T, p *proc, what string, ok func(watcherView) bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for !ok(viewOf(t, p)) {
		if time.Now().After(deadline) {
			dump(t, p)
			v := viewOf(t, p)
			t.Fatalf("%s: not within 3m (members %v, holds %d)", what, v.group.Members, len(v.held))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func dump(t *testing.T, ps ...*proc) {
	t.Helper()
	for i, p := range ps {
		out, errs := p.lines()
		var shards []string
		for _, l := range out {
			if strings.Contains(l, `"SHARD"`) || strings.Contains(l, `"STATUS"`) {
				shards = append(shards, l)
			}
		}
		sort.Strings(shards)
		t.Logf("watcher %d: %d stdout lines; SHARD/STATUS:\n%s\nstderr:\n%s", i, len(out), strings.Join(shards, "\n"), strings.Join(errs, "\n"))
	}
}
