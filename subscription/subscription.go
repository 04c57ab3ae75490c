package subscription

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/informerkit/informerkit/discoveryresolver"
	"github.com/informerkit/informerkit/dynamicinformer"
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
	// Type is Added, Updated or Deleted.
	Type EventType
	GVR  schema.GroupVersionResource
	// Object is the new state (Added, Updated) or the last known state
	// (Deleted). It is shared with the cache: do not mutate it.
	Object any
	// OldObject is the previous state for Updated.
	OldObject any
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
	f        *dynamicinformer.Factory
	resolver *discoveryresolver.Resolver
	filter   discoveryresolver.Filter
	opts     []dynamicinformer.ResourceOption
	handler  func(Event)
	log      logr.Logger // for panics in the Deleted events of a dropped resource

	handlerMu  sync.Mutex // serializes handler calls
	loggedDrop atomic.Bool

	mu      sync.Mutex // guards members
	members map[schema.GroupVersionResource]*member

	trigger chan struct{}
	cancel  context.CancelFunc
	done    chan struct{}
}

type member struct {
	handle *dynamicinformer.InformerHandle
	reg    toolscache.ResourceEventHandlerRegistration

	mu     sync.Mutex // guards seen, closed
	seen   map[string]any
	closed bool
}

// New starts a subscription on f for every served, watchable resource
// (preferred version) that filter matches, with opts applied to each
// resource's informer (f.ForResource). handler is called for every event
// of every member, one call at a time (never concurrently), each event
// carrying its GVR. A late subscriber receives the existing objects of
// every matching resource as Added with IsInitialList. When a resource
// stops matching or stops being served, the handler receives a Deleted
// event for every object it last saw of it. A panic in handler is
// recovered and the event skipped (see the package documentation for
// where it is counted). The subscription runs until ctx ends, Stop, or
// f's Shutdown (Factory.Done).
//
// f must have a resolver (Options.Resolver; NewForConfig builds one); a
// factory without one, a nil f or a nil handler is dynamicinformer.ErrInvalid; after f's Shutdown, New
// returns dynamicinformer.ErrStopped. An error of the first discovery
// match is returned as is.
func New(ctx context.Context, f *dynamicinformer.Factory, filter discoveryresolver.Filter, handler func(Event), opts ...dynamicinformer.ResourceOption) (*Subscription, error) {
	if f == nil {
		return nil, fmt.Errorf("%w: nil factory", dynamicinformer.ErrInvalid)
	}
	if handler == nil {
		return nil, fmt.Errorf("%w: nil handler", dynamicinformer.ErrInvalid)
	}
	r := f.Resolver()
	if r == nil {
		return nil, fmt.Errorf("%w: subscription.New needs a discovery resolver: set Options.Resolver (NewForConfig builds one)", dynamicinformer.ErrInvalid)
	}
	select {
	case <-f.Done():
		return nil, dynamicinformer.ErrStopped
	default:
	}
	filter.Verbs = append(slices.Clone(filter.Verbs), "list", "watch")
	s := &Subscription{
		f: f, resolver: r, filter: filter, opts: opts, handler: handler,
		log:     klog.FromContext(ctx),
		members: map[schema.GroupVersionResource]*member{},
		trigger: make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
	sctx, cancel := context.WithCancel(ctx)
	s.cancel = cancel
	// The subscription asks discovery nothing itself: the factory's
	// presence refreshes the resolver (periodically, after CRD changes,
	// after 404s) and every round that changes something reconciles the
	// subscription. Registered before the first match, so no change in
	// between is missed.
	removeDisc := r.OnChange(func(discoveryresolver.Change) { s.poke() })
	if err := s.reconcile(sctx); err != nil {
		removeDisc()
		cancel()
		s.releaseAll()
		return nil, err
	}
	go func() {
		defer close(s.done)
		defer removeDisc()
		defer s.releaseAll()
		for {
			select {
			case <-sctx.Done():
				return
			case <-f.Done():
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
// A GVR that stopped matching leaves the list only after the handler has
// been called with a Deleted event for every object it was told of.
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
// goroutine. Safe to call more than once, and after the factory's
// Shutdown.
func (s *Subscription) Stop() {
	s.cancel()
	<-s.done
}

func (s *Subscription) reconcile(ctx context.Context) error {
	matched, err := s.resolver.Match(ctx, s.filter)
	if err != nil && len(matched) == 0 {
		return err
	}
	want := map[schema.GroupVersionResource]bool{}
	for _, r := range matched {
		want[r.GVR] = true
	}
	s.mu.Lock()
	var gone []schema.GroupVersionResource
	for gvr := range s.members {
		if !want[gvr] {
			gone = append(gone, gvr)
		}
	}
	var add []schema.GroupVersionResource
	for gvr := range want {
		if _, ok := s.members[gvr]; !ok {
			add = append(add, gvr)
		}
	}
	s.mu.Unlock()
	// A member leaves s.members (Resources) only once the handler has
	// been told that its objects are gone.
	for _, gvr := range gone {
		s.mu.Lock()
		m := s.members[gvr]
		s.mu.Unlock()
		s.drop(m)
		s.mu.Lock()
		delete(s.members, gvr)
		s.mu.Unlock()
	}
	for _, gvr := range add {
		h := s.f.ForResource(gvr, s.opts...)
		if never(h.Status()) {
			h.Release() // shut down, invalid options or a conflict: nothing to watch
			continue
		}
		m := &member{handle: h, seen: map[string]any{}}
		reg, err := h.Informer().AddEventHandler(s.adapter(gvr, m))
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

// never reports whether a handle's informer will never run: ForResource
// gives such a handle after Shutdown (Stopped), for options that do not
// validate (Failed, ErrInvalid) and for options its shared informer
// cannot honour (Failed, ErrOptionConflict).
func never(st dynamicinformer.Status) bool {
	switch st.State {
	case dynamicinformer.Stopped:
		return true
	case dynamicinformer.Failed:
		return errors.Is(st.Err, dynamicinformer.ErrInvalid) || errors.Is(st.Err, dynamicinformer.ErrOptionConflict)
	}
	return false
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
		s.deliverDropped(Event{Type: Deleted, GVR: m.handle.GVR(), Object: obj, FinalStateUnknown: true})
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

// call calls the handler, one call at a time. A panic goes on to the
// caller: the handle's recovery for informer events, deliverDropped for
// the rest.
func (s *Subscription) call(e Event) {
	s.handlerMu.Lock()
	defer s.handlerMu.Unlock()
	s.handler(e)
}

// deliverDropped calls the handler with a Deleted event of a dropped
// resource (no informer delivers it), recovering a panic: the event is
// skipped and, the first time, logged.
func (s *Subscription) deliverDropped(e Event) {
	defer func() {
		if v := recover(); v != nil {
			p := &eventhandler.PanicError{Event: "delete", Key: objectKey(e.Object), Value: v, Stack: debug.Stack()}
			if s.loggedDrop.CompareAndSwap(false, true) {
				s.log.Error(p, "subscription handler panicked on a Deleted event of a resource it stopped watching; the event was skipped (later such panics are not logged)",
					"gvr", e.GVR.String(), "stack", string(p.Stack))
			}
		}
	}()
	s.call(e)
}

func objectKey(obj any) string {
	m, err := meta.Accessor(obj)
	if err != nil {
		return ""
	}
	return toolscache.MetaObjectToName(m).String() // the store's key: "name" when cluster-scoped
}

// adapter is a member's handler on its informer. A panic of the
// subscription's handler is left to the handle, which recovers it.
func (s *Subscription) adapter(gvr schema.GroupVersionResource, m *member) toolscache.ResourceEventHandler {
	record := func(e Event) {
		// Deliver under m.mu so a concurrent drop cannot emit a Deleted
		// before this event.
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.closed {
			return
		}
		k := objectKey(e.Object)
		if e.Type == Deleted {
			delete(m.seen, k)
		} else {
			m.seen[k] = e.Object
		}
		s.call(e)
	}
	return toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			record(Event{Type: Added, GVR: gvr, Object: obj, IsInitialList: initial})
		},
		UpdateFunc: func(old, obj any) {
			record(Event{Type: Updated, GVR: gvr, Object: obj, OldObject: old})
		},
		DeleteFunc: func(obj any) {
			e := Event{Type: Deleted, GVR: gvr, Object: obj}
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				e.Object, e.FinalStateUnknown = d.Obj, true
			}
			record(e)
		},
	}
}
