package controllerruntime

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/informerkit/informerkit/dynamicinformer"
)

// entry is the cache's informer of one kind and class. A kind that no
// source knew when the entry was made (its CRD not installed yet) is
// unresolved: it has no factory informer until a resource of that kind
// is served (Cache.followPending resolves it); meanwhile the handlers and
// indexers added to its Informer wait in the entry and are moved onto
// the factory's informer when it is made.
type entry struct {
	c          *Cache
	gvk        schema.GroupVersionKind
	class      class
	group      string // its key among the kind's informers (entryKey.group)
	inf        *Informer
	noDeepCopy bool
	// namespaces and oc are its group's (kindPlan); transform is the one
	// it runs (typed conversion, metadata's kind, the user's). oc,
	// transform and noDeepCopy become clusterOC's and clusterTransform
	// (set for a group's informer) if the kind, not known when the entry
	// was made, turns out cluster-scoped (resolved; under mu from then).
	namespaces       []string
	oc               objConfig
	transform        toolscache.TransformFunc
	clusterOC        *objConfig
	clusterTransform toolscache.TransformFunc
	// options are the factory options of the kind's informer, given
	// whether its resource is namespaced.
	options func(namespaced bool) []dynamicinformer.ResourceOption
	// placeholder stands for the factory's informer while the kind is
	// unresolved (never run: an empty store, the indexers added so far).
	placeholder toolscache.SharedIndexInformer

	mu         sync.Mutex // guards the fields below
	gvr        schema.GroupVersionResource
	namespaced bool
	handle     *dynamicinformer.InformerHandle // nil while unresolved, and for a custom informer
	// custom is the informer Options.NewInformer made (nil without it, or
	// while unresolved); stopCustom stops it.
	custom       toolscache.SharedIndexInformer
	stopCustom   context.CancelFunc
	waiting      []*registration                 // handlers added while unresolved
	removed      bool                            // RemoveInformer was called
	fieldIndexes map[string]toolscache.IndexFunc // by index name ("field:" + field)

	statusMu   sync.Mutex // guards statusCh, lastStatus
	statusCh   <-chan struct{}
	lastStatus dynamicinformer.Status
}

// status is handleStatus as of the cache's last status change
// (Cache.changes): InformerHandle.Status counts the store's keys (O(n)),
// and Get, List and HasSynced ask for the state on every call, so it is
// asked again only after the factory has reported a change of some
// informer's status (OnStatusChange, delivered in order from one
// goroutine, as handlers get the objects) — or on every call once the
// cache has stopped and hears of no more changes.
func (e *entry) status() dynamicinformer.Status {
	ch := e.c.changes()
	e.statusMu.Lock()
	defer e.statusMu.Unlock()
	if e.statusCh != ch || e.c.isStopped() {
		e.lastStatus, e.statusCh = e.handleStatus(), ch
	}
	return e.lastStatus
}

// current is the factory's informer handle (nil while unresolved, and
// for a custom informer) and the informer reads and handlers go to (the
// placeholder while unresolved).
func (e *entry) current() (*dynamicinformer.InformerHandle, toolscache.SharedIndexInformer) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.handle, e.liveLocked()
}

// liveLocked is the informer reads and handlers go to: the factory's, the
// custom one, or the placeholder while unresolved. e.mu is held.
func (e *entry) liveLocked() toolscache.SharedIndexInformer {
	switch {
	case e.handle != nil:
		return e.handle.Informer()
	case e.custom != nil:
		return e.custom
	}
	return e.placeholder
}

// resolvedLocked: the entry has its informer (the factory's or a custom
// one). e.mu is held.
func (e *entry) resolvedLocked() bool { return e.handle != nil || e.custom != nil }

func (e *entry) isCustom() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.custom != nil
}

func (e *entry) isResolved() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.resolvedLocked()
}

// handleStatus is the factory informer's Status; while the kind is
// unresolved, Pending with ErrNotServed.
func (e *entry) handleStatus() dynamicinformer.Status {
	e.mu.Lock()
	h, custom, gvr := e.handle, e.custom, e.gvr
	e.mu.Unlock()
	if h != nil {
		return h.Status()
	}
	if custom != nil {
		st := dynamicinformer.Status{GVR: gvr, State: dynamicinformer.Syncing}
		if custom.HasSynced() {
			st.State = dynamicinformer.Synced
		}
		return st
	}
	reason := fmt.Sprintf("no served resource has kind %s", e.gvk)
	return dynamicinformer.Status{
		State:  dynamicinformer.Pending,
		Reason: reason,
		Err:    &dynamicinformer.InformerError{Kind: dynamicinformer.ErrNotServed, Err: errors.New(reason)},
	}
}

// resolved makes the kind's informer on the factory at gvr (the kind was
// unresolved) and moves the handlers and indexers added meanwhile onto
// it. c.mu is held (so RemoveInformer cannot run meanwhile).
func (e *entry) resolved(gvr schema.GroupVersionResource, namespaced bool) {
	e.mu.Lock()
	if e.resolvedLocked() || e.removed {
		e.mu.Unlock()
		return
	}
	if !namespaced && e.clusterOC != nil {
		// Taken as namespaced while not known: a cluster-scoped kind
		// has the kind's cluster config, not its namespace's.
		e.oc, e.transform, e.noDeepCopy = *e.clusterOC, e.clusterTransform, e.clusterOC.noDeepCopy
	}
	e.mu.Unlock()
	h, custom, stop := e.c.makeInformer(e, gvr, namespaced)
	e.mu.Lock()
	if e.resolvedLocked() || e.removed {
		e.mu.Unlock()
		release(h, stop)
		return
	}
	inf := custom
	if h != nil {
		inf = h.Informer()
	}
	var errs []error
	if ix := e.placeholder.GetIndexer().GetIndexers(); len(ix) > 0 {
		if err := inf.AddIndexers(ix); err != nil {
			errs = append(errs, fmt.Errorf("indexers: %w", err))
		}
	}
	for _, r := range e.waiting {
		inner, err := inf.AddEventHandlerWithOptions(r.handler, r.opts)
		if err != nil {
			errs = append(errs, fmt.Errorf("event handler: %w", err))
			continue
		}
		r.mu.Lock()
		r.inner = inner
		r.mu.Unlock()
	}
	e.waiting = nil
	e.handle, e.custom, e.stopCustom, e.gvr, e.namespaced = h, custom, stop, gvr, namespaced
	e.mu.Unlock()
	if len(errs) > 0 {
		e.c.logger.Error(errors.Join(errs...), "cannot move what was added to a pending informer onto the informer of its resource", "gvk", e.gvk.String(), "gvr", gvr.String())
	}
	e.c.notify()
}

// notServed reports whether the kind's resource is known not to be served
// (unresolved, Pending with ErrNotServed, or Removed).
func (e *entry) notServed() bool {
	return notServed(e.status())
}

func notServed(st dynamicinformer.Status) bool {
	return st.State == dynamicinformer.Removed ||
		(st.State == dynamicinformer.Pending && errors.Is(st.Err, dynamicinformer.ErrNotServed))
}

type waitMode int

const (
	waitRead     waitMode = iota // Get, List: not served is an error
	waitInformer                 // GetInformer: not served returns the informer
)

// customPoll is how often a wait looks at a custom informer's HasSynced
// (it reports no status changes).
const customPoll = 50 * time.Millisecond

// wait waits until the informer can answer (see Get and GetInformer). For
// waitRead it returns the source to read from.
func (e *entry) wait(ctx context.Context, mode waitMode) (source, error) {
	e.mu.Lock()
	custom := e.custom
	e.mu.Unlock()
	if custom != nil {
		// A custom informer (Options.NewInformer): waited for as
		// controller-runtime waits for its informers.
		t := time.NewTicker(customPoll)
		defer t.Stop()
		for !custom.HasSynced() {
			select {
			case <-t.C:
			case <-ctx.Done():
				return source{}, apierrors.NewTimeoutError(fmt.Sprintf("failed waiting for %s Informer to sync: %v", e.gvk, ctx.Err()), 0)
			}
		}
		return source{inf: custom}, nil
	}
	for {
		ch := e.c.changes()
		h, _ := e.current()
		st := e.status()
		switch {
		case notServed(st) && mode == waitRead:
			err := st.Err
			if err == nil {
				err = dynamicinformer.ErrNotServed
			}
			e.mu.Lock()
			gvr := e.gvr
			e.mu.Unlock()
			return source{}, &NotServedError{GVK: e.gvk, GVR: gvr, Err: err}
		case notServed(st):
			return source{h: h}, nil
		case h != nil && h.Informer().HasSynced():
			return source{h: h, inf: h.Informer()}, nil
		case st.State == dynamicinformer.Failed, st.State == dynamicinformer.Stopped:
			if st.Err != nil {
				return source{}, fmt.Errorf("informer for %s: %w", e.gvk, st.Err)
			}
			return source{}, fmt.Errorf("informer for %s: %s: %s", e.gvk, st.State, st.Reason)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return source{}, apierrors.NewTimeoutError(fmt.Sprintf("failed waiting for %s Informer to sync (%s: %s): %v", e.gvk, st.State, st.Reason, ctx.Err()), 0)
		}
	}
}

func (e *entry) deepCopy(opt *bool) bool {
	e.mu.Lock()
	no := e.noDeepCopy
	e.mu.Unlock()
	return !no && (opt == nil || !*opt)
}

// source is what a read reads: a synced informer, with its factory
// handle (nil for a custom informer).
type source struct {
	h   *dynamicinformer.InformerHandle
	inf toolscache.SharedIndexInformer
}

// list is the objects of namespace ns ("": all) matching sel: through
// informerkit's label index, or a scan of a custom informer's store.
func (s source) list(ns string, sel labels.Selector) ([]runtime.Object, error) {
	if s.h != nil {
		if ns != "" {
			return s.h.Lister().ByNamespace(ns).List(sel)
		}
		return s.h.Lister().List(sel)
	}
	var out []runtime.Object
	add := func(o any) {
		if ro, ok := o.(runtime.Object); ok {
			out = append(out, ro)
		}
	}
	var err error
	if ns != "" {
		err = toolscache.ListAllByNamespace(s.inf.GetIndexer(), ns, sel, add)
	} else {
		err = toolscache.ListAll(s.inf.GetIndexer(), sel, add)
	}
	return out, err
}

func (e *entry) get(src source, key client.ObjectKey, out client.Object, opts ...client.GetOption) error {
	var getOpts client.GetOptions
	getOpts.ApplyOptions(opts)
	e.mu.Lock()
	namespaced := e.namespaced
	e.mu.Unlock()
	if !namespaced {
		key.Namespace = ""
	}
	storeKey := key.Name
	if key.Namespace != "" {
		storeKey = key.Namespace + "/" + key.Name
	}
	obj, exists, err := src.inf.GetIndexer().GetByKey(storeKey)
	if err != nil {
		return err
	}
	if !exists {
		return apierrors.NewNotFound(schema.GroupResource{Group: e.gvk.Group, Resource: e.gvk.Kind}, key.Name)
	}
	ro, ok := obj.(runtime.Object)
	if !ok {
		return fmt.Errorf("cache contained %T, which is not an Object", obj)
	}
	deep := e.deepCopy(getOpts.UnsafeDisableDeepCopy)
	if deep {
		ro = ro.DeepCopyObject()
	}
	outVal, objVal := reflect.ValueOf(out), reflect.ValueOf(ro)
	if !objVal.Type().AssignableTo(outVal.Type()) {
		return fmt.Errorf("cache had type %s, but %s was asked for", objVal.Type(), outVal.Type())
	}
	reflect.Indirect(outVal).Set(reflect.Indirect(objVal))
	if deep {
		out.GetObjectKind().SetGroupVersionKind(e.gvk)
	}
	return nil
}

// items is what List answers from src (see Cache.List), at most
// lo.Limit if set.
func (e *entry) items(src source, lo client.ListOptions) ([]runtime.Object, error) {
	sel := lo.LabelSelector
	var objs []any
	switch {
	case lo.FieldSelector != nil:
		if !requiresExactMatch(lo.FieldSelector) {
			return nil, fmt.Errorf("non-exact field matches are not supported by the cache")
		}
		var err error
		if objs, err = e.byIndexes(src, lo.FieldSelector.Requirements(), lo.Namespace); err != nil {
			return nil, err
		}
	default:
		if sel == nil {
			sel = labels.Everything()
		}
		ros, err := src.list(lo.Namespace, sel)
		if err != nil {
			return nil, err
		}
		sel = nil // matched by the lister
		objs = make([]any, len(ros))
		for i, o := range ros {
			objs[i] = o
		}
	}
	deep := e.deepCopy(lo.UnsafeDisableDeepCopy)
	items := make([]runtime.Object, 0, len(objs))
	for _, item := range objs {
		if lo.Limit > 0 && int64(len(items)) >= lo.Limit {
			break
		}
		obj, ok := item.(runtime.Object)
		if !ok {
			return nil, fmt.Errorf("cache contained %T, which is not an Object", item)
		}
		if sel != nil {
			m, err := apimeta.Accessor(obj)
			if err != nil {
				return nil, err
			}
			if !sel.Matches(labels.Set(m.GetLabels())) {
				continue
			}
		}
		if deep {
			obj = obj.DeepCopyObject()
			obj.GetObjectKind().SetGroupVersionKind(e.gvk)
		}
		items = append(items, obj)
	}
	return items, nil
}

func requiresExactMatch(sel fields.Selector) bool {
	reqs := sel.Requirements()
	if len(reqs) == 0 {
		return false
	}
	for _, r := range reqs {
		if r.Operator != selection.Equals && r.Operator != selection.DoubleEquals {
			return false
		}
	}
	return true
}

// byIndexes answers exact field requirements from IndexField indexes, as
// controller-runtime's cache reader does.
func (e *entry) byIndexes(src source, reqs fields.Requirements, namespace string) ([]any, error) {
	indexer := src.inf.GetIndexer()
	var objs []any
	for i, req := range reqs {
		name := fieldIndexName(req.Field)
		value := keyToNamespacedKey(namespace, req.Value)
		e.mu.Lock()
		fn, ok := e.fieldIndexes[name]
		e.mu.Unlock()
		if !ok {
			return nil, fmt.Errorf("index with name %s does not exist (register the field with IndexField)", name)
		}
		if i == 0 {
			var err error
			if objs, err = indexer.ByIndex(name, value); err != nil {
				return nil, err
			}
		} else {
			kept := objs[:0:0]
			for _, o := range objs {
				vals, err := fn(o)
				if err != nil {
					return nil, err
				}
				if slices.Contains(vals, value) {
					kept = append(kept, o)
				}
			}
			objs = kept
		}
		if len(objs) == 0 {
			return nil, nil
		}
	}
	return objs, nil
}

const allNamespacesNamespace = "__all_namespaces"

func fieldIndexName(field string) string { return "field:" + field }

func keyToNamespacedKey(ns, key string) string {
	if ns != "" {
		return ns + "/" + key
	}
	return allNamespacesNamespace + "/" + key
}

// indexField adds the field index controller-runtime's IndexField adds:
// each value under its namespace and under all namespaces.
func (e *entry) indexField(field string, extract client.IndexerFunc) error {
	fn := func(raw any) ([]string, error) {
		obj, ok := raw.(client.Object)
		if !ok {
			return nil, fmt.Errorf("object of type %T is not an Object", raw)
		}
		ns := obj.GetNamespace()
		raws := extract(obj)
		n := len(raws)
		if ns != "" {
			n *= 2
		}
		vals := make([]string, n)
		for i, v := range raws {
			vals[i] = keyToNamespacedKey(ns, v)
			if ns != "" {
				vals[i+len(raws)] = keyToNamespacedKey("", v)
			}
		}
		return vals, nil
	}
	name := fieldIndexName(field)
	if err := e.inf.AddIndexers(toolscache.Indexers{name: fn}); err != nil {
		return err
	}
	e.mu.Lock()
	e.fieldIndexes[name] = fn
	e.mu.Unlock()
	return nil
}

// Informer is the cache.Informer GetInformer returns, and a
// toolscache.SharedIndexInformer: the informerkit informer's handle
// (handlers' panics recovered and counted in its Status, removed by
// RemoveInformer). The cache runs it: Run and RunWithContext return at
// once, and SetTransform and SetWatchErrorHandler* are errors (set
// transforms through cache.Options; watch errors are in Status).
//
// While the kind is not served, HasSynced — and the HasSynced of the
// registrations its AddEventHandler methods return — is true: it holds
// nothing, and will sync by itself once served. So a controller of a kind
// whose CRD is not installed starts, and reconciles once the CRD is
// established. While no served resource has the kind at all (its
// resource is not known yet), GetStore and GetIndexer are empty, and the
// handlers and indexers added are moved onto the informer of the
// resource once one serves the kind; Status is then Pending with
// ErrNotServed and an empty GVR. With Options.NewInformer it stands for
// the informer NewInformer returned (its Status is then Syncing or
// Synced). A kind held per namespace config has one Informer per config;
// GetInformer then returns one cache.Informer over them all. Its methods
// are safe for concurrent use.
type Informer struct {
	e *entry
}

var _ toolscache.SharedIndexInformer = (*Informer)(nil)

// Status is the informerkit informer's status (Pending, Syncing, Synced,
// Removed, Failed, ... with a typed error).
func (i *Informer) Status() dynamicinformer.Status { return i.e.status() }

// HasSynced: the informer has synced (at least once), or its resource is
// not served.
func (i *Informer) HasSynced() bool {
	if i.e.notServed() {
		return true
	}
	e := i.e
	e.mu.Lock()
	inf, ok := e.liveLocked(), e.resolvedLocked()
	e.mu.Unlock()
	return ok && inf.HasSynced()
}

// HasSyncedChecker is done when HasSynced is true at the time of the call
// of its Done, else when the informer syncs.
func (i *Informer) HasSyncedChecker() toolscache.DoneChecker {
	return checker{e: i.e, inner: func() toolscache.DoneChecker {
		e := i.e
		e.mu.Lock()
		inf, ok := e.liveLocked(), e.resolvedLocked()
		e.mu.Unlock()
		if !ok {
			return nil
		}
		return inf.HasSyncedChecker()
	}}
}

func (i *Informer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandlerWithOptions(h, toolscache.HandlerOptions{})
}

func (i *Informer) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, d time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandlerWithOptions(h, toolscache.HandlerOptions{ResyncPeriod: &d})
}

func (i *Informer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, o toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	e := i.e
	e.mu.Lock()
	defer e.mu.Unlock()
	r := &registration{e: e, handler: h, opts: o}
	if !e.resolvedLocked() {
		if e.removed {
			return nil, fmt.Errorf("informer for %s was removed (RemoveInformer)", e.gvk)
		}
		e.waiting = append(e.waiting, r)
		return r, nil
	}
	inner, err := e.liveLocked().AddEventHandlerWithOptions(h, o)
	if err != nil {
		return nil, err
	}
	r.inner = inner
	return r, nil
}

func (i *Informer) RemoveEventHandler(reg toolscache.ResourceEventHandlerRegistration) error {
	e := i.e
	r, ok := reg.(*registration)
	if !ok {
		_, inf := e.current()
		return inf.RemoveEventHandler(reg)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if idx := slices.Index(e.waiting, r); idx >= 0 {
		e.waiting = slices.Delete(e.waiting, idx, idx+1)
		return nil
	}
	r.mu.Lock()
	inner := r.inner
	r.mu.Unlock()
	if inner == nil || !e.resolvedLocked() {
		return nil
	}
	return e.liveLocked().RemoveEventHandler(inner)
}

// AddIndexers adds indexers to the informer's store (kept and moved onto
// the informer of the resource while the kind is not known yet).
func (i *Informer) AddIndexers(indexers toolscache.Indexers) error {
	e := i.e
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.liveLocked().AddIndexers(indexers)
}

// IsStopped: the informer was removed (RemoveInformer) or has stopped.
func (i *Informer) IsStopped() bool {
	e := i.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.resolvedLocked() || e.removed {
		return e.removed
	}
	return e.liveLocked().IsStopped()
}

func (i *Informer) GetStore() toolscache.Store {
	_, inf := i.e.current()
	return inf.GetStore()
}

func (i *Informer) GetIndexer() toolscache.Indexer {
	_, inf := i.e.current()
	return inf.GetIndexer()
}

func (i *Informer) GetController() toolscache.Controller {
	_, inf := i.e.current()
	return inf.GetController()
}

func (i *Informer) LastSyncResourceVersion() string {
	_, inf := i.e.current()
	return inf.LastSyncResourceVersion()
}

// Run returns at once: the cache runs its informers (Cache.Start).
func (i *Informer) Run(<-chan struct{}) {}

// RunWithContext returns at once: the cache runs its informers.
func (i *Informer) RunWithContext(context.Context) {}

// SetTransform is an error: transforms are set through cache.Options
// (DefaultTransform, ByObject[...].Transform) before the informer is made.
func (i *Informer) SetTransform(toolscache.TransformFunc) error {
	return unsupported("Informer.SetTransform", "set DefaultTransform or ByObject[...].Transform in cache.Options")
}

// SetWatchErrorHandler is an error: watch errors are in Status.
func (i *Informer) SetWatchErrorHandler(toolscache.WatchErrorHandler) error {
	return unsupported("Informer.SetWatchErrorHandler", "watch errors are in the informer's Status (Informer.Status, Cache.Factory().OnStatusChange)")
}

// SetWatchErrorHandlerWithContext is an error: watch errors are in Status.
func (i *Informer) SetWatchErrorHandlerWithContext(toolscache.WatchErrorHandlerWithContext) error {
	return unsupported("Informer.SetWatchErrorHandlerWithContext", "watch errors are in the informer's Status (Informer.Status, Cache.Factory().OnStatusChange)")
}

// registration is a handler added through an Informer; inner is the
// factory informer's registration (nil while the kind is unresolved).
type registration struct {
	e       *entry
	handler toolscache.ResourceEventHandler
	opts    toolscache.HandlerOptions

	mu    sync.Mutex // guards inner
	inner toolscache.ResourceEventHandlerRegistration
}

func (r *registration) current() toolscache.ResourceEventHandlerRegistration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inner
}

func (r *registration) HasSynced() bool {
	if r.e.notServed() {
		return true
	}
	inner := r.current()
	return inner != nil && inner.HasSynced()
}

func (r *registration) HasSyncedChecker() toolscache.DoneChecker {
	return checker{e: r.e, inner: func() toolscache.DoneChecker {
		if inner := r.current(); inner != nil {
			return inner.HasSyncedChecker()
		}
		return nil
	}}
}

// checker is done when the kind is not served at the time of Done, else
// when inner (the factory informer's checker, nil while unresolved) is.
type checker struct {
	e     *entry
	inner func() toolscache.DoneChecker
}

func (c checker) Name() string {
	if in := c.inner(); in != nil {
		return in.Name()
	}
	return "informerkit informer for " + c.e.gvk.String()
}

var closed = func() chan struct{} { ch := make(chan struct{}); close(ch); return ch }()

func (c checker) Done() <-chan struct{} {
	if c.e.notServed() {
		return closed
	}
	if in := c.inner(); in != nil {
		return in.Done()
	}
	return closed // unresolved (so not served)
}
