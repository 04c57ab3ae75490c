package discoveryresolver

import (
	"context"
	"testing"
	"time"
)

// TestMissRightAfterRoundWaitsForNextRound: a CRD that becomes served just
// after a round is resolved by a miss that comes less than the minimum
// refresh interval later. The miss waits for the next allowed round instead
// of answering ErrNotFound from the older snapshot, and that round starts no
// sooner than the interval after the previous one.
func TestMissRightAfterRoundWaitsForNextRound(t *testing.T) {
	const interval = 200 * time.Millisecond
	f := newFake(cluster()...)
	r := New(f, WithMinRefreshInterval(interval))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := r.Resolve(ctx, "pods"); err != nil {
		t.Fatal(err)
	}
	// The CRD becomes Established right after the round.
	f.set(append(cluster(), group("late.example.com", version("v1", res("lates", "Late", "lt"))))...)
	got, err := r.Resolve(ctx, "lt")
	if err != nil || got.GVR != gvr("late.example.com", "v1", "lates") {
		t.Fatalf("Resolve(lt) right after the round = %v, %v; want late.example.com/v1 lates", got.GVR, err)
	}
	starts := f.roundStarts()
	if len(starts) != 2 {
		t.Fatalf("%d rounds, want 2 (the first resolution, then the one the miss waited for)", len(starts))
	}
	if gap := starts[1].Sub(starts[0]); gap < interval {
		t.Fatalf("the miss's round started %v after the previous one, inside the %v minimum interval", gap, interval)
	}
}
