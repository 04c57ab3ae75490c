package listwatch

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
)

func names(evs []watch.Event) []string {
	var out []string
	for _, ev := range evs {
		m, err := meta.Accessor(ev.Object)
		if err != nil {
			out = append(out, string(ev.Type))
			continue
		}
		out = append(out, string(ev.Type)+":"+m.GetName())
	}
	return out
}

// Prefix events come first, then the server's, until the server ends.
func TestStreamPrefixThenServer(t *testing.T) {
	leaks(t)
	server := watch.NewRaceFreeFake()
	var released atomic.Bool
	s := NewStream(server, func() { released.Store(true) })
	s.Prefix = []watch.Event{{Type: watch.Added, Object: widget("a", "p1", "")}, {Type: watch.Bookmark, Object: bookmark("10")}}
	var interrupted atomic.Bool
	s.Interrupted = func() { interrupted.Store(true) }
	w := s.Start()
	server.Add(widget("a", "s1", "11"))
	server.Modify(widget("a", "s1", "12"))
	got := names([]watch.Event{mustNext(t, w), mustNext(t, w), mustNext(t, w), mustNext(t, w)})
	if want := []string{"ADDED:p1", "BOOKMARK:", "ADDED:s1", "MODIFIED:s1"}; !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	server.Stop() // the server ends the watch: so does the stream
	if rest := drain(t, w); len(rest) != 0 {
		t.Fatalf("events after the server ended: %v", names(rest))
	}
	if !released.Load() || interrupted.Load() {
		t.Fatalf("released %v, interrupted %v", released.Load(), interrupted.Load())
	}
}

func mustNext(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	ev, ok := next(t, w, 5*time.Second)
	if !ok {
		t.Fatal("stream closed")
	}
	return ev
}

// Stop during the prefix: Interrupted is called, the server watch is
// stopped and released, nothing more is delivered.
func TestStreamStopDuringPrefix(t *testing.T) {
	leaks(t)
	server := watch.NewRaceFreeFake()
	var released, interrupted atomic.Bool
	s := NewStream(server, func() { released.Store(true) })
	s.Prefix = []watch.Event{{Type: watch.Added, Object: widget("a", "p1", "")}, {Type: watch.Added, Object: widget("a", "p2", "")}}
	s.Interrupted = func() { interrupted.Store(true) }
	w := s.Start()
	mustNext(t, w)
	w.Stop()
	w.Stop() // idempotent
	// Nobody reads p2, so the stop wins: the prefix is cut short. (Reading
	// while stopping could take p2 and complete the prefix.)
	deadline := time.Now().Add(10 * time.Second)
	for !released.Load() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	drain(t, w)
	if !interrupted.Load() || !released.Load() || !server.IsStopped() {
		t.Fatalf("interrupted %v released %v server stopped %v", interrupted.Load(), released.Load(), server.IsStopped())
	}
}

// Interrupt during the prefix: Interrupted, then Final's events, then
// Done(true).
func TestStreamInterruptDuringPrefix(t *testing.T) {
	leaks(t)
	server := watch.NewRaceFreeFake()
	s := NewStream(server, nil)
	interrupt := make(chan struct{})
	s.Interrupt = interrupt
	s.Prefix = []watch.Event{{Type: watch.Added, Object: widget("a", "p1", "")}, {Type: watch.Added, Object: widget("a", "p2", "")}}
	var interrupted atomic.Bool
	s.Interrupted = func() { interrupted.Store(true) }
	s.Final = func() []watch.Event { return []watch.Event{{Type: watch.Deleted, Object: widget("a", "f1", "")}} }
	done := make(chan bool, 1)
	s.Done = func(delivered bool) { done <- delivered }
	w := s.Start()
	mustNext(t, w) // p1
	close(interrupt)
	// p2 may or may not win the race with the interrupt; the final event
	// comes last, then the stream ends.
	got := names(drain(t, w))
	if len(got) == 0 || got[len(got)-1] != "DELETED:f1" {
		t.Fatalf("after interrupt: %v, want the final delete last", got)
	}
	if len(got) == 1 && !interrupted.Load() {
		t.Fatal("prefix cut short without Interrupted")
	}
	if d := <-done; !d {
		t.Fatal("Done(false) though the final events were read")
	}
	if !server.IsStopped() {
		t.Fatal("server watch not stopped")
	}
}

// Interrupt while forwarding the server: Final's events, Done(true). A
// consumer that stops before reading them: Done(false).
func TestStreamInterruptWhileForwarding(t *testing.T) {
	leaks(t)
	for _, read := range []bool{true, false} {
		server := watch.NewRaceFreeFake()
		s := NewStream(server, nil)
		interrupt := make(chan struct{})
		s.Interrupt = interrupt
		finalAsked := make(chan struct{})
		s.Final = func() []watch.Event {
			close(finalAsked)
			return []watch.Event{{Type: watch.Deleted, Object: widget("a", "f1", "")}, {Type: watch.Bookmark, Object: bookmark("1")}}
		}
		done := make(chan bool, 1)
		s.Done = func(delivered bool) { done <- delivered }
		w := s.Start()
		server.Add(widget("a", "s1", "11"))
		mustNext(t, w)
		close(interrupt)
		if read {
			if got := names(drain(t, w)); !slices.Equal(got, []string{"DELETED:f1", "BOOKMARK:"}) {
				t.Fatalf("final events %v", got)
			}
		} else {
			<-finalAsked
			w.Stop()
			drain(t, w)
		}
		if d := <-done; d != read {
			t.Fatalf("read %v: Done(%v)", read, d)
		}
	}
}

// A stream without a server watch delivers its prefix, then waits for
// Interrupt (or Stop); without Interrupt it ends after the prefix.
func TestStreamWithoutServer(t *testing.T) {
	leaks(t)
	s := NewStream(nil, nil)
	s.Prefix = []watch.Event{{Type: watch.Added, Object: widget("a", "p1", "")}}
	if got := names(drain(t, s.Start())); !slices.Equal(got, []string{"ADDED:p1"}) {
		t.Fatalf("events %v", got)
	}

	s = NewStream(nil, nil)
	interrupt := make(chan struct{})
	s.Interrupt = interrupt
	s.Final = func() []watch.Event { return []watch.Event{{Type: watch.Deleted, Object: widget("a", "f1", "")}} }
	w := s.Start()
	select {
	case ev := <-w.ResultChan():
		t.Fatalf("event %v before the interrupt", ev)
	case <-time.After(50 * time.Millisecond):
	}
	close(interrupt)
	if got := names(drain(t, w)); !slices.Equal(got, []string{"DELETED:f1"}) {
		t.Fatalf("events %v", got)
	}

	s = NewStream(nil, nil)
	s.Interrupt = make(chan struct{})
	var finals atomic.Int32
	s.Final = func() []watch.Event { finals.Add(1); return nil }
	w = s.Start()
	w.Stop()
	drain(t, w)
	if finals.Load() != 0 {
		t.Fatal("Final asked on Stop")
	}
}

// The idle bound is re-armed for what is left after an event: a stream
// with events spaced under the bound lives, and expires after a full bound
// of silence counted from the last event.
func TestStreamIdleRearm(t *testing.T) {
	leaks(t)
	const idle = 400 * time.Millisecond
	server := watch.NewRaceFreeFake()
	s := NewStream(server, nil)
	var idled atomic.Int32
	var lastEvent atomic.Int64
	s.idle, s.onIdle, s.onEvent = idle, func() { idled.Add(1) }, func(t time.Time) { lastEvent.Store(t.UnixNano()) }
	w := s.Start()
	time.Sleep(idle / 4)
	server.Add(widget("a", "s1", "11"))
	mustNext(t, w)
	sent := time.Now()
	ev := mustNext(t, w)
	if !isExpiredEvent(ev) || idled.Load() != 1 {
		t.Fatalf("got %v, idled %d", ev, idled.Load())
	}
	if since := time.Since(sent); since < idle*8/10 {
		t.Fatalf("expired %v after the last event, before the bound %v", since, idle)
	}
	drain(t, w)
	if lastEvent.Load() == 0 {
		t.Fatal("the last event's time was not reported")
	}
}

// Observe sees each event (prefix, server, final) before the reader can
// take it — the reader then owns the object and may edit it in place —
// and its taken func runs only for events the reader took: an event
// offered when the stream stops was observed, never taken.
func TestStreamObserveBeforeTheReader(t *testing.T) {
	leaks(t)
	server := watch.NewRaceFreeFake()
	s := NewStream(server, nil)
	s.Prefix = []watch.Event{{Type: watch.Added, Object: widget("a", "p1", "")}}
	var mu sync.Mutex
	var observed, taken []string
	s.Observe = func(ev watch.Event) func() {
		// Reading the object here must not race with the reader's
		// edit below (-race).
		name := names([]watch.Event{ev})[0]
		mu.Lock()
		observed = append(observed, name)
		mu.Unlock()
		return func() {
			mu.Lock()
			taken = append(taken, name)
			mu.Unlock()
		}
	}
	w := s.Start()
	for _, want := range []string{"ADDED:p1", "ADDED:s1"} {
		if want == "ADDED:s1" {
			server.Add(widget("a", "s1", "11"))
		}
		ev := mustNext(t, w)
		ev.Object.(*unstructured.Unstructured).SetLabels(map[string]string{"edited": "in place"}) // the reader's now
		if got := names([]watch.Event{ev})[0]; got != want {
			t.Fatalf("event %s, want %s", got, want)
		}
	}
	server.Add(widget("a", "s2", "12")) // offered, never read
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		mu.Lock()
		n := len(observed)
		mu.Unlock()
		if n == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d events observed, want 3", n)
		}
	}
	w.Stop()
	drain(t, w)
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"ADDED:p1", "ADDED:s1", "ADDED:s2"}; !slices.Equal(observed, want) {
		t.Errorf("observed %v, want %v", observed, want)
	}
	// s1's taken may run just after the reader got it; by the stop it has.
	if want := []string{"ADDED:p1", "ADDED:s1"}; !slices.Equal(taken, want) {
		t.Errorf("taken %v, want %v (s2 was never read)", taken, want)
	}
}
