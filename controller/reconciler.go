package controller

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
)

// Request is what a worker hands a Reconciler: the key it took from the
// queue and what the informer's cache holds for it at that moment.
type Request struct {
	Key
	// Object is the cached object (*unstructured.Unstructured, or
	// *metav1.PartialObjectMetadata for MetadataOnly informers) when the
	// worker took the key. It is shared with the cache: never mutate it
	// (DeepCopy first). Nil means gone: the object was deleted, or its
	// resource stopped being served before the reconcile.
	Object runtime.Object
}

// Gone reports whether the object is no longer in the cache.
func (r Request) Gone() bool { return r.Object == nil }

// Reconciler brings the world in line with one object. It is called by
// the controller's workers: never concurrently for the same Key, but
// concurrently for different keys (Options.Workers).
//
// A nil error forgets the key (its back-off starts over). An error puts
// the key back after the rate limiter's delay, unless the key's resource
// has gone Removed meanwhile (then the key is dropped: a CRD that is gone
// answers 404 forever), the controller is shutting down, or
// Options.MaxRetries is reached. A panic is recovered and handled as an
// error (*ReconcilePanicError).
//
// ctx ends when the controller's drain bound runs out after Run's context
// ended (Options.DrainTimeout): a reconciler must return soon after.
type Reconciler interface {
	Reconcile(ctx context.Context, req Request) error
}

// ReconcilerFunc adapts a function to Reconciler.
type ReconcilerFunc func(ctx context.Context, req Request) error

// Reconcile calls f.
func (f ReconcilerFunc) Reconcile(ctx context.Context, req Request) error { return f(ctx, req) }
