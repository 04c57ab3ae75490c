package controllerruntime

import (
	"fmt"
	"strings"
	"sync"
	"time"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// kindCache is the cache's informers of one kind and class: one
// informer, or — for a namespaced kind held per namespace config
// (kindPlan.perNamespace) — one per group of namespaces with the same
// config, and one for the NamespaceAll config. Reads are routed as
// controller-runtime's multi-namespace cache routes them: a namespace to
// the informer holding it (else the NamespaceAll one, else an error);
// all namespaces to every informer, their objects concatenated.
type kindCache struct {
	entries []*entry          // in the plan's order
	byNS    map[string]*entry // nil: entries[0] holds every namespace
	all     *entry            // the NamespaceAll config's, if any
	inf     cache.Informer    // what GetInformer returns
}

// forNamespace is the informer holding namespace ns's objects.
func (k *kindCache) forNamespace(ns string) (*entry, bool) {
	if k.byNS == nil || k.clusterScoped() {
		return k.entries[0], true
	}
	if e, ok := k.byNS[ns]; ok {
		return e, true
	}
	if k.all != nil {
		return k.all, true
	}
	return nil, false
}

// readers are the informers a List over all namespaces reads.
func (k *kindCache) readers() []*entry {
	if k.clusterScoped() {
		return k.entries[:1]
	}
	return k.entries
}

// clusterScoped: a kind that was not known when its informers were made
// (taken as namespaced) turned out cluster-scoped. Its informers each
// hold every object (namespaces do not apply): the first answers.
func (k *kindCache) clusterScoped() bool {
	if len(k.entries) == 1 && k.byNS == nil {
		return false
	}
	e := k.entries[0]
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.resolvedLocked() && !e.namespaced
}

// multiInformer is the cache.Informer of a kind held by several
// informers (one per namespace config), after controller-runtime's
// multiNamespaceInformer: handlers and indexers are added to each; it
// has synced when each has; it is stopped when each is.
type multiInformer struct {
	c      *Cache
	name   string
	infs   []*Informer
	synced *allDone // over the informers' HasSyncedChecker
}

func newMultiInformer(c *Cache, name string, infs []*Informer) *multiInformer {
	checkers := make([]toolscache.DoneChecker, len(infs))
	for i, inf := range infs {
		checkers[i] = inf.HasSyncedChecker()
	}
	return &multiInformer{c: c, name: name, infs: infs, synced: newAllDone(c, name, checkers)}
}

var _ cache.Informer = (*multiInformer)(nil)

func (m *multiInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return m.AddEventHandlerWithOptions(h, toolscache.HandlerOptions{})
}

func (m *multiInformer) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, d time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return m.AddEventHandlerWithOptions(h, toolscache.HandlerOptions{ResyncPeriod: &d})
}

func (m *multiInformer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, o toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	regs := make([]toolscache.ResourceEventHandlerRegistration, 0, len(m.infs))
	for _, inf := range m.infs {
		r, err := inf.AddEventHandlerWithOptions(h, o)
		if err != nil {
			return nil, err
		}
		regs = append(regs, r)
	}
	checkers := make([]toolscache.DoneChecker, len(regs))
	for i, reg := range regs {
		checkers[i] = reg.HasSyncedChecker()
	}
	return &multiRegistration{regs: regs, synced: newAllDone(m.c, m.name, checkers)}, nil
}

func (m *multiInformer) RemoveEventHandler(reg toolscache.ResourceEventHandlerRegistration) error {
	r, ok := reg.(*multiRegistration)
	if !ok {
		return fmt.Errorf("registration is not a registration returned by this informer")
	}
	for i, inf := range m.infs {
		if err := inf.RemoveEventHandler(r.regs[i]); err != nil {
			return err
		}
	}
	return nil
}

func (m *multiInformer) AddIndexers(indexers toolscache.Indexers) error {
	for _, inf := range m.infs {
		if err := inf.AddIndexers(indexers); err != nil {
			return err
		}
	}
	return nil
}

func (m *multiInformer) HasSynced() bool {
	for _, inf := range m.infs {
		if !inf.HasSynced() {
			return false
		}
	}
	return true
}

func (m *multiInformer) HasSyncedChecker() toolscache.DoneChecker { return m.synced }

func (m *multiInformer) IsStopped() bool {
	for _, inf := range m.infs {
		if !inf.IsStopped() {
			return false
		}
	}
	return true
}

// multiRegistration is a handler added to each informer of a
// multiInformer.
type multiRegistration struct {
	regs   []toolscache.ResourceEventHandlerRegistration
	synced *allDone // over the registrations' HasSyncedChecker
}

func (r *multiRegistration) HasSynced() bool {
	for _, reg := range r.regs {
		if !reg.HasSynced() {
			return false
		}
	}
	return true
}

func (r *multiRegistration) HasSyncedChecker() toolscache.DoneChecker { return r.synced }

// allDone is done when each of its checkers is. Its channel is closed by
// a goroutine started at the first Done, which also ends once the cache
// has stopped (Start ends).
type allDone struct {
	c        *Cache
	name     string
	checkers []toolscache.DoneChecker
	once     sync.Once
	done     chan struct{}
}

func newAllDone(c *Cache, name string, checkers []toolscache.DoneChecker) *allDone {
	return &allDone{c: c, name: name, checkers: checkers, done: make(chan struct{})}
}

func (a *allDone) Name() string {
	names := make([]string, len(a.checkers))
	for i, ch := range a.checkers {
		names[i] = ch.Name()
	}
	return a.name + " (" + strings.Join(names, ", ") + ")"
}

func (a *allDone) Done() <-chan struct{} {
	a.once.Do(func() {
		go func() {
			for _, ch := range a.checkers {
				select {
				case <-ch.Done():
				case <-a.c.stoppedCh:
					return
				}
			}
			close(a.done)
		}()
	})
	return a.done
}
