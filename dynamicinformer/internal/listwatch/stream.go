package listwatch

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/watch"

	"github.com/informerkit/informerkit/dynamicinformer/internal/reflectorseam"
)

// Stream is the watch.Interface an informer's reflector reads. It
// delivers Prefix events first, then forwards a server watch (if any),
// until one of these happens:
//
//   - the consumer calls Stop;
//   - the server watch ends;
//   - the server stays silent for the idle bound (set by Liveness): the
//     stream ends with an "expired" error event, so the reflector lists;
//   - Interrupt is closed: Final is asked for the events to deliver
//     instead of anything further, then the stream ends — unless Then
//     returns a stream to continue with (see Then).
//
// Configure the exported fields, then call Start once. One goroutine per
// stream; it ends when the stream ends.
type Stream struct {
	// Prefix is delivered before the server's events.
	Prefix []watch.Event
	// Interrupted, if set, is called when the stream ends (Stop or
	// Interrupt) before all of Prefix was delivered.
	Interrupted func()
	// Interrupt, when closed, ends the stream after Final's events.
	Interrupt <-chan struct{}
	// Final returns the events to deliver when Interrupt is closed (nil:
	// none); Done is then called with whether all of them were delivered.
	// Both run on the stream's goroutine.
	Final func() []watch.Event
	Done  func(delivered bool)
	// InitialEventsEnd, if set, is called once, on the stream's
	// goroutine: when the bookmark that ends a watch-list stream's initial
	// events (annotation metav1.InitialEventsAnnotationKey) has been
	// delivered, with its resourceVersion, or when the stream ends, with
	// "".
	InitialEventsEnd func(rv string)
	// Then, if set, is called on the stream's goroutine once Final's
	// events were all delivered, after the server watch was stopped. A
	// stream it returns (built by Liveness.Watch or NewStream, configured,
	// not started) continues this one on the same result channel: its
	// Prefix, then its server watch, with its own Interrupt, Interrupted,
	// Final, Done, Then, PrefixDelivered, Observe and Ended (the
	// reader sees one watch). nil: the stream ends.
	Then func() *Stream
	// PrefixDelivered, if set, is called on the stream's goroutine once
	// all of Prefix was taken by the reader (not if the stream ended or
	// was interrupted first).
	PrefixDelivered func()
	// Observe, if set, is called on the stream's goroutine with every
	// event (prefix, server, final) before it is offered to the reader,
	// while its object is still the stream's alone: once the reader took
	// it, the reflector and the informer's transforms may edit it in
	// place, so nothing may read it after. The func Observe returns, if
	// not nil, is called once the reader took the event, and never if it
	// did not (the stream ended first).
	Observe func(watch.Event) (taken func())
	// Ended, if set, is called on the stream's goroutine when the stream
	// ends (not when it continues with Then's stream).
	Ended func()

	inner   watch.Interface
	release func()
	idle    time.Duration
	onIdle  func()
	onEvent func(time.Time)
	// firstEvent, if set, is called when the first server event arrives.
	firstEvent func()

	result   chan watch.Event
	stop     chan struct{} // closed by Stop
	stopOnce sync.Once
}

// NewStream returns a stream over inner (nil: prefix and final events
// only). release, if set, is called once inner is stopped.
func NewStream(inner watch.Interface, release func()) *Stream {
	return &Stream{inner: inner, release: release}
}

// Start starts delivering. It returns s.
func (s *Stream) Start() *Stream {
	s.result, s.stop = make(chan watch.Event), make(chan struct{})
	go s.forward()
	return s
}

// ResultChan implements watch.Interface.
func (s *Stream) ResultChan() <-chan watch.Event { return s.result }

// Stop implements watch.Interface.
func (s *Stream) Stop() { s.stopOnce.Do(func() { close(s.stop) }) }

func (s *Stream) forward() {
	defer close(s.result)
	defer s.initialEventsEnd("")
	defer func() {
		if s.Ended != nil {
			s.Ended()
		}
	}()
	for s.run() {
	}
}

// run delivers the prefix, then the server's events, then Final's; it
// reports whether the stream continues with Then's stream (adopted).
func (s *Stream) run() (next bool) {
	defer func() {
		if !next {
			s.closeInner()
		}
	}()
	for i, ev := range s.Prefix {
		taken := s.observe(ev)
		select {
		case s.result <- ev:
			s.Prefix[i] = watch.Event{} // let the object go
			taken()
		case <-s.stop:
			s.interrupted()
			return false
		case <-s.Interrupt:
			s.interrupted()
			return s.final()
		}
	}
	s.Prefix = nil
	if s.PrefixDelivered != nil {
		s.PrefixDelivered()
	}
	if s.inner == nil {
		if s.Interrupt != nil {
			select {
			case <-s.Interrupt:
				return s.final()
			case <-s.stop:
			}
		}
		return false
	}
	if s.forwardServer() {
		return s.final()
	}
	return false
}

// final delivers Final's events, then asks Then for a stream to continue
// with and adopts it.
func (s *Stream) final() bool {
	if !s.deliverFinal() || s.Then == nil {
		return false
	}
	s.closeInner()
	n := s.Then()
	if n == nil {
		return false
	}
	s.Prefix, s.Interrupted, s.Interrupt, s.Final, s.Done = n.Prefix, n.Interrupted, n.Interrupt, n.Final, n.Done
	s.Then, s.PrefixDelivered, s.Observe, s.Ended = n.Then, n.PrefixDelivered, n.Observe, n.Ended
	s.inner, s.release, s.idle, s.onIdle, s.onEvent, s.firstEvent = n.inner, n.release, n.idle, n.onIdle, n.onEvent, n.firstEvent
	return true
}

// closeInner stops the server watch (once) and releases it.
func (s *Stream) closeInner() {
	if s.inner == nil {
		return
	}
	s.inner.Stop()
	if s.release != nil {
		s.release()
	}
	s.inner, s.release = nil, nil
}

// Discard stops the server watch of a stream that was never started.
func (s *Stream) Discard() { s.closeInner() }

// observe is Observe's call for ev; it returns what to call once the
// reader took ev (never nil).
func (s *Stream) observe(ev watch.Event) (taken func()) {
	if s.Observe != nil {
		if f := s.Observe(ev); f != nil {
			return f
		}
	}
	return noop
}

func noop() {}

func (s *Stream) interrupted() {
	if s.Interrupted != nil {
		s.Interrupted()
	}
}

// deliverFinal delivers Final's events and reports whether all of them
// were delivered.
func (s *Stream) deliverFinal() bool {
	var events []watch.Event
	if s.Final != nil {
		events = s.Final()
	}
	delivered := true
	for _, ev := range events {
		taken := s.observe(ev)
		select {
		case s.result <- ev:
			taken()
		case <-s.stop:
			delivered = false
		}
		if !delivered {
			break
		}
	}
	if s.Done != nil {
		s.Done(delivered)
	}
	return delivered
}

// forwardServer forwards the server's events until the stream ends; it
// reports whether it ended because Interrupt was closed.
func (s *Stream) forwardServer() (interrupted bool) {
	in := s.inner.ResultChan()
	var idle <-chan time.Time
	var t *time.Timer
	var from, last time.Time
	if s.idle > 0 {
		// The timer is not reset per event (that costs more than reading
		// the clock): when it fires early it is re-armed for what is left.
		t = time.NewTimer(s.idle)
		defer t.Stop()
		idle, from = t.C, time.Now()
		defer func() {
			if !last.IsZero() {
				s.onEvent(last)
			}
		}()
	}
	for {
		select {
		case <-s.stop:
			return false
		case <-s.Interrupt:
			return true
		case <-idle:
			if !last.IsZero() {
				from = last
			}
			if left := s.idle - time.Since(from); left > 0 {
				t.Reset(left)
				continue
			}
			s.onIdle()
			expired := reflectorseam.ExpiredEvent("no event or bookmark from the server for " + s.idle.String() + "; relisting")
			select {
			case s.result <- expired:
			case <-s.stop:
			}
			return false
		case ev, ok := <-in:
			if !ok {
				return false
			}
			if s.firstEvent != nil {
				s.firstEvent()
				s.firstEvent = nil
			}
			taken := s.observe(ev)
			// (Read before the send, like Observe's: the object is the
			// reader's after it.)
			endRV, ends := "", false
			if s.InitialEventsEnd != nil && ev.Type == watch.Bookmark && reflectorseam.EndsInitialEvents(ev.Object) {
				ends = true
				if m, err := meta.Accessor(ev.Object); err == nil {
					endRV = m.GetResourceVersion()
				}
			}
			select {
			case s.result <- ev:
			case <-s.stop:
				return false
			case <-s.Interrupt:
				return true
			}
			taken()
			if ends {
				s.initialEventsEnd(endRV)
			}
			if t != nil {
				last = time.Now()
			}
		}
	}
}

func (s *Stream) initialEventsEnd(rv string) {
	if f := s.InitialEventsEnd; f != nil {
		s.InitialEventsEnd = nil
		f(rv)
	}
}
