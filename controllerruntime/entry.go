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

// entry is the cache's informer of one kind and class.
type entry struct {
	c          *Cache
	gvk        schema.GroupVersionKind
	class      class
	gvr        schema.GroupVersionResource
	namespaced bool
	handle     *dynamicinformer.InformerHandle
	inf        *Informer
	noDeepCopy bool

	mu           sync.Mutex
	fieldIndexes map[string]toolscache.IndexFunc // by index name ("field:" + field)

	statusMu   sync.Mutex // guards statusCh, lastStatus
	statusCh   <-chan struct{}
	lastStatus dynamicinformer.Status
}

// status is the informer's Status as of the cache's last status change
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
		e.lastStatus, e.statusCh = e.handle.Status(), ch
	}
	return e.lastStatus
}

// notServed reports whether the kind's resource is known not to be served
// (Pending with ErrNotServed, or Removed).
func (e *entry) notServed() bool {
	st := e.status()
	return st.State == dynamicinformer.Removed ||
		(st.State == dynamicinformer.Pending && errors.Is(st.Err, dynamicinformer.ErrNotServed))
}

type waitMode int

const (
	waitRead     waitMode = iota // Get, List: not served is an error
	waitInformer                 // GetInformer: not served returns the informer
)

// wait waits until the informer can answer (see Get and GetInformer).
func (e *entry) wait(ctx context.Context, mode waitMode) error {
	for {
		ch := e.c.changes()
		st := e.status()
		notServed := st.State == dynamicinformer.Removed ||
			(st.State == dynamicinformer.Pending && errors.Is(st.Err, dynamicinformer.ErrNotServed))
		switch {
		case notServed && mode == waitRead:
			err := st.Err
			if err == nil {
				err = dynamicinformer.ErrNotServed
			}
			return &NotServedError{GVK: e.gvk, GVR: e.gvr, Err: err}
		case notServed:
			return nil
		case e.inf.SharedIndexInformer.HasSynced():
			return nil
		case st.State == dynamicinformer.Failed, st.State == dynamicinformer.Stopped:
			if st.Err != nil {
				return fmt.Errorf("informer for %s: %w", e.gvk, st.Err)
			}
			return fmt.Errorf("informer for %s: %s: %s", e.gvk, st.State, st.Reason)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return apierrors.NewTimeoutError(fmt.Sprintf("failed waiting for %s Informer to sync (%s: %s): %v", e.gvk, st.State, st.Reason, ctx.Err()), 0)
		}
	}
}

func (e *entry) deepCopy(opt *bool) bool {
	return !e.noDeepCopy && (opt == nil || !*opt)
}

func (e *entry) get(key client.ObjectKey, out client.Object, opts ...client.GetOption) error {
	var getOpts client.GetOptions
	getOpts.ApplyOptions(opts)
	if !e.namespaced {
		key.Namespace = ""
	}
	storeKey := key.Name
	if key.Namespace != "" {
		storeKey = key.Namespace + "/" + key.Name
	}
	obj, exists, err := e.handle.Informer().GetIndexer().GetByKey(storeKey)
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

func (e *entry) list(out client.ObjectList, opts ...client.ListOption) error {
	var lo client.ListOptions
	lo.ApplyOptions(opts)
	if lo.Continue != "" {
		return fmt.Errorf("continue list option is not supported by the cache")
	}
	sel := lo.LabelSelector
	var objs []any
	switch {
	case lo.FieldSelector != nil:
		if !requiresExactMatch(lo.FieldSelector) {
			return fmt.Errorf("non-exact field matches are not supported by the cache")
		}
		var err error
		if objs, err = e.byIndexes(lo.FieldSelector.Requirements(), lo.Namespace); err != nil {
			return err
		}
	default:
		if sel == nil {
			sel = labels.Everything()
		}
		var ros []runtime.Object
		var err error
		if lo.Namespace != "" {
			ros, err = e.handle.Lister().ByNamespace(lo.Namespace).List(sel)
		} else {
			ros, err = e.handle.Lister().List(sel)
		}
		if err != nil {
			return err
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
			return fmt.Errorf("cache contained %T, which is not an Object", item)
		}
		if sel != nil {
			m, err := apimeta.Accessor(obj)
			if err != nil {
				return err
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
	if err := apimeta.SetList(out, items); err != nil {
		return err
	}
	out.SetContinue("continue-not-supported")
	return nil
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
func (e *entry) byIndexes(reqs fields.Requirements, namespace string) ([]any, error) {
	indexer := e.handle.Informer().GetIndexer()
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
	if err := e.handle.Informer().AddIndexers(toolscache.Indexers{name: fn}); err != nil {
		return err
	}
	e.mu.Lock()
	e.fieldIndexes[name] = fn
	e.mu.Unlock()
	return nil
}

// Informer is the cache.Informer GetInformer returns: the informerkit
// informer's handle (handlers' panics recovered and counted in its
// Status, removed by RemoveInformer). HasSynced, and the HasSynced of the
// registrations its AddEventHandler methods return, are also true while
// the kind's resource is not served (it holds nothing, and will sync by
// itself once served): a controller of a kind whose CRD is not installed
// starts, and reconciles once the CRD is established.
type Informer struct {
	toolscache.SharedIndexInformer
	e *entry
}

// Status is the informerkit informer's status (Pending, Syncing, Synced,
// Removed, Failed, ... with a typed error).
func (i *Informer) Status() dynamicinformer.Status { return i.e.handle.Status() }

// HasSynced: the informer has synced (at least once), or its resource is
// not served.
func (i *Informer) HasSynced() bool { return i.SharedIndexInformer.HasSynced() || i.e.notServed() }

// HasSyncedChecker is done when HasSynced is true at the time of the call,
// else when the informer syncs.
func (i *Informer) HasSyncedChecker() toolscache.DoneChecker {
	return checker{inner: i.SharedIndexInformer.HasSyncedChecker(), e: i.e}
}

func (i *Informer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandlerWithOptions(h, toolscache.HandlerOptions{})
}

func (i *Informer) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, d time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandlerWithOptions(h, toolscache.HandlerOptions{ResyncPeriod: &d})
}

func (i *Informer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, o toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	reg, err := i.SharedIndexInformer.AddEventHandlerWithOptions(h, o)
	if err != nil {
		return nil, err
	}
	return &registration{inner: reg, e: i.e}, nil
}

func (i *Informer) RemoveEventHandler(reg toolscache.ResourceEventHandlerRegistration) error {
	if r, ok := reg.(*registration); ok {
		reg = r.inner
	}
	return i.SharedIndexInformer.RemoveEventHandler(reg)
}

type registration struct {
	inner toolscache.ResourceEventHandlerRegistration
	e     *entry
}

func (r *registration) HasSynced() bool { return r.inner.HasSynced() || r.e.notServed() }

func (r *registration) HasSyncedChecker() toolscache.DoneChecker {
	return checker{inner: r.inner.HasSyncedChecker(), e: r.e}
}

type checker struct {
	inner toolscache.DoneChecker
	e     *entry
}

func (c checker) Name() string { return c.inner.Name() }

var closed = func() chan struct{} { ch := make(chan struct{}); close(ch); return ch }()

func (c checker) Done() <-chan struct{} {
	if c.e.notServed() {
		return closed
	}
	return c.inner.Done()
}
