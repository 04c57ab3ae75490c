package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/cache"
	"github.com/informerkit/informerkit/discoveryresolver"
	"github.com/informerkit/informerkit/dynamicinformer"
)

// watcher owns the factory, the informers the configuration asks for, and
// everything that looks at them (printer, counters, event waiters).
type watcher struct {
	cfg     *Config
	factory *dynamicinformer.Factory
	out     *printer
	counts  *counters

	handles []*dynamicinformer.InformerHandle
	sub     *dynamicinformer.Subscription

	stateMu   sync.Mutex
	lastState map[schema.GroupVersionResource]dynamicinformer.State

	seenMu  sync.Mutex
	seen    map[string]int // "TYPE gvr ns/name" → count, for the demo's waits
	changed chan struct{}  // closed and replaced on every event

	removeStatus func()
	started      time.Time
}

func newWatcher(cfg *Config, restCfg *rest.Config, out *printer, logger logr.Logger) (*watcher, error) {
	f, err := dynamicinformer.NewForConfig(restCfg, 0,
		dynamicinformer.WithLogger(logger),
		dynamicinformer.WithDefaults(dynamicinformer.WithTransform(cache.StripManagedFields)))
	if err != nil {
		return nil, err
	}
	return &watcher{
		cfg: cfg, factory: f, out: out, counts: newCounters(),
		lastState: map[schema.GroupVersionResource]dynamicinformer.State{},
		seen:      map[string]int{}, changed: make(chan struct{}),
	}, nil
}

// resourceOptions are the informer options of one resource: its own
// namespaces and selectors, else the global ones.
func (w *watcher) resourceOptions(r ResourceSpec) []dynamicinformer.ResourceOption {
	ns, ls, fsel := w.cfg.Namespaces, w.cfg.LabelSelector, w.cfg.FieldSelector
	if len(r.Namespaces) > 0 {
		ns = r.Namespaces
	}
	if r.LabelSelector != "" {
		ls = r.LabelSelector
	}
	if r.FieldSelector != "" {
		fsel = r.FieldSelector
	}
	var opts []dynamicinformer.ResourceOption
	if len(ns) > 0 {
		opts = append(opts, dynamicinformer.WithNamespaces(ns...))
	}
	if ls != "" {
		opts = append(opts, dynamicinformer.WithLabelSelector(ls))
	}
	if fsel != "" {
		opts = append(opts, dynamicinformer.WithFieldSelector(fsel))
	}
	return opts
}

func checkSelectors(label, field string) error {
	if label != "" {
		if _, err := labels.Parse(label); err != nil {
			return usagef("invalid label selector %q: %v", label, err)
		}
	}
	if field != "" {
		if _, err := fields.ParseSelector(field); err != nil {
			return usagef("invalid field selector %q: %v", field, err)
		}
	}
	return nil
}

// setup resolves every resource and registers handlers, before anything
// starts. Errors that are the user's (unknown, ambiguous, unwatchable
// names, bad selectors) are usage errors (exit 2).
func (w *watcher) setup(ctx context.Context) error {
	if err := checkSelectors(w.cfg.LabelSelector, w.cfg.FieldSelector); err != nil {
		return err
	}
	w.removeStatus = w.factory.OnStatusChange(w.onStatus)
	if w.cfg.All {
		filter := discoveryresolver.Filter{Groups: w.cfg.Groups, Categories: w.cfg.Categories}
		if len(w.cfg.Namespaces) > 0 {
			namespaced := true // a namespace option does not apply to cluster-scoped resources
			filter.Namespaced = &namespaced
		}
		sub, err := w.factory.Subscribe(ctx, filter, w.onEvent, w.resourceOptions(ResourceSpec{})...)
		if err != nil {
			return fmt.Errorf("subscribe: %w", err)
		}
		w.sub = sub
		return nil
	}
	seen := map[string]bool{}
	for _, r := range w.cfg.Resources {
		if err := checkSelectors(r.LabelSelector, r.FieldSelector); err != nil {
			return err
		}
		opts := w.resourceOptions(r)
		gi, err := w.factory.ForName(ctx, r.Name, opts...)
		if err != nil {
			gvr, waitable := parseQualifiedGVR(r.Name)
			switch {
			case w.cfg.WaitForCRDs && errors.Is(err, discoveryresolver.ErrNotFound) && waitable:
				gi = w.factory.ForResource(gvr, opts...)
			case w.cfg.WaitForCRDs && errors.Is(err, discoveryresolver.ErrNotFound):
				return usagef("resource %q is not served by the cluster; to wait for it with --wait-for-crds, name it fully qualified as resource.version.group (for example crontabs.v1.stable.example.com): %v", r.Name, err)
			default:
				return resolveError(r.Name, err)
			}
		}
		h := gi
		st := h.Status()
		key := fmt.Sprintf("%s|%q|%s|%s", h.GVR(), st.Namespaces, st.LabelSelector, st.FieldSelector)
		if seen[key] {
			h.Release() // the same resource named twice (ct and crontabs.stable.example.com): one stream of events
			continue
		}
		seen[key] = true
		if _, err := h.Informer().AddEventHandler(w.handlerFor(h.GVR())); err != nil {
			return fmt.Errorf("%s: add handler: %w", r.Name, err)
		}
		w.handles = append(w.handles, h)
	}
	return nil
}

// resolveError explains why a name cannot be watched, as a usage error when
// the name (not the network) is the problem.
func resolveError(name string, err error) error {
	var amb *discoveryresolver.AmbiguousError
	switch {
	case errors.As(err, &amb):
		var cands []string
		for _, c := range amb.Candidates {
			cands = append(cands, gvrString(c.GVR))
		}
		return usagef("resource %q is ambiguous; qualify it with its group, one of: %s", name, strings.Join(cands, ", "))
	case errors.Is(err, discoveryresolver.ErrNotFound):
		return usagef("unknown resource %q: the server serves no resource of that name (see kubectl api-resources; use --wait-for-crds with resource.version.group to wait for a CRD): %v", name, err)
	case errors.Is(err, discoveryresolver.ErrNotWatchable):
		return usagef("resource %q cannot be watched (it does not support list and watch)", name)
	case errors.Is(err, discoveryresolver.ErrSubresource):
		return usagef("resource %q is a subresource; subresources cannot be watched", name)
	case errors.Is(err, dynamicinformer.ErrNamespaceOnClusterScoped):
		return usagef("resource %q is cluster-scoped; drop -n/--namespace for it", name)
	case errors.Is(err, dynamicinformer.ErrInvalidSelector):
		return usagef("resource %q: %v", name, err)
	}
	return fmt.Errorf("resource %q: %w", name, err)
}

func (w *watcher) handlerFor(gvr schema.GroupVersionResource) toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			w.onEvent(dynamicinformer.Event{Type: dynamicinformer.Added, GVR: gvr, Object: obj, IsInitialList: initial})
		},
		UpdateFunc: func(oldObj, newObj any) {
			w.onEvent(dynamicinformer.Event{Type: dynamicinformer.Updated, GVR: gvr, Object: newObj, OldObject: oldObj})
		},
		DeleteFunc: func(obj any) {
			ev := dynamicinformer.Event{Type: dynamicinformer.Deleted, GVR: gvr, Object: obj}
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				ev.Object, ev.FinalStateUnknown = d.Obj, true
			}
			w.onEvent(ev)
		},
	}
}

func (w *watcher) onEvent(ev dynamicinformer.Event) {
	u, ok := objectOf(ev.Object)
	if !ok {
		return
	}
	w.counts.inc(ev.GVR, string(ev.Type))
	w.out.event(ev)
	w.seenMu.Lock()
	w.seen[eventKey(string(ev.Type), ev.GVR, u.GetNamespace(), u.GetName())]++
	close(w.changed)
	w.changed = make(chan struct{})
	w.seenMu.Unlock()
}

func eventKey(typ string, gvr schema.GroupVersionResource, ns, name string) string {
	return typ + " " + gvrString(gvr) + " " + ns + "/" + name
}

// waitEvent waits until an event of that type has been printed for the
// object (the demo uses it to keep its output in a readable order).
func (w *watcher) waitEvent(ctx context.Context, typ dynamicinformer.EventType, gvr schema.GroupVersionResource, ns, name string) error {
	key := eventKey(string(typ), gvr, ns, name)
	for {
		w.seenMu.Lock()
		n, ch := w.seen[key], w.changed
		w.seenMu.Unlock()
		if n > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", key, ctx.Err())
		case <-ch:
		}
	}
}

func (w *watcher) onStatus(st dynamicinformer.Status) {
	w.stateMu.Lock()
	prev := w.lastState[st.GVR]
	w.lastState[st.GVR] = st.State
	w.stateMu.Unlock()
	w.out.status(st, prev, false)
}

// watches reports whether any informer of the watcher is for gvr.
func (w *watcher) watches(gvr schema.GroupVersionResource) bool {
	for _, h := range w.handles {
		if h.GVR() == gvr {
			return true
		}
	}
	if w.sub != nil {
		for _, r := range w.sub.Resources() {
			if r == gvr {
				return true
			}
		}
	}
	return false
}

// waitState waits until an informer of gvr reaches one of states.
func (w *watcher) waitState(ctx context.Context, gvr schema.GroupVersionResource, states ...dynamicinformer.State) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		for _, st := range w.factory.Statuses() {
			if st.GVR != gvr {
				continue
			}
			for _, s := range states {
				if st.State == s {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s to be %v: %w", gvrString(gvr), states, ctx.Err())
		case <-t.C:
		}
	}
}

func (w *watcher) start(ctx context.Context) {
	w.started = time.Now()
	// Informers run until shutdown(), not until ctx ends: the end of
	// --duration or a signal cancels ctx, and shutdown() must still see the
	// informers' last real states (not Stopped) for the final status.
	w.factory.Start(context.WithoutCancel(ctx))
}

// settled: the informer is not going to change by itself soon — it has
// synced, or is waiting for its resource (a CRD not installed), or is in a
// terminal state. "Pending: not started" and Syncing are not settled.
func settled(st dynamicinformer.Status) bool {
	switch st.State {
	case dynamicinformer.Syncing:
		return false
	case dynamicinformer.Pending:
		return st.Reason != "not started" && !time.Now().Before(st.Since.Add(2*time.Second))
	}
	return true
}

// progress prints, every interval until every informer has settled, one
// line per resource: synced or not and how many objects are cached.
func (w *watcher) progress(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sts := w.factory.Statuses()
		done := 0
		var parts []string
		allSettled := true
		for _, st := range sts {
			if st.State == dynamicinformer.Synced {
				done++
			}
			if !settled(st) {
				allSettled = false
			}
			mark := "…"
			if st.State == dynamicinformer.Synced {
				mark = "✓"
			}
			parts = append(parts, fmt.Sprintf("%s %s %s %d objects", mark, gvrString(st.GVR), st.State, st.Objects))
		}
		sort.Strings(parts)
		w.out.info("%s SYNC    %d/%d synced after %s: %s", time.Now().Format("15:04:05.000"), done, len(sts),
			time.Since(w.started).Round(100*time.Millisecond), strings.Join(parts, "; "))
		if allSettled && len(sts) > 0 {
			return
		}
	}
}

func (w *watcher) printStatus(title string) {
	w.out.statusTable(title, w.factory.Statuses(), w.counts.snapshot())
}

// shutdown stops every informer and, if they were started, prints the
// final status.
func (w *watcher) shutdown() {
	if w.started.IsZero() {
		if w.removeStatus != nil {
			w.removeStatus()
		}
		w.factory.Shutdown()
		return
	}
	final := w.factory.Statuses() // before stopping: the last real states, not Stopped
	if w.removeStatus != nil {
		w.removeStatus()
	}
	if w.sub != nil {
		w.sub.Stop()
	}
	w.factory.Shutdown()
	w.out.statusTable("final status", final, w.counts.snapshot())
	for _, st := range final {
		w.out.status(st, "", true)
	}
}
