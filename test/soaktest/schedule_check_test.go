package soaktest

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// The same seed gives the same schedule; another seed another one; the
// first len(kinds) iterations have every kind.
func TestScheduleReproducible(t *testing.T) {
	window := func(r *rand.Rand) time.Duration { return 5*time.Second + time.Duration(r.Int64N(int64(5*time.Second))) }
	draw := func(seed uint64) []iteration {
		s := newSchedule(seed, allFaults, window)
		var out []iteration
		for i := 0; i < 30; i++ {
			out = append(out, s.next())
		}
		return out
	}
	a, b, c := draw(7), draw(7), draw(8)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("seed 7 gave two schedules:\n%v\n%v", a[0], b[0])
	}
	if reflect.DeepEqual(a, c) {
		t.Fatal("seeds 7 and 8 gave the same schedule")
	}
	seen := map[string]bool{}
	overlapping := 0
	for _, it := range a[:len(allFaults)] {
		seen[it.Faults[0].Kind] = true
		if len(it.Faults) > 1 {
			overlapping++
		}
		for _, f := range it.Faults {
			if f.At < 0 || f.At >= it.Window || f.For < 300*time.Millisecond {
				t.Errorf("%v: fault outside its window", it)
			}
		}
	}
	if len(seen) != len(allFaults) {
		t.Errorf("the first %d iterations cover %d kinds: %v", len(allFaults), len(seen), seen)
	}
	for _, it := range a[len(allFaults):] {
		if len(it.Faults) > 1 {
			overlapping++
		}
	}
	if overlapping == 0 {
		t.Error("no iteration with overlapping faults in 30")
	}

	// pairs: every kind in the first half as many iterations, two each.
	s := newSchedule(7, allFaults, window)
	s.pairs = true
	seen = map[string]bool{}
	for i := 0; i < len(allFaults)/2; i++ {
		it := s.next()
		if len(it.Faults) != 2 {
			t.Errorf("pairs: %v", it)
		}
		for _, f := range it.Faults {
			seen[f.Kind] = true
		}
	}
	if len(seen) != len(allFaults) {
		t.Errorf("pairs: %d kinds in %d iterations: %v", len(seen), len(allFaults)/2, seen)
	}
}
