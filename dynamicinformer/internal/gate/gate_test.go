package gate

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestGateSetAndState(t *testing.T) {
	g := New(false)
	open, reason, changed := g.State()
	if open || reason != "" {
		t.Fatalf("new closed gate: %v %q", open, reason)
	}
	if g.Set(false, "checking", false) {
		t.Fatal("closing a closed gate reported a change")
	}
	if _, reason, _ := g.State(); reason != "checking" {
		t.Fatalf("reason %q", reason)
	}
	// An authoritative reason replaces any; a 404's does not replace it.
	g.Set(false, "CRD deleted", true)
	g.Set(false, "404", false)
	if _, reason, _ := g.State(); reason != "CRD deleted" {
		t.Fatalf("reason %q, want the authoritative one kept", reason)
	}
	select {
	case <-changed:
		t.Fatal("changed closed without a change of open")
	default:
	}
	if !g.Set(true, "", false) {
		t.Fatal("opening reported no change")
	}
	select {
	case <-changed:
	default:
		t.Fatal("changed not closed when the gate opened")
	}
	if g.Set(true, "", true) {
		t.Fatal("opening an open gate reported a change")
	}
	// Closing an open gate with a 404 sets that reason.
	if !g.Set(false, "404", false) {
		t.Fatal("closing reported no change")
	}
	if _, reason, _ := g.State(); reason != "404" {
		t.Fatalf("reason %q", reason)
	}
}

func TestGateWaitOpen(t *testing.T) {
	leaks(t)
	g := New(false)
	if err := New(true).WaitOpen(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if err := g.WaitOpen(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v", err)
	}
	done := make(chan error)
	go func() { done <- g.WaitOpen(context.Background()) }()
	g.Set(false, "still closed", true) // no change of open: keeps waiting
	select {
	case err := <-done:
		t.Fatalf("WaitOpen returned %v while closed", err)
	case <-time.After(50 * time.Millisecond):
	}
	g.Set(true, "", true)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
