package diskcost

import (
	"testing"
	"time"
)

// TestCountsOnlyWhenOn: off, Start returns nil and nothing is counted; on,
// each call is counted with the CPU it spent (a busy loop of 20 ms: more
// than nothing, no more than the time it took).
func TestCountsOnlyWhenOn(t *testing.T) {
	Reset()
	Enable(false)
	if stop := Start(); stop != nil {
		t.Fatal("Start measured while off")
	}
	if !Supported {
		t.Skip("no thread CPU time on this platform")
	}
	Enable(true)
	defer Enable(false)
	begin := time.Now()
	stop := Start()
	for end := time.Now().Add(20 * time.Millisecond); time.Now().Before(end); {
	}
	stop()
	took := time.Since(begin)
	n, ns := Read()
	if n != 1 || ns <= 0 || time.Duration(ns) > took+2*time.Millisecond {
		t.Fatalf("measured %d calls, %v of CPU in %v; want 1, more than 0, no more than that", n, time.Duration(ns), took)
	}
	Reset()
	if n, ns := Read(); n != 0 || ns != 0 {
		t.Fatalf("after Reset: %d, %d", n, ns)
	}
}

// Calls much shorter than a scheduler tick, each after the thread slept
// (as the journal's disk goroutine is woken), are counted: about all
// of their CPU time, not only the calls a tick happens to fall in.
// (Read through getrusage(RUSAGE_THREAD) they measured about nothing.)
func TestShortCallsCounted(t *testing.T) {
	if !Supported {
		t.Skip("no thread CPU time on this platform")
	}
	Reset()
	Enable(true)
	defer Enable(false)
	const calls, each = 200, 50 * time.Microsecond
	var busy time.Duration
	for i := 0; i < calls; i++ {
		time.Sleep(time.Millisecond)
		stop := Start()
		begin := time.Now()
		for time.Since(begin) < each {
		}
		busy += time.Since(begin)
		stop()
	}
	n, ns := Read()
	if n != calls || time.Duration(ns) < busy/2 {
		t.Fatalf("measured %d calls, %v of CPU; want %d, at least half of the %v spent", n, time.Duration(ns), calls, busy)
	}
	t.Logf("%d calls of about %v: measured %v of %v spent", calls, each, time.Duration(ns), busy)
}
