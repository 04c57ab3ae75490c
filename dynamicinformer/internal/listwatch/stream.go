package listwatch

import (
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"
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
//     instead of anything further, then the stream ends.
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
	if s.inner != nil {
		defer func() {
			s.inner.Stop()
			if s.release != nil {
				s.release()
			}
		}()
	}
	for i, ev := range s.Prefix {
		select {
		case s.result <- ev:
			s.Prefix[i] = watch.Event{} // let the object go
		case <-s.stop:
			s.interrupted()
			return
		case <-s.Interrupt:
			s.interrupted()
			s.deliverFinal()
			return
		}
	}
	s.Prefix = nil
	if s.inner == nil {
		if s.Interrupt != nil {
			select {
			case <-s.Interrupt:
				s.deliverFinal()
			case <-s.stop:
			}
		}
		return
	}
	if s.forwardServer() {
		s.deliverFinal()
	}
}

func (s *Stream) interrupted() {
	if s.Interrupted != nil {
		s.Interrupted()
	}
}

func (s *Stream) deliverFinal() {
	var events []watch.Event
	if s.Final != nil {
		events = s.Final()
	}
	delivered := true
	for _, ev := range events {
		select {
		case s.result <- ev:
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
			status := apierrors.NewResourceExpired("informerkit: no event or bookmark from the server for " +
				s.idle.String() + "; relisting").Status()
			select {
			case s.result <- watch.Event{Type: watch.Error, Object: &status}:
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
			select {
			case s.result <- ev:
			case <-s.stop:
				return false
			case <-s.Interrupt:
				return true
			}
			if t != nil {
				last = time.Now()
			}
		}
	}
}
