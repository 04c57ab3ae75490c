package dynamicinformer

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// liveLW is a ListerWatcher whose watches are fake streams the test feeds,
// or (block) requests that are never answered, as a client-go request
// retrying 429s is not.
type liveLW struct {
	mu        sync.Mutex
	listErr   error
	lists     []metav1.ListOptions
	watches   []*watch.RaceFreeFakeWatcher
	watchOpts []metav1.ListOptions
	block     bool
	blockErr  chan error // what a blocked request returned (its context's error)
}

func (s *liveLW) ListWithContext(_ context.Context, o metav1.ListOptions) (kruntime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lists = append(s.lists, o)
	if s.listErr != nil {
		return nil, s.listErr
	}
	return oneWidgetList(), nil
}

func (s *liveLW) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	s.mu.Lock()
	s.watchOpts = append(s.watchOpts, o)
	block := s.block
	s.mu.Unlock()
	if block {
		<-ctx.Done()
		s.blockErr <- ctx.Err()
		return nil, ctx.Err()
	}
	w := watch.NewRaceFreeFake()
	s.mu.Lock()
	s.watches = append(s.watches, w)
	s.mu.Unlock()
	return w, nil
}

func (s *liveLW) counts() (lists, watches int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.lists), len(s.watchOpts)
}

func (s *liveLW) lastList() metav1.ListOptions {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lists[len(s.lists)-1]
}

func newLiveGate(idle time.Duration) (*gatedListerWatcher, *liveLW, *hookLog) {
	lw, _, hooks := newTestGate(true)
	inner := &liveLW{blockErr: make(chan error, 1)}
	lw.inner = inner
	lw.idleTimeout = idle
	return lw, inner, hooks
}

// next reads one event, failing after timeout; ok false: the stream closed.
func next(t *testing.T, w watch.Interface, timeout time.Duration) (watch.Event, bool) {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		return ev, ok
	case <-time.After(timeout):
		t.Fatalf("no event within %v", timeout)
		return watch.Event{}, false
	}
}

func isExpiredEvent(ev watch.Event) bool {
	st, ok := ev.Object.(*metav1.Status)
	return ev.Type == watch.Error && ok && apierrors.IsResourceExpired(apierrors.FromObject(st))
}

func bookmark(rv string) kruntime.Object {
	u := &unstructured.Unstructured{Object: map[string]interface{}{}}
	u.SetResourceVersion(rv)
	return u
}

// A stream that stays silent for the idle timeout ends with "expired"; the
// next list is a probe (consistent, paginated) and stays due until one
// succeeds; watches give way to it meanwhile (watch-list ones by falling
// back to a list).
func TestLivenessSilentStreamEndsAndProbes(t *testing.T) {
	const idle = 100 * time.Millisecond
	lw, inner, hooks := newLiveGate(idle)
	ctx := context.Background()
	if _, err := lw.ListWithContext(ctx, metav1.ListOptions{ResourceVersion: "0"}); err != nil {
		t.Fatal(err)
	}
	w, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "10", AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ev, ok := next(t, w, 5*time.Second)
	silentFor := time.Since(start)
	if !ok || !isExpiredEvent(ev) {
		t.Fatalf("silent stream gave %v (open %v), want an expired error", ev, ok)
	}
	if silentFor < idle*9/10 {
		t.Fatalf("stream ended after %v, before the idle timeout %v", silentFor, idle)
	}
	if _, ok := next(t, w, time.Second); ok {
		t.Fatal("stream still open after the expired error")
	}
	w.Stop()
	if hooks.last() != "silent" {
		t.Fatalf("hooks %v, want silent last", hooks.events)
	}
	if !inner.watches[0].IsStopped() {
		t.Fatal("server stream not stopped")
	}

	// Watches give way to the probe without a request.
	_, watchesBefore := inner.counts()
	if _, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "10"}); !apierrors.IsResourceExpired(err) {
		t.Fatalf("watch while a probe is due: %v, want expired", err)
	}
	if _, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "10", SendInitialEvents: truePtr()}); !errors.Is(err, errProbeFallback) {
		t.Fatalf("watch-list while a probe is due: %v, want the list fallback", err)
	}
	if _, w := inner.counts(); w != watchesBefore {
		t.Fatalf("%d watch requests sent while a probe was due", w-watchesBefore)
	}

	// The probe fails (the server cannot read the resource): still due.
	storeErr := apierrors.NewInternalError(errors.New("corrupt"))
	inner.mu.Lock()
	inner.listErr = storeErr
	inner.mu.Unlock()
	for i := 0; i < 2; i++ {
		if _, err := lw.ListWithContext(ctx, metav1.ListOptions{ResourceVersion: "10"}); !errors.Is(err, storeErr) {
			t.Fatalf("probe list err %v", err)
		}
		if o := inner.lastList(); o.ResourceVersion != "" || o.Limit != probePageSize {
			t.Fatalf("probe list %d sent rv %q limit %d, want a consistent list of pages of %d", i, o.ResourceVersion, o.Limit, probePageSize)
		}
	}
	if _, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "10"}); !apierrors.IsResourceExpired(err) {
		t.Fatalf("watch after a failed probe: %v, want expired", err)
	}
	// A later page keeps the page size.
	if _, err := lw.ListWithContext(ctx, metav1.ListOptions{Continue: "token"}); !errors.Is(err, storeErr) {
		t.Fatal(err)
	}
	if o := inner.lastList(); o.Limit != probePageSize {
		t.Fatalf("continued probe page limit %d", o.Limit)
	}

	// The probe succeeds: back to normal lists and watches.
	inner.mu.Lock()
	inner.listErr = nil
	inner.mu.Unlock()
	if _, err := lw.ListWithContext(ctx, metav1.ListOptions{ResourceVersion: "10"}); err != nil {
		t.Fatal(err)
	}
	if _, err := lw.ListWithContext(ctx, metav1.ListOptions{ResourceVersion: "10"}); err != nil {
		t.Fatal(err)
	}
	if o := inner.lastList(); o.ResourceVersion != "10" || o.Limit != 0 {
		t.Fatalf("list after a successful probe sent rv %q limit %d, want the reflector's", o.ResourceVersion, o.Limit)
	}
	w, err = lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "10"})
	if err != nil {
		t.Fatalf("watch after a successful probe: %v", err)
	}
	w.Stop()
}

// Events and bookmarks keep a quiet stream alive; time spent waiting for
// the consumer does not count as silence.
func TestLivenessBookmarksKeepStreamAlive(t *testing.T) {
	const idle = 300 * time.Millisecond
	lw, inner, _ := newLiveGate(idle)
	ctx := context.Background()
	if _, err := lw.ListWithContext(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "10", AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	server := inner.watches[0]
	for i := 0; i < 20; i++ { // 20 × 60ms = 4 idle periods
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
// server has been silent for the idle timeout; the reflector then lists.
func TestLivenessUnansweredWatchRequest(t *testing.T) {
	const idle = 100 * time.Millisecond
	for _, watchList := range []bool{false, true} {
		lw, inner, hooks := newLiveGate(idle)
		ctx := context.Background()
		if _, err := lw.ListWithContext(ctx, metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
		inner.mu.Lock()
		inner.block = true
		inner.mu.Unlock()
		opts := metav1.ListOptions{ResourceVersion: "10"}
		if watchList {
			opts.SendInitialEvents = truePtr()
		}
		start := time.Now()
		_, err := lw.WatchWithContext(ctx, opts)
		took := time.Since(start)
		want := apierrors.IsResourceExpired(err)
		if watchList {
			want = errors.Is(err, errProbeFallback)
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
		if _, err := lw.ListWithContext(ctx, metav1.ListOptions{ResourceVersion: "10"}); err != nil {
			t.Fatal(err)
		}
		if o := inner.lastList(); o.ResourceVersion != "" || o.Limit != probePageSize {
			t.Fatalf("list after an unanswered watch: rv %q limit %d, want a probe", o.ResourceVersion, o.Limit)
		}
	}
}

// A cancelled context is the caller's, not silence.
func TestLivenessCallerCancelIsNotSilence(t *testing.T) {
	lw, inner, hooks := newLiveGate(time.Hour)
	if _, err := lw.ListWithContext(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	inner.mu.Lock()
	inner.block = true
	inner.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "10"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v", err)
	}
	if hooks.last() == "silent" || lw.probeDue() {
		t.Fatal("a cancelled request made a probe due")
	}
}

// Without an idle timeout a silent stream stays open.
func TestLivenessOff(t *testing.T) {
	lw, _, _ := newLiveGate(0)
	w := listAndWatch(t, lw)
	defer w.Stop()
	select {
	case ev := <-w.ResultChan():
		t.Fatalf("silent stream without an idle timeout gave %v", ev)
	case <-time.After(300 * time.Millisecond):
	}
}

// The factory applies the default bound, and none to informers over
// several namespaces.
func TestLivenessFactoryDefault(t *testing.T) {
	if d := watchIdleTimeout(defaults(0).watchIdle, resourceConfig{}); d != DefaultWatchIdleTimeout {
		t.Fatalf("default %v", d)
	}
	if d := watchIdleTimeout(time.Minute, resourceConfig{namespaces: []string{"a", "b"}}); d != 0 {
		t.Fatalf("several namespaces: %v", d)
	}
	c := defaults(0)
	WithWatchIdleTimeout(0)(&c)
	if d := watchIdleTimeout(c.watchIdle, resourceConfig{}); d != 0 {
		t.Fatalf("off: %v", d)
	}
}

func truePtr() *bool { b := true; return &b }
