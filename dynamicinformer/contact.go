package dynamicinformer

import (
	"context"
	"errors"
	"net/http"
	"sync"
)

// contactMonitor watches every request a factory built by NewForConfig
// sends, at the transport: a request that gets no response (refused,
// reset, EOF, timeout, TLS) means the API server cannot be reached; any
// response means it can. It exists because client-go's REST client hides
// these errors from its callers for a while: it retries a GET that met EOF
// or a reset up to 10 times, a second apart, and a watch that exhausts
// those retries returns an empty watch, not an error — a reflector behind
// a load balancer whose server is gone would re-watch quietly forever.
// Transitions are reported to onChange (lost: the error; restored: nil),
// from the goroutine that sent the request; they must not block.
type contactMonitor struct {
	mu       sync.Mutex // guards lost, onChange
	lost     error
	onChange func(error)
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

// wrap is a rest.Config WrapTransport function.
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
