package controller

import (
	"slices"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/dynamicinformer"
)

// resource is what the controller knows about one GVR its sources
// deliver: the informers whose caches hold its objects, and whether it is
// Removed (its queued keys are then dropped, not reconciled).
type resource struct {
	gvr schema.GroupVersionResource

	mu      sync.RWMutex // guards handles and indexers
	handles []*dynamicinformer.InformerHandle
	// indexers[i] is handles[i]'s cache, looked up in order.
	indexers []toolscache.Indexer

	removed atomic.Bool
}

// get returns the cached object for key, or nil if no informer of the
// resource holds it.
func (r *resource) get(objectKey string) runtime.Object {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, idx := range r.indexers {
		obj, ok, err := idx.GetByKey(objectKey)
		if err == nil && ok {
			if ro, isObj := obj.(runtime.Object); isObj {
				return ro
			}
		}
	}
	return nil
}

// addHandle records an informer holding the resource's objects; a handle
// already recorded is ignored.
func (r *resource) addHandle(h *dynamicinformer.InformerHandle) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if slices.Contains(r.handles, h) {
		return
	}
	r.handles = append(r.handles, h)
	r.indexers = append(r.indexers, h.Informer().GetIndexer())
}

// currentlyRemoved reports whether any informer of the resource is Removed
// now. It reads the informers' current status, so a late notification
// (Removed delivered after the resource came back) changes nothing.
func (r *resource) currentlyRemoved() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, h := range r.handles {
		if h.Status().State == dynamicinformer.Removed {
			return true
		}
	}
	return false
}

// resourceTable maps the GVRs the controller has seen to their resource.
// Entries are never deleted while the controller runs: a resource that
// goes Removed may come back, and a key's GVR must stay known until the
// key leaves the queue.
type resourceTable struct {
	mu    sync.RWMutex // guards byGVR
	byGVR map[schema.GroupVersionResource]*resource
}

func newResourceTable() *resourceTable {
	return &resourceTable{byGVR: map[schema.GroupVersionResource]*resource{}}
}

func (t *resourceTable) get(gvr schema.GroupVersionResource) *resource {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.byGVR[gvr]
}

// ensure returns gvr's resource, creating it; created reports whether
// this call created it.
func (t *resourceTable) ensure(gvr schema.GroupVersionResource) (r *resource, created bool) {
	if r := t.get(gvr); r != nil {
		return r, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if r := t.byGVR[gvr]; r != nil {
		return r, false
	}
	r = &resource{gvr: gvr}
	t.byGVR[gvr] = r
	return r, true
}
