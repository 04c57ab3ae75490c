package gate

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// accessGate is an Access func that blocks until allowed is closed,
// counting its calls.
type accessGate struct {
	calls   atomic.Int32
	allowed chan struct{}
}

func (a *accessGate) wait(ctx context.Context) error {
	a.calls.Add(1)
	select {
	case <-a.allowed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// The first list waits for Access with no request sent; once it allows,
// the list goes out, and later lists do not ask again.
func TestAccessHoldsFirstList(t *testing.T) {
	leaks(t)
	f := newFixture(t, true, 0)
	a := &accessGate{allowed: make(chan struct{})}
	f.lw.Access = a.wait
	done := listAsync(f.lw, metav1.ListOptions{})
	notReturned(t, done, 100*time.Millisecond)
	if lists, watches := f.inner.counts(); lists != 0 || watches != 0 || f.hooks.has("listStarted") {
		t.Fatalf("while access is checked: %d lists, %d watches, hooks %v; want none", lists, watches, f.hooks.snapshot())
	}
	close(a.allowed)
	if r := <-done; r.err != nil {
		t.Fatal(r.err)
	}
	if lists, _ := f.inner.counts(); lists != 1 || f.lw.Phase() != Serving {
		t.Fatalf("%d lists, phase %v", lists, f.lw.Phase())
	}
	if _, err := f.lw.ListWithContext(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := a.calls.Load(); n != 1 {
		t.Fatalf("Access called %d times, want once (before the first list only)", n)
	}
}

// A watch-list first sync waits for Access too; ending the context while
// it waits ends the request with the context's error and sends nothing.
func TestAccessHoldsFirstWatchList(t *testing.T) {
	leaks(t)
	f := newFixture(t, true, 0)
	a := &accessGate{allowed: make(chan struct{})}
	f.lw.Access = a.wait
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := f.lw.WatchWithContext(ctx, metav1.ListOptions{SendInitialEvents: truePtr()})
		errc <- err
	}()
	time.Sleep(100 * time.Millisecond)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("watch-list ended with %v, want context.Canceled", err)
	}
	if lists, watches := f.inner.counts(); lists != 0 || watches != 0 {
		t.Fatalf("%d lists, %d watches sent while access was denied", lists, watches)
	}
	close(a.allowed)
	done := watchAsync(f.lw, metav1.ListOptions{SendInitialEvents: truePtr()})
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if _, watches := f.inner.counts(); watches != 1 || f.lw.Phase() != Serving {
		t.Fatalf("%d watches, phase %v", watches, f.lw.Phase())
	}
	r.w.Stop()
	drain(t, r.w, -1)
}

// A first list that finds every initial-list slot taken says so
// (WaitingForSlot) before it waits; one that finds a slot free does not.
func TestWaitingForSlotHook(t *testing.T) {
	leaks(t)
	slots := NewSlots(1)
	f := newFixture(t, true, 0)
	f.lw.InitialLists = slots
	var waited atomic.Int32
	f.lw.Hooks.WaitingForSlot = func() { waited.Add(1) }
	if err := slots.Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	done := listAsync(f.lw, metav1.ListOptions{})
	deadline := time.Now().Add(5 * time.Second)
	for waited.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if waited.Load() != 1 {
		t.Fatalf("WaitingForSlot called %d times, want 1", waited.Load())
	}
	notReturned(t, done, 50*time.Millisecond)
	slots.Release()
	if r := <-done; r.err != nil {
		t.Fatal(r.err)
	}
	g := newFixture(t, true, 0)
	g.lw.InitialLists = slots
	g.lw.Hooks.WaitingForSlot = func() { t.Error("WaitingForSlot with a free slot") }
	if _, err := g.lw.ListWithContext(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
}

// listAsync lists on another goroutine.
func listAsync(lw *ListerWatcher, opts metav1.ListOptions) <-chan result {
	done := make(chan result, 1)
	go func() {
		_, err := lw.ListWithContext(context.Background(), opts)
		done <- result{nil, err}
	}()
	return done
}
