package controller

import (
	"context"
	"runtime/debug"
	"sync"
)

// workerSlot says what one worker is reconciling, for the drain report.
type workerSlot struct {
	mu   sync.Mutex // guards key, busy
	key  Key
	busy bool
}

func (s *workerSlot) set(k Key, busy bool) {
	s.mu.Lock()
	s.key, s.busy = k, busy
	s.mu.Unlock()
}

func (s *workerSlot) current() (Key, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.key, s.busy
}

// work takes keys until the queue shuts down and is empty.
func (c *Controller) work(ctx context.Context, slot *workerSlot) {
	for {
		key, shutdown := c.queue.Get()
		if shutdown {
			return
		}
		c.process(ctx, slot, key)
		c.queue.Done(key)
	}
}

// process reconciles one key, or drops it, and decides whether it comes
// back.
func (c *Controller) process(ctx context.Context, slot *workerSlot, key Key) {
	if c.stoppingNow() {
		c.queue.Forget(key)
		return
	}
	r := c.resources.get(key.GVR)
	if r == nil || r.removed.Load() {
		c.queue.Forget(key)
		c.counters.dropped.Add(1)
		return
	}
	req := Request{Key: key, Object: r.get(key.ObjectKey())}
	slot.set(key, true)
	err := c.reconcile(ctx, req)
	slot.set(Key{}, false)
	if err == nil {
		c.queue.Forget(key)
		c.counters.reconciled.Add(1)
		return
	}
	c.counters.failed.Add(1)
	switch {
	case r.removed.Load():
		// Its resource went away meanwhile: a retry would meet 404 until
		// the resource is back, and then the relist queues it anyway.
		c.queue.Forget(key)
		c.counters.dropped.Add(1)
	case c.stoppingNow():
		c.queue.Forget(key)
	case c.opts.MaxRetries > 0 && c.queue.NumRequeues(key)+1 >= c.opts.MaxRetries:
		c.queue.Forget(key)
		c.counters.gaveUp.Add(1)
		c.log.V(1).Info("giving up on a key", "key", key.String(), "failures", c.opts.MaxRetries, "err", err.Error())
	default:
		c.log.V(4).Info("reconcile failed; retrying with back-off", "key", key.String(), "err", err.Error())
		c.queue.AddRateLimited(key)
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
