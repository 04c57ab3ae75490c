package fleet

import (
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	toolscache "k8s.io/client-go/tools/cache"
)

// delivery is one Handler registered on one cluster's informer of one
// generation (the cluster's clients as built from one Config). It adds the
// cluster's name and, for a generation that replaces another (credentials
// rotated), turns the new informer's initial list into the difference from
// what the handler was given by the previous one.
type delivery struct {
	cluster string
	h       Handler

	mu sync.Mutex // guards prev, seen, swept and serialises calls to h
	// prev is the previous generation's cache, stopped (nil: the handler
	// starts from nothing).
	prev  toolscache.Store
	seen  map[string]struct{} // keys of prev delivered again by this generation
	swept bool                // prev's keys not seen have been deleted
}

func newDelivery(cluster string, h Handler, prev toolscache.Store) *delivery {
	d := &delivery{cluster: cluster, h: h, prev: prev, swept: prev == nil}
	if prev != nil {
		d.seen = map[string]struct{}{}
	}
	return d
}

func keyOf(obj any) string {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		return d.Key
	}
	k, err := toolscache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return ""
	}
	return k
}

func resourceVersionOf(obj any) string {
	m, err := meta.Accessor(obj)
	if err != nil {
		return ""
	}
	return m.GetResourceVersion()
}

// OnAdd implements toolscache.ResourceEventHandler.
func (d *delivery) OnAdd(obj any, isInInitialList bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.swept {
		if !isInInitialList {
			d.sweepLocked()
		} else {
			key := keyOf(obj)
			d.seen[key] = struct{}{}
			if old, ok, _ := d.prev.GetByKey(key); ok {
				if resourceVersionOf(old) != resourceVersionOf(obj) {
					d.h.OnUpdate(d.cluster, old, obj)
				}
				return
			}
		}
	}
	d.h.OnAdd(d.cluster, obj, isInInitialList)
}

// OnUpdate implements toolscache.ResourceEventHandler.
func (d *delivery) OnUpdate(oldObj, newObj any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sweepLocked()
	d.h.OnUpdate(d.cluster, oldObj, newObj)
}

// OnDelete implements toolscache.ResourceEventHandler.
func (d *delivery) OnDelete(obj any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sweepLocked()
	d.h.OnDelete(d.cluster, obj)
}

// sweep deletes, once, what the previous generation had and this one's
// initial list did not bring: called when the new informer's handler has
// synced, or at its first event after the initial list, whichever comes
// first.
func (d *delivery) sweep() {
	d.mu.Lock()
	defer d.mu.Unlock()
	defer func() { _ = recover() }() // not on an informer's goroutine: nothing counts it
	d.sweepLocked()
}

func (d *delivery) sweepLocked() {
	if d.swept {
		return
	}
	d.swept = true
	prev, seen := d.prev, d.seen
	d.prev, d.seen = nil, nil
	for _, old := range prev.List() {
		if _, ok := seen[keyOf(old)]; !ok {
			d.h.OnDelete(d.cluster, old)
		}
	}
}

// leave gives the handler a delete for every object it holds of this
// cluster: those of cache (the stopped informer's) and those of the
// previous generation not yet replaced. Panics are recovered (the informer
// that would count them has stopped).
func (d *delivery) leave(cache toolscache.Store) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var objs []any
	if cache != nil {
		objs = cache.List()
	}
	if !d.swept {
		for _, old := range d.prev.List() {
			if _, ok := d.seen[keyOf(old)]; !ok {
				objs = append(objs, old)
			}
		}
		d.swept, d.prev, d.seen = true, nil, nil
	}
	for _, o := range objs {
		func() {
			defer func() { _ = recover() }()
			d.h.OnDelete(d.cluster, o)
		}()
	}
}
