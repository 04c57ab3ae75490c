package dynamicinformer

import (
	"context"
	"sync"

	"github.com/informerkit/informerkit/dynamicinformer/internal/lifecycle"
	"github.com/informerkit/informerkit/dynamicinformer/internal/listwatch"
	"github.com/informerkit/informerkit/shard"
)

// entryShard is what an entry keeps about its shard (WithShard or
// WithShardSource). The zero value means: not sharded.
type entryShard struct {
	source shard.Source // nil: static (or none)

	mu       sync.Mutex   // guards the fields below
	now      shard.Shard  // the shard asked for now
	listed   *shard.Shard // the shard of the last complete list; nil: none yet
	consumer shard.Consumer
}

// current is the shard the informer asks for now.
func (s *entryShard) current() shard.Shard {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now
}

// shardFilter wraps the informer's requests with its shard.
func (e *entry) shardFilter(funcs listwatch.Funcs) listwatch.Funcs {
	f := &listwatch.ShardFilter{Current: e.shard.current, Outside: e.outsideShardSeen}
	if e.shard.source != nil {
		f.Listed = e.shardListed
	}
	return f.Funcs(funcs)
}

// followShard runs while the informer runs, for an informer given a
// shard.Source: on every change of the source's shard it switches the
// informer to the new shard (gate.ListerWatcher.Switch: inside the open
// stream, or through a relist), so that the objects that left reach
// handlers as deletes and those that entered as adds. It tells the source
// what the cache holds: at a switch, the part of the old shard within the
// new one; the new shard once a list of it is in the reflector's hands
// (shardListed).
func (e *entry) followShard(ctx context.Context) {
	src := e.shard.source
	c := src.Register(e.currentGVR().String())
	defer c.Close()
	next, changed := src.Current()
	e.shard.mu.Lock()
	e.shard.consumer = c
	// The informer runs beside this goroutine: its first list may be
	// complete already (shardListed found no consumer to tell).
	var held *shard.Shard
	if e.shard.listed != nil && e.shard.listed.Equal(e.shard.now) {
		held = e.shard.listed
	}
	e.shard.mu.Unlock()
	if held != nil {
		c.Holds(*held, true)
	}
	for {
		e.switchShard(next)
		select {
		case <-ctx.Done():
			e.shard.mu.Lock()
			e.shard.consumer = nil
			e.shard.mu.Unlock()
			return
		case <-changed:
		}
		next, changed = src.Current()
	}
}

// switchShard makes s the informer's shard (no-op if it is already).
func (e *entry) switchShard(s shard.Shard) {
	e.shard.mu.Lock()
	old := e.shard.now
	if old.Equal(s) {
		e.shard.mu.Unlock()
		return
	}
	e.shard.now = s
	held, ok := shard.Shard{}, false
	if e.shard.listed != nil && e.shard.listed.Equal(old) {
		held, ok = old.Intersect(s)
	}
	c := e.shard.consumer
	e.shard.mu.Unlock()
	if c != nil {
		c.Holds(held, ok)
	}
	e.logger.V(1).Info("shard changed; switching", "shard", s.Selector(), "size", s.Size())
	e.apply(lifecycle.Event{Kind: lifecycle.ShardChanged}) // Status.Shard
	e.lw.Switch()
}

// shardListed: a list of s is complete and the reflector has it (the
// last page returned to it, a watch-list stream's initial events taken,
// or a switch's events — adds, deletes, bookmark — taken).
func (e *entry) shardListed(s shard.Shard) {
	e.shard.mu.Lock()
	e.shard.listed = &s
	now, c := e.shard.now, e.shard.consumer
	e.shard.mu.Unlock()
	if !now.Equal(s) {
		// The shard changed while this list ran: switch again (inside the
		// stream when the gate can, else through a relist). For a plain
		// list the gate is not Serving yet and this does nothing;
		// relistIfStale, from the gate's Listed hook, catches it.
		e.lw.Switch()
		return
	}
	if c != nil {
		c.Holds(s, true)
	}
}

// relistIfStale is called once a list has been handed to the reflector:
// if the shard changed while it ran, the informer lists again.
func (e *entry) relistIfStale() {
	if e.shard.source == nil {
		return
	}
	e.shard.mu.Lock()
	stale := e.shard.listed != nil && !e.shard.listed.Equal(e.shard.now)
	e.shard.mu.Unlock()
	if stale {
		e.lw.Relist()
	}
}

// sharded reports whether the informer has a shard.
func (e *entry) sharded() bool { return e.shard.source != nil || !e.shard.current().IsZero() }
