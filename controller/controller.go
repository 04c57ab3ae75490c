package controller

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/informerkit/informerkit/discoveryresolver"
	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/eventhandler"
	"github.com/informerkit/informerkit/subscription"
)

// Controller feeds the events of any number of informerkit informers and
// subscriptions into one rate-limited work queue (client-go's typed
// workqueue) keyed by Key, and runs Options.Workers workers that call the
// Reconciler with the key and the object cached for it.
//
// Guarantees:
//   - A key is never reconciled by two workers at once; keys queued again
//     while queued are reconciled once.
//   - After the informers have synced, every cached object is reconciled
//     at least once, and every add, update and delete queues its key.
//   - When a watched resource goes Removed (its CRD deleted), keys of it
//     that are queued or waiting out a back-off are dropped when a worker
//     takes them, and a failed reconcile of it is not retried. When it is
//     served again its informer relists and each object is queued once
//     (by its add event).
//   - Panics in Reconcile and on the event path are recovered and counted
//     (Stats); they never end a goroutine or the process.
//   - Run returns only after every goroutine it started has ended, except
//     reconciles still running at the drain bound (see Run).
//
// Watch and Subscribe are called before Run; a Controller runs once.
// Stats is safe for concurrent use at any time.
type Controller struct {
	factory *dynamicinformer.Factory
	rec     Reconciler
	opts    Options
	log     logr.Logger

	resources *resourceTable
	counters  counters

	mu      sync.Mutex // guards handles, subs, started, slots
	handles []*handleSource
	subs    []*subscriptionSource
	started bool
	slots   []*workerSlot // one per worker, set by Run

	// queue is set by Run before any event handler is registered and not
	// changed after.
	queue workqueue.TypedRateLimitingInterface[item]
	// stopping is closed when Run's context ends: keys taken from the
	// queue after that are dropped, failures are not retried. stopped is
	// set just before, for the workers' fast check.
	stopping chan struct{}
	stopped  atomic.Bool

	removedMu    sync.Mutex // guards removedQ
	removedQ     []schema.GroupVersionResource
	removedWake  chan struct{}
	firstPanicMu sync.Mutex // guards loggedPanic
	loggedPanic  map[string]bool
}

// handleSource is an informer handle given to Watch.
type handleSource struct {
	h   *dynamicinformer.InformerHandle
	reg toolscache.ResourceEventHandlerRegistration
	// cur is the resource of h's current GVR; touched only by h's event
	// delivery goroutine (client-go delivers a handler's events one at a
	// time).
	cur *resource
}

// subscriptionSource is a filter given to Subscribe; Run subscribes.
type subscriptionSource struct {
	filter discoveryresolver.Filter
	opts   []dynamicinformer.ResourceOption
	sub    *subscription.Subscription

	mu sync.Mutex // guards listers
	// listers holds one handle per GVR the subscription delivered, sharing
	// the subscription's informer (same options), to read its cache.
	listers map[schema.GroupVersionResource]*dynamicinformer.InformerHandle
}

// New returns a controller over factory's informers calling r. Nothing
// runs until Run.
func New(factory *dynamicinformer.Factory, r Reconciler, opts Options) (*Controller, error) {
	if factory == nil {
		return nil, fmt.Errorf("%w: informer factory", ErrNilArgument)
	}
	if r == nil {
		return nil, fmt.Errorf("%w: reconciler", ErrNilArgument)
	}
	opts = opts.defaults()
	return &Controller{
		factory:     factory,
		rec:         r,
		opts:        opts,
		log:         opts.Logger,
		resources:   newResourceTable(),
		stopping:    make(chan struct{}),
		removedWake: make(chan struct{}, 1),
		loggedPanic: map[string]bool{},
	}, nil
}

// Watch adds an informer (from the controller's factory: ForResource or
// ForName) whose events queue keys. The controller does not release it.
// It fails with ErrStarted once Run has been called, and ErrNilArgument for
// a nil handle.
func (c *Controller) Watch(h *dynamicinformer.InformerHandle) error {
	if h == nil {
		return fmt.Errorf("%w: informer handle", ErrNilArgument)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return ErrStarted
	}
	c.handles = append(c.handles, &handleSource{h: h})
	return nil
}

// Subscribe adds every resource matching filter, following discovery
// (resources that appear later, such as CRDs installed while the
// controller runs, are added; see subscription.New). opts
// apply to each resource's informer. Run subscribes; Subscribe only
// records the filter, so errors (no resolver) come from Run.
func (c *Controller) Subscribe(filter discoveryresolver.Filter, opts ...dynamicinformer.ResourceOption) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return ErrStarted
	}
	c.subs = append(c.subs, &subscriptionSource{filter: filter, opts: opts, listers: map[schema.GroupVersionResource]*dynamicinformer.InformerHandle{}})
	return nil
}

// Stats returns the controller's counters.
func (c *Controller) Stats() Stats {
	s := Stats{
		Failed:          c.counters.failed.Load(),
		Requeued:        c.counters.requeued.Load(),
		GaveUp:          c.counters.gaveUp.Load(),
		Dropped:         c.counters.dropped.Load(),
		Removals:        c.counters.removals.Load(),
		ReconcilePanics: c.counters.reconcilePanics.Load(),
		HandlerPanics:   c.counters.handlerPanics.Load(),
	}
	c.mu.Lock()
	q, slots := c.queue, c.slots
	c.mu.Unlock()
	if q != nil {
		s.Queued = q.Len()
	}
	for _, sl := range slots {
		s.Reconciled += sl.reconciled.Load()
	}
	return s
}

// Run registers the event handlers, subscribes, waits until every source
// has synced (or is waiting for its resource, Removed, or Failed), starts
// the workers and blocks until ctx ends. The factory must be started
// (before or after Run) for events to flow.
//
// Shutdown: when ctx ends, handlers are removed and subscriptions
// stopped, keys still queued are dropped (a later run relists them), and
// reconciles already running get Options.DrainTimeout to finish. Run
// returns nil when they all finished in time; otherwise it cancels their
// context and returns a *DrainTimeoutError (errors.As)
// without waiting for them further. A second Run returns ErrStarted.
func (c *Controller) Run(ctx context.Context) error {
	c.mu.Lock()
	if c.started {
		c.mu.Unlock()
		return ErrStarted
	}
	c.started = true
	c.queue = workqueue.NewTypedRateLimitingQueueWithConfig(c.opts.rateLimiter(c.resources),
		workqueue.TypedRateLimitingQueueConfig[item]{Name: c.opts.Name})
	handles, subs := c.handles, c.subs
	slots := make([]*workerSlot, c.opts.Workers)
	for i := range slots {
		slots[i] = &workerSlot{}
	}
	c.slots = slots
	c.mu.Unlock()

	var bg sync.WaitGroup // the controller's own goroutines other than workers
	removeStatus := c.factory.OnStatusChange(c.onStatus)
	bg.Add(1)
	go func() {
		defer bg.Done()
		c.runRemovedHooks()
	}()

	err := c.register(ctx, handles, subs)
	if err == nil {
		c.waitForSync(ctx, handles, subs)
	}

	// Reconciles get a context of their own: it ends at the drain bound,
	// not when ctx ends, so that running work can finish.
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	var workers sync.WaitGroup
	if err == nil {
		for i := range slots {
			workers.Add(1)
			go func(slot *workerSlot) {
				defer workers.Done()
				c.work(workCtx, slot)
			}(slots[i])
		}
		<-ctx.Done()
	}

	// Shutdown: no new events, no new keys taken, running work drains.
	c.stopped.Store(true)
	close(c.stopping)
	c.unregister(handles, subs)
	removeStatus()
	c.queue.ShutDown()
	drained := make(chan struct{})
	go func() {
		workers.Wait()
		close(drained)
	}()
	timer := time.NewTimer(c.opts.DrainTimeout)
	defer timer.Stop()
	select {
	case <-drained:
	case <-timer.C:
		// Read the slots before cancelling: a cancelled reconcile returns
		// and its worker ends, clearing its slot.
		var inflight []Key
		for _, s := range slots {
			if it, busy := s.current(); busy {
				inflight = append(inflight, it.key(c.resources.byID(it.resourceID())))
			}
		}
		cancelWork()
		if err == nil {
			err = &DrainTimeoutError{Timeout: c.opts.DrainTimeout, InFlight: inflight}
		}
		c.log.Info("shutdown: reconciles still running at the drain bound; their context is cancelled", "count", len(inflight), "timeout", c.opts.DrainTimeout.String())
	}
	c.removedMu.Lock()
	close(c.removedWake)
	c.removedMu.Unlock()
	bg.Wait()
	for _, s := range subs {
		s.mu.Lock()
		for _, h := range s.listers {
			h.Release()
		}
		s.listers = nil
		s.mu.Unlock()
	}
	return err
}

// register adds the event handlers and starts the subscriptions.
func (c *Controller) register(ctx context.Context, handles []*handleSource, subs []*subscriptionSource) error {
	for _, src := range handles {
		r, _ := c.resources.ensure(src.h.GVR())
		r.addHandle(src.h)
		src.cur = r
		// Through the handle, so the handler goes with it (Release); the
		// controller counts its own panics (Stats) before the handle would.
		reg, err := src.h.Informer().AddEventHandler(eventhandler.RecoverPanics(c.handleEvents(src), c.handlerPanic))
		if err != nil {
			return fmt.Errorf("watch %s: %w", src.h.GVR(), err)
		}
		src.reg = reg
	}
	for _, src := range subs {
		sub, err := subscription.New(ctx, c.factory, src.filter, func(e subscription.Event) { c.onSubscriptionEvent(src, e) }, src.opts...)
		if err != nil {
			return fmt.Errorf("subscribe: %w", err)
		}
		src.sub = sub
	}
	return nil
}

// unregister removes the controller's handlers. Watched handles are the
// caller's (the controller does not release them), so their handlers are
// removed one by one; subscriptions release their own.
func (c *Controller) unregister(handles []*handleSource, subs []*subscriptionSource) {
	for _, src := range handles {
		if src.reg != nil {
			_ = src.h.Informer().RemoveEventHandler(src.reg)
		}
	}
	for _, src := range subs {
		if src.sub != nil {
			src.sub.Stop()
		}
	}
}

// waitForSync returns when every source has delivered its initial objects
// (a source whose resource is not served, Removed or Failed does not
// hold the others back) or ctx ends.
func (c *Controller) waitForSync(ctx context.Context, handles []*handleSource, subs []*subscriptionSource) {
	// Status is read at most every statusPollInterval: it counts the
	// cache's keys, which is not free on a large cache.
	var lastStatus time.Time
	settled := make([]bool, len(handles)) // Pending, Removed, Failed or Stopped at the last read
	synced := func() bool {
		readStatus := time.Since(lastStatus) >= statusPollInterval
		if readStatus {
			lastStatus = time.Now()
		}
		for i, src := range handles {
			if src.reg.HasSynced() {
				continue
			}
			if readStatus {
				switch src.h.Status().State {
				case dynamicinformer.Pending, dynamicinformer.Removed, dynamicinformer.Failed, dynamicinformer.Stopped:
					settled[i] = true
				default:
					settled[i] = false
				}
			}
			if !settled[i] {
				return false
			}
		}
		for _, src := range subs {
			if !src.sub.HasSynced() {
				return false
			}
		}
		return true
	}
	t := time.NewTicker(syncPollInterval)
	defer t.Stop()
	for !synced() {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// handleEvents turns a watched informer's events into keys.
func (c *Controller) handleEvents(src *handleSource) toolscache.ResourceEventHandler {
	deliver := func(e subscription.Event) {
		e.GVR = src.h.GVR()
		if src.cur.gvr != e.GVR {
			// The informer follows a new preferred version (ForName
			// without a version): its objects now come under that GVR.
			src.cur, _ = c.resources.ensure(e.GVR)
			src.cur.addHandle(src.h)
		}
		c.enqueue(src.cur, e)
	}
	return toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			deliver(subscription.Event{Type: subscription.Added, Object: obj, IsInitialList: initial})
		},
		UpdateFunc: func(old, obj any) {
			deliver(subscription.Event{Type: subscription.Updated, Object: obj, OldObject: old})
		},
		DeleteFunc: func(obj any) {
			e := subscription.Event{Type: subscription.Deleted, Object: obj}
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				e.Object, e.FinalStateUnknown = d.Obj, true
			}
			deliver(e)
		},
	}
}

// onSubscriptionEvent queues the key of a subscription's event. The
// subscription calls it one event at a time.
func (c *Controller) onSubscriptionEvent(src *subscriptionSource, e subscription.Event) {
	defer func() {
		if v := recover(); v != nil {
			key, _ := KeyOf(e.GVR, e.Object)
			c.handlerPanic(&eventhandler.PanicError{Event: string(e.Type), Key: key.ObjectKey(), Value: v})
		}
	}()
	r, _ := c.resources.ensure(e.GVR)
	src.mu.Lock()
	if src.listers != nil && src.listers[e.GVR] == nil {
		// A handle on the subscription's own informer (same GVR, same
		// options: the factory shares it) gives the reconciler its cache.
		h := c.factory.ForResource(e.GVR, src.opts...)
		src.listers[e.GVR] = h
		r.addHandle(h)
	}
	src.mu.Unlock()
	c.enqueue(r, e)
}

// enqueue queues e's key. An add or update proves the resource is served.
func (c *Controller) enqueue(r *resource, e subscription.Event) {
	if e.Type != subscription.Deleted && r.removed.Load() {
		r.removed.Store(false)
	}
	if c.opts.Filter != nil && !c.opts.Filter(e) {
		return
	}
	if it, ok := itemOf(r, e.Object); ok {
		c.queue.Add(it)
	}
}

func (c *Controller) handlerPanic(p *eventhandler.PanicError) {
	c.counters.handlerPanics.Add(1)
	if c.firstPanic("handler") {
		c.log.Error(p, "event handling panicked; the event was skipped (later panics are counted in Stats, not logged)")
	}
}

// firstPanic reports whether this is the first panic of kind.
func (c *Controller) firstPanic(kind string) bool {
	c.firstPanicMu.Lock()
	defer c.firstPanicMu.Unlock()
	if c.loggedPanic[kind] {
		return false
	}
	c.loggedPanic[kind] = true
	return true
}

// onStatus follows the informers' lifecycle. It reads the current status
// of the resource's informers rather than trusting the notification, so
// notifications that arrive late cannot mark a served resource Removed.
func (c *Controller) onStatus(st dynamicinformer.Status) {
	r := c.resources.get(st.GVR)
	if r == nil {
		return
	}
	switch {
	case r.currentlyRemoved():
		if !r.removed.Swap(true) {
			c.counters.removals.Add(1)
			c.log.V(1).Info("resource removed; its queued keys are dropped", "gvr", st.GVR.String(), "reason", st.Reason)
			c.removedMu.Lock()
			select {
			case <-c.stopping:
			default:
				if c.opts.OnRemoved != nil {
					c.removedQ = append(c.removedQ, st.GVR)
					select {
					case c.removedWake <- struct{}{}:
					default:
					}
				}
			}
			c.removedMu.Unlock()
		}
	case st.State == dynamicinformer.Syncing || st.State == dynamicinformer.Synced || st.State == dynamicinformer.Stale:
		r.removed.Store(false)
	}
}

// runRemovedHooks calls Options.OnRemoved in order until Run ends.
func (c *Controller) runRemovedHooks() {
	for range c.removedWake {
		for {
			c.removedMu.Lock()
			if len(c.removedQ) == 0 {
				c.removedMu.Unlock()
				break
			}
			gvr := c.removedQ[0]
			c.removedQ = c.removedQ[1:]
			c.removedMu.Unlock()
			c.callRemoved(gvr)
		}
	}
}

func (c *Controller) callRemoved(gvr schema.GroupVersionResource) {
	defer func() {
		if v := recover(); v != nil {
			c.counters.handlerPanics.Add(1)
			if c.firstPanic("removed") {
				c.log.Error(fmt.Errorf("%v", v), "OnRemoved panicked", "gvr", gvr.String())
			}
		}
	}()
	c.opts.OnRemoved(gvr)
}

// stoppingNow reports whether Run's context has ended.
func (c *Controller) stoppingNow() bool { return c.stopped.Load() }
