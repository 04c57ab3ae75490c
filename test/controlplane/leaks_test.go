package controlplane_test

import (
	"strings"
	"testing"
	"time"

	"github.com/informerkit/informerkit/test/controlplane"
)

// parked runs until release is closed (a stand-in for an informer
// goroutine a test forgot to stop).
func parked(release <-chan struct{}) { <-release }

// TestLeakCheckSeesOnlyItsOwnGoroutines: a goroutine started after the
// snapshot is reported (and counted) until it ends; one started by
// another goroutine with its own snapshot (another test running beside
// this one) is not.
func TestLeakCheckSeesOnlyItsOwnGoroutines(t *testing.T) {
	controlplane.Parallel(t)
	release, otherRelease := make(chan struct{}), make(chan struct{})
	defer close(otherRelease)
	otherStarted := make(chan controlplane.GoroutineSnapshot)
	go func() { // another test's goroutine tree
		s := controlplane.SnapshotGoroutines()
		go parked(otherRelease)
		otherStarted <- s
	}()
	other := <-otherStarted

	snap := controlplane.SnapshotGoroutines()
	if n := snap.Running(); n != 0 {
		t.Fatalf("Running() = %d before starting anything, want 0", n)
	}
	for i := 0; i < 2; i++ {
		go parked(release)
	}
	waitFor := func(what string, cond func() bool) {
		for i := 0; i < 200 && !cond(); i++ {
			<-timeAfter()
		}
		if !cond() {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
	waitFor("two running goroutines", func() bool { return snap.Running() == 2 })
	left := snap.Leaked()
	if len(left) != 1 || !strings.Contains(left[0], "controlplane_test.parked") || !strings.HasPrefix(left[0], "2 @") {
		t.Fatalf("Leaked() = %q, want one stack of 2 goroutines in parked", left)
	}
	if n := other.Running(); n != 1 {
		t.Fatalf("the other snapshot's Running() = %d, want its own 1", n)
	}
	close(release)
	waitFor("no goroutine of this snapshot", func() bool { return len(snap.Leaked()) == 0 && snap.Running() == 0 })
	if n := other.Running(); n != 1 {
		t.Fatalf("the other snapshot's Running() = %d after this one's ended, want 1", n)
	}
}

func timeAfter() <-chan time.Time { return time.After(10 * time.Millisecond) }
