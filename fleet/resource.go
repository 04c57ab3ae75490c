package fleet

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/informerkit/informerkit/dynamicinformer"
)

// Resource is one resource over every cluster of a fleet (Fleet.ForResource,
// Fleet.ForName): an informer in each cluster, one handler registration for
// all of them, one Lister across them, a status per cluster. Its methods are
// safe for concurrent use.
type Resource struct {
	fleet *Fleet
	gvr   schema.GroupVersionResource // ForResource ("" for ForName)
	name  string                      // ForName ("" for ForResource)
	opts  []dynamicinformer.ResourceOption

	mu       sync.Mutex // guards regs, released
	regs     map[*Registration]struct{}
	released bool
}

// Registration is one Handler added to a Resource.
type Registration struct {
	res *Resource
	h   Handler

	mu      sync.Mutex // guards removed
	removed bool
}

// String names the resource: the GVR of ForResource, the name of ForName.
func (r *Resource) String() string {
	if r.name != "" {
		return r.name
	}
	return r.gvr.String()
}

func (r *Resource) isReleased() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.released
}

func (r *Resource) registrations() []*Registration {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*Registration, 0, len(r.regs))
	for reg := range r.regs {
		out = append(out, reg)
	}
	return out
}

// bindings returns r's informer in each cluster of the fleet now, by
// cluster, sorted by cluster name (a cluster without one yet is left out).
func (r *Resource) bindings() ([]*binding, <-chan struct{}) {
	bs, _, changed := r.bindingsState()
	return bs, changed
}

// bindingsState is bindings with whether the source has given its first
// set of clusters, read with the members.
func (r *Resource) bindingsState() ([]*binding, bool, <-chan struct{}) {
	ms, sourced, changed := r.fleet.membersState()
	out := make([]*binding, 0, len(ms))
	for _, m := range ms {
		if b := m.binding(r); b != nil {
			out = append(out, b)
		}
	}
	return out, sourced, changed
}

// AddEventHandler registers h for the events of every cluster, those of the
// fleet now and those that join later (see Handler for the contract): each
// cluster's informer replays what it holds to h as adds, then its changes.
// After Release or Shutdown it returns ErrStopped; a nil h is an error.
func (r *Resource) AddEventHandler(h Handler) (*Registration, error) {
	if h == nil {
		return nil, fmt.Errorf("fleet: nil handler")
	}
	reg := &Registration{res: r, h: h}
	r.mu.Lock()
	if r.released {
		r.mu.Unlock()
		return nil, ErrStopped
	}
	r.regs[reg] = struct{}{}
	r.mu.Unlock()
	bs, _ := r.bindings()
	for _, b := range bs {
		b.addHandler(reg)
	}
	return reg, nil
}

func (reg *Registration) isRemoved() bool {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	return reg.removed
}

// Remove unregisters the handler from every cluster: it gets no event after
// Remove returns, except one being delivered at that moment. Calling it
// again is a no-op.
func (reg *Registration) Remove() {
	reg.mu.Lock()
	reg.removed = true
	reg.mu.Unlock()
	reg.res.mu.Lock()
	delete(reg.res.regs, reg)
	reg.res.mu.Unlock()
	bs, _ := reg.res.bindings()
	for _, b := range bs {
		b.removeHandler(reg)
	}
}

// HasSynced reports whether the handler has been given the initial list of
// every cluster of the fleet now (as client-go's registration HasSynced,
// per cluster). A fleet with no cluster has synced.
func (reg *Registration) HasSynced() bool {
	bs, _ := reg.res.bindings()
	for _, b := range bs {
		if !b.handlerSynced(reg) {
			return false
		}
	}
	return true
}

// Release ends the Resource: its handlers are removed (no deletes are sent),
// its informer in each cluster is released, and clusters that join later do
// not get it. Reads through its Lister see nothing afterwards. Calling it
// again is a no-op.
func (r *Resource) Release() {
	r.mu.Lock()
	if r.released {
		r.mu.Unlock()
		return
	}
	r.released = true
	r.mu.Unlock()
	for _, m := range r.fleet.remove(r) {
		m.unbind(r)
	}
	r.fleet.notify()
}

// Status is a snapshot of the resource in every cluster of the fleet.
func (r *Resource) Status() ResourceStatus {
	bs, _ := r.bindings()
	return r.statusOf(bs)
}

func (r *Resource) statusOf(bs []*binding) ResourceStatus {
	ms, _ := r.fleet.membersSnapshot()
	have := map[*member]bool{}
	st := ResourceStatus{Resource: r.String()}
	for _, b := range bs {
		have[b.m] = true
		st.Clusters = append(st.Clusters, b.status())
	}
	for _, m := range ms {
		if !have[m] && !r.isReleased() {
			st.Clusters = append(st.Clusters, m.placeholderStatus(r))
		}
	}
	sortClusterStatuses(st.Clusters)
	return st
}

// WaitForSync waits until the resource has synced in the clusters mode
// names (see WaitMode) and returns its status then. If ctx ends first it
// returns the status and a *SyncError (errors.Is ErrNotSynced and the
// context's error) naming the clusters that held the wait and why; after
// Release or Shutdown, ErrStopped. It does not poll: it wakes on status
// changes.
func (r *Resource) WaitForSync(ctx context.Context, mode WaitMode) (ResourceStatus, error) {
	for {
		if r.isReleased() || r.fleet.isShutdown() {
			return r.Status(), ErrStopped
		}
		// (Whether the source has given its set is read with the members:
		// read after them, a set given in between would count as synced
		// with none of its clusters in the status.)
		bs, sourced, changed := r.bindingsState()
		st := r.statusOf(bs)
		waiting := st.waitingFor(mode)
		if len(waiting) == 0 && sourced {
			return st, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			if !sourced {
				waiting = map[string]string{"": "the source has given no clusters yet"}
			}
			return st, &SyncError{NotSynced: waiting, Cause: ctx.Err()}
		}
	}
}
