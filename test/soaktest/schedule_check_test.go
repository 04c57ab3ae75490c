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

	// group n: every kind in the first ceil(kinds/n) iterations, n each
	// (the last the rest), each kind once.
	for _, g := range []int{2, 3} {
		s := newSchedule(7, allFaults, window)
		s.group = g
		seen = map[string]bool{}
		n := (len(allFaults) + g - 1) / g
		for i := 0; i < n; i++ {
			it := s.next()
			if want := min(g, len(allFaults)-g*i); len(it.Faults) != want {
				t.Errorf("group %d: %v, want %d faults", g, it, want)
			}
			for _, f := range it.Faults {
				if seen[f.Kind] {
					t.Errorf("group %d: %s twice in the first %d iterations", g, f.Kind, n)
				}
				seen[f.Kind] = true
			}
		}
		if len(seen) != len(allFaults) {
			t.Errorf("group %d: %d kinds in %d iterations: %v", g, len(seen), n, seen)
		}
	}
}

// The short mode (TestSoak without INFORMERKIT_SOAK) injects every fault
// kind the harness knows, whatever the seed: each new kind is exercised
// against the server in the repository's test command.
func TestShortModeCoversEveryKind(t *testing.T) {
	for _, seed := range []uint64{1, 2929, 1796190085536266917} {
		cfg := shortConfig(seed)
		s := newSchedule(seed, cfg.kinds, cfg.window)
		s.group = cfg.group
		seen := map[string]bool{}
		for i := 0; i < cfg.iterations; i++ {
			for _, f := range s.next().Faults {
				seen[f.Kind] = true
			}
		}
		for _, k := range allFaults {
			if !seen[k] {
				t.Errorf("seed %d: the short mode's %d iterations never inject %s", seed, cfg.iterations, k)
			}
		}
	}
}
