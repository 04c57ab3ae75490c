package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/informerkit/informerkit/test/controlplane"
)

// cachedRun is one run of the watcher on --cache-dir: it waits for the
// JSON STATUS Synced line, then until want(events) holds, then a moment
// for anything more, and stops the watcher with SIGTERM. It returns the
// object events printed (not STATUS lines) and the Synced status.
func cachedRun(t *testing.T, kubeconfig, ns, dir string, want func([]record) bool) (events []record, synced jsonStatus) {
	t.Helper()
	p := startWatcher(t, "--kubeconfig", kubeconfig, "--resource", "configmaps", "-n", ns, "-o", "json",
		"--cache-dir", dir, "--progress-interval", "0", "--verbose")
	deadline := time.Now().Add(4 * time.Minute)
	for {
		out, errs := p.lines()
		events, synced = events[:0], jsonStatus{}
		for _, l := range out {
			typ, st, ev := parseLine(t, l)
			switch {
			case typ == "STATUS" && st.State == "Synced" && synced.State == "":
				synced = st
			case typ == "ADDED" || typ == "UPDATED" || typ == "DELETED":
				events = append(events, ev)
			}
		}
		if synced.State != "" && want(events) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Synced status with the expected events within 4m (%d events so far)\nstderr:\n%s", len(events), strings.Join(errs, "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second) // anything more printed would be a spurious event
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := p.exited(t, 2*time.Minute)
	if code != exitOK {
		t.Fatalf("exit code %d\nstderr:\n%s", code, stderr)
	}
	for _, l := range strings.Split(stderr, "\n") {
		if strings.Contains(l, "disk") || strings.Contains(l, "cache") || strings.Contains(l, "stored") {
			t.Logf("stderr: %s", l)
		}
	}
	for _, l := range strings.Split(stdout, "\n") {
		if strings.Contains(l, `"final":true`) {
			t.Logf("final: %s", l)
		}
	}
	events = events[:0]
	for _, l := range strings.Split(stdout, "\n") {
		if typ, _, ev := parseLine(t, l); typ == "ADDED" || typ == "UPDATED" || typ == "DELETED" {
			events = append(events, ev)
		}
	}
	return events, synced
}

// parseLine reads one -o json line: its type and, by type, the status or
// the event.
func parseLine(t *testing.T, l string) (typ string, st jsonStatus, ev record) {
	t.Helper()
	if l == "" {
		return "", st, ev
	}
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal([]byte(l), &head); err != nil {
		t.Fatalf("stdout line is not JSON: %q: %v", l, err)
	}
	if head.Type == "STATUS" {
		_ = json.Unmarshal([]byte(l), &st)
	} else {
		_ = json.Unmarshal([]byte(l), &ev)
	}
	return head.Type, st, ev
}

// keysOf are the namespace/name of the events of type typ, sorted.
func keysOf(events []record, typ string) []string {
	var out []string
	for _, e := range events {
		if e.Type == typ {
			out = append(out, e.Namespace+"/"+e.Name)
		}
	}
	slices.Sort(out)
	return out
}

// changeConfigMaps creates the configmaps named add, updates those named
// update and deletes those named del, and returns the three key lists.
func changeConfigMaps(t *testing.T, ctx context.Context, kube kubernetes.Interface, ns string, add, update, del []string) (added, updated, deleted []string) {
	t.Helper()
	cms := kube.CoreV1().ConfigMaps(ns)
	for _, n := range add {
		if _, err := cms.Create(ctx, newConfigMap(n, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		added = append(added, ns+"/"+n)
	}
	for _, n := range update {
		cm, err := cms.Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data = map[string]string{"changed": time.Now().String()}
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		updated = append(updated, ns+"/"+n)
	}
	for _, n := range del {
		if err := cms.Delete(ctx, n, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		deleted = append(deleted, ns+"/"+n)
	}
	slices.Sort(added)
	slices.Sort(updated)
	slices.Sort(deleted)
	return added, updated, deleted
}

// TestE2ECacheDirRestart: crd-watcher --cache-dir over 5,000 configmaps
// prints them all once (initial list), is stopped; while it is down 3
// are created, 2 updated, 2 deleted; started again it prints exactly
// those 7 events (no initial-list line for the 5,000 it restored), its
// Synced status says 5,000 restored, and it sends no list. Stopped again,
// 2 more created, updated and deleted each and etcd compacted: the watch
// from the stored resourceVersion answers 410, the watcher lists once,
// and again prints exactly the changes.
func TestE2ECacheDirRestart(t *testing.T) {
	// Side by side with the others: the etcd it compacts and the API
	// server it counts lists on are its own (below).
	controlplane.Parallel(t)
	watcherBinary(t) // skips with -short
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	// A control plane of its own, without the watch cache for configmaps:
	// the watch cache keeps recent events whatever etcd compacted, so only
	// then does the compaction below put the stored resourceVersion past
	// the server's window.
	cp, err := controlplane.Start(ctx, controlplane.Options{ExtraFlags: []string{"--watch-cache-sizes=configmaps#0"}})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	ns := perRun("cachedir")
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	kube := cp.Kube()
	const n = 5000
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 16 {
				if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%04d", i)},
					Data: map[string]string{"i": fmt.Sprint(i)}}, metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("created %d configmaps in %v", n, time.Since(start).Round(time.Millisecond))
	kubeconfig, lists := cp.ListCountingProxy(t, "/namespaces/"+ns+"/configmaps")
	dir := filepath.Join(t.TempDir(), "cache")

	// First run: a cold start prints the initial list.
	events, synced := cachedRun(t, kubeconfig, ns, dir, func(ev []record) bool { return len(ev) >= n })
	if len(events) != n || len(keysOf(events, "ADDED")) != n || synced.Restored != 0 || synced.CacheError != "" {
		t.Fatalf("cold start: %d events (%d ADDED), status %+v; want %d initial adds, nothing restored", len(events), len(keysOf(events, "ADDED")), synced, n)
	}
	if lists := lists.Load(); lists != 1 {
		t.Errorf("cold start sent %d lists, want 1", lists)
	}
	if snaps, _ := filepath.Glob(filepath.Join(dir, "configmaps.core.preferred-*.snap")); len(snaps) != 1 {
		entries, err := os.ReadDir(dir)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("cache directory holds %v (%v), want one snapshot", names, err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("cache directory mode %v (%v), want 0700", fi.Mode().Perm(), err)
	}

	// Resumed: only what changed while down.
	check := func(what string, events []record, added, updated, deleted []string) {
		t.Helper()
		for _, e := range events {
			if e.Initial {
				t.Errorf("%s: an initial-list event was printed: %+v", what, e.jsonEvent)
			}
		}
		if a, u, d := keysOf(events, "ADDED"), keysOf(events, "UPDATED"), keysOf(events, "DELETED"); !slices.Equal(a, added) || !slices.Equal(u, updated) || !slices.Equal(d, deleted) || len(events) != len(added)+len(updated)+len(deleted) {
			t.Errorf("%s printed %d events: ADDED %v UPDATED %v DELETED %v; want exactly ADDED %v UPDATED %v DELETED %v", what, len(events), a, u, d, added, updated, deleted)
		}
	}
	added, updated, deleted := changeConfigMaps(t, ctx, kube, ns, []string{"new-0", "new-1", "new-2"}, []string{"cm-0000", "cm-0001"}, []string{"cm-0002", "cm-0003"})
	lists.Reset()
	events, synced = cachedRun(t, kubeconfig, ns, dir, func(ev []record) bool { return len(ev) >= 7 })
	t.Logf("resumed restart: %d events, %d lists, Synced %+v", len(events), lists.Load(), synced)
	check("resumed restart", events, added, updated, deleted)
	if synced.Restored != n || synced.CacheError != "" {
		t.Errorf("resumed restart: Synced status restored %d (cache error %q), want %d", synced.Restored, synced.CacheError, n)
	}
	if lists := lists.Load(); lists != 0 {
		t.Errorf("resumed restart sent %d lists, want 0", lists)
	}

	// Past the window: one list, again only the changes.
	added, updated, deleted = changeConfigMaps(t, ctx, kube, ns, []string{"new-3", "new-4"}, []string{"cm-0004", "new-0"}, []string{"cm-0005", "new-1"})
	if _, err := cp.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	lists.Reset()
	events, synced = cachedRun(t, kubeconfig, ns, dir, func(ev []record) bool { return len(ev) >= 6 })
	t.Logf("restart after compaction: %d events, %d lists, Synced %+v", len(events), lists.Load(), synced)
	check("restart after compaction", events, added, updated, deleted)
	if synced.Restored != n+1 {
		t.Errorf("restart after compaction: restored %d, want %d", synced.Restored, n+1)
	}
	if lists := lists.Load(); lists != 1 {
		t.Errorf("restart after compaction sent %d lists, want 1", lists)
	}
}
