package discoveryresolver

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// round is one discovery round. Its fields other than done are written once,
// before done is closed, and read only after.
type round struct {
	seq       uint64        // 1 for the first round, one more for each later one
	start     time.Time     // when it started, by the resolver's clock
	done      chan struct{} // closed when it has ended
	err       error
	abandoned bool // ended by its leader's context: an answer for no one else
}

// Refresh runs a discovery round now, ignoring the minimum refresh
// interval: it is forced. If a round is already in flight, Refresh waits for
// that one instead of starting another. It returns nil, a
// *GroupDiscoveryError if some group-versions failed (the rest was
// refreshed), another error if discovery failed as a whole (the previous
// snapshot stays), or ctx's error. When Refresh returns, the Change the
// round found has been delivered to OnChange callbacks, unless Refresh is
// called from inside one.
//
// Because nothing limits it, Refresh is meant for one owner that decides
// the pace itself, such as a single periodic rediscovery loop or a test.
// Callers that may be many or frequent (one per subscription, per informer,
// per event) should not call it: a lookup that misses runs a rate-limited
// round by itself.
func (r *Resolver) Refresh(ctx context.Context) error {
	return r.refresh(ctx, true, nil)
}

// RefreshIfStale makes sure the snapshot comes from a discovery round that
// started at most maxAge before the call, running one only if needed. A
// maxAge below the minimum refresh interval (WithMinRefreshInterval) counts
// as that interval, so RefreshIfStale(ctx, 0) is a refresh that respects
// the rate limit. After Invalidate, it runs a round whatever maxAge. The
// factory calls it to re-check discovery at a bounded rate.
//
// Like every other round, the one it needs is shared: if a round is in
// flight, RefreshIfStale waits for it; concurrent callers start at most one.
// If the latest round is young enough, it returns that round's result at
// once, without network: nil or a *GroupDiscoveryError if it built the
// snapshot, or its error if it failed as a whole (the snapshot is then
// older than maxAge). Otherwise it returns what Refresh would, or ctx's
// error. It waits for the minimum refresh interval only if the latest round
// was abandoned by its caller's context before it could answer.
//
// Many callers, each with its own maxAge, may call it as often as they like:
// the server sees at most one round per minimum refresh interval (plus
// Refresh calls and rounds after Invalidate), and none at all while some
// round is younger than each caller's maxAge.
func (r *Resolver) RefreshIfStale(ctx context.Context, maxAge time.Duration) error {
	return r.refresh(ctx, false, r.startedSince(max(maxAge, r.opts.minRefreshInterval)))
}

// startedSince returns a test for rounds that started at most age before
// now.
func (r *Resolver) startedSince(age time.Duration) func(*round) bool {
	from := r.opts.now().Add(-age)
	return func(rd *round) bool { return !rd.start.Before(from) }
}

// current returns the snapshot to answer from, running a round first if
// there is none or it was invalidated: RefreshIfStale(ctx, 0). On a failed
// round it still returns the previous snapshot if there is one.
func (r *Resolver) current(ctx context.Context) (*snapshot, error) {
	s := r.snap.Load()
	if s != nil && !r.stale.Load() {
		return s, nil
	}
	err := r.refresh(ctx, false, r.startedSince(r.opts.minRefreshInterval))
	if s2 := r.snap.Load(); s2 != nil {
		return s2, nil
	}
	if err == nil {
		err = errors.New("discoveryresolver: no discovery data")
	}
	return nil, err
}

// refresh returns the result of a round that answers the caller, running
// one or waiting for one as needed; it is the only place rounds start.
//
// With force (Refresh), it joins the round in flight or starts one at once.
// Otherwise a round answers the caller if covers says so: a round in flight
// that does not is waited for, then another is needed. If the latest round
// answers and Invalidate was not called since it started, its result is
// returned without a new round. Else a round starts when the minimum
// refresh interval since the latest start has passed (at once after
// Invalidate); until then the caller waits, bounded by ctx. All waiting is
// done in the caller's goroutine; a round whose leader's ctx ends is
// abandoned, and the callers still waiting go on as if it had not run.
func (r *Resolver) refresh(ctx context.Context, force bool, covers func(*round) bool) error {
	for {
		r.mu.Lock()
		if rd := r.round; rd != nil {
			r.mu.Unlock()
			select {
			case <-rd.done:
			case <-ctx.Done():
				return ctx.Err()
			}
			if rd.abandoned && ctx.Err() == nil {
				continue // the leader gave up; this caller has not
			}
			if force || covers(rd) {
				return rd.err
			}
			continue // it started too early to answer this caller
		}
		stale := r.stale.Load()
		if !force && !stale && r.last != nil && covers(r.last) {
			err := r.last.err
			r.mu.Unlock()
			return err
		}
		now := r.opts.now()
		if !force && !stale && !r.lastStart.IsZero() {
			if wait := r.lastStart.Add(r.opts.minRefreshInterval).Sub(now); wait > 0 {
				r.mu.Unlock()
				r.log.V(2).Info("waiting for the minimum refresh interval", "wait", wait)
				if err := r.sleep(ctx, wait); err != nil {
					return err
				}
				continue
			}
		}
		rd := &round{seq: r.started.Load() + 1, start: now, done: make(chan struct{})}
		r.started.Store(rd.seq)
		r.round = rd
		r.lastStart = now
		r.stale.Store(false)
		r.mu.Unlock()
		err := r.lead(ctx, rd)
		r.deliver()
		return err
	}
}

// sleep waits for d on the resolver's clock, or until ctx ends.
func (r *Resolver) sleep(ctx context.Context, d time.Duration) error {
	c, stop := r.opts.newTimer(d)
	defer stop()
	select {
	case <-c:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// lead runs round rd and always ends it, even if the discovery client
// panics, so that waiters are never stranded.
func (r *Resolver) lead(ctx context.Context, rd *round) (err error) {
	var change *Change
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("discoveryresolver: discovery panicked: %v", p)
			defer panic(p)
		}
		r.mu.Lock()
		r.round = nil
		if change != nil && len(r.listeners) > 0 {
			r.pending = append(r.pending, *change)
		}
		rd.err = err
		rd.abandoned = isContextError(err) && ctx.Err() != nil
		if !rd.abandoned {
			r.last = rd
		}
		r.mu.Unlock()
		close(rd.done)
	}()
	change, err = r.runRound(ctx)
	return err
}

func isContextError(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
