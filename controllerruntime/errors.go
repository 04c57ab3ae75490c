package controllerruntime

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ErrResourceNotServed is what Get and List answer while the kind's
// resource is not served by the API server (a CRD not installed yet, or
// deleted): errors.Is(err, ErrResourceNotServed), and errors.Is(err,
// dynamicinformer.ErrNotServed) too. The informer waits and syncs by
// itself once the resource is served. The error is a *NotServedError.
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
	return fmt.Sprintf("%s (%s): %v: %v", e.GVK, e.GVR.GroupResource(), ErrResourceNotServed, e.Err)
}

// Unwrap returns ErrResourceNotServed and the informer's error.
func (e *NotServedError) Unwrap() []error { return []error{ErrResourceNotServed, e.Err} }

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
