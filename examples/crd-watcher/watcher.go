package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/discoveryresolver"
	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/prometheusmetrics"
	"github.com/informerkit/informerkit/shard"
	"github.com/informerkit/informerkit/shard/membership"
	"github.com/informerkit/informerkit/subscription"
)

// watcher owns the factory, the informers the configuration asks for, and
// everything that looks at them (printer, counters, event waiters, the
// server contact monitor).
type watcher struct {
	cfg     *Config
	ep      endpoint
	factory *dynamicinformer.Factory
	dyn     dynamic.Interface
	probe   rest.Interface // for GET /version
	out     *printer
	counts  *counters
	metrics *prometheusmetrics.Metrics // the factory's informer metrics
	tr      *transitions
	contact *contactMonitor
	table   *tableOutput // -o table / -o wide; nil otherwise

	handles []*dynamicinformer.InformerHandle
	sub     *subscription.Subscription

	seenMu  sync.Mutex     // guards seen and changed
	seen    map[string]int // "TYPE gvr ns/name" → count, for the demo's waits
	changed chan struct{}  // closed and replaced on every event

	// failed receives the first failure that ends the run under
	// --exit-on-failure (buffered; later ones are dropped).
	failed chan error

	restCfg *rest.Config

	// restoredMu guards restoredGVR: per resource, whether the initial
	// list its handler is receiving was restored from --cache-dir (then
	// it is not printed: the run before printed it). Decided on the
	// first initial-list add, forgotten on the next other event.
	restoredMu  sync.Mutex
	restoredGVR map[schema.GroupVersionResource]bool

	member *membership.Member // --shard-group; nil otherwise

	groupMu   sync.Mutex // guards groupView
	groupView *groupView // the group as last seen; nil before the first report
	stopGroup func()     // ends the group reporter and waits for it; nil without a group

	removeStatus func()
	stopContact  context.CancelFunc // ends the contact monitor; nil before start
	started      time.Time
}

func newWatcher(cfg *Config, restCfg *rest.Config, ep endpoint, out *printer, logger logr.Logger) (*watcher, error) {
	metrics := prometheusmetrics.New()
	defaults := []dynamicinformer.ResourceOption{
		dynamicinformer.WithProjection(dynamicinformer.Projection{StripManagedFields: true}),
		dynamicinformer.WithAccessCheck(cfg.AccessCheck),
	}
	if cfg.Shard != "" {
		s, err := shard.ParseStatic(cfg.Shard) // checked by validate
		if err != nil {
			return nil, err
		}
		defaults = append(defaults, dynamicinformer.WithShard(s))
	}
	// The library checks contact as the watcher's own monitor does (every
	// contactInterval, bounded by --request-timeout), so an informer turns
	// Stale when the CONTACT line says the server is gone, not at the
	// library's slower default.
	f, err := dynamicinformer.NewForConfig(restCfg, dynamicinformer.Options{Defaults: defaults, Logger: logger, Metrics: metrics,
		CacheDir: cfg.CacheDir, CacheSecrets: cfg.CacheSecrets,
		ContactCheckInterval: contactInterval, ContactCheckTimeout: cfg.RequestTimeout})
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(restCfg)
	if err != nil {
		return nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(restCfg)
	if err != nil {
		return nil, err
	}
	w := &watcher{
		cfg: cfg, ep: ep, restCfg: restCfg, factory: f, dyn: dyn, probe: disc.RESTClient(), out: out, counts: newCounters(), metrics: metrics,
		seen: map[string]int{}, changed: make(chan struct{}), failed: make(chan error, 1),
		restoredGVR: map[schema.GroupVersionResource]bool{},
	}
	if cfg.Output == "table" || cfg.Output == "wide" {
		client, err := newRESTTable(restCfg)
		if err != nil {
			return nil, err
		}
		w.table = newTableOutput(client, out, cfg.Output == "wide", cfg.All || len(cfg.Resources) > 1, cfg.RequestTimeout, w.kindOf)
	}
	w.tr = newTransitions(statusGrace, w.served, out.status)
	if cfg.All && cfg.PermittedNamespaces && cfg.Output == "text" {
		// --all over a user who may see most resources nowhere: one line
		// for those, not one each.
		w.tr.quiet, w.tr.sum = permittedNowhere, out.sumPermittedNowhere
	}
	w.contact = newContactMonitor(func(ctx context.Context) error {
		return probeServer(ctx, w.probe, cfg.RequestTimeout)
	}, contactInterval, w.onContact)
	return w, nil
}

// statusGrace is how long an informer may pass through a transient state
// (Syncing, a start-up Pending) before a STATUS line says so.
const statusGrace = time.Second

// served reports whether discovery, as last seen, serves the informer's
// resource (a "not served" Pending for it is a start-up artefact, not a
// wait for a CRD).
func (w *watcher) served(st dynamicinformer.Status) bool {
	r := w.factory.Resolver()
	if r == nil {
		return false
	}
	_, ok := r.Lookup(st.GVR)
	return ok
}

// kindOf is the kind of a served resource, from discovery as last seen.
func (w *watcher) kindOf(gvr schema.GroupVersionResource) schema.GroupKind {
	if r := w.factory.Resolver(); r != nil {
		if res, ok := r.Lookup(gvr); ok {
			return res.GVK.GroupKind()
		}
	}
	return schema.GroupKind{}
}

// connect checks that the API server answers before anything else talks to
// it, saying "still connecting…" while it waits, and explains a failure in
// the user's terms.
func (w *watcher) connect(ctx context.Context) error {
	done := make(chan struct{})
	defer close(done)
	go func() {
		start := time.Now()
		t := time.NewTimer(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				w.out.info("still connecting to %s… (%s; --request-timeout %s)", w.ep, time.Since(start).Round(time.Second), w.cfg.RequestTimeout)
				t.Reset(3 * time.Second)
			}
		}
	}()
	if err := probeServer(ctx, w.probe, w.cfg.RequestTimeout); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return errors.New(explain(w.ep, err, w.cfg.RequestTimeout))
	}
	return nil
}

// onContact reports a change of contact with the API server.
func (w *watcher) onContact(err error, down time.Duration) {
	var text string
	if err != nil {
		text = explain(w.ep, err, w.cfg.RequestTimeout)
	}
	w.out.contact(w.ep.Host, text, down)
	if err != nil {
		w.fail(errors.New(text))
	}
}

// fail ends the run with exit code 3 under --exit-on-failure; without it,
// it does nothing (the failure has been printed already).
func (w *watcher) fail(err error) {
	if !w.cfg.ExitOnFailure {
		return
	}
	select {
	case w.failed <- err:
	default:
	}
}

// contactErr is the watcher's view of its contact with the API server:
// its own monitor's error, else the first informer that reports it cannot
// reach the server.
func (w *watcher) contactErr(sts []dynamicinformer.Status) error {
	if _, err := w.contact.state(); err != nil {
		return errors.New(explain(w.ep, err, w.cfg.RequestTimeout))
	}
	for _, st := range sts {
		if _, err := libraryContact(st); err != nil {
			// Said as the CONTACT line says it: not the informer's
			// request (its GVR, URL and query).
			return errors.New(explain(w.ep, err, w.cfg.RequestTimeout))
		}
	}
	return nil
}

// lastContact is the last time the server answered the watcher or any
// informer.
func (w *watcher) lastContact(sts []dynamicinformer.Status) time.Time {
	last, _ := w.contact.state()
	for _, st := range sts {
		if l, _ := libraryContact(st); l.After(last) {
			last = l
		}
	}
	return last
}

// selection is what one resource entry selects: its own namespaces and
// selectors, else the global ones.
func (w *watcher) selection(r ResourceSpec) (namespaces []string, label, field string) {
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
	return ns, ls, fsel
}

// resourceOptions are the informer options of one resource: its own
// namespaces and selectors, else the global ones.
func (w *watcher) resourceOptions(r ResourceSpec) []dynamicinformer.ResourceOption {
	ns, ls, fsel := w.selection(r)
	var opts []dynamicinformer.ResourceOption
	switch {
	case w.cfg.PermittedNamespaces:
		opts = append(opts, dynamicinformer.WithPermittedNamespaces(ns...))
	case len(ns) > 0:
		opts = append(opts, dynamicinformer.WithNamespaces(ns...))
	}
	if ls != "" {
		opts = append(opts, dynamicinformer.WithLabelSelector(ls))
	}
	if fsel != "" {
		opts = append(opts, dynamicinformer.WithFieldSelector(fsel))
	}
	if w.member != nil {
		opts = append(opts, dynamicinformer.WithShardSource(w.member))
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
// names, bad selectors, an --all selection that matches nothing) are usage
// errors (exit 2).
func (w *watcher) setup(ctx context.Context) error {
	if err := checkSelectors(w.cfg.LabelSelector, w.cfg.FieldSelector); err != nil {
		return err
	}
	w.removeStatus = w.factory.OnStatusChange(w.onStatus)
	if w.cfg.All {
		filter := discoveryresolver.Filter{Groups: w.cfg.Groups, Categories: w.cfg.Categories}
		if len(w.cfg.Namespaces) > 0 || w.cfg.PermittedNamespaces {
			namespaced := true // a namespace option does not apply to cluster-scoped resources
			filter.Namespaced = &namespaced
		}
		// The subscription runs until shutdown(), not until ctx ends: it
		// releases its informers when its context ends, and the final
		// status must still see every one of them.
		sub, err := subscription.New(context.WithoutCancel(ctx), w.factory, filter, w.onEvent(w.cfg.Namespaces, w.cfg.LabelSelector, w.cfg.FieldSelector), w.resourceOptions(ResourceSpec{})...)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return w.serverError("discovery", err)
		}
		w.sub = sub
		return checkSelection(w.cfg.Groups, w.cfg.Categories, len(sub.Resources()), w.cfg.WaitForCRDs, w.servedResources(ctx), w.out.info)
	}
	seen := map[string]string{} // selectionKey → the name it was first given as
	resolved := w.resolveAll(ctx, w.cfg.Resources)
	for _, r := range w.cfg.Resources {
		if err := checkSelectors(r.LabelSelector, r.FieldSelector); err != nil {
			return err
		}
		opts := w.resourceOptions(r)
		rctx, cancel := context.WithTimeout(ctx, w.cfg.RequestTimeout)
		// The same resource named twice (ct and crontabs.v1.stable.example.com)
		// is one stream of events: found before an informer exists for the
		// second name, which would only be released again (a Stopped line).
		name := r.Name
		rn, known := resolved[r.Name]
		if gvr, ok := w.lookupName(rn, known, r.Name); ok {
			if first, dup := seen[w.selectionKey(gvr, r)]; dup {
				cancel()
				w.out.info("note: %q and %q are the same resource (%s); watching it once", first, r.Name, gvrString(gvr))
				continue
			}
		}
		var gi *dynamicinformer.InformerHandle
		err := rn.err
		if !known || err == nil {
			// Found (ForName finds it in the same snapshot, at once), or
			// not resolved above.
			gi, err = w.factory.ForName(rctx, name, opts...)
		}
		cancel()
		if err != nil {
			gvr, waitable := parseQualifiedGVR(r.Name)
			switch {
			case ctx.Err() != nil:
				return ctx.Err()
			case w.cfg.WaitForCRDs && errors.Is(err, discoveryresolver.ErrNotFound) && waitable:
				gi = w.factory.ForResource(gvr, opts...)
			case w.cfg.WaitForCRDs && errors.Is(err, discoveryresolver.ErrNotFound):
				return waitNameError(r.Name, w.servedResources(ctx))
			case isNameError(err):
				return resolveError(r.Name, err, w.servedResources(ctx))
			default:
				return w.serverError(fmt.Sprintf("resource %q", r.Name), err)
			}
		}
		h := gi
		st := h.Status()
		seen[w.selectionKey(h.GVR(), r)] = r.Name
		if _, err := h.Informer().AddEventHandler(w.handlerFor(h.GVR(), st.Namespaces, st.LabelSelector, st.FieldSelector)); err != nil {
			return fmt.Errorf("%s: add handler: %w", r.Name, err)
		}
		w.handles = append(w.handles, h)
	}
	return nil
}

// resolvedName is what discovery answered for a name.
type resolvedName struct {
	res discoveryresolver.Resource
	err error
}

// resolveAll resolves every resource name at once, before any informer is
// made. A name discovery does not know waits for a discovery round that
// started after it was asked (a CRD created just before must be found),
// and the resolver starts at most one round a second: asked one after
// another, each unknown name (each unserved one under --wait-for-crds)
// cost a second or two, and delayed every resource named after it; asked
// together they share one round. Nothing without a resolver.
func (w *watcher) resolveAll(ctx context.Context, specs []ResourceSpec) map[string]resolvedName {
	r := w.factory.Resolver()
	out := map[string]resolvedName{}
	if r == nil {
		return out
	}
	ctx, cancel := context.WithTimeout(ctx, w.cfg.RequestTimeout)
	defer cancel()
	var names []string
	for _, spec := range specs {
		if !slices.Contains(names, spec.Name) {
			names = append(names, spec.Name)
		}
	}
	got := make([]resolvedName, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := r.Resolve(ctx, name)
			got[i] = resolvedName{res: res, err: err}
		}()
	}
	wg.Wait()
	for i, name := range names {
		out[name] = got[i]
	}
	return out
}

// lookupName is the resource a name stands for, as setup will watch it:
// what discovery answered (rn, if known), else (--wait-for-crds) the
// fully qualified name itself; false if neither tells.
func (w *watcher) lookupName(rn resolvedName, known bool, name string) (schema.GroupVersionResource, bool) {
	if known && rn.err == nil {
		return rn.res.GVR, true
	}
	if w.cfg.WaitForCRDs {
		return parseQualifiedGVR(name)
	}
	return schema.GroupVersionResource{}, false
}

// selectionKey tells apart what two resource entries watch: the resource
// and the entry's own namespaces and selectors (else the global ones).
func (w *watcher) selectionKey(gvr schema.GroupVersionResource, r ResourceSpec) string {
	ns, ls, fsel := w.selection(r)
	set := map[string]bool{}
	for _, n := range ns {
		set[n] = true
	}
	if set[""] {
		set = nil // all namespaces
	}
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	return fmt.Sprintf("%s|%q|%s|%s", gvrString(gvr), names, ls, fsel)
}

// isNameError reports whether resolving a name failed because of the name
// (not the network).
func isNameError(err error) bool {
	var amb *discoveryresolver.AmbiguousError
	return errors.As(err, &amb) || errors.Is(err, discoveryresolver.ErrNotFound) ||
		errors.Is(err, discoveryresolver.ErrNotWatchable) || errors.Is(err, discoveryresolver.ErrSubresource) ||
		errors.Is(err, dynamicinformer.ErrInvalid)
}

// serverError explains a failure to talk to the server during setup.
func (w *watcher) serverError(what string, err error) error {
	return fmt.Errorf("%s: %s", what, explain(w.ep, err, w.cfg.RequestTimeout))
}

// servedResources lists what discovery serves, for suggestions; nil if it
// cannot tell.
func (w *watcher) servedResources(ctx context.Context) []discoveryresolver.Resource {
	r := w.factory.Resolver()
	if r == nil {
		return nil
	}
	rs, _ := r.Resources(ctx)
	return rs
}

// handlerFor adapts an informer's handler calls to events of gvr.
// namespaces, label and field are the informer's: a delete of an object
// that stopped matching the selectors is told apart from a real delete.
func (w *watcher) handlerFor(gvr schema.GroupVersionResource, namespaces []string, label, field string) toolscache.ResourceEventHandler {
	on := w.onEvent(namespaces, label, field)
	return toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			on(subscription.Event{Type: subscription.Added, GVR: gvr, Object: obj, IsInitialList: initial})
		},
		UpdateFunc: func(oldObj, newObj any) {
			on(subscription.Event{Type: subscription.Updated, GVR: gvr, Object: newObj, OldObject: oldObj})
		},
		DeleteFunc: func(obj any) {
			ev := subscription.Event{Type: subscription.Deleted, GVR: gvr, Object: obj}
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				ev.Object, ev.FinalStateUnknown = d.Obj, true
			}
			on(ev)
		},
	}
}

// onEvent returns the event handler of informers with these namespaces
// and selectors.
func (w *watcher) onEvent(namespaces []string, label, field string) func(subscription.Event) {
	return func(ev subscription.Event) {
		u, ok := objectOf(ev.Object)
		if !ok {
			return
		}
		if w.fromDisk(ev) {
			return
		}
		w.counts.inc(ev.GVR, string(ev.Type))
		if w.table != nil {
			w.table.event(ev, u, namespaces, label, field) // a DELETED row is a DELETED row: no GET to tell selector deletes apart
		} else {
			var unmatched string
			if ev.Type == subscription.Deleted && (label != "" || field != "") && w.stillExists(ev.GVR, u) {
				unmatched = strings.Trim(label+","+field, ",")
			}
			w.out.event(ev, unmatched)
		}
		w.seenMu.Lock()
		w.seen[eventKey(string(ev.Type), ev.GVR, u.GetNamespace(), u.GetName())]++
		close(w.changed)
		w.changed = make(chan struct{})
		w.seenMu.Unlock()
	}
}

// fromDisk reports whether ev is an initial-list add of an informer that
// restored its cache from --cache-dir: what the run before already
// printed. The watch after it brings what changed while the watcher was
// down, as ordinary events.
func (w *watcher) fromDisk(ev subscription.Event) bool {
	if w.cfg.CacheDir == "" {
		return false
	}
	w.restoredMu.Lock()
	defer w.restoredMu.Unlock()
	if !ev.IsInitialList {
		delete(w.restoredGVR, ev.GVR)
		return false
	}
	restored, known := w.restoredGVR[ev.GVR]
	if !known {
		for _, st := range w.factory.Statuses() {
			if st.GVR == ev.GVR && st.Restored > 0 {
				restored = true
			}
		}
		w.restoredGVR[ev.GVR] = restored
	}
	return restored
}

// stillExists reports whether the object of a delete seen through a
// selector is still on the server (the same object: same uid, not being
// deleted). The server sends such a delete both when the object is deleted
// and when it changes so that it no longer matches the selector (with the
// object's last matching state in both cases); only a GET tells them
// apart. An error (gone, forbidden, no answer within --request-timeout)
// counts as deleted.
func (w *watcher) stillExists(gvr schema.GroupVersionResource, u *unstructured.Unstructured) bool {
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.RequestTimeout)
	defer cancel()
	var ri dynamic.ResourceInterface = w.dyn.Resource(gvr)
	if ns := u.GetNamespace(); ns != "" {
		ri = w.dyn.Resource(gvr).Namespace(ns)
	}
	cur, err := ri.Get(ctx, u.GetName(), metav1.GetOptions{})
	return err == nil && cur.GetUID() == u.GetUID() && cur.GetDeletionTimestamp() == nil
}

func eventKey(typ string, gvr schema.GroupVersionResource, ns, name string) string {
	return typ + " " + gvrString(gvr) + " " + ns + "/" + name
}

// waitEvent waits until an event of that type has been printed for the
// object (the demo uses it to keep its output in a readable order).
func (w *watcher) waitEvent(ctx context.Context, typ subscription.EventType, gvr schema.GroupVersionResource, ns, name string) error {
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
	w.tr.observe(st)
	if st.State == dynamicinformer.Failed {
		w.fail(fmt.Errorf("%s failed: %s", gvrString(st.GVR), statusDetail(st)))
	} else if len(st.Denied) > 0 && (st.State == dynamicinformer.Synced || st.State == dynamicinformer.Stale) {
		w.fail(fmt.Errorf("%s not ready: %s", gvrString(st.GVR), deniedText(st)))
	}
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
	cctx, cancel := context.WithCancel(ctx)
	w.stopContact = cancel
	go w.contact.run(cctx)
}

// settled: the informer is not going to change by itself soon — it has
// synced, or is waiting for its resource (a CRD not installed) since 2 s
// before now, or is in a terminal state. "Pending: not started" and
// Syncing are not settled.
func settled(st dynamicinformer.Status, now time.Time) bool {
	switch st.State {
	case dynamicinformer.Syncing:
		return false
	case dynamicinformer.Pending:
		return st.Err != nil && !now.Before(st.Since.Add(2*time.Second))
	}
	return true
}

// progress prints, every interval while some informer has not settled,
// one line per resource: synced or not and how many objects are cached.
// Caches that settle before the first interval print no progress at all
// (their STATUS lines say it); after progress lines, a last one says when
// the last informer settled.
func (w *watcher) progress(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	printed := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sts := w.factory.Statuses()
		if len(sts) == 0 {
			continue // --all --wait-for-crds with nothing matching yet
		}
		now := time.Now()
		line, allSettled := syncLine(sts, w.started, now)
		if allSettled && !printed {
			return
		}
		w.out.info("%s %s", now.Format("15:04:05.000"), line)
		printed = true
		if allSettled {
			return
		}
	}
}

// syncLine is a SYNC line at now for informers started at started, and
// whether every informer has settled. Its clock is the informers': the
// duration is the time from their start (w.start) to now, when the line
// is printed — so its timestamp and its duration agree (a Pending that
// settles 2 s after its CRD was found missing prints "after 2s", not the
// time of the last state change).
func syncLine(sts []dynamicinformer.Status, started, now time.Time) (string, bool) {
	done := 0
	var parts []string
	allSettled := true
	for _, st := range sts {
		if st.State == dynamicinformer.Synced || st.State == dynamicinformer.Stale {
			done++ // the list is complete
		}
		if !settled(st, now) {
			allSettled = false
		}
		mark := "…"
		if st.State == dynamicinformer.Synced || st.State == dynamicinformer.Stale {
			mark = "✓"
		}
		parts = append(parts, fmt.Sprintf("%s %s %s %d objects", mark, gvrString(st.GVR), st.State, st.Objects))
	}
	sort.Strings(parts)
	return fmt.Sprintf("SYNC    %d/%d synced after %s: %s", done, len(sts), roundDuration(now.Sub(started)), strings.Join(parts, "; ")), allSettled
}

// roundDuration keeps about two significant digits: 21ms, 1.2s, 14s.
func roundDuration(d time.Duration) time.Duration {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond)
	case d < 10*time.Second:
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Second)
}

// serverLine is the status table's line about the API server: empty while
// in contact, else since when it has not answered and why.
func (w *watcher) serverLine(sts []dynamicinformer.Status) string {
	err := w.contactErr(sts)
	if err == nil {
		return ""
	}
	return fmt.Sprintf("NO CONTACT with the API server since %s: %v", w.lastContact(sts).Format("15:04:05"), err)
}

func (w *watcher) printStatus(title string) {
	sts := w.factory.Statuses()
	w.out.statusTable(title, w.serverLine(sts), w.groupLine(), sts, w.counts.snapshot())
}

// joinGroup joins --shard-group (if given) before any informer exists, and
// reports the group as this replica sees it from then on (SHARD lines).
func (w *watcher) joinGroup(ctx context.Context, demo bool) error {
	if w.cfg.ShardGroup == "" {
		return nil
	}
	m, err := joinGroup(ctx, w.cfg, w.restCfg, demo)
	if err != nil {
		return err
	}
	w.member = m
	gctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	w.stopGroup = func() { cancel(); <-done }
	go func() {
		defer close(done)
		followGroup(gctx, w.cfg, m, func(v groupView) {
			w.groupMu.Lock()
			w.groupView = &v
			w.groupMu.Unlock()
			w.out.shardGroup(v)
		})
	}()
	return nil
}

// group is the shard group as last seen; nil without --shard-group or
// before the first report.
func (w *watcher) group() *groupView {
	w.groupMu.Lock()
	defer w.groupMu.Unlock()
	if w.groupView == nil {
		return nil
	}
	v := *w.groupView
	return &v
}

// groupLine is the status table's line about the shard group; "" without
// --shard-group.
func (w *watcher) groupLine() string {
	v := w.group()
	if v == nil {
		return ""
	}
	return "shard " + v.String()
}

// shutdown stops every informer and, if they were started, prints the
// final status.
//
// With --shard-group it first leaves the group gracefully, while its
// informers still run: the others hold this replica's objects before it
// lets them go.
func (w *watcher) shutdown() {
	if w.member != nil {
		w.stopGroup() // no SHARD lines about the leave itself
		leaveGroup(w.cfg, w.member, w.out)
	}
	if w.started.IsZero() {
		if w.removeStatus != nil {
			w.removeStatus()
		}
		w.tr.stop()
		if w.sub != nil {
			w.sub.Stop()
		}
		w.factory.Shutdown()
		if w.table != nil {
			w.table.stop()
		}
		return
	}
	w.stopContact()
	final := w.factory.Statuses() // before stopping: the last real states, not Stopped
	server, group := w.serverLine(final), w.groupLine()
	if w.removeStatus != nil {
		w.removeStatus()
	}
	w.tr.stop()
	if w.sub != nil {
		w.sub.Stop()
	}
	w.factory.Shutdown()
	if w.table != nil {
		w.table.stop() // the rows still waiting print before the final status
	}
	w.out.statusTable("final status", server, group, final, w.counts.snapshot())
	for _, st := range final {
		w.out.finalStatus(st)
	}
}

// crdRediscovery is how often the library refreshes discovery (its
// default): without a CRD watch, CRD changes are seen that late.
const crdRediscovery = 30 * time.Second

// noteCRDAccess says once, at start, when the user may not list or watch
// CustomResourceDefinitions: the library then follows CRDs through
// discovery and 404 answers, so a CRD installed later is seen only at the
// next discovery refresh. A review that cannot be made says nothing.
func (w *watcher) noteCRDAccess(ctx context.Context) {
	var missing []string
	for _, verb := range []string{"list", "watch"} {
		req := &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
			"spec": map[string]interface{}{"resourceAttributes": map[string]interface{}{
				"verb": verb, "group": "apiextensions.k8s.io", "resource": "customresourcedefinitions"}},
		}}
		gvr := schema.GroupVersionResource{Group: "authorization.k8s.io", Version: "v1", Resource: "selfsubjectaccessreviews"}
		out, err := w.dyn.Resource(gvr).Create(ctx, req, metav1.CreateOptions{})
		if err != nil {
			return
		}
		if allowed, found, _ := unstructured.NestedBool(out.Object, "status", "allowed"); found && !allowed {
			missing = append(missing, verb)
		}
	}
	if len(missing) > 0 {
		w.out.info("note: may not %s customresourcedefinitions: CRDs installed or deleted are seen at the next discovery refresh (every %v) or after a 404, not at once",
			strings.Join(missing, ", "), crdRediscovery)
	}
}
