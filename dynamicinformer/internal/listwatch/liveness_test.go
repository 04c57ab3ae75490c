package listwatch

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"sync"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
)

// A stream that stays silent for the idle bound ends with "expired"; the
// next list is a probe (consistent, paginated) and stays due until one
// succeeds; watches give way to it meanwhile (watch-list ones with the
// list fallback).
func TestLivenessSilentStreamEndsAndProbes(t *testing.T) {
	leaks(t)
	const idle = 100 * time.Millisecond
	l, inner, hooks := newLiveness(idle)
	ctx := context.Background()
	if _, err := l.List(ctx, metav1.ListOptions{ResourceVersion: "0"}, false); err != nil {
		t.Fatal(err)
	}
	s, err := l.Watch(ctx, metav1.ListOptions{ResourceVersion: "10", AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	w := s.Start()
	start := time.Now()
	ev, ok := next(t, w, 5*time.Second)
	silentFor := time.Since(start)
	if !ok || !isExpiredEvent(ev) {
		t.Fatalf("silent stream gave %v (open %v), want an expired error", ev, ok)
	}
	if silentFor < idle*9/10 {
		t.Fatalf("stream ended after %v, before the idle bound %v", silentFor, idle)
	}
	if _, ok := next(t, w, time.Second); ok {
		t.Fatal("stream still open after the expired error")
	}
	w.Stop()
	if hooks.last() != "silent" {
		t.Fatalf("hooks %v, want silent last", hooks.events)
	}
	if !inner.watch(0).IsStopped() {
		t.Fatal("server stream not stopped")
	}
	if !l.ProbeDue() {
		t.Fatal("no probe due after a silent stream")
	}

	// Watches give way to the probe without a request.
	_, watchesBefore := inner.counts()
	if _, err := l.Watch(ctx, metav1.ListOptions{ResourceVersion: "10"}); !apierrors.IsResourceExpired(err) {
		t.Fatalf("watch while a probe is due: %v, want expired", err)
	}
	if _, err := l.Watch(ctx, metav1.ListOptions{ResourceVersion: "10", SendInitialEvents: truePtr()}); !errors.Is(err, ErrProbeFallback) {
		t.Fatalf("watch-list while a probe is due: %v, want the list fallback", err)
	}
	if _, w := inner.counts(); w != watchesBefore {
		t.Fatalf("%d watch requests sent while a probe was due", w-watchesBefore)
	}

	// The probe fails (the server cannot read the resource): still due.
	storeErr := apierrors.NewInternalError(errors.New("corrupt"))
	inner.set(func(s *liveLW) { s.listErr = storeErr })
	for i := 0; i < 2; i++ {
		if _, err := l.List(ctx, metav1.ListOptions{ResourceVersion: "10"}, false); !errors.Is(err, storeErr) {
			t.Fatalf("probe list err %v", err)
		}
		if o := inner.lastList(); o.ResourceVersion != "" || o.Limit != ProbePageSize {
			t.Fatalf("probe list %d sent rv %q limit %d, want a consistent list of pages of %d", i, o.ResourceVersion, o.Limit, ProbePageSize)
		}
	}
	if _, err := l.Watch(ctx, metav1.ListOptions{ResourceVersion: "10"}); !apierrors.IsResourceExpired(err) {
		t.Fatalf("watch after a failed probe: %v, want expired", err)
	}
	// A later page keeps the page size.
	if _, err := l.List(ctx, metav1.ListOptions{Continue: "token"}, false); !errors.Is(err, storeErr) {
		t.Fatal(err)
	}
	if o := inner.lastList(); o.Limit != ProbePageSize || o.Continue != "token" {
		t.Fatalf("continued probe page limit %d continue %q", o.Limit, o.Continue)
	}

	// The probe succeeds: back to normal lists and watches.
	inner.set(func(s *liveLW) { s.listErr = nil })
	if _, err := l.List(ctx, metav1.ListOptions{ResourceVersion: "10"}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := l.List(ctx, metav1.ListOptions{ResourceVersion: "10"}, false); err != nil {
		t.Fatal(err)
	}
	if o := inner.lastList(); o.ResourceVersion != "10" || o.Limit != 0 {
		t.Fatalf("list after a successful probe sent rv %q limit %d, want the reflector's", o.ResourceVersion, o.Limit)
	}
	s, err = l.Watch(ctx, metav1.ListOptions{ResourceVersion: "10"})
	if err != nil {
		t.Fatalf("watch after a successful probe: %v", err)
	}
	s.Start().Stop()
}

// A fresh list (the gate's relist after a removal) drops the reflector's
// resourceVersion but is not paginated.
func TestLivenessFreshList(t *testing.T) {
	l, inner, _ := newLiveness(time.Hour)
	if _, err := l.List(context.Background(), metav1.ListOptions{ResourceVersion: "10", ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}, true); err != nil {
		t.Fatal(err)
	}
	if o := inner.lastList(); o.ResourceVersion != "" || o.ResourceVersionMatch != "" || o.Limit != 0 {
		t.Fatalf("fresh list sent %+v", o)
	}
}

// The first page of a list at any resourceVersion (a reflector's first
// LIST: "0" with its page size) is sent as a consistent list, which the
// server paginates; every other list keeps its resourceVersion.
func TestLivenessPagesListsAtAnyVersion(t *testing.T) {
	l, inner, _ := newLiveness(time.Hour)
	for _, c := range []struct {
		in     metav1.ListOptions
		wantRV string
	}{
		{metav1.ListOptions{ResourceVersion: "0", Limit: 500}, ""},
		{metav1.ListOptions{ResourceVersion: "0", ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, Limit: 500}, ""},
		{metav1.ListOptions{ResourceVersion: "0"}, "0"},               // no page size: the whole list, as asked
		{metav1.ListOptions{ResourceVersion: "12", Limit: 500}, "12"}, // an exact page, as asked
		{metav1.ListOptions{ResourceVersion: "0", Limit: 500, Continue: "c"}, "0"},
	} {
		if _, err := l.List(context.Background(), c.in, false); err != nil {
			t.Fatal(err)
		}
		if o := inner.lastList(); o.ResourceVersion != c.wantRV || o.Limit != c.in.Limit || o.Continue != c.in.Continue ||
			(c.wantRV == "" && o.ResourceVersionMatch != "") {
			t.Errorf("%+v sent as %+v, want resourceVersion %q", c.in, o, c.wantRV)
		}
	}
}

// Events and bookmarks keep a quiet stream alive; time spent waiting for
// the consumer does not count as silence.
func TestLivenessBookmarksKeepStreamAlive(t *testing.T) {
	leaks(t)
	const idle = 500 * time.Millisecond
	l, inner, _ := newLiveness(idle)
	ctx := context.Background()
	if _, err := l.List(ctx, metav1.ListOptions{}, false); err != nil {
		t.Fatal(err)
	}
	s, err := l.Watch(ctx, metav1.ListOptions{ResourceVersion: "10", AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	w := s.Start()
	defer w.Stop()
	server := inner.watch(0)
	for i := 0; i < 12; i++ { // 12 × 100ms > 2 idle periods
		time.Sleep(idle / 5)
		server.Action(watch.Bookmark, bookmark("11"))
		if ev, _ := next(t, w, time.Second); ev.Type != watch.Bookmark {
			t.Fatalf("event %d: %v, want the bookmark", i, ev)
		}
	}
	// A slow consumer: the event waits 2 idle periods to be read.
	server.Action(watch.Bookmark, bookmark("12"))
	time.Sleep(2 * idle)
	if ev, _ := next(t, w, time.Second); ev.Type != watch.Bookmark {
		t.Fatalf("after a slow read: %v, want the bookmark", ev)
	}
	start := time.Now()
	ev, _ := next(t, w, 5*time.Second)
	if !isExpiredEvent(ev) || time.Since(start) < idle*8/10 {
		t.Fatalf("got %v after %v, want expired after about %v of silence", ev, time.Since(start), idle)
	}
	if lists, _ := inner.counts(); lists != 1 {
		t.Fatalf("%d lists while the stream was alive", lists)
	}
}

// A watch request the server does not answer (client-go retrying 429
// "storage is (re)initializing" inside the request) is cancelled when the
// server has been silent for the idle bound; the reflector then lists.
func TestLivenessUnansweredWatchRequest(t *testing.T) {
	leaks(t)
	const idle = 100 * time.Millisecond
	for _, watchList := range []bool{false, true} {
		l, inner, hooks := newLiveness(idle)
		ctx := context.Background()
		if _, err := l.List(ctx, metav1.ListOptions{}, false); err != nil {
			t.Fatal(err)
		}
		inner.set(func(s *liveLW) { s.block = true })
		opts := metav1.ListOptions{ResourceVersion: "10"}
		if watchList {
			opts.SendInitialEvents = truePtr()
		}
		start := time.Now()
		_, err := l.Watch(ctx, opts)
		took := time.Since(start)
		want := apierrors.IsResourceExpired(err)
		if watchList {
			want = errors.Is(err, ErrProbeFallback)
		}
		if !want || took > 2*time.Second {
			t.Fatalf("watch-list %v: unanswered watch returned %v after %v", watchList, err, took)
		}
		if cerr := <-inner.blockErr; !errors.Is(cerr, context.Canceled) {
			t.Fatalf("request context: %v, want cancelled", cerr)
		}
		if hooks.last() != "silent" {
			t.Fatalf("hooks %v", hooks.events)
		}
		if c, ok := hooks.lastContact(); ok && c != nil {
			t.Fatalf("a request cut by the idle bound reported contact error %v", c)
		}
		if _, err := l.List(ctx, metav1.ListOptions{ResourceVersion: "10"}, false); err != nil {
			t.Fatal(err)
		}
		if o := inner.lastList(); o.ResourceVersion != "" || o.Limit != ProbePageSize {
			t.Fatalf("list after an unanswered watch: rv %q limit %d, want a probe", o.ResourceVersion, o.Limit)
		}
	}
}

// A cancelled context is the caller's, not silence.
func TestLivenessCallerCancelIsNotSilence(t *testing.T) {
	leaks(t)
	l, inner, hooks := newLiveness(time.Hour)
	if _, err := l.List(context.Background(), metav1.ListOptions{}, false); err != nil {
		t.Fatal(err)
	}
	inner.set(func(s *liveLW) { s.block = true })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := l.Watch(ctx, metav1.ListOptions{ResourceVersion: "10"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v", err)
	}
	if hooks.last() == "silent" || l.ProbeDue() {
		t.Fatal("a cancelled request made a probe due")
	}
	// The caller's cancel while the idle bound also ran out is still the
	// caller's error, not a probe.
	l2, inner2, _ := newLiveness(30 * time.Millisecond)
	if _, err := l2.List(context.Background(), metav1.ListOptions{}, false); err != nil {
		t.Fatal(err)
	}
	inner2.set(func(s *liveLW) { s.block = true })
	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if _, err := l2.Watch(ctx2, metav1.ListOptions{ResourceVersion: "10"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled caller got %v", err)
	}
}

// Without an idle bound a silent stream stays open and no probe is ever
// due.
func TestLivenessOff(t *testing.T) {
	leaks(t)
	l, inner, _ := newLiveness(0)
	ctx := context.Background()
	if _, err := l.List(ctx, metav1.ListOptions{}, false); err != nil {
		t.Fatal(err)
	}
	s, err := l.Watch(ctx, metav1.ListOptions{ResourceVersion: "10"})
	if err != nil {
		t.Fatal(err)
	}
	w := s.Start()
	select {
	case ev := <-w.ResultChan():
		t.Fatalf("silent stream without an idle bound gave %v", ev)
	case <-time.After(300 * time.Millisecond):
	}
	if l.ProbeDue() {
		t.Fatal("probe due without an idle bound")
	}
	inner.watch(0).Add(widget("a", "w2", "11"))
	if ev, ok := next(t, w, time.Second); !ok || ev.Type != watch.Added {
		t.Fatalf("event %v", ev)
	}
	w.Stop()
	drain(t, w)
	if !inner.watch(0).IsStopped() {
		t.Fatal("server watch not stopped with the stream")
	}
}

// Forget stops measuring silence: a resource not served for longer than
// the bound is not judged silent; only a list starts measuring again.
func TestLivenessForget(t *testing.T) {
	leaks(t)
	const idle = 50 * time.Millisecond
	l, _, _ := newLiveness(idle)
	ctx := context.Background()
	if _, err := l.List(ctx, metav1.ListOptions{}, false); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * idle)
	if !l.ProbeDue() {
		t.Fatal("no probe due after silence since a list")
	}
	l.Forget()
	time.Sleep(2 * idle)
	if l.ProbeDue() {
		t.Fatal("probe due after Forget")
	}
}

// A watch-list stream counts as a list once open: silence is measured from
// it.
func TestLivenessWatchListStartsMeasuring(t *testing.T) {
	leaks(t)
	const idle = 50 * time.Millisecond
	l, _, _ := newLiveness(idle)
	s, err := l.Watch(context.Background(), metav1.ListOptions{SendInitialEvents: truePtr()})
	if err != nil {
		t.Fatal(err)
	}
	s.Start().Stop()
	time.Sleep(2 * idle)
	if !l.ProbeDue() {
		t.Fatal("silence after a watch-list stream not measured")
	}
}

// The watch-open bound is race-free (issue 20, defect 2). The old
// openWatch checked `!bound.Stop() && timedOut.Load()`: a timer that had
// fired but not yet set its flag let the request's stream be returned,
// and the timer then cancelled the request's context a moment later — a
// stream handed to the reflector already dead. Here the request returns
// right around the deadline, many times; every stream Watch returns must
// still be alive (its request context not cancelled, its server watch not
// stopped) after the timer would have acted, else Watch must return the
// probe error.
func TestLivenessWatchOpenBoundRaceFree(t *testing.T) {
	leaks(t)
	const idle = 2 * time.Millisecond
	inner := &racyLW{}
	l := &Liveness{Inner: inner, Idle: idle}
	ctx := context.Background()
	var streams, probes int
	for i := 0; i < 400; i++ {
		if _, err := l.List(ctx, metav1.ListOptions{}, false); err != nil { // silence measured from now
			t.Fatal(err)
		}
		inner.delay = time.Duration(rand.Int64N(int64(2 * idle)))
		s, err := l.Watch(ctx, metav1.ListOptions{ResourceVersion: "10"})
		if err != nil {
			if !apierrors.IsResourceExpired(err) {
				t.Fatalf("iteration %d: %v, want a stream or the probe error", i, err)
			}
			probes++
			continue
		}
		streams++
		time.Sleep(2 * idle) // past the bound: a late timer would have acted
		if rctx, w := inner.last(); rctx.Err() != nil || w.IsStopped() {
			t.Fatalf("iteration %d: a returned stream was cancelled (ctx %v, stopped %v)", i, rctx.Err(), w.IsStopped())
		}
		w := s.Start()
		w.Stop()
		drain(t, w)
		if rctx, _ := inner.last(); rctx.Err() == nil {
			t.Fatalf("iteration %d: request context not released with the stream", i)
		}
	}
	t.Logf("%d streams, %d timed out", streams, probes)
	if streams == 0 || probes == 0 {
		t.Fatalf("the deadline was not straddled: %d streams, %d timed out", streams, probes)
	}
}

// racyLW answers a watch after delay (or when its context ends, as a real
// request does).
type racyLW struct {
	delay time.Duration // set between requests

	mu  sync.Mutex // guards ctx, w
	ctx context.Context
	w   *watch.RaceFreeFakeWatcher
}

func (r *racyLW) ListWithContext(context.Context, metav1.ListOptions) (runtime.Object, error) {
	return widgetList("10"), nil
}

func (r *racyLW) WatchWithContext(ctx context.Context, _ metav1.ListOptions) (watch.Interface, error) {
	t := time.NewTimer(r.delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	w := watch.NewRaceFreeFake()
	r.mu.Lock()
	r.ctx, r.w = ctx, w
	r.mu.Unlock()
	return w, nil
}

func (r *racyLW) last() (context.Context, *watch.RaceFreeFakeWatcher) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ctx, r.w
}

// Contact: any answer is contact, a transport error is lost contact, a
// cancelled request says nothing.
func TestLivenessContact(t *testing.T) {
	leaks(t)
	refused := &url.URL{Scheme: "https", Host: "x"}
	connErr := &url.Error{Op: "Get", URL: refused.String(), Err: &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}}
	cases := []struct {
		name    string
		err     error
		report  bool
		contact bool
	}{
		{"answered", nil, true, true},
		{"forbidden status", apierrors.NewForbidden(schema.GroupResource{Resource: "widgets"}, "", errors.New("no")), true, true},
		{"connection refused", connErr, true, false},
		{"EOF", io.ErrUnexpectedEOF, true, false},
		{"cancelled", context.Canceled, false, false},
		{"other error", errors.New("decoding failed"), false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, inner, hooks := newLiveness(0)
			inner.set(func(s *liveLW) { s.listErr = c.err })
			_, _ = l.List(context.Background(), metav1.ListOptions{}, false)
			got, ok := hooks.lastContact()
			if ok != c.report {
				t.Fatalf("reported %v, want %v", ok, c.report)
			}
			if ok && (got == nil) != c.contact {
				t.Fatalf("contact err %v, want contact %v", got, c.contact)
			}
		})
	}
	// Watches report too.
	l, inner, hooks := newLiveness(0)
	inner.set(func(s *liveLW) { s.watchErr = connErr })
	if _, err := l.Watch(context.Background(), metav1.ListOptions{}); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("watch err %v", err)
	}
	if got, _ := hooks.lastContact(); got == nil {
		t.Fatal("a refused watch did not report lost contact")
	}
	// No hook: nothing to call.
	(&Liveness{Inner: inner}).report(connErr)
}

func TestIsConnectionError(t *testing.T) {
	if IsConnectionError(nil) {
		t.Fatal("nil")
	}
	if IsConnectionError(apierrors.NewServiceUnavailable("x")) {
		t.Fatal("a status answer is not a connection error")
	}
	if !IsConnectionError(&net.OpError{Op: "read", Err: syscall.ECONNRESET}) {
		t.Fatal("reset")
	}
	if !IsConnectionError(syscall.ECONNREFUSED) {
		t.Fatal("refused")
	}
	if IsConnectionError(errors.New("x")) {
		t.Fatal("plain error")
	}
}
