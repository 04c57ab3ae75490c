package gate

import "context"

// Slots bounds how many informers send their initial list at once (a
// factory-wide cap, so that starting many informers does not send the API
// server as many lists at the same moment). A nil *Slots is no bound. It
// is safe for concurrent use.
type Slots struct {
	ch chan struct{} // one element per slot in use
}

// NewSlots returns a bound of n concurrent initial lists (nil: n <= 0, no
// bound).
func NewSlots(n int) *Slots {
	if n <= 0 {
		return nil
	}
	return &Slots{ch: make(chan struct{}, n)}
}

// Acquire takes a slot, waiting until one is free or ctx ends.
func (s *Slots) Acquire(ctx context.Context) error {
	if s == nil {
		return nil
	}
	select {
	case s.ch <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TryAcquire takes a slot if one is free now and reports whether it did
// (a nil *Slots always does).
func (s *Slots) TryAcquire() bool {
	if s == nil {
		return true
	}
	select {
	case s.ch <- struct{}{}:
		return true
	default:
		return false
	}
}

// Release gives a slot back.
func (s *Slots) Release() {
	if s != nil {
		<-s.ch
	}
}

// Cap is the number of slots (0: no bound).
func (s *Slots) Cap() int {
	if s == nil {
		return 0
	}
	return cap(s.ch)
}
