package cache

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
)

// ErrCachedObjectMutated is wrapped by the error MutationDetector.Verify
// returns when a cached object was changed after it entered the cache.
var ErrCachedObjectMutated = errors.New("cached object mutated")

// MutationDetector catches code that changes objects it read from a shared
// informer cache (which corrupts what every other reader sees). It is meant
// for tests: it keeps a deep copy of every object it is told about, so it
// doubles the cache's memory.
//
// Feed it the objects that enter the cache, either by registering
// ResourceEventHandler() on the informer (handlers receive the very
// pointers that are stored) or by wrapping an indexer with WrapIndexer.
// Each object is compared with its copy when it leaves the cache (update or
// delete) and on Verify. All methods are safe for concurrent use, and the
// zero value is not usable: call NewMutationDetector.
//
// client-go's own detector (toolscache.NewCacheMutationDetector, enabled
// for every informer by KUBE_CACHE_MUTATION_DETECTOR=true in the
// environment at process start) works as well but panics from a background
// goroutine about a second after the fact; this one reports an error a test
// can assert on, naming the object.
type MutationDetector struct {
	// mu guards objects and failures.
	mu       sync.Mutex
	objects  map[interface{}]runtime.Object // cached pointer -> deep copy taken when it was added
	failures []string
}

// NewMutationDetector returns an empty detector.
func NewMutationDetector() *MutationDetector {
	return &MutationDetector{objects: map[interface{}]runtime.Object{}}
}

// addObject records a deep copy of obj (a runtime.Object; a
// DeletedFinalStateUnknown or anything else is ignored).
func (d *MutationDetector) addObject(obj interface{}) {
	ro, ok := obj.(runtime.Object)
	if !ok {
		return
	}
	c := ro.DeepCopyObject()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.objects[obj] = c
}

// removeObject compares obj with its copy, records a failure if they
// differ, and forgets it.
func (d *MutationDetector) removeObject(obj interface{}) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if _, ok := obj.(runtime.Object); !ok {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if c, ok := d.objects[obj]; ok {
		d.compareLocked(obj, c)
		delete(d.objects, obj)
	}
}

// compareLocked records a failure if obj differs from its copy. It uses
// reflect.DeepEqual: a deep copy is exactly equal to an unmodified object,
// and unlike equality.Semantic it works on objects with unexported fields
// (cache.Compact).
func (d *MutationDetector) compareLocked(obj interface{}, copied runtime.Object) {
	if reflect.DeepEqual(obj, copied) {
		return
	}
	key, _ := toolscache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	d.failures = append(d.failures, fmt.Sprintf("%T %q", obj, key))
}

// Verify compares every object still recorded with its copy and returns an
// error wrapping ErrCachedObjectMutated that names every mutated object
// (including those found when they left the cache), or nil.
func (d *MutationDetector) Verify() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for obj, c := range d.objects {
		if !reflect.DeepEqual(obj, c) {
			d.compareLocked(obj, c)
			// Record the current state so that one mutation is reported once.
			d.objects[obj] = obj.(runtime.Object).DeepCopyObject()
		}
	}
	if len(d.failures) == 0 {
		return nil
	}
	f := append([]string(nil), d.failures...)
	sort.Strings(f)
	d.failures = nil
	return fmt.Errorf("%w: %v", ErrCachedObjectMutated, f)
}

// ResourceEventHandler returns a handler to register on the informer whose
// cache is to be watched: it records added and updated objects and checks
// replaced and deleted ones.
func (d *MutationDetector) ResourceEventHandler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) { d.addObject(obj) },
		UpdateFunc: func(oldObj, newObj interface{}) {
			if oldObj != newObj {
				d.removeObject(oldObj)
			}
			d.addObject(newObj)
		},
		DeleteFunc: func(obj interface{}) { d.removeObject(obj) },
	}
}

// WrapIndexer returns an indexer that behaves as indexer and tells d about
// every object it adds, updates, replaces or deletes. Use it where a test
// builds the indexer itself.
func (d *MutationDetector) WrapIndexer(indexer toolscache.Indexer) toolscache.Indexer {
	return &detectingIndexer{Indexer: indexer, d: d}
}

type detectingIndexer struct {
	toolscache.Indexer
	d *MutationDetector
}

// forget checks and forgets the stored object that obj replaces (unless it
// is obj itself and is staying).
func (i *detectingIndexer) forget(obj interface{}, leaving bool) {
	old, exists, err := i.Indexer.Get(obj)
	if err == nil && exists && (leaving || old != obj) {
		i.d.removeObject(old)
	}
}

func (i *detectingIndexer) Add(obj interface{}) error {
	i.forget(obj, false)
	i.d.addObject(obj)
	return i.Indexer.Add(obj)
}

func (i *detectingIndexer) Update(obj interface{}) error {
	i.forget(obj, false)
	i.d.addObject(obj)
	return i.Indexer.Update(obj)
}

func (i *detectingIndexer) Delete(obj interface{}) error {
	i.forget(obj, true)
	return i.Indexer.Delete(obj)
}

func (i *detectingIndexer) Replace(list []interface{}, rv string) error {
	for _, old := range i.Indexer.List() {
		i.d.removeObject(old)
	}
	for _, obj := range list {
		i.d.addObject(obj)
	}
	return i.Indexer.Replace(list, rv)
}
