package dynamicinformer

import (
	"context"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/discoveryresolver"
	"github.com/informerkit/informerkit/eventhandler"
)

// EventType says what happened to an object.
type EventType string

const (
	Added   EventType = "ADDED"
	Updated EventType = "UPDATED"
	Deleted EventType = "DELETED"
)

// Event is one change seen by a Subscription.
type Event struct {
	Type EventType
	GVR  schema.GroupVersionResource
	// Object is the new state (Added, Updated) or the last known state
	// (Deleted). It is shared with the cache: do not mutate it.
	Object interface{}
	// OldObject is the previous state for Updated.
	OldObject interface{}
	// IsInitialList is true for Added events that replay objects that
	// existed when the informer (or the subscription) started.
	IsInitialList bool
	// FinalStateUnknown is true for Deleted events whose object is the last
	// state the cache saw, not the state at deletion, because a relist found
	// the object gone or the subscription stopped watching the resource.
	// When a resource stops being served, its objects' Deleted events also
	// carry the last cached state, with FinalStateUnknown false.
	FinalStateUnknown bool
}

// Subscription watches every resource that matches a filter, following
// discovery: informers are added as matching resources appear and released
// as they vanish. One handler receives the events of all of them.
type Subscription struct {
	f       *Factory
	filter  discoveryresolver.Filter
	opts    []ResourceOption
	handler func(Event)

	handlerMu sync.Mutex // serializes handler calls
	panics    atomic.Int64

	mu      sync.Mutex // guards members
	members map[schema.GroupVersionResource]*member

	trigger chan struct{}
	cancel  context.CancelFunc
	done    chan struct{}
	stopOne sync.Once
}

type member struct {
	handle *InformerHandle
	reg    toolscache.ResourceEventHandlerRegistration

	mu     sync.Mutex // guards seen, closed
	seen   map[string]interface{}
	closed bool
}

// Subscribe starts a subscription for every served, watchable resource
// (preferred version) that filter matches, with opts applied to each
// informer (namespaces, label selector on objects, MetadataOnly,
// transforms). handler is called for every event of every member, one call
// at a time (never concurrently), each event carrying its GVR. A late
// subscriber receives the existing objects of every matching resource as
// Added with IsInitialList. When a resource stops matching or stops being
// served, the handler receives a Deleted event for every object it last saw
// of it. A panic in handler is recovered: that event is skipped and
// counted (Subscription.Panics). The subscription runs until ctx ends,
// Stop, or Shutdown; it needs a resolver (WithResolver / NewForConfig).
func (f *Factory) Subscribe(ctx context.Context, filter discoveryresolver.Filter, handler func(Event), opts ...ResourceOption) (*Subscription, error) {
	if f.cfg.resolver == nil {
		return nil, errNoResolver("Subscribe")
	}
	if handler == nil {
		return nil, ErrInvalid
	}
	f.mu.Lock()
	if f.shutdown {
		f.mu.Unlock()
		return nil, ErrStopped
	}
	// Counted under f.mu so Shutdown's Wait cannot race this Add; released
	// by the goroutine below, or at once if the first reconcile fails.
	f.wg.Add(1)
	f.mu.Unlock()
	filter.Verbs = append(slices.Clone(filter.Verbs), "list", "watch")
	s := &Subscription{
		f: f, filter: filter, opts: opts, handler: handler,
		members: map[schema.GroupVersionResource]*member{},
		trigger: make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
	sctx, cancel := context.WithCancel(ctx)
	s.cancel = cancel
	if err := s.reconcile(sctx); err != nil {
		cancel()
		s.releaseAll()
		f.wg.Done()
		return nil, err
	}
	// The subscription asks discovery nothing itself: the factory's
	// presence refreshes it (periodically, after CRD changes, after 404s)
	// and every round that changes something reconciles the subscription.
	removeDisc := f.cfg.resolver.OnChange(func(discoveryresolver.Change) { s.poke() })
	go func() {
		defer f.wg.Done()
		defer close(s.done)
		defer removeDisc()
		for {
			select {
			case <-sctx.Done():
				s.releaseAll()
				return
			case <-f.closed:
				s.releaseAll()
				return
			case <-s.trigger:
				_ = s.reconcile(sctx)
			}
		}
	}()
	return s, nil
}

func (s *Subscription) poke() {
	select {
	case s.trigger <- struct{}{}:
	default:
	}
}

// Resources lists the GVRs the subscription currently watches, sorted.
func (s *Subscription) Resources() []schema.GroupVersionResource {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]schema.GroupVersionResource, 0, len(s.members))
	for gvr := range s.members {
		out = append(out, gvr)
	}
	slices.SortFunc(out, func(a, b schema.GroupVersionResource) int {
		if a.String() < b.String() {
			return -1
		}
		if a.String() > b.String() {
			return 1
		}
		return 0
	})
	return out
}

// HasSynced reports whether every current member has delivered its initial
// objects to the handler.
func (s *Subscription) HasSynced() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.members {
		if !m.reg.HasSynced() {
			return false
		}
	}
	return true
}

// Stop ends the subscription, releases its informers and waits for its
// goroutine. Safe to call more than once.
func (s *Subscription) Stop() {
	s.stopOne.Do(s.cancel)
	<-s.done
}

func (s *Subscription) reconcile(ctx context.Context) error {
	matched, err := s.f.cfg.resolver.Match(ctx, s.filter)
	if err != nil && len(matched) == 0 {
		return err
	}
	want := map[schema.GroupVersionResource]bool{}
	for _, r := range matched {
		want[r.GVR] = true
	}
	s.mu.Lock()
	var gone []*member
	for gvr, m := range s.members {
		if !want[gvr] {
			gone = append(gone, m)
			delete(s.members, gvr)
		}
	}
	var add []schema.GroupVersionResource
	for gvr := range want {
		if _, ok := s.members[gvr]; !ok {
			add = append(add, gvr)
		}
	}
	s.mu.Unlock()
	for _, m := range gone {
		s.drop(m)
	}
	for _, gvr := range add {
		h, err := s.f.forResource(gvr, s.f.cfg.merge(s.opts), false)
		if err != nil {
			continue // shut down or invalid options: nothing to watch
		}
		m := &member{handle: h, seen: map[string]interface{}{}}
		reg, err := h.addEventHandler(s.adapter(gvr, m), toolscache.HandlerOptions{})
		if err != nil {
			h.Release()
			continue
		}
		m.reg = reg
		s.mu.Lock()
		s.members[gvr] = m
		s.mu.Unlock()
	}
	return nil
}

// drop releases a member's informer (which removes the member's
// handler) and tells the handler that every object it saw of it is gone.
func (s *Subscription) drop(m *member) {
	m.handle.Release()
	m.mu.Lock()
	m.closed = true
	seen := m.seen
	m.seen = nil
	m.mu.Unlock()
	for _, obj := range seen {
		s.deliver(Event{Type: Deleted, GVR: m.handle.GVR(), Object: obj, FinalStateUnknown: true})
	}
}

func (s *Subscription) releaseAll() {
	s.mu.Lock()
	members := s.members
	s.members = map[schema.GroupVersionResource]*member{}
	s.mu.Unlock()
	for _, m := range members {
		m.handle.Release()
	}
}

// deliver calls the handler, one call at a time, recovering a panic: the
// event is skipped, counted (Panics) and, the first time, logged.
func (s *Subscription) deliver(e Event) {
	s.handlerMu.Lock()
	defer s.handlerMu.Unlock()
	defer func() {
		if v := recover(); v != nil {
			p := &eventhandler.PanicError{Event: handlerEvent[e.Type], Key: objectKey(e.Object), Value: v, Stack: debug.Stack()}
			if s.panics.Add(1) == 1 {
				s.f.cfg.logger.Error(p, "subscription handler panicked; the event was skipped (later panics are counted by Panics, not logged)",
					"gvr", e.GVR.String(), "stack", string(p.Stack))
			}
		}
	}()
	s.handler(e)
}

var handlerEvent = map[EventType]string{Added: "add", Updated: "update", Deleted: "delete"}

// Panics counts the handler calls that panicked (each event skipped).
func (s *Subscription) Panics() int64 { return s.panics.Load() }

func objectKey(obj interface{}) string {
	m, err := meta.Accessor(obj)
	if err != nil {
		return ""
	}
	return toolscache.MetaObjectToName(m).String() // the store's key: "name" when cluster-scoped
}

func (s *Subscription) adapter(gvr schema.GroupVersionResource, m *member) toolscache.ResourceEventHandler {
	record := func(e Event) {
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return
		}
		k := objectKey(e.Object)
		if e.Type == Deleted {
			delete(m.seen, k)
		} else {
			m.seen[k] = e.Object
		}
		// Deliver under m.mu so a concurrent drop cannot emit a Deleted
		// before this event.
		s.deliver(e)
		m.mu.Unlock()
	}
	return toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj interface{}, initial bool) {
			record(Event{Type: Added, GVR: gvr, Object: obj, IsInitialList: initial})
		},
		UpdateFunc: func(old, obj interface{}) {
			record(Event{Type: Updated, GVR: gvr, Object: obj, OldObject: old})
		},
		DeleteFunc: func(obj interface{}) {
			e := Event{Type: Deleted, GVR: gvr, Object: obj}
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				e.Object, e.FinalStateUnknown = d.Obj, true
			}
			record(e)
		},
	}
}
