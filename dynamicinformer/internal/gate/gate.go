// Package gate keeps an informer quiet while its resource is not served,
// and moves it through the resource's removal and return inside watch
// streams, keeping the same client-go informer and its handlers.
//
// A Gate is the belief that the resource is served. The ListerWatcher of
// this package sits between client-go's reflector and the liveness layer
// (package listwatch) and runs the informer's list/watch state machine
// (see Phase) against it.
package gate

import (
	"context"
	"sync"
)

// Gate records whether a resource is believed to be served, and why not.
// It is safe for concurrent use.
type Gate struct {
	mu            sync.Mutex    // guards open, reason, authoritative, changed
	open          bool          // the resource is believed to be served
	reason        string        // why it is closed
	authoritative bool          // the reason came from an authoritative source
	changed       chan struct{} // closed and replaced whenever open changes
}

// New returns a gate, open or closed.
func New(open bool) *Gate {
	return &Gate{open: open, changed: make(chan struct{})}
}

// Set opens or closes the gate and reports whether open changed. Closing
// with an authoritative reason (from the CRD or discovery) replaces any
// reason; a non-authoritative one (a 404 answer) does not replace the
// reason of an already closed gate.
func (g *Gate) Set(open bool, reason string, authoritative bool) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !open && (g.open || authoritative || !g.authoritative) {
		g.reason, g.authoritative = reason, authoritative
	}
	if g.open == open {
		return false
	}
	g.open = open
	close(g.changed)
	g.changed = make(chan struct{})
	return true
}

// State returns whether the gate is open, why not, and a channel closed
// at the next change of open.
func (g *Gate) State() (open bool, reason string, changed <-chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.open, g.reason, g.changed
}

// WaitOpen blocks until the gate is open or ctx ends.
func (g *Gate) WaitOpen(ctx context.Context) error {
	for {
		open, _, changed := g.State()
		if open {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
