package controller

import (
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"

	"github.com/informerkit/informerkit/subscription"
)

// Options configure a Controller. The zero value is usable; every default
// is set in defaults().
type Options struct {
	// Workers is the number of goroutines calling Reconcile. Default 1.
	Workers int
	// RateLimiter spaces the retries of a key whose reconcile failed.
	// Nil: client-go's DefaultTypedControllerRateLimiter (per key
	// exponential from 5 ms to 1000 s, and 10 retries/s with a burst of
	// 100 overall).
	RateLimiter workqueue.TypedRateLimiter[Key]
	// MaxRetries drops a key after that many consecutive failed
	// reconciles (counted in Stats.GaveUp). 0: retry until it succeeds.
	MaxRetries int
	// DrainTimeout bounds shutdown: after Run's context ends, reconciles
	// already running get this long to finish before their context is
	// cancelled and Run returns a *DrainTimeoutError. Default 30 s.
	DrainTimeout time.Duration
	// Name names the work queue for client-go's workqueue metrics
	// (workqueue.SetProvider). Empty: no queue metrics.
	Name string
	// Filter, if set, is asked about every event before its key is
	// queued; false skips the event. It runs on the informer's delivery
	// goroutine: keep it fast. A panic in it is recovered, the event
	// skipped and counted (Stats.HandlerPanics).
	Filter func(subscription.Event) bool
	// OnRemoved, if set, is called once each time a watched resource goes
	// Removed (its CRD deleted, its version no longer served), after its
	// queued keys stopped being reconciled: the place to forget what the
	// controller held about that resource's objects. Calls come from one
	// controller goroutine, in order; Run waits for the last one.
	OnRemoved func(gvr schema.GroupVersionResource)
	// Logger receives the controller's few log lines (V(0): the first
	// panic of a kind; V(1): give-ups, removals; V(4): each retry).
	// Default: discard.
	Logger logr.Logger
}

// rateLimiter is the queue's rate limiter: Options.RateLimiter, or
// client-go's default controller rate limiter.
func (o Options) rateLimiter(resources *resourceTable) workqueue.TypedRateLimiter[item] {
	if o.RateLimiter != nil {
		return keyLimiter{l: o.RateLimiter, resources: resources}
	}
	return workqueue.DefaultTypedControllerRateLimiter[item]()
}

// syncPollInterval is how often Run checks that its sources have synced
// before it starts the workers.
// statusPollInterval is how often it reads the Status of a source that
// has not synced, to tell a resource that is not served from one that is
// still listing.
const (
	syncPollInterval   = 10 * time.Millisecond
	statusPollInterval = 250 * time.Millisecond
)

func (o Options) defaults() Options {
	if o.Workers <= 0 {
		o.Workers = 1
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = 30 * time.Second
	}
	if o.MaxRetries < 0 {
		o.MaxRetries = 0
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
	return o
}
