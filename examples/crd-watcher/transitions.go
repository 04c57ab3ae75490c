package main

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/informerkit/informerkit/dynamicinformer"
)

// transitions decides which informer status changes get a STATUS line:
// only real transitions. A state an informer passes through on its way
// somewhere (Syncing while it lists, Restored while a restart from
// --cache-dir resumes its watch, Pending before it starts, a Pending
// "not served" for a resource discovery serves) is printed only if the
// informer is still in it after grace; a state it settles in (Synced,
// Stale, Failed, Removed, Stopped, a Pending for a resource that is not
// served)
// is printed at once, and only if it differs from the last state printed
// (or, for Failed and Pending, if the error changed). So a start that
// lists and syncs within grace prints one line, "Synced (13 objects)", and
// a Synced → Syncing → Synced flicker prints nothing.
//
// Lines are delivered to print one at a time, in the order the statuses
// arrived or the grace timers fired; print must not call back into
// transitions.
type transitions struct {
	grace time.Duration
	// served reports whether discovery serves the informer's resource; a
	// "not served" Pending for a served resource is a start-up artefact.
	served func(st dynamicinformer.Status) bool
	print  func(st dynamicinformer.Status, prev dynamicinformer.State)

	// quiet, if set, picks the statuses that are not worth a line each
	// the first time (under --all --permitted-namespaces in text: a
	// resource the user may see in no namespace); they are summed up,
	// one line per batch a grace apart (sum). A later change of such an
	// informer (a namespace permitted) prints as usual.
	quiet func(st dynamicinformer.Status) bool
	sum   func(sts []dynamicinformer.Status)

	mu       sync.Mutex // guards tracks, stopped, quieted and sumTimer, and is held while printing
	tracks   map[string]*track
	stopped  bool
	quieted  []dynamicinformer.Status // waiting for sum
	sumTimer *time.Timer
}

// track is one informer's printing state.
type track struct {
	printed    dynamicinformer.State // "" until the first line
	printedErr string
	// printedScope is the scope summary printed (--permitted-namespaces:
	// a change of the namespaces permitted is news in any state).
	printedScope string
	latest       dynamicinformer.Status
	timer        *time.Timer
}

func newTransitions(grace time.Duration, served func(dynamicinformer.Status) bool, print func(dynamicinformer.Status, dynamicinformer.State)) *transitions {
	return &transitions{grace: grace, served: served, print: print, tracks: map[string]*track{}}
}

// informerKey tells informers of one GVR with different options apart.
func informerKey(st dynamicinformer.Status) string {
	return fmt.Sprintf("%s|%q|%s|%s|%v", st.GVR, st.Namespaces, st.LabelSelector, st.FieldSelector, st.MetadataOnly)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// transient reports whether st is a state the informer passes through.
func (tr *transitions) transient(st dynamicinformer.Status) bool {
	switch st.State {
	case dynamicinformer.Syncing, dynamicinformer.Restored:
		return true
	case dynamicinformer.Pending:
		return st.Err == nil || tr.served == nil || tr.served(st)
	}
	return false
}

// observe takes one status change.
func (tr *transitions) observe(st dynamicinformer.Status) {
	key := informerKey(st)
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.stopped {
		return
	}
	t := tr.tracks[key]
	if t == nil {
		t = &track{}
		tr.tracks[key] = t
	}
	t.latest = st
	if tr.transient(st) {
		if t.timer == nil {
			t.timer = time.AfterFunc(tr.grace, func() { tr.expire(key) })
		}
		return
	}
	if t.timer != nil {
		t.timer.Stop()
		t.timer = nil
	}
	if prev, ok := tr.take(t, st); ok {
		tr.emit(st, prev)
	}
}

// emit prints st's line, or keeps it for the next sum if it is quiet and
// the informer's first line. tr.mu must be held.
func (tr *transitions) emit(st dynamicinformer.Status, prev dynamicinformer.State) {
	if prev != "" || tr.quiet == nil || !tr.quiet(st) {
		if len(tr.quieted) > 0 {
			// Its line says more than the sum to come would.
			key := informerKey(st)
			tr.quieted = slices.DeleteFunc(tr.quieted, func(q dynamicinformer.Status) bool { return informerKey(q) == key })
		}
		tr.print(st, prev)
		return
	}
	tr.quieted = append(tr.quieted, st)
	if tr.sumTimer == nil {
		tr.sumTimer = time.AfterFunc(tr.grace, tr.flush)
	}
}

// flush prints the sum of the quiet statuses kept.
func (tr *transitions) flush() {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.flushLocked()
}

func (tr *transitions) flushLocked() {
	if tr.sumTimer != nil {
		tr.sumTimer.Stop()
		tr.sumTimer = nil
	}
	if tr.stopped || len(tr.quieted) == 0 {
		return
	}
	sts := tr.quieted
	tr.quieted = nil
	tr.sum(sts)
}

// take decides whether st is news against what t printed, and records it
// as printed if so. tr.mu must be held.
func (tr *transitions) take(t *track, st dynamicinformer.Status) (dynamicinformer.State, bool) {
	if st.State == t.printed && (st.State == dynamicinformer.Synced || st.State == dynamicinformer.Stale || errText(st.Err) == t.printedErr) &&
		scopeText(st) == t.printedScope {
		return "", false
	}
	if st.State == dynamicinformer.Pending && st.Err == nil && t.printed == "" {
		return "", false // not started yet: nothing to say
	}
	prev := t.printed
	t.printed, t.printedErr, t.printedScope = st.State, errText(st.Err), scopeText(st)
	return prev, true
}

// expire: the grace of a transient state ran out; print it if the
// informer is still in it.
func (tr *transitions) expire(key string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	t := tr.tracks[key]
	if tr.stopped || t == nil || t.timer == nil {
		return
	}
	t.timer = nil
	if st := t.latest; tr.transient(st) {
		if prev, ok := tr.take(t, st); ok {
			tr.emit(st, prev)
		}
	}
}

// stop prints the sum of the quiet statuses kept and cancels pending
// timers; nothing is printed after it returns.
func (tr *transitions) stop() {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.flushLocked()
	tr.stopped = true
	for _, t := range tr.tracks {
		if t.timer != nil {
			t.timer.Stop()
			t.timer = nil
		}
	}
}
