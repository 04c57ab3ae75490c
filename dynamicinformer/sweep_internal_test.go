package dynamicinformer

import (
	"testing"
	"time"
)

// The sync monitor sweeps a draining removal's cache first firstSweep
// after it sees the removal, then at doubling gaps up to maxSweepGap, and
// starts over for the next removal.
func TestSweeperPacing(t *testing.T) {
	var s sweeper
	t0 := time.Unix(1000, 0)
	if s.due(1, t0) {
		t.Fatal("a sweep due the moment the removal is seen")
	}
	var at []time.Duration
	for d := time.Duration(0); d <= 10*time.Second; d += 20 * time.Millisecond {
		if s.due(1, t0.Add(d)) {
			at = append(at, d)
		}
	}
	want := []time.Duration{200 * time.Millisecond, 600 * time.Millisecond, 1400 * time.Millisecond, 3 * time.Second, 5 * time.Second, 7 * time.Second, 9 * time.Second}
	if len(at) != len(want) {
		t.Fatalf("sweeps at %v, want %v", at, want)
	}
	for i := range want {
		if at[i] != want[i] {
			t.Fatalf("sweeps at %v, want %v", at, want)
		}
	}
	if s.due(2, t0.Add(20*time.Second)) {
		t.Fatal("a new removal swept at once")
	}
	if !s.due(2, t0.Add(20*time.Second+firstSweep)) {
		t.Fatal("a new removal not swept after firstSweep")
	}
}
