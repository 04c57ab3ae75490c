package discoveryresolver

import (
	"context"
	"errors"
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

// TestrefreshIfStale: refreshIfStale adds no round while the latest one is
// younger than maxAge (or the minimum refresh interval, if longer),
// concurrent callers share one round, invalidate forces one, and a failed
// latest round is reported without another.
func TestRefreshIfStale(t *testing.T) {
	defer checkNoGoroutineLeak(t)()
	f := newFake(cluster()...)
	clock := &fakeClock{t: time.Unix(1_000_000, 0)}
	r := New(f, withClock(clock), WithMinRefreshInterval(time.Second))
	ctx := context.Background()
	rounds := func(want int32, what string) {
		t.Helper()
		if got := f.calls.Load(); got != want {
			t.Fatalf("%s: %d rounds, want %d", what, got, want)
		}
	}
	if err := r.RefreshIfStale(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	rounds(1, "no snapshot yet")
	if err := r.RefreshIfStale(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	rounds(1, "right after a round")
	clock.advance(10 * time.Second)
	_ = r.RefreshIfStale(ctx, 30*time.Second)
	rounds(1, "10s after a round, maxAge 30s")
	_ = r.RefreshIfStale(ctx, 0) // 0 means the minimum refresh interval
	rounds(2, "10s after a round, maxAge 0")
	_ = r.RefreshIfStale(ctx, 0)
	rounds(2, "maxAge 0 right after a round (the rate limit)")
	clock.advance(29 * time.Second)
	_ = r.RefreshIfStale(ctx, 30*time.Second)
	rounds(2, "29s after a round, maxAge 30s")
	clock.advance(2 * time.Second)
	_ = r.RefreshIfStale(ctx, 30*time.Second)
	rounds(3, "31s after a round, maxAge 30s")

	// Concurrent callers share one round.
	clock.advance(time.Minute)
	release := f.hold()
	const n = 16
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() { errs <- r.RefreshIfStale(ctx, 0) }()
	}
	<-f.entered
	<-f.entered
	<-f.entered
	<-f.entered // the four rounds so far have started
	release()
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	rounds(4, "concurrent callers")

	// invalidate makes the next call run a round, whatever maxAge.
	r.Invalidate()
	_ = r.RefreshIfStale(ctx, time.Hour)
	rounds(5, "after invalidate")

	// A failed latest round answers, without another, until it is old.
	down := errors.New("connection refused")
	f.setErr(down)
	clock.advance(2 * time.Second)
	if err := r.RefreshIfStale(ctx, 0); !errors.Is(err, down) {
		t.Fatalf("refreshIfStale with discovery down = %v, want %v", err, down)
	}
	if err := r.RefreshIfStale(ctx, 0); !errors.Is(err, down) {
		t.Fatalf("refreshIfStale right after a failed round = %v, want %v", err, down)
	}
	rounds(6, "after a failed round")
	if _, ok := r.Lookup(gvr("", "v1", "pods")); !ok {
		t.Fatal("a failed round dropped the snapshot")
	}
}
