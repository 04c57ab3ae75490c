package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/informerkit/informerkit/internal/diskcost"
	"github.com/informerkit/informerkit/test/controlplane"
)

// TestRestartShort runs the restart scenario at N=100 (300 with
// INFORMERKIT_LONG), once, against a
// real API server in this process, so that it cannot rot. It asserts what
// the numbers rest on, never timings: RunRestart's sanity checks (the
// cold start lists once and restores nothing; the resumed restart
// restores N and sends no list; the diffed one, after a compaction, lists
// once; each restart's handler sees exactly the objects created, updated
// and deleted while it was down), every row recorded with a ratio to
// client-go, and no goroutine left.
func TestRestartShort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	// Side by side with TestBenchShort, on its own API server; what it
	// asserts (list and event counts, its own directory's growth, its
	// journal threads' CPU) is not disturbed by another test's load.
	leaks := controlplane.Parallel(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Options{Logf: t.Logf, ExtraFlags: RestartServerFlags})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	n := controlplane.Sized(100, 300)
	restart, persist, err := RunRestart(ctx, cp.Config(), RestartConfig{
		Sizes: []int{n}, Runs: 1, Changes: 5, PersistEvents: 100, PersistRate: 100, LoadWorkers: 4,
		Compact: func(ctx context.Context) error { _, err := cp.Compact(ctx); return err },
		Logf:    t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	cs := fmt.Sprintf("N=%d", n)
	for _, im := range []string{RestartCold, RestartResumed, RestartDiffed} {
		if x, ok := restart.Ratio(RowRestart, cs, "sync", im, ClientGo); !ok || !(x > 0) {
			t.Errorf("%s: sync ratio to client-go %v (%v)", im, x, ok)
		}
		if x, ok := restart.Ratio(RowRestart, cs, "received", im, ClientGo); !ok || !(x > 0) {
			t.Errorf("%s: bytes ratio to client-go %v (%v)", im, x, ok)
		}
	}
	for im, want := range map[string]float64{RestartCold: 1, RestartResumed: 0, RestartDiffed: 1, ClientGo: 1} {
		if v, ok := restart.Median(RowRestart, cs, "lists", im); !ok || v != want {
			t.Errorf("%s: %v lists (%v), want %v", im, v, ok, want)
		}
	}
	for im, want := range map[string]float64{RestartResumed: 10, RestartDiffed: 10} {
		if v, _ := restart.Median(RowRestart, cs, "handler events", im); v != want {
			t.Errorf("%s: %v handler events, want %v (5 changes of each kind made while down)", im, v, want)
		}
	}
	pcs := fmt.Sprintf("100 events, N=%d", n)
	// (Bytes passed to write(2) are recorded too, but this process also
	// runs the API server and etcd, whose writes swamp the journal's:
	// the directory's growth is the check here.)
	on, ok1 := persist.Median(RowPersist, pcs, "stored", PersistOn)
	off, ok2 := persist.Median(RowPersist, pcs, "stored", PersistOff)
	if !ok1 || !ok2 || !(on > 100) || off != 0 {
		t.Errorf("bytes stored per event with CacheDir %v (%v), without %v (%v); want more than 100 with (a journal record per event), none without", on, ok1, off, ok2)
	}
	// Persistence's own CPU (thread CPU time, Linux): some with CacheDir,
	// none without.
	jOn, ok1 := persist.Median(RowPersist, pcs, "disk CPU", PersistOn)
	jOff, ok2 := persist.Median(RowPersist, pcs, "disk CPU", PersistOff)
	if !ok1 || !ok2 || jOff != 0 || diskcost.Supported && !(jOn > 0) {
		t.Errorf("journal CPU per event with CacheDir %v (%v), without %v (%v); want more than 0 with, none without", jOn, ok1, jOff, ok2)
	}
	if _, ok := persist.Median(RowPersist, pcs, "written", PersistOn); !ok {
		t.Error("no write(2) sample")
	}
	if _, ok := persist.Ratio(RowPersist, pcs, "client CPU", PersistOn, PersistOff); !ok {
		// CPU minus the writer's may come out ≤ 0 on a tiny run; the
		// sample must exist.
		if _, ok := persist.Median(RowPersist, pcs, "client CPU", PersistOn); !ok {
			t.Error("no persistence CPU sample")
		}
	}
	md := restart.Markdown() + persist.Markdown()
	for _, row := range []string{RowRestart, RowPersist} {
		if !strings.Contains(md, row) {
			t.Errorf("tables lack %q", row)
		}
	}
	t.Log("\n" + md)
	leaks.VerifyNoLeaks(t)
}
