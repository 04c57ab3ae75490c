package eventhandler

import (
	"context"
	"sync"

	toolscache "k8s.io/client-go/tools/cache"
)

// CoalescingHandler is an event handler for level-triggered consumers
// (those that act on an object's current state, not on each change) whose
// work can be slower than the event rate. It keeps at most one pending
// entry per object key holding the latest state, and delivers entries to
// its delegate from one goroutine, oldest first.
//
// Why: client-go buffers every event for every handler without bound
// (each listener has an unbounded ring buffer), so a handler slower than
// the write rate holds memory proportional to the number of events. A
// CoalescingHandler holds memory proportional to the number of distinct
// keys with undelivered changes (Stats().Pending ≤ distinct keys), never
// more.
//
// What the delegate sees, per key, for the changes merged into one entry:
//   - the key was unknown to the delegate (first event an add): OnAdd with
//     the latest state, or nothing if the object was deleted again before
//     delivery;
//   - the key was known (first event an update or delete): OnUpdate(the
//     state the delegate last saw, the latest state), or OnDelete with the
//     final state (a toolscache.DeletedFinalStateUnknown passes through
//     unchanged) if the object is gone;
//   - deleted and created again while pending: OnDelete(the final state of
//     the old object) then OnAdd(the new one). Deletes are never turned
//     into updates.
//
// Intermediate states are skipped by design. Delivery order across keys is
// the order in which keys first became pending; one key is never delivered
// twice at once. Objects are shared with the informer's cache: do not
// mutate them.
//
// The OnAdd/OnUpdate/OnDelete methods never block on the delegate and are
// safe for concurrent use. When the context given to Coalescing ends the
// delivery goroutine ends (after the delegate call in progress, if any),
// pending entries are dropped, and later events are counted as Dropped.
// A panicking delegate crashes the delivery goroutine like any goroutine:
// wrap it with RecoverPanics.
type CoalescingHandler struct {
	delegate toolscache.ResourceEventHandler
	done     chan struct{}

	mu      sync.Mutex // guards everything below
	cond    *sync.Cond // signalled on a new pending key and on stop
	pending map[string]*coalescedEntry
	queue   []string // the pending keys, each once, in first-pending order
	stopped bool
	stats   CoalescingStats
}

// CoalescingStats counts what a CoalescingHandler did.
type CoalescingStats struct {
	// Received counts events handed to the handler.
	Received int64
	// Coalesced counts events merged into an entry that was already
	// pending (they are not delivered on their own).
	Coalesced int64
	// Delivered counts calls made to the delegate.
	Delivered int64
	// Dropped counts events received after the context ended plus pending
	// entries discarded when it ended.
	Dropped int64
	// Pending is the number of keys waiting for delivery now; MaxPending
	// is the highest it has been.
	Pending, MaxPending int
}

// coalescedEntry is one key's undelivered change.
type coalescedEntry struct {
	seen      bool // the delegate knew the key when the entry began
	initial   bool // isInInitialList of the add that began the entry
	old       any  // the state the delegate last saw (entry begun by an update)
	tombstone any  // a delete to deliver before cur (deleted and re-created)
	cur       any  // the latest state; nil if deleted
	final     any  // the final state when deleted
}

// Coalescing returns a CoalescingHandler delivering to delegate and starts
// its delivery goroutine, which runs until ctx ends (Wait waits for it).
// Add the returned handler to an informer like any other handler.
func Coalescing(ctx context.Context, delegate toolscache.ResourceEventHandler) *CoalescingHandler {
	c := &CoalescingHandler{
		delegate: delegate,
		done:     make(chan struct{}),
		pending:  map[string]*coalescedEntry{},
	}
	c.cond = sync.NewCond(&c.mu)
	go c.run(ctx)
	return c
}

// Wait blocks until the delivery goroutine has ended (after ctx ended).
func (c *CoalescingHandler) Wait() { <-c.done }

// Stats returns a snapshot of the handler's counters.
func (c *CoalescingHandler) Stats() CoalescingStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Pending = len(c.pending)
	return s
}

// OnAdd implements toolscache.ResourceEventHandler.
func (c *CoalescingHandler) OnAdd(obj any, isInInitialList bool) {
	c.merge(obj, func(e *coalescedEntry, fresh bool) {
		if fresh {
			e.initial = isInInitialList
		}
		c.setCurrent(e, obj)
	})
}

// OnUpdate implements toolscache.ResourceEventHandler.
func (c *CoalescingHandler) OnUpdate(oldObj, newObj any) {
	c.merge(newObj, func(e *coalescedEntry, fresh bool) {
		if fresh {
			e.seen, e.old = true, oldObj
		}
		c.setCurrent(e, newObj)
	})
}

// OnDelete implements toolscache.ResourceEventHandler.
func (c *CoalescingHandler) OnDelete(obj any) {
	c.merge(obj, func(e *coalescedEntry, fresh bool) {
		if fresh {
			e.seen = true
		}
		e.cur, e.tombstone, e.old = nil, nil, nil
		if e.seen {
			e.final = obj
		}
	})
}

// setCurrent records a new live state; after a pending delete of an object
// the delegate knew, that delete is kept to be delivered first.
func (c *CoalescingHandler) setCurrent(e *coalescedEntry, obj any) {
	if e.cur == nil && e.final != nil {
		e.tombstone, e.final = e.final, nil
	}
	e.cur = obj
}

// merge applies an event to its key's entry, creating it if needed.
func (c *CoalescingHandler) merge(obj any, apply func(e *coalescedEntry, fresh bool)) {
	key, err := toolscache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return // not an object with metadata; informers do not send those
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats.Received++
	if c.stopped {
		c.stats.Dropped++
		return
	}
	e, ok := c.pending[key]
	if ok {
		c.stats.Coalesced++
	} else {
		e = &coalescedEntry{}
		c.pending[key] = e
		c.queue = append(c.queue, key)
		if n := len(c.pending); n > c.stats.MaxPending {
			c.stats.MaxPending = n
		}
		c.cond.Signal()
	}
	apply(e, !ok)
}

func (c *CoalescingHandler) run(ctx context.Context) {
	defer close(c.done)
	stop := context.AfterFunc(ctx, func() {
		c.mu.Lock()
		c.stopped = true
		c.cond.Broadcast()
		c.mu.Unlock()
	})
	defer stop()
	for {
		c.mu.Lock()
		for len(c.queue) == 0 && !c.stopped {
			c.cond.Wait()
		}
		if c.stopped {
			c.stats.Dropped += int64(len(c.pending))
			c.pending, c.queue = map[string]*coalescedEntry{}, nil
			c.mu.Unlock()
			return
		}
		key := c.queue[0]
		c.queue[0] = ""
		c.queue = c.queue[1:]
		e := c.pending[key]
		delete(c.pending, key)
		c.mu.Unlock()
		c.deliver(e)
	}
}

func (c *CoalescingHandler) deliver(e *coalescedEntry) {
	calls := 0
	switch {
	case e.cur == nil && e.final != nil:
		c.delegate.OnDelete(e.final)
		calls++
	case e.cur == nil:
		// Created and deleted before delivery: the delegate never knew it.
	case e.tombstone != nil:
		c.delegate.OnDelete(e.tombstone)
		c.delegate.OnAdd(e.cur, false)
		calls += 2
	case e.seen:
		c.delegate.OnUpdate(e.old, e.cur)
		calls++
	default:
		c.delegate.OnAdd(e.cur, e.initial)
		calls++
	}
	c.mu.Lock()
	c.stats.Delivered += int64(calls)
	c.mu.Unlock()
}
