package controlplane

import (
	"bytes"
	"context"
	"fmt"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Goroutine leak checks that work while tests run side by side.
//
// A check that diffs all the process's goroutines before and after a test
// sees every other running test's goroutines as leaks. Instead, the test's
// goroutine carries a pprof label (a fresh value of leakLabel) from the
// snapshot on. Go gives every goroutine the labels of the goroutine that
// created it, so everything the test starts after the snapshot — its
// factory, the factory's informers, their reflectors and whatever those
// start in turn — carries the same value, and no other test's goroutine
// does. Leaked reports the goroutines with the snapshot's value that run
// informerkit code.
//
// What this cannot see: a goroutine created on the test's behalf by a
// goroutine that existed before the snapshot and does not descend from the
// test (none of informerkit's do: every goroutine it starts descends from
// a call the test made). CheckNoGoroutinesLeft, run by RunTests after all of
// a package's tests, closes that gap: no informerkit goroutine may be left
// in the process at all.

// leakLabel is the pprof label key that marks a test's goroutines.
const leakLabel = "informerkit-leakcheck"

var leakSeq atomic.Int64

// GoroutineSnapshot marks the calling goroutine (a test's) so that the
// goroutines it starts from now on can be found and checked after
// Shutdown. Take it on the test's goroutine, before starting anything.
type GoroutineSnapshot struct {
	id string
}

// SnapshotGoroutines starts tracking the goroutines the calling goroutine
// starts from now on. It replaces the caller's pprof labels with one
// label of its own.
func SnapshotGoroutines() GoroutineSnapshot {
	id := fmt.Sprintf("g%d", leakSeq.Add(1))
	pprof.SetGoroutineLabels(pprof.WithLabels(context.Background(), pprof.Labels(leakLabel, id)))
	return GoroutineSnapshot{id: id}
}

// Leaked returns the stacks of goroutines started since the snapshot by
// the snapshot's goroutine (or their descendants) that are still alive
// and run informerkit code, one entry per distinct stack with its count.
func (s GoroutineSnapshot) Leaked() []string {
	return informerkitGoroutines(func(labels string) bool {
		return strings.Contains(labels, fmt.Sprintf("%q:%q", leakLabel, s.id))
	})
}

// Running counts the goroutines alive now that the snapshot's goroutine
// started since the snapshot (or their descendants), whatever code they
// run: a test's own measure of the goroutines it keeps, which other
// tests running beside it do not disturb.
func (s GoroutineSnapshot) Running() int {
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil {
		return -1
	}
	n := 0
	want := fmt.Sprintf("%q:%q", leakLabel, s.id)
	for _, rec := range strings.Split(buf.String(), "\n\n") {
		if !strings.Contains(rec, "# labels: ") || !strings.Contains(rec, want) ||
			strings.Contains(rec, "runtime/pprof.writeGoroutine") || strings.Contains(rec, "testing.tRunner") {
			continue
		}
		var count int
		if _, err := fmt.Sscanf(rec, "%d @", &count); err == nil {
			n += count
		}
	}
	return n
}

// VerifyNoLeaks waits (up to 5 s) for the goroutines started since s to
// end, and reports those left as an error of t.
func (s GoroutineSnapshot) VerifyNoLeaks(t interface {
	Helper()
	Errorf(format string, args ...any)
}) {
	t.Helper()
	if left := waitNone(s.Leaked); len(left) > 0 {
		t.Errorf("goroutines leaked after Shutdown (%d stacks):\n%s", len(left), strings.Join(left, "\n\n"))
	}
}

// CheckNoGoroutinesLeft waits (up to 5 s) for every goroutine running
// informerkit code, whichever test started it, to end, and returns the
// stacks of those left. RunTests calls it after a package's tests.
func CheckNoGoroutinesLeft() []string {
	return waitNone(func() []string { return informerkitGoroutines(func(string) bool { return true }) })
}

func waitNone(leaked func() []string) []string {
	var left []string
	for deadline := time.Now().Add(5 * time.Second); ; {
		if left = leaked(); len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Parallel marks t to run side by side with the package's other parallel
// tests (t.Parallel) and starts tracking its goroutines, like
// SnapshotGoroutines. Call it first in a test that shares the package's
// control plane without disturbing it (no server restart, no proxy cut,
// no compaction, no process-wide counters).
func Parallel(t *testing.T) GoroutineSnapshot {
	t.Helper()
	t.Parallel()
	return SnapshotGoroutines()
}

// informerkitGoroutines lists, from the labelled goroutine profile, the
// stacks whose labels match and that run informerkit code other than this
// harness's own (the proxy serving pooled keep-alive connections outlives
// any one factory).
func informerkitGoroutines(match func(labels string) bool) []string {
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil {
		return []string{"goroutine profile: " + err.Error()}
	}
	var out []string
	// debug=1: "goroutine profile: total N", then one record per distinct
	// (stack, labels): "<count> @ <pcs>", an optional "# labels: {...}"
	// line, then "#\t<pc>\t<func>+<off>\t<file>:<line>" lines.
	for _, rec := range strings.Split(buf.String(), "\n\n") {
		labels := ""
		for _, line := range strings.Split(rec, "\n") {
			if l, ok := strings.CutPrefix(line, "# labels: "); ok {
				labels = l
				break
			}
		}
		if !match(labels) {
			continue
		}
		if strings.Contains(rec, "runtime/pprof.writeGoroutine") || strings.Contains(rec, "testing.tRunner") {
			continue // this check itself, and tests' own goroutines
		}
		if strings.Contains(rec, "github.com/informerkit/informerkit/") && !strings.Contains(rec, "informerkit/test/controlplane.") {
			out = append(out, rec)
		}
	}
	return out
}
