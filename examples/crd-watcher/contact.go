package main

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/rest"

	"github.com/informerkit/informerkit/dynamicinformer"
)

// endpoint is the API server the watcher talks to, in the user's words:
// the server URL and the kubeconfig context and user that lead to it.
type endpoint struct {
	Host    string
	Context string // "" in-cluster or in demo mode
	User    string // the kubeconfig user; " as X" is added when it impersonates another user, X (userText)
}

func (e endpoint) String() string {
	s := e.Host
	switch {
	case e.Context != "" && e.User != "":
		s += fmt.Sprintf(" (context %q, user %q)", e.Context, e.User)
	case e.Context != "":
		s += fmt.Sprintf(" (context %q)", e.Context)
	case e.User != "":
		s += fmt.Sprintf(" (%s)", e.User)
	}
	return s
}

// errNotKubernetes: the server answered, but not as a Kubernetes API
// server does (GET /version gave no version).
var errNotKubernetes = errors.New("not a Kubernetes API server")

// probeServer asks the server for its version (GET /version: cheap, and
// any authenticated user may read it) and waits at most timeout.
func probeServer(ctx context.Context, rc rest.Interface, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	body, err := rc.Get().AbsPath("/version").Do(ctx).Raw()
	if err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("%w (GET /version: 404 Not Found)", errNotKubernetes)
		}
		return err
	}
	var info version.Info
	if err := json.Unmarshal(body, &info); err != nil || info.GitVersion == "" {
		return fmt.Errorf("%w (GET /version answered without a version)", errNotKubernetes)
	}
	return nil
}

// explain turns an error from talking to the server into one sentence in
// the user's terms: the server, context and user, and what went wrong
// (refused, no answer within --request-timeout, credentials rejected, not
// a Kubernetes server), without client library internals.
func explain(ep endpoint, err error, timeout time.Duration) string {
	var status apierrors.APIStatus
	var dnsErr *net.DNSError
	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var certErr x509.CertificateInvalidError
	switch {
	case errors.Is(err, errNotKubernetes):
		return fmt.Sprintf("the server at %s does not look like a Kubernetes API server: %v", ep, err)
	case apierrors.IsUnauthorized(err):
		return fmt.Sprintf("the API server at %s rejected the credentials (401 Unauthorized): check the user's token or certificate", ep)
	case errors.As(err, &status) && status.Status().Message != "":
		return fmt.Sprintf("the API server at %s answered %d: %s", ep, status.Status().Code, status.Status().Message)
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		return fmt.Sprintf("no answer from the API server at %s within %s (--request-timeout)", ep, timeout)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Sprintf("cannot reach the API server at %s: connection refused", ep)
	case errors.As(err, &dnsErr):
		return fmt.Sprintf("cannot reach the API server at %s: host %q not found", ep, dnsErr.Name)
	case errors.As(err, &unknownCA), errors.As(err, &hostErr), errors.As(err, &certErr):
		return fmt.Sprintf("cannot reach the API server at %s: its TLS certificate is not trusted: %v", ep, innermost(err))
	}
	return fmt.Sprintf("cannot reach the API server at %s: %v", ep, innermost(err))
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// innermost drops the wrappers of a transport error that repeat what
// explain already says or are client internals: an informer's
// InformerError (its GVR and kind), the URL and query
// (`Get "https://…/version?timeout=32s": `) and the dialled address
// (`dial tcp …: `). The library words a lost contact the same way in a
// Status.Reason but has no function for it: this is the watcher's one
// copy.
func innermost(err error) error {
	for {
		var ie *dynamicinformer.InformerError
		var ue *url.Error
		var oe *net.OpError
		switch {
		case errors.As(err, &ie) && ie.Err != nil:
			err = ie.Err
		case errors.As(err, &ue) && ue.Err != nil:
			err = ue.Err
		case errors.As(err, &oe) && oe.Err != nil:
			err = oe.Err
		default:
			return err
		}
	}
}

// contactMonitor checks the API server every interval, independently of
// the informers, so that a server that goes away is reported within
// seconds even while every informer's watch sits idle. It reports each
// change of contact (lost, restored) to onChange, from its own goroutine,
// in order.
type contactMonitor struct {
	probe    func(ctx context.Context) error
	interval time.Duration
	onChange func(err error, down time.Duration)

	mu   sync.Mutex // guards err, last
	err  error      // nil while in contact
	last time.Time  // last successful probe
}

// contactInterval is how often the monitor probes the server.
const contactInterval = 2 * time.Second

func newContactMonitor(probe func(ctx context.Context) error, interval time.Duration, onChange func(err error, down time.Duration)) *contactMonitor {
	return &contactMonitor{probe: probe, interval: interval, onChange: onChange, last: time.Now()}
}

// run probes until ctx ends.
func (m *contactMonitor) run(ctx context.Context) {
	t := time.NewTicker(m.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := m.probe(ctx)
		if ctx.Err() != nil {
			return
		}
		m.record(err)
	}
}

func (m *contactMonitor) record(err error) {
	m.mu.Lock()
	was := m.err
	now := time.Now()
	var down time.Duration
	switch {
	case err == nil:
		if was != nil {
			// From the last contact, not the first failed probe: a probe
			// into a black hole fails only at its timeout.
			down = now.Sub(m.last)
		}
		m.last = now
	}
	m.err = err
	m.mu.Unlock()
	if (was == nil) != (err == nil) && m.onChange != nil {
		m.onChange(err, down)
	}
}

// state returns the last successful contact and the current error (nil
// while in contact).
func (m *contactMonitor) state() (last time.Time, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last, m.err
}

// libraryContact is what the library reports about one informer's contact
// with the API server: the last time the server answered it and the error
// while it cannot reach the server (nil otherwise). The watcher's own
// contactMonitor checks the server too (it also covers the time before
// any informer exists).
func libraryContact(st dynamicinformer.Status) (last time.Time, err error) {
	return st.LastContact, st.ContactErr
}
