package fleet

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/dynamicinformer"
)

// binding is one Resource in one cluster, for one generation of the
// cluster's clients: its informer handle and the handlers registered on it.
type binding struct {
	m   *member
	res *Resource
	fac *dynamicinformer.Factory // nil: the cluster has no clients (member.err)
	// prev is what the handlers held of the cluster before this generation
	// (the previous generation's cache, stopped), nil for a first
	// generation. Reads use it until this generation has synced.
	prev toolscache.Indexer
	// carried are the registrations that had a handler on the previous
	// generation: theirs are given the difference from prev.
	carried map[*Registration]bool

	mu sync.Mutex // guards every field below
	// handle is the informer (nil while a name is being resolved).
	handle *dynamicinformer.InformerHandle
	// resolveErr is why a name does not resolve in this cluster (yet).
	resolveErr error
	deliveries map[*Registration]*registered
	released   bool
	// ctx ends with the generation or at release (the binding's own
	// goroutines end on it); cancel ends it.
	ctx    context.Context
	cancel context.CancelFunc
}

// registered is a Handler on this binding's informer.
type registered struct {
	d   *delivery
	reg toolscache.ResourceEventHandlerRegistration
}

// newBinding makes r's binding on fac; old is the previous generation's
// (nil: none).
func newBinding(m *member, r *Resource, fac *dynamicinformer.Factory, old *binding) *binding {
	b := &binding{m: m, res: r, fac: fac, deliveries: map[*Registration]*registered{}}
	if old != nil {
		b.prev = old.view()
		b.carried = map[*Registration]bool{}
		old.mu.Lock()
		for reg := range old.deliveries {
			b.carried[reg] = true
		}
		old.mu.Unlock()
	}
	return b
}

// start creates the informer (ForResource at once; ForName on a goroutine
// that resolves the name) and registers the Resource's handlers on it.
func (b *binding) start(genCtx context.Context) {
	ctx, cancel := context.WithCancel(genCtx)
	b.mu.Lock()
	b.ctx, b.cancel = ctx, cancel
	released := b.released
	b.mu.Unlock()
	if released {
		cancel()
	}
	if b.fac == nil {
		return
	}
	if b.res.name == "" {
		b.setHandle(b.fac.ForResource(b.res.gvr, b.res.opts...))
		return
	}
	b.m.fleet.wg.Add(1)
	go func() {
		defer b.m.fleet.wg.Done()
		b.resolve(ctx)
	}()
}

// Name resolution retry timings: after a CRD change, first after
// resolveRetryFirst (discovery may lag the CRD), doubling to resolveRetryMax.
const (
	resolveRetryFirst = 250 * time.Millisecond
	resolveRetryMax   = 30 * time.Second
	resolveTimeout    = 10 * time.Second
)

// resolve resolves the Resource's name in the cluster until it does, the
// generation ends or the binding is released.
func (b *binding) resolve(ctx context.Context) {
	delay := resolveRetryFirst
	for {
		crd := b.m.crdSignal() // before the attempt, so no change is missed
		rctx, cancel := context.WithTimeout(ctx, resolveTimeout)
		h, err := b.fac.ForName(rctx, b.res.name, b.res.opts...)
		cancel()
		if ctx.Err() != nil || b.isReleased() {
			if h != nil {
				h.Release()
			}
			return
		}
		if err == nil {
			b.setHandle(h)
			b.m.fleet.notify()
			return
		}
		if errors.Is(err, dynamicinformer.ErrStopped) {
			return
		}
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w: discovery not answered within %v: %w", dynamicinformer.ErrNoContact, resolveTimeout, err)
		}
		b.mu.Lock()
		changed := b.resolveErr == nil || b.resolveErr.Error() != err.Error()
		b.resolveErr = err
		b.mu.Unlock()
		if changed {
			b.m.fleet.notify()
		}
		timer := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-crd:
			delay = resolveRetryFirst
			// Discovery may lag the CRD's establishment a little.
			select {
			case <-ctx.Done():
				timer.Stop()
				return
			case <-time.After(resolveRetryFirst):
			}
		case <-timer.C:
			delay = min(2*delay, resolveRetryMax)
		}
		timer.Stop()
	}
}

func (b *binding) isReleased() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.released || b.res.isReleased()
}

// setHandle installs the informer and registers every handler.
func (b *binding) setHandle(h *dynamicinformer.InformerHandle) {
	b.mu.Lock()
	if b.released {
		b.mu.Unlock()
		h.Release()
		return
	}
	b.handle = h
	b.resolveErr = nil
	b.mu.Unlock()
	for _, reg := range b.res.registrations() {
		b.addHandler(reg)
	}
}

// addHandler registers reg's handler on the informer (no-op without one,
// or if registered).
func (b *binding) addHandler(reg *Registration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.handle == nil || b.released || reg.isRemoved() {
		return
	}
	if _, ok := b.deliveries[reg]; ok {
		return
	}
	var prev toolscache.Store
	if b.carried[reg] && b.prev != nil {
		prev = b.prev
	}
	d := newDelivery(b.m.name, reg.h, prev)
	r, err := b.handle.Informer().AddEventHandler(d)
	if err != nil {
		return
	}
	b.deliveries[reg] = &registered{d: d, reg: r}
	if prev != nil {
		ctx := b.ctx
		b.m.fleet.wg.Add(1)
		go func() {
			defer b.m.fleet.wg.Done()
			if toolscache.WaitForCacheSync(ctx.Done(), r.HasSynced) {
				d.sweep()
			}
		}()
	}
}

// removeHandler unregisters reg's handler.
func (b *binding) removeHandler(reg *Registration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.deliveries[reg]
	if !ok {
		return
	}
	delete(b.deliveries, reg)
	if b.handle != nil {
		_ = b.handle.Informer().RemoveEventHandler(r.reg)
	}
}

// handlerSynced: reg's handler has been given this cluster's initial list.
func (b *binding) handlerSynced(reg *Registration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.deliveries[reg]
	return ok && r.reg.HasSynced()
}

// release drops the informer (Resource.Release): handlers get nothing more.
func (b *binding) release() {
	b.mu.Lock()
	b.released = true
	h := b.handle
	if b.cancel != nil {
		b.cancel()
	}
	b.mu.Unlock()
	if h != nil {
		h.Release()
	}
}

// synced: the informer has synced at least once in this generation.
func (b *binding) synced() bool {
	b.mu.Lock()
	h := b.handle
	b.mu.Unlock()
	return h != nil && h.Informer().HasSynced()
}

// reader is the cache reads use: the informer's once it has synced, the
// previous generation's until then (nil: nothing to read).
func (b *binding) reader() toolscache.Indexer {
	b.mu.Lock()
	h, prev := b.handle, b.prev
	b.mu.Unlock()
	if h != nil && (prev == nil || h.Informer().HasSynced()) {
		return h.Informer().GetIndexer()
	}
	return prev
}

// view is what the handlers hold of the cluster through this binding, once
// it has stopped: the informer's cache, over what the previous generation
// held and this one has not replaced yet (if it had not synced).
func (b *binding) view() toolscache.Indexer {
	b.mu.Lock()
	h, prev := b.handle, b.prev
	b.mu.Unlock()
	if prev == nil || (h != nil && h.Informer().HasSynced()) {
		if h == nil {
			return nil
		}
		return h.Informer().GetIndexer()
	}
	merged := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	for _, o := range prev.List() {
		_ = merged.Add(o)
	}
	if h != nil {
		for _, o := range h.Informer().GetStore().List() {
			_ = merged.Add(o)
		}
	}
	return merged
}

// leave gives every handler a delete per object it holds of the cluster
// (the generation has stopped).
func (b *binding) leave() {
	b.mu.Lock()
	h := b.handle
	ds := make([]*registered, 0, len(b.deliveries))
	for _, r := range b.deliveries {
		ds = append(ds, r)
	}
	prev := b.prev
	var orphans []*Registration // carried over, never registered on this generation
	for reg := range b.carried {
		if _, ok := b.deliveries[reg]; !ok && prev != nil && !reg.isRemoved() {
			orphans = append(orphans, reg)
		}
	}
	b.mu.Unlock()
	var cache toolscache.Store
	if h != nil {
		cache = h.Informer().GetStore()
	}
	for _, r := range ds {
		r.d.leave(cache)
	}
	// Handlers registered after the rebuild began were given nothing of
	// prev: nothing to delete for them. Handlers carried over but not yet
	// registered on this generation (no informer: the name did not
	// resolve, or the clients could not be built) hold prev.
	for _, reg := range orphans {
		newDelivery(b.m.name, reg.h, nil).leave(prev)
	}
}

// status is the binding's informer status in its cluster.
func (b *binding) status() ClusterResourceStatus {
	b.mu.Lock()
	h, resolveErr, prev := b.handle, b.resolveErr, b.prev
	b.mu.Unlock()
	cs := ClusterResourceStatus{Cluster: b.m.name}
	switch {
	case h != nil:
		cs.Status = h.Status()
		cs.HasSynced = h.Informer().HasSynced()
	case b.fac == nil:
		cs.Status = dynamicinformer.Status{GVR: b.res.gvr, State: dynamicinformer.Failed, Err: b.m.clientErr(), Reason: "no clients for the cluster"}
	case resolveErr != nil:
		cs.Status = dynamicinformer.Status{GVR: b.res.gvr, State: dynamicinformer.Pending, Err: &ClusterError{Cluster: b.m.name, Err: resolveErr}, Reason: "name not resolved: " + resolveErr.Error()}
		if errors.Is(resolveErr, dynamicinformer.ErrNoContact) {
			cs.Status.ContactErr = cs.Status.Err
		}
	default:
		cs.Status = dynamicinformer.Status{GVR: b.res.gvr, State: dynamicinformer.Pending, Reason: "resolving " + b.res.name}
	}
	if !cs.HasSynced && prev != nil {
		cs.Rebuilding = true
		cs.HasSynced = true
		cs.Objects = len(prev.ListKeys())
	}
	return cs
}

func (b *binding) currentHandle() *dynamicinformer.InformerHandle {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.handle
}
