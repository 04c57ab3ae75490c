package listwatch

import (
	"context"
	"errors"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/dynamicinformer/internal/reflectorseam"
)

// ErrProbeFallback is reflectorseam.ErrProbeFallback: the answer to a
// watch-list request when a liveness probe is due.
var ErrProbeFallback = reflectorseam.ErrProbeFallback

// ProbePageSize is the page size of a liveness probe list, client-go's
// default for its own consistent lists. A paginated consistent list is
// answered from storage when the server's watch cache is not ready
// (KEP 4568), so it reports what keeps the cache from initializing
// instead of a 429 "storage is (re)initializing".
const ProbePageSize = 500

// LivenessHooks is what the liveness layer tells its informer. Both are
// called on the goroutine that made the request (the reflector's) or on a
// stream's goroutine, and must not block.
type LivenessHooks struct {
	// Silent: nothing came from the server for the idle bound; the next
	// list is a probe. where says what was waiting.
	Silent func(idle time.Duration, where string)
	// Contact: a request reached the server (err nil: any answer, even an
	// error status) or could not (err: the transport's error).
	Contact func(err error)
	// Request, if set: a list or watch request (verb "list" or "watch")
	// ended with err (nil: answered; ErrWatchNotAnswered: no answer within
	// the idle bound). Requests cancelled by their context are not
	// reported.
	Request func(verb string, err error)
	// WatchEnded, if set: a server watch ended while its context was live
	// (the server closed it, an error, the idle bound, an interrupt).
	WatchEnded func()
}

// ErrWatchNotAnswered is what Hooks.Request is told of a watch request
// cancelled because it was not answered within the idle bound.
var ErrWatchNotAnswered = errIdleOpen

// Liveness is the layer between the gate and the server. It bounds how
// long the server may stay silent, and reports contact.
//
// Silence: when nothing has come from the server for Idle — no list
// answered, no event or bookmark on the open watch, or a watch request not
// answered (client-go retries 429 answers inside one request) — the watch
// ends with "expired" and the next list is a probe: consistent and
// paginated, due until one succeeds. Idle 0 turns the bound off. Every
// request goes through this layer, including the gate's refills, so a
// resource that returns after a long removal is not judged silent.
type Liveness struct {
	Inner toolscache.ListerWatcherWithContext
	Idle  time.Duration
	Hooks LivenessHooks

	lastLife atomic.Int64 // monotonic nanoseconds since monoBase of the last sign of life, +1; 0: never

	mu     sync.Mutex // guards probe, listed
	probe  bool       // a probe list is due (cleared by a successful list)
	listed bool       // a list succeeded since the last Forget: silence is measured
}

// monoBase anchors lastLife to the monotonic clock.
var monoBase = time.Now()

// alive records that the server showed life at t.
func (l *Liveness) alive(t time.Time) {
	n := int64(t.Sub(monoBase)) + 1
	for {
		old := l.lastLife.Load()
		if old >= n || l.lastLife.CompareAndSwap(old, n) {
			return
		}
	}
}

// idleLeft is how long the server may stay silent from now before a probe
// is due (<= 0: due now); a full Idle before the server first answered.
func (l *Liveness) idleLeft(now time.Time) time.Duration {
	last := l.lastLife.Load()
	if l.Idle <= 0 || last == 0 {
		return l.Idle
	}
	return l.Idle - (now.Sub(monoBase) - time.Duration(last-1))
}

// ProbeDue reports whether a probe list is due, marking it due if the
// server has been silent for Idle since a list succeeded.
func (l *Liveness) ProbeDue() bool {
	if l.Idle <= 0 {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.probe && l.listed && l.idleLeft(time.Now()) <= 0 {
		l.probe = true
	}
	return l.probe
}

// Forget stops measuring silence until the next successful list (the
// informer stopped asking the server: its resource is not served).
func (l *Liveness) Forget() {
	l.mu.Lock()
	l.listed, l.probe = false, false
	l.mu.Unlock()
}

func (l *Liveness) markProbe(where string) {
	l.mu.Lock()
	l.probe = true
	l.mu.Unlock()
	if l.Hooks.Silent != nil {
		l.Hooks.Silent(l.Idle, where)
	}
}

// ProbeError is the error that makes a reflector list: for a watch-list
// request, the watch-list fallback; else "expired".
func ProbeError(watchList bool) error {
	if watchList {
		return ErrProbeFallback
	}
	return reflectorseam.Expired("no sign of life from the server; relisting")
}

// PagedAtAnyVersion reports whether opts ask for the first page of a
// list at any resourceVersion ("0", what a reflector's first list sends
// with its page size). The API server answers such a list from its watch
// cache whole, ignoring the limit: one body of every object, which the
// client holds entire while it decodes it (a LIST sync's peak: the body
// beside the objects it becomes). List asks for it as a consistent list
// instead, which the server paginates — from its watch cache since
// Kubernetes 1.34 (ConsistentListFromCache, ListFromCacheSnapshot), from
// etcd before — so the client holds one page's body at a time. A
// consistent list is never older than one at "0".
func PagedAtAnyVersion(opts metav1.ListOptions) bool {
	return opts.Limit > 0 && opts.Continue == "" && opts.ResourceVersion == "0" &&
		(opts.ResourceVersionMatch == "" || opts.ResourceVersionMatch == metav1.ResourceVersionMatchNotOlderThan)
}

// List lists through Inner. fresh asks for a consistent list (no
// resourceVersion), as a relist after a removal does; a due probe is
// consistent and paginated; so is the first page of a list at any
// resourceVersion (PagedAtAnyVersion).
func (l *Liveness) List(ctx context.Context, opts metav1.ListOptions, fresh bool) (runtime.Object, error) {
	if opts.Continue != "" {
		// A later page of a paginated list: sent as it is.
		if opts.Limit == 0 {
			opts.Limit = ProbePageSize // the first page was a probe's
		}
		obj, err := l.Inner.ListWithContext(ctx, opts)
		l.report(err)
		l.request("list", err)
		return obj, err
	}
	probe := l.ProbeDue()
	if fresh || probe || PagedAtAnyVersion(opts) {
		opts.ResourceVersion, opts.ResourceVersionMatch = "", ""
	}
	if probe && opts.Limit == 0 {
		opts.Limit = ProbePageSize
	}
	obj, err := l.Inner.ListWithContext(ctx, opts)
	l.report(err)
	l.request("list", err)
	if err == nil {
		l.alive(time.Now())
		l.mu.Lock()
		l.probe, l.listed = false, true
		l.mu.Unlock()
	}
	return obj, err
}

// errIdleOpen: a watch request was not answered within the idle bound.
var errIdleOpen = errors.New("informerkit: watch request not answered within the idle bound")

// Watch opens a server watch and returns it as an unstarted Stream that
// ends when the server is silent for Idle. A watch-list request (opts
// asks for initial events) counts as a successful list once open. When
// a probe is due it returns ProbeError instead of asking the server.
func (l *Liveness) Watch(ctx context.Context, opts metav1.ListOptions) (*Stream, error) {
	watchList := reflectorseam.WatchListRequested(opts)
	if l.ProbeDue() {
		return nil, ProbeError(watchList)
	}
	w, release, err := l.open(ctx, opts)
	if errors.Is(err, errIdleOpen) {
		l.request("watch", err)
		l.markProbe("waiting for a watch request to be answered")
		return nil, ProbeError(watchList)
	}
	l.request("watch", err)
	if err != nil {
		l.report(err)
		return nil, err
	}
	l.alive(time.Now())
	if l.Hooks.WatchEnded != nil {
		release = l.watchEnded(ctx, release)
	}
	if watchList {
		l.mu.Lock()
		l.listed = true
		l.mu.Unlock()
	}
	s := NewStream(w, release)
	// A watch that opens says little: client-go's REST client turns a
	// watch that kept meeting EOF into an empty, closed watch. The first
	// event (or bookmark) is the server's answer.
	s.firstEvent = func() { l.report(nil) }
	if l.Idle > 0 {
		s.idle = l.Idle
		s.onIdle = func() { l.markProbe("on the open watch") }
		s.onEvent = l.alive
	}
	return s, nil
}

// open sends the watch request. With an idle bound, a request not
// answered before the server has been silent for that long is cancelled
// (errIdleOpen). release must be called once the stream is done.
func (l *Liveness) open(ctx context.Context, opts metav1.ListOptions) (w watch.Interface, release func(), err error) {
	if l.Idle <= 0 {
		w, err := l.Inner.WatchWithContext(ctx, opts)
		return w, func() {}, err
	}
	w, release, err = openWithin(ctx, max(l.idleLeft(time.Now()), 0), func(ctx context.Context) (watch.Interface, error) {
		return l.Inner.WatchWithContext(ctx, opts)
	})
	if errors.Is(err, errOpenUnanswered) {
		return nil, nil, errIdleOpen
	}
	return w, release, err
}

// report tells the Contact hook whether a request reached the server. An
// answer of any status is contact; a cancelled request says nothing.
func (l *Liveness) report(err error) {
	if l.Hooks.Contact == nil {
		return
	}
	if err == nil {
		l.Hooks.Contact(nil)
		return
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		l.Hooks.Contact(nil)
		return
	}
	if IsConnectionError(err) {
		l.Hooks.Contact(err)
	}
}

// IsConnectionError reports whether err says the server could not be
// reached or the connection broke (refused, reset, EOF, timeout, DNS,
// TLS) rather than answered. client-go's REST client wraps such errors
// in a *url.Error.
func IsConnectionError(err error) bool {
	if err == nil {
		return false
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return false
	}
	var urlErr *url.Error
	var netErr net.Error
	return errors.As(err, &urlErr) || errors.As(err, &netErr) ||
		utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err)
}

// request tells the Request hook how a request ended, unless it was
// cancelled.
func (l *Liveness) request(verb string, err error) {
	if l.Hooks.Request == nil || err != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return
	}
	l.Hooks.Request(verb, err)
}

// watchEnded wraps a stream's release so that the WatchEnded hook hears of
// a server watch that ended while ctx was live.
func (l *Liveness) watchEnded(ctx context.Context, release func()) func() {
	return func() {
		if ctx.Err() == nil {
			l.Hooks.WatchEnded()
		}
		release()
	}
}
