package main

import (
	"bytes"
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

// Under --all --permitted-namespaces, resources the user may see in no
// namespace are summed up in one line per batch, not a line each; one
// later permitted in a namespace gets its own line, and a resource with a
// namespace permitted from the start prints as usual.
func TestTransitionsSumResourcesPermittedNowhere(t *testing.T) {
	var p printed
	var sumsMu sync.Mutex
	var sums [][]string
	tr := newTransitions(50*time.Millisecond, nil, p.print)
	tr.quiet = permittedNowhere
	sumDone := make(chan struct{}, 4)
	tr.sum = func(sts []dynamicinformer.Status) {
		var names []string
		for _, st := range sts {
			names = append(names, st.GVR.Resource)
		}
		sumsMu.Lock()
		sums = append(sums, names)
		sumsMu.Unlock()
		sumDone <- struct{}{}
	}
	nowhere := func(res string) dynamicinformer.Status {
		st := status(res, dynamicinformer.Synced, 0, nil)
		st.Permitted = []string{}
		return st
	}
	for _, res := range []string{"a", "b", "c"} {
		tr.observe(nowhere(res))
	}
	somewhere := status("d", dynamicinformer.Synced, 2, nil)
	somewhere.Permitted = []string{"team-a"}
	tr.observe(somewhere)
	select {
	case <-sumDone:
	case <-time.After(5 * time.Second):
		t.Fatal("no sum line within 5 s")
	}
	// b is granted a namespace: its own line.
	granted := status("b", dynamicinformer.Synced, 1, nil)
	granted.Permitted = []string{"team-a"}
	tr.observe(granted)
	// A second batch after the first was printed; f is granted a
	// namespace before that batch's line: its own line, and it is not in
	// the sum.
	tr.observe(nowhere("e"))
	tr.observe(nowhere("f"))
	grantedF := status("f", dynamicinformer.Synced, 1, nil)
	grantedF.Permitted = []string{"team-b"}
	tr.observe(grantedF)
	tr.stop() // prints what is kept
	sumsMu.Lock()
	defer sumsMu.Unlock()
	if fmt.Sprint(sums) != "[[a b c] [e]]" {
		t.Errorf("sums %v, want [[a b c] [e]]", sums)
	}
	if got, want := p.get(), "d →Synced 2\nb Synced→Synced 1\nf Synced→Synced 1"; got != want {
		t.Errorf("lines\n%s\nwant\n%s", got, want)
	}
}

// The sum line names the first resources and counts the rest.
func TestPermittedNowhereLine(t *testing.T) {
	var out bytes.Buffer
	pr := &printer{errOut: &out, now: func() time.Time { return time.Date(2026, 12, 7, 14, 2, 11, 512e6, time.UTC) }}
	var sts []dynamicinformer.Status
	for i := range 10 {
		sts = append(sts, status(fmt.Sprintf("r%02d", i), dynamicinformer.Synced, 0, nil))
	}
	pr.sumPermittedNowhere(sts)
	want := "14:02:11.512 STATUS  10 resources Synced (0 objects); permitted in no namespace: r00.v1, r01.v1, r02.v1, r03.v1, r04.v1, r05.v1, r06.v1, r07.v1 and 2 more"
	if got := out.String(); !strings.HasPrefix(got, want) {
		t.Errorf("line\n%s\nwant it to start\n%s", got, want)
	}
}
