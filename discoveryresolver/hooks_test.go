package discoveryresolver

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The factory's maintenance calls on the resolver: a rate-limited refresh that adds no round while
// the latest is young, an invalidation (with group-versions to read
// directly) that makes the next one run at once, and the failed groups.
func TestMaintenanceHooks(t *testing.T) {
	defer checkNoGoroutineLeak(t)()
	f := newFake(cluster()...)
	clock := &fakeClock{t: time.Unix(1_000_000, 0)}
	r := New(f, withClock(clock), WithMinRefreshInterval(time.Second))
	m := r
	ctx := context.Background()
	if err := m.RefreshIfStale(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := m.RefreshIfStale(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := f.calls.Load(); got != 1 {
		t.Fatalf("%d rounds after two RefreshIfStale within maxAge, want 1", got)
	}
	gv := schema.GroupVersion{Group: "stable.example.com", Version: "v1"}
	m.Invalidate(gv)
	r.mu.Lock()
	direct := r.direct[gv]
	r.mu.Unlock()
	if !direct || !r.stale.Load() {
		t.Fatalf("after Invalidate(%v): direct %v, stale %v; want both", gv, direct, r.stale.Load())
	}
	if err := m.RefreshIfStale(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	if got := f.calls.Load(); got != 2 {
		t.Fatalf("%d rounds after Invalidate, want 2", got)
	}
	if fg := m.FailedGroups(); len(fg) != 0 {
		t.Fatalf("FailedGroups = %v, want none", fg)
	}
}
