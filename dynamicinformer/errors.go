package dynamicinformer

import (
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/informerkit/informerkit/dynamicinformer/internal/access"
	"github.com/informerkit/informerkit/dynamicinformer/internal/listwatch"
	"github.com/informerkit/informerkit/dynamicinformer/internal/presence"
)

// Errors a caller can test with errors.Is. Status.Err and the errors
// returned by ForName wrap them; where the API server answered, the
// *apierrors.StatusError is wrapped too (errors.As works for it).
var (
	// ErrForbidden: the API server refused list or watch (RBAC: 403) or
	// rejected the credentials (401), or the access check
	// (WithAccessCheck) found them not allowed: then the error names the
	// missing verbs and namespaces and wraps an error that is not an
	// *apierrors.StatusError (no request was refused). The server's
	// answer, where there is one, is wrapped (errors.As
	// *apierrors.StatusError gives the code).
	ErrForbidden = errors.New("forbidden")
	// ErrNoNamespaces: a WithPermittedNamespaces informer's user may not
	// list namespaces and no candidate namespaces were given, so there is
	// nowhere to ask permission in: the informer is Failed, its Err wraps
	// both ErrForbidden and ErrNoNamespaces (and the server's 403). Give
	// the candidates: WithPermittedNamespaces(ns...).
	ErrNoNamespaces = access.ErrNoNamespaces
	// ErrNotServed: the resource is not served (yet, or any more); the
	// Wait methods return it for a Removed informer that had not caught
	// up.
	ErrNotServed = errors.New("resource not served")
	// ErrInvalid: an option or argument no informer can honour; the error
	// names it: a label or field selector that does not parse or that the
	// server rejected, a Projection that cannot be built (a field path
	// that does not parse, Compact with MetadataOnly), a WithTransform
	// transform that is a projection only WithProjection can take
	// (*ProjectionTransformError), a namespace asked
	// of a cluster-scoped resource, a shard source with several
	// namespaces, a nil event handler, a client the factory lacks (a
	// projection other than MetadataOnly on a factory without a dynamic
	// client), ForName or subscription.New without a resolver
	// (Options.Resolver), a resourceVersion the Wait methods cannot
	// compare. No retry cures it.
	ErrInvalid = presence.ErrInvalid
	// ErrOptionConflict: a handle asked a shared informer for what it
	// cannot honour, or asked a handle's Informer() for a setting the
	// factory owns (transform, watch error handler); the error names the
	// option. A handle that cannot join is Failed; the shared informer
	// and its other handles are unaffected.
	ErrOptionConflict = errors.New("option conflicts with the shared informer")
	// ErrStopped: the informer does not run for this caller any more: its
	// handle was released (adding a handler, the Wait methods) or the
	// factory was shut down (the Status of a handle obtained after
	// Shutdown, ForName and subscription.New after Shutdown).
	ErrStopped = errors.New("informer stopped")
	// ErrStoreRead: the API server cannot read some objects of the resource
	// from its storage (stored bytes that do not decode or decrypt), so it
	// fails every LIST of the resource (500, reason StorageReadError) and
	// no informer of it can resync until those objects are removed. The
	// informer keeps the objects it had, is Failed, retries at the
	// reflector's backoff and recovers by itself. See docs/DESIGN.md.
	ErrStoreRead = errors.New("server cannot read objects from its storage")
	// ErrNoContact: the API server cannot be reached (connection refused,
	// reset, timed out, DNS, TLS). It is the Kind of Status.ContactErr.
	ErrNoContact = errors.New("no contact with the API server")
	// ErrWatch: any other error the reflector saw (decode errors, server
	// errors, connection failures); the cause is wrapped.
	ErrWatch = errors.New("list/watch error")
)

// errNoResolver is the error of what (ForName, subscription.New) on a factory
// without a resolver.
func errNoResolver(what string) error {
	return fmt.Errorf("%w: %s needs a discovery resolver: set Options.Resolver (NewForConfig builds one)", ErrInvalid, what)
}

// classify maps an error seen by list or watch to one of the package's
// sentinel errors, keeping the cause.
func classify(gvr schema.GroupVersionResource, err error) error {
	if err == nil {
		return nil
	}
	var kind error
	switch {
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err), errors.Is(err, access.ErrDenied):
		kind = ErrForbidden
	case apierrors.IsNotFound(err):
		kind = ErrNotServed
	case apierrors.IsStoreReadError(err):
		kind = ErrStoreRead
	case apierrors.IsBadRequest(err) || apierrors.IsInvalid(err):
		kind = ErrInvalid
	case listwatch.IsConnectionError(err):
		kind = ErrNoContact
	default:
		kind = ErrWatch
	}
	return &InformerError{GVR: gvr, Kind: kind, Err: err}
}

// InformerError is the error type of Status.Err: Kind is one of the
// package's sentinel errors (errors.Is matches it), Err is the cause
// (errors.As reaches an *apierrors.StatusError through it).
type InformerError struct {
	GVR  schema.GroupVersionResource
	Kind error
	Err  error
}

// Error names the resource as kubectl takes it (widgets.v1.example.com),
// then the kind and the cause.
func (e *InformerError) Error() string {
	return fmt.Sprintf("%s: %v: %v", presence.Qualified(e.GVR), e.Kind, e.Err)
}

// Unwrap returns both the kind and the cause.
func (e *InformerError) Unwrap() []error { return []error{e.Kind, e.Err} }
