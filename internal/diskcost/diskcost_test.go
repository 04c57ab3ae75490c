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
