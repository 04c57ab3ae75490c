package main

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/informerkit/informerkit/dynamicinformer"
)

type printed struct {
	mu    sync.Mutex
	lines []string
}

func (p *printed) print(st dynamicinformer.Status, prev dynamicinformer.State) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := fmt.Sprintf("%s %s→%s %d", st.GVR.Resource, prev, st.State, st.Objects)
	if st.Err != nil {
		l += " " + st.Err.Error()
	}
	p.lines = append(p.lines, l)
}

func (p *printed) get() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

var notServed = errors.New("not served")

func status(res string, s dynamicinformer.State, n int, err error) dynamicinformer.Status {
	return dynamicinformer.Status{GVR: schema.GroupVersionResource{Version: "v1", Resource: res}, State: s, Objects: n, Err: err}
}

// A start that goes Pending (not started), Pending "not served" for a
// resource discovery serves, Syncing, Synced within the grace prints one
// line: Synced with its count.
func TestTransitionsStartPrintsSyncedOnce(t *testing.T) {
	var p printed
	tr := newTransitions(200*time.Millisecond, func(dynamicinformer.Status) bool { return true }, p.print)
	defer tr.stop()
	for _, st := range []dynamicinformer.Status{
		status("pods", dynamicinformer.Pending, 0, nil),
		status("pods", dynamicinformer.Pending, 0, notServed),
		status("pods", dynamicinformer.Syncing, 0, nil),
		status("pods", dynamicinformer.Synced, 13, nil),
		status("pods", dynamicinformer.Syncing, 13, nil), // a relist flicker
		status("pods", dynamicinformer.Synced, 13, nil),
	} {
		tr.observe(st)
	}
	time.Sleep(400 * time.Millisecond) // past the grace: no timer may print the flicker
	if got, want := p.get(), "pods →Synced 13"; got != want {
		t.Fatalf("lines:\n%s\nwant:\n%s", got, want)
	}
}

// A resource that is really not served (discovery does not serve it) is
// reported at once; a Syncing that lasts past the grace is reported, then
// the Synced with the state it came from.
func TestTransitionsRealStates(t *testing.T) {
	var p printed
	tr := newTransitions(100*time.Millisecond, func(dynamicinformer.Status) bool { return false }, p.print)
	defer tr.stop()
	tr.observe(status("widgets", dynamicinformer.Pending, 0, nil))
	tr.observe(status("widgets", dynamicinformer.Pending, 0, notServed))
	if got := p.get(); got != "widgets →Pending 0 not served" {
		t.Fatalf("after a real wait: %q", got)
	}
	tr.observe(status("widgets", dynamicinformer.Syncing, 0, nil))
	time.Sleep(300 * time.Millisecond)
	tr.observe(status("widgets", dynamicinformer.Synced, 5, nil))
	want := "widgets →Pending 0 not served\nwidgets Pending→Syncing 0\nwidgets Syncing→Synced 5"
	if got := p.get(); got != want {
		t.Fatalf("lines:\n%s\nwant:\n%s", got, want)
	}
}

// Failed is printed at once, again when the error changes, and not when
// the same failure is reported again.
func TestTransitionsFailed(t *testing.T) {
	var p printed
	tr := newTransitions(time.Hour, nil, p.print)
	defer tr.stop()
	forbidden := errors.New("forbidden")
	tr.observe(status("cm", dynamicinformer.Failed, 0, forbidden))
	tr.observe(status("cm", dynamicinformer.Failed, 0, errors.New("forbidden")))
	tr.observe(status("cm", dynamicinformer.Failed, 0, errors.New("unauthorized")))
	tr.observe(status("cm", dynamicinformer.Syncing, 0, nil)) // transient: not yet
	tr.observe(status("cm", dynamicinformer.Synced, 2, nil))
	want := "cm →Failed 0 forbidden\ncm Failed→Failed 0 unauthorized\ncm Failed→Synced 2"
	if got := p.get(); got != want {
		t.Fatalf("lines:\n%s\nwant:\n%s", got, want)
	}
}

// Nothing is printed after stop, even by a grace timer already running.
func TestTransitionsStop(t *testing.T) {
	var p printed
	tr := newTransitions(50*time.Millisecond, nil, p.print)
	tr.observe(status("pods", dynamicinformer.Syncing, 0, nil))
	tr.stop()
	tr.observe(status("pods", dynamicinformer.Synced, 1, nil))
	time.Sleep(150 * time.Millisecond)
	if got := p.get(); got != "" {
		t.Fatalf("printed after stop: %q", got)
	}
}

// Synced → Stale (contact lost) and back are printed at once, each once;
// a Stale reported again (another reason) is not news.
func TestTransitionsStale(t *testing.T) {
	var p printed
	tr := newTransitions(time.Hour, nil, p.print)
	defer tr.stop()
	tr.observe(status("cm", dynamicinformer.Synced, 2, nil))
	stale := status("cm", dynamicinformer.Stale, 2, nil)
	stale.Reason = "no contact with the API server: connection refused"
	tr.observe(stale)
	stale.Reason = "no contact with the API server: connection reset by peer"
	tr.observe(stale)
	tr.observe(status("cm", dynamicinformer.Synced, 3, nil))
	want := "cm →Synced 2\ncm Synced→Stale 2\ncm Stale→Synced 3"
	if got := p.get(); got != want {
		t.Fatalf("lines:\n%s\nwant:\n%s", got, want)
	}
}
