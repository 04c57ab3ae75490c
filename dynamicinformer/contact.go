package dynamicinformer

import (
	"context"
	"errors"
	"fmt"
	"net/http"
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
//     not returned within slowRequest and then, while contact is lost,
//     until the server answers: one create of a SelfSubjectReview, which
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
type contactMonitor struct {
	probe func(ctx context.Context) error // nil: no probe (tests)
	wake  chan struct{}

	mu       sync.Mutex // guards lost, onChange
	lost     error
	onChange func(error)
}

// Probe timings.
const (
	slowRequest     = time.Second      // a request not returned by then asks for a probe
	probeTimeout    = 10 * time.Second // a probe not answered by then: no contact
	probeQuiet      = time.Second      // after an answered probe, the next waits this long
	probeRetryFirst = time.Second      // while contact is lost, probes back off from this ...
	probeRetryMax   = 8 * time.Second  // ... to this
)

// selfSubjectReviews is the resource the probe creates.
var selfSubjectReviews = schema.GroupVersionResource{Group: "authentication.k8s.io", Version: "v1", Resource: "selfsubjectreviews"}

func newContactMonitor() *contactMonitor { return &contactMonitor{wake: make(chan struct{}, 1)} }

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
	m.mu.Lock()
	changed := (m.lost == nil) != (err == nil)
	m.lost = err
	f := m.onChange
	m.mu.Unlock()
	if changed && f != nil {
		f(err)
	}
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
// request that has not returned within slowRequest asks for a probe. A
// watch that opens is not taken as contact: client-go returns an empty
// watch, without error, when it never reached the server.
func (m *contactMonitor) funcs(f listwatch.Funcs) listwatch.Funcs {
	return listwatch.Funcs{
		List: func(ctx context.Context, ns string, opts metav1.ListOptions) (runtime.Object, error) {
			t := time.AfterFunc(slowRequest, m.poke)
			obj, err := f.List(ctx, ns, opts)
			t.Stop()
			m.observeResult(err)
			return obj, err
		},
		Watch: func(ctx context.Context, ns string, opts metav1.ListOptions) (watch.Interface, error) {
			t := time.AfterFunc(slowRequest, m.poke)
			w, err := f.Watch(ctx, ns, opts)
			t.Stop()
			if err != nil {
				m.observeResult(err)
			}
			return w, err
		},
	}
}

// run sends probes when asked, and while contact is lost, until ctx ends.
func (m *contactMonitor) run(ctx context.Context) {
	if m.probe == nil {
		return
	}
	retry := probeRetryFirst
	var again *time.Timer
	defer func() {
		if again != nil {
			again.Stop()
		}
	}()
	for {
		var due <-chan time.Time
		if again != nil {
			due = again.C
		}
		select {
		case <-ctx.Done():
			return
		case <-m.wake:
		case <-due:
		}
		if again != nil {
			again.Stop()
			again = nil
		}
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
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
			m.observe(fmt.Errorf("no answer to a probe within %v: %w", probeTimeout, err))
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
