package controllerruntime

import (
	"errors"
	"fmt"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ErrResourceNotServed is what Get and List answer while the kind's
// resource is not served by the API server (a CRD not installed yet, or
// deleted): errors.Is(err, ErrResourceNotServed), and errors.Is(err,
// dynamicinformer.ErrNotServed) too. The informer waits and syncs by
// itself once the resource is served. The error is a *NotServedError,
// which is also a NotFound (apierrors.IsNotFound, client.IgnoreNotFound),
// as the API server's answer to a read of a resource it does not serve
// is: a reconcile that runs after its kind's CRD was deleted ends.
var ErrResourceNotServed = errors.New("resource not served")

// ErrUnsupported is the kind of every *UnsupportedOptionError.
var ErrUnsupported = errors.New("not supported by the informerkit cache")

// NotServedError says which kind is not served, and why (Err: the
// informer's Status.Err, wrapping dynamicinformer.ErrNotServed).
type NotServedError struct {
	GVK schema.GroupVersionKind
	GVR schema.GroupVersionResource
	Err error
}

func (e *NotServedError) Error() string {
	if e.GVR.Empty() {
		return fmt.Sprintf("%s: %v: %v", e.GVK, ErrResourceNotServed, e.Err)
	}
	return fmt.Sprintf("%s (%s): %v: %v", e.GVK, e.GVR.GroupResource(), ErrResourceNotServed, e.Err)
}

// Status makes the error a NotFound (apierrors.APIStatus): no object of
// a kind that is not served exists.
func (e *NotServedError) Status() metav1.Status {
	gr := e.GVR.GroupResource()
	if gr.Empty() {
		gr = schema.GroupResource{Group: e.GVK.Group, Resource: e.GVK.Kind}
	}
	return metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusNotFound,
		Reason:  metav1.StatusReasonNotFound,
		Details: &metav1.StatusDetails{Group: gr.Group, Kind: gr.Resource},
		Message: e.Error(),
	}
}

// Unwrap returns ErrResourceNotServed and the informer's error.
func (e *NotServedError) Unwrap() []error { return []error{ErrResourceNotServed, e.Err} }

// LookupError is what Get, List, GetInformer and IndexField answer when
// the kind's resource could not be looked up: the caller's ctx ended (or
// discovery did not answer, and Options.Mapper does not know the kind)
// before discovery answered. It is a Timeout (apierrors.IsTimeout), as
// controller-runtime's answer to a read whose ctx ends before its
// informer has synced; errors.Is finds the cause (context.Canceled,
// context.DeadlineExceeded, the discovery error). Nothing is recorded:
// the kind is not taken as not served, and the next call looks it up
// again.
type LookupError struct {
	GVK schema.GroupVersionKind
	Err error
}

func (e *LookupError) Error() string {
	return fmt.Sprintf("looking up the resource of %s: %v", e.GVK, e.Err)
}

// Unwrap returns the cause.
func (e *LookupError) Unwrap() error { return e.Err }

// Status makes the error a Timeout (apierrors.APIStatus).
func (e *LookupError) Status() metav1.Status {
	return metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusGatewayTimeout,
		Reason:  metav1.StatusReasonTimeout,
		Details: &metav1.StatusDetails{Group: e.GVK.Group, Kind: e.GVK.Kind},
		Message: e.Error(),
	}
}

// ErrNamespaceNotCached is the kind of every *NamespaceNotCachedError.
var ErrNamespaceNotCached = errors.New("unknown namespace for the cache")

// NamespaceNotCachedError is what Get and List answer for a namespace the
// cache does not hold for the kind: DefaultNamespaces (or the kind's
// ByObject.Namespaces) names neither it nor NamespaceAll. Its message is
// controller-runtime's; errors.Is(err, ErrNamespaceNotCached). It is not
// a NotFound: the object may exist.
type NamespaceNotCachedError struct {
	GVK       schema.GroupVersionKind
	Namespace string
	// Name is the object's, for a Get ("" for a List).
	Name string
	List bool
}

func (e *NamespaceNotCachedError) Error() string {
	if e.List {
		return fmt.Sprintf("unable to list: %v because of %v", e.Namespace, ErrNamespaceNotCached)
	}
	return fmt.Sprintf("unable to get: %s/%s because of %v", e.Namespace, e.Name, ErrNamespaceNotCached)
}

// Unwrap returns ErrNamespaceNotCached.
func (e *NamespaceNotCachedError) Unwrap() error { return ErrNamespaceNotCached }

// UnsupportedOptionError names a cache.Options field, a value or a call
// this cache does not implement (errors.Is ErrUnsupported). NewCache
// returns it for options it cannot honour rather than ignoring them.
type UnsupportedOptionError struct {
	Option string // e.g. "Options.NewInformer", "DefaultNamespaces[\"a\"]"
	Reason string
}

func (e *UnsupportedOptionError) Error() string {
	return fmt.Sprintf("informerkit controller-runtime cache: %s: %v: %s", e.Option, ErrUnsupported, e.Reason)
}

// Unwrap returns ErrUnsupported.
func (e *UnsupportedOptionError) Unwrap() error { return ErrUnsupported }

func unsupported(option, reason string) error {
	return &UnsupportedOptionError{Option: option, Reason: reason}
}
