package controller

import (
	"context"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// workerSlot says what one worker is reconciling, for the drain report.
type workerSlot struct {
	mu sync.Mutex // guards it, busy
	it item       // the item being reconciled, while busy
	// busy is set with it when a reconcile starts and stays set until the
	// next one starts or the worker ends: one lock per reconcile. A worker
	// between keys is either taking the next one or, at shutdown, about
	// to end, so the drain report (taken after the bound) names only
	// reconciles that outlived it.
	busy bool
	// reconciled counts this worker's successful reconciles (summed by
	// Stats): one counter per worker keeps workers off a shared cache line.
	reconciled atomic.Int64
	_          [64]byte
}

func (s *workerSlot) start(it item) {
	s.mu.Lock()
	s.it, s.busy = it, true
	s.mu.Unlock()
}

func (s *workerSlot) end() {
	s.mu.Lock()
	s.busy = false
	s.mu.Unlock()
}

func (s *workerSlot) current() (item, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.it, s.busy
}

// work takes keys until the queue shuts down and is empty.
func (c *Controller) work(ctx context.Context, slot *workerSlot) {
	defer slot.end()
	for {
		it, shutdown := c.queue.Get()
		if shutdown {
			return
		}
		c.process(ctx, slot, it)
		c.queue.Done(it)
	}
}

// process reconciles one key, or drops it, and decides whether it comes
// back.
func (c *Controller) process(ctx context.Context, slot *workerSlot, it item) {
	if c.stoppingNow() {
		c.queue.Forget(it)
		return
	}
	r := c.resources.byID(it.resourceID())
	if r.removed.Load() {
		c.queue.Forget(it)
		c.counters.dropped.Add(1)
		return
	}
	req := Request{Key: it.key(r), Object: r.get(it.objectKey())}
	slot.start(it)
	err := c.reconcile(ctx, req)
	if err == nil {
		c.queue.Forget(it)
		slot.reconciled.Add(1)
		return
	}
	c.counters.failed.Add(1)
	switch {
	case r.removed.Load():
		// Its resource went away meanwhile: a retry would meet 404 until
		// the resource is back, and then the relist queues it anyway.
		c.queue.Forget(it)
		c.counters.dropped.Add(1)
	case c.stoppingNow():
		c.queue.Forget(it)
	case c.opts.MaxRetries > 0 && c.queue.NumRequeues(it)+1 >= c.opts.MaxRetries:
		c.queue.Forget(it)
		c.counters.gaveUp.Add(1)
		c.log.V(1).Info("giving up on a key", "key", req.Key.String(), "failures", c.opts.MaxRetries, "err", err.Error())
	default:
		c.log.V(4).Info("reconcile failed; retrying with back-off", "key", req.Key.String(), "err", err.Error())
		c.queue.AddRateLimited(it)
		c.counters.requeued.Add(1)
	}
}

// reconcile calls the reconciler, turning a panic into an error.
func (c *Controller) reconcile(ctx context.Context, req Request) (err error) {
	defer func() {
		if v := recover(); v != nil {
			p := &ReconcilePanicError{Key: req.Key, Value: v, Stack: debug.Stack()}
			c.counters.reconcilePanics.Add(1)
			if c.firstPanic("reconcile") {
				c.log.Error(p, "reconciler panicked; the key is retried (later panics are counted in Stats, not logged)", "stack", string(p.Stack))
			}
			err = p
		}
	}()
	return c.rec.Reconcile(ctx, req)
}
