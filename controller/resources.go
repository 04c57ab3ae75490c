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
	gvr    schema.GroupVersionResource
	id     uint32 // index in resourceTable.ids
	prefix string // itemPrefix(id)

	mu      sync.Mutex // guards handles and writes of indexers
	handles []*dynamicinformer.InformerHandle
	// indexers holds the handles' caches, looked up in order. Replaced,
	// never modified, so workers read it without a lock.
	indexers atomic.Pointer[[]toolscache.Indexer]

	removed atomic.Bool
}

// get returns the cached object for key, or nil if no informer of the
// resource holds it.
func (r *resource) get(objectKey string) runtime.Object {
	idxs := r.indexers.Load()
	if idxs == nil {
		return nil
	}
	for _, idx := range *idxs {
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
	var idxs []toolscache.Indexer
	if old := r.indexers.Load(); old != nil {
		idxs = slices.Clone(*old)
	}
	idxs = append(idxs, h.Informer().GetIndexer())
	r.indexers.Store(&idxs)
}

// currentlyRemoved reports whether any informer of the resource is Removed
// now. It reads the informers' current status, so a late notification
// (Removed delivered after the resource came back) changes nothing.
func (r *resource) currentlyRemoved() bool {
	r.mu.Lock()
	handles := slices.Clone(r.handles)
	r.mu.Unlock()
	for _, h := range handles {
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
	mu    sync.RWMutex // guards byGVR and writes of ids
	byGVR map[schema.GroupVersionResource]*resource
	// ids[i] is the resource with id i. Replaced, never modified, so
	// workers read it without a lock.
	ids atomic.Pointer[[]*resource]
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
	var ids []*resource
	if old := t.ids.Load(); old != nil {
		ids = slices.Clone(*old)
	}
	r = &resource{gvr: gvr, id: uint32(len(ids)), prefix: itemPrefix(uint32(len(ids)))}
	ids = append(ids, r)
	t.ids.Store(&ids)
	t.byGVR[gvr] = r
	return r, true
}

// byID returns the resource with id; ids come from items, so it exists.
func (t *resourceTable) byID(id uint32) *resource { return (*t.ids.Load())[id] }
