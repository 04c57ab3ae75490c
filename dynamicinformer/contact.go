package dynamicinformer

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/informerkit/informerkit/dynamicinformer/internal/listwatch"
)

// Contact monitoring: whether the factory's API server can be reached.
// Every factory has one contactMonitor, fed by
//
//   - its informers' requests (contactMonitor.funcs): a list that is
//     answered (any status) is contact, a list or watch that fails with a
//     connection error is not;
//   - a probe (contactMonitor.run), sent when a list or watch request has
//     not returned within slowRequest, when nothing has been answered for
//     Options.ContactCheckInterval (the heartbeat: a server that stops
//     answering while every watch sits idle, black-holed or frozen, is
//     found within that interval and the probe's timeout), and then,
//     while contact is lost, until the server answers: one create of a
//     SelfSubjectReview, which
//     every API server answers to every user (even a refusal is an
//     answer), stores nothing, and which client-go's REST client does not
//     retry (a request with a body never is);
//   - for a factory from NewForConfig, also every request at the
//     transport (contactMonitor.wrap).
//
// The probe exists because client-go's REST client hides a lost server
// from its callers: it retries a GET that met EOF or a reset up to 10
// times, a second apart, and a watch that exhausts those retries returns
// an empty watch, not an error — so a reflector behind a proxy or load
// balancer whose server is gone re-watches quietly, and only a transport
// wrapper (which a factory built on clients does not have) would see it.
// A request that is still waiting after slowRequest is the sign: a
// server answers a watch at once, and a list of a healthy server costs one
// probe. Transitions (lost: the error; restored: nil) go to onChange.
//
// While contact is lost (and there is a probe to find it again), the
// informers' requests wait for it instead of failing (contactMonitor.funcs):
// a request that meets a connection error, or that client-go gave up on,
// waits and is sent again once a probe is answered. So an outage costs no
// failed list, no relist and no growth of the reflector's back-off (which
// would delay the informer by up to 30 s after the server is back), and
// what changed meanwhile arrives as soon as contact is regained.
type contactMonitor struct {
	probe func(ctx context.Context) error // nil: no probe (tests)
	wake  chan struct{}
	// every is the heartbeat: a probe when nothing was answered for this
	// long (<= 0: none); timeout bounds a probe.
	every, timeout time.Duration

	mu       sync.Mutex // guards lost, since, answered, changed, onChange
	lost     error
	since    time.Time     // when contact was last lost or regained
	answered time.Time     // when a request or probe was last answered
	changed  chan struct{} // closed (and replaced) at each transition
	onChange func(error)
}

// Probe timings.
const (
	slowRequest     = time.Second     // a request not returned by then asks for a probe
	probeQuiet      = time.Second     // after an answered probe, the next waits this long
	probeRetryFirst = time.Second     // while contact is lost, probes back off from this ...
	probeRetryMax   = 2 * time.Second // ... to this: contact regained is seen within it
	// The defaults of Options.ContactCheckInterval and ContactCheckTimeout.
	defaultContactCheckInterval = 5 * time.Second
	defaultContactCheckTimeout  = 10 * time.Second
)

// selfSubjectReviews is the resource the probe creates.
var selfSubjectReviews = schema.GroupVersionResource{Group: "authentication.k8s.io", Version: "v1", Resource: "selfsubjectreviews"}

func newContactMonitor() *contactMonitor {
	return &contactMonitor{wake: make(chan struct{}, 1), timeout: defaultContactCheckTimeout, changed: make(chan struct{})}
}

// configure sets the heartbeat and the probe timeout from the options
// (before the factory starts).
func (m *contactMonitor) configure(o Options) {
	m.every, m.timeout = o.ContactCheckInterval, o.ContactCheckTimeout
	if m.every == 0 {
		m.every = defaultContactCheckInterval
	}
	if m.timeout <= 0 {
		m.timeout = defaultContactCheckTimeout
	}
}

// probeThrough makes the probe go through client (nil: no probe). It is
// set before the factory starts.
func (m *contactMonitor) probeThrough(client dynamic.Interface) {
	if client == nil {
		m.probe = nil
		return
	}
	m.probe = func(ctx context.Context) error {
		review := &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview",
		}}
		_, err := client.Resource(selfSubjectReviews).Create(ctx, review, metav1.CreateOptions{})
		return err
	}
}

// setOnChange sets the transition callback (once, before requests flow).
func (m *contactMonitor) setOnChange(f func(error)) {
	m.mu.Lock()
	m.onChange = f
	m.mu.Unlock()
}

func (m *contactMonitor) observe(err error) {
	now := time.Now()
	m.mu.Lock()
	changed := (m.lost == nil) != (err == nil)
	m.lost = err
	if err == nil {
		m.answered = now
	}
	if changed {
		m.since = now
		close(m.changed)
		m.changed = make(chan struct{})
	}
	f := m.onChange
	m.mu.Unlock()
	if changed && err != nil {
		// Lost by a request's error: probe, so that the retries start (and
		// a loss one request alone saw is corrected by the next answer).
		m.poke()
	}
	if changed && f != nil {
		f(err)
	}
}

// state is the error that lost contact (nil: contact) and when contact
// was last lost or regained (zero: never).
func (m *contactMonitor) state() (error, time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lost, m.since
}

// waitContact returns once contact is not known to be lost (at once
// without a probe, which alone could find it again), or ctx's error. It
// asks for a probe while it waits.
func (m *contactMonitor) waitContact(ctx context.Context) error {
	if m.probe == nil {
		return nil
	}
	for {
		m.mu.Lock()
		lost, changed := m.lost, m.changed
		m.mu.Unlock()
		if lost == nil {
			return nil
		}
		m.poke()
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// waits reports whether a request that ended with err waits for contact
// and is sent again: a connection error while contact is lost, with a
// probe to find it again.
func (m *contactMonitor) waits(ctx context.Context, err error) bool {
	return m.probe != nil && ctx.Err() == nil && listwatch.IsConnectionError(err) && m.isLost()
}

func (m *contactMonitor) isLost() bool { return m.lostErr() != nil }

// lostErr is the error that lost contact (nil: contact, as far as known).
func (m *contactMonitor) lostErr() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lost
}

// tellContact gives an informer that starts the contact the factory has
// now. onChange reports only transitions, to the informers there at the
// time: an informer started while contact is lost would otherwise hear
// nothing until it comes back — behind a black hole its own requests
// never end, and the probe finding the server still gone changes nothing
// — and stay Syncing with no ContactErr for as long as the outage lasts.
// Contact regained meanwhile is broadcast to e too (it is registered
// before it starts), perhaps before the lost state given here: the state
// is read again after.
func (f *Factory) tellContact(e *entry) {
	err := f.contact.lostErr()
	if err == nil {
		return
	}
	e.contact(err)
	if f.contact.lostErr() == nil {
		e.contact(nil)
	}
}

// observeResult records what a finished request says of the server: an
// answer (nil or a status error) is contact, a connection error is not;
// a cancelled request and other errors say nothing.
func (m *contactMonitor) observeResult(err error) {
	var status apierrors.APIStatus
	switch {
	case err == nil || errors.As(err, &status):
		m.observe(nil)
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
	case listwatch.IsConnectionError(err):
		m.observe(err)
	}
}

// poke asks for a probe (coalesced).
func (m *contactMonitor) poke() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// funcs wraps an informer's requests: their results are observed, and a
// request that has not returned within slowRequest asks for a probe.
// While contact is lost a request waits for it before it is sent, and a
// request that fails for want of it (a connection error; for a watch,
// also client-go's empty watch) waits and is sent again (see
// contactMonitor). A watch that opens is not taken as contact: client-go
// returns an empty watch, without error, when it never reached the
// server. retried, if set, is told of each request that failed and is
// sent again (for metrics: the informer's own hooks see only the last).
func (m *contactMonitor) funcs(f listwatch.Funcs, retried func(verb string, err error)) listwatch.Funcs {
	again := func(verb string, err error) {
		if retried != nil {
			retried(verb, err)
		}
	}
	return listwatch.Funcs{
		List: func(ctx context.Context, ns string, opts metav1.ListOptions) (runtime.Object, error) {
			return throughContact(ctx, m, "list", again, func() (runtime.Object, error) { return f.List(ctx, ns, opts) }, nil)
		},
		Watch: func(ctx context.Context, ns string, opts metav1.ListOptions) (watch.Interface, error) {
			// client-go retried a lost server until it gave up and answered
			// an empty watch, which the reflector would take for a broken
			// watch and relist after a back-off.
			return throughContact(ctx, m, "watch", again, func() (watch.Interface, error) { return f.Watch(ctx, ns, opts) }, isEmptyWatch)
		},
	}
}

// throughContact sends one request (send) as contactMonitor.funcs says:
// it waits for contact first, asks for a probe if the request is slow,
// observes the result, and sends it again (telling again) when it failed
// for want of contact. gaveUp, if set, marks a request that opened a
// stream: its success says nothing of the server (only its failure is
// observed), and a result gaveUp reports is sent again while contact is
// lost.
func throughContact[T any](ctx context.Context, m *contactMonitor, verb string, again func(string, error), send func() (T, error), gaveUp func(T) bool) (T, error) {
	for {
		if err := m.waitContact(ctx); err != nil {
			var zero T
			return zero, err
		}
		t := time.AfterFunc(slowRequest, m.poke)
		v, err := send()
		t.Stop()
		if err != nil || gaveUp == nil {
			m.observeResult(err)
		}
		switch {
		case err != nil && m.waits(ctx, err):
			again(verb, err)
		case err == nil && gaveUp != nil && gaveUp(v) && m.probe != nil && ctx.Err() == nil && m.isLost():
		default:
			return v, err
		}
	}
}

// emptyWatchType is the type of client-go's watch.NewEmptyWatch, what its
// REST client answers for a watch whose retries met only EOF or resets.
var emptyWatchType = reflect.TypeOf(watch.NewEmptyWatch())

func isEmptyWatch(w watch.Interface) bool { return reflect.TypeOf(w) == emptyWatchType }

// run sends probes when asked, and while contact is lost, until ctx ends.
func (m *contactMonitor) run(ctx context.Context) {
	if m.probe == nil {
		return
	}
	m.mu.Lock()
	if m.answered.IsZero() {
		m.answered = time.Now() // the heartbeat counts from the start
	}
	m.mu.Unlock()
	retry := probeRetryFirst
	var again *time.Timer
	beat := time.NewTimer(time.Hour)
	defer func() {
		if again != nil {
			again.Stop()
		}
		beat.Stop()
	}()
	for {
		var due, heartbeat <-chan time.Time
		if again != nil {
			due = again.C
		} else if wait, ok := m.heartbeatIn(time.Now()); ok {
			beat.Reset(wait)
			heartbeat = beat.C
		}
		select {
		case <-ctx.Done():
			return
		case <-m.wake:
		case <-due:
		case <-heartbeat:
			if wait, ok := m.heartbeatIn(time.Now()); !ok || wait > 0 {
				continue // answered meanwhile
			}
		}
		beat.Stop()
		if again != nil {
			again.Stop()
			again = nil
		}
		pctx, cancel := context.WithTimeout(ctx, m.timeout)
		err := m.probe(pctx)
		timedOut := pctx.Err() != nil
		cancel()
		if ctx.Err() != nil {
			return
		}
		var status apierrors.APIStatus
		switch {
		case err == nil || errors.As(err, &status):
			m.observe(nil)
			retry = probeRetryFirst
			// Requests that were slow meanwhile asked again: one probe for
			// all of them, after a pause.
			select {
			case <-ctx.Done():
				return
			case <-time.After(probeQuiet):
			}
			continue
		case timedOut:
			m.observe(fmt.Errorf("no answer to a probe within %v: %w", m.timeout, err))
		case listwatch.IsConnectionError(err):
			m.observe(err)
		default:
			// Neither an answer nor a connection error (a client that
			// cannot build the request): no verdict, but while contact is
			// lost keep asking.
			if !m.isLost() {
				continue
			}
		}
		again = time.NewTimer(retry)
		retry = min(2*retry, probeRetryMax)
	}
}

// heartbeatIn is how long from now until the heartbeat's probe is due
// (<= 0: due), and false when there is no heartbeat (none configured, or
// contact is lost: the retries probe then).
func (m *contactMonitor) heartbeatIn(now time.Time) (time.Duration, bool) {
	if m.every <= 0 {
		return 0, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lost != nil {
		return 0, false
	}
	return m.answered.Add(m.every).Sub(now), true
}

// wrap is a rest.Config WrapTransport function: it observes every request
// a factory from NewForConfig sends (a request that gets no response
// means no contact; any response means contact).
func (m *contactMonitor) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		switch {
		case err == nil:
			m.observe(nil)
		case req.Context().Err() != nil || errors.Is(err, context.Canceled):
			// The caller gave up: says nothing of the server.
		default:
			m.observe(err)
		}
		return resp, err
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
