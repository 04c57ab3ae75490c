package dynamicinformer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/dynamicinformer/internal/access"
	"github.com/informerkit/informerkit/dynamicinformer/internal/codec"
	"github.com/informerkit/informerkit/dynamicinformer/internal/gate"
	"github.com/informerkit/informerkit/dynamicinformer/internal/lifecycle"
	"github.com/informerkit/informerkit/dynamicinformer/internal/listwatch"
	"github.com/informerkit/informerkit/dynamicinformer/internal/presence"
	"github.com/informerkit/informerkit/dynamicinformer/internal/reflectorseam"
	"github.com/informerkit/informerkit/eventhandler"
)

// entry is one client-go informer and everything the factory keeps about
// it: its list/watch machinery, its status, its reference count. It is
// the presence.Member of its informer. It knows nothing of the factory:
// what it needs is given to it as funcs (entryDeps).
type entry struct {
	key    spec
	gvr    atomic.Pointer[schema.GroupVersionResource] // the resource watched now; see currentGVR
	follow bool                                        // obtained by name without a version (see ForName)
	cfg    resourceConfig                              // the first handle's; see join for what later handles change
	relist *relistPeriod                               // WithRelistPeriod, the shortest asked
	deps   entryDeps
	funcs  listwatch.Funcs // the resource's requests, for the scope check
	// switchedTo is the version the state machine was last told of (the
	// first, or a VersionSwitched's), under mu. Statuses report it, so
	// that none pairs the new version with the state reached at the old
	// one (gvr moves a moment before the machine hears of the switch).
	switchedTo string

	informer toolscache.SharedIndexInformer
	lw       *gate.ListerWatcher
	server   *listwatch.Liveness
	logger   logr.Logger
	metrics  *entryMetrics // nil without Options.Metrics

	refs   int                // guarded by Factory.mu
	cancel context.CancelFunc // set when started; guarded by Factory.mu

	done   chan struct{} // closed when the informer's goroutines have ended
	synced chan struct{} // closed when the state first becomes Synced
	wake   chan struct{} // nudges the sync monitor

	shard        entryShard                       // WithShard, WithShardSource
	outsideShard atomic.Int64                     // objects the server sent outside the shard, dropped
	lastContact  atomic.Int64                     // unix nanoseconds of the last request the server answered
	nextCheck    atomic.Int64                     // unix nanoseconds of the next namespace check (0: none)
	permit       atomic.Pointer[access.Permitter] // WithAccessCheck over several namespaces
	disk         *entryDisk                       // Options.CacheDir (nil: not kept on disk)
	stopReason   atomic.Pointer[string]           // what Stopped will say (set before the run context is cancelled)
	unsubscribe  func()                           // ends the namespace-change wakes (nil: none); set before run

	pubMu       sync.Mutex        // serializes applying events' effects, so statuses are published in order; taken before mu
	mu          sync.Mutex        // guards lc, panics, lastPanic
	lc          lifecycle.Machine // the informer's state; changed only by apply
	panics      int64             // panics recovered from handlers added through the handle
	denied      map[string]string // namespaces not listed, and why (Status.Denied or NotPermitted)
	permittedNS []string          // WithPermittedNamespaces: the namespaces held (Status.Permitted)
	lastPanic   *eventhandler.PanicError
}

// entryDeps is what an entry needs from outside.
type entryDeps struct {
	logger   logr.Logger
	publish  func(Status)                      // the factory's status notifier
	notFound func(schema.GroupVersionResource) // presence.NotFound
	// lookupScope reports whether discovery knows gvr and whether it is
	// namespaced (ok false: unknown).
	lookupScope func(schema.GroupVersionResource) (namespaced, ok bool)
	watchIdle   time.Duration
	metrics     *metricsDeps // nil: no metrics
	// initialLists bounds the first list of the factory's informers
	// (nil: no bound).
	initialLists *gate.Slots
	// review answers access questions for WithAccessCheck, shared by the
	// factory's informers (nil: no client to ask); accessBackoff is the
	// re-check back-off (zero: access's defaults).
	review        *access.Reviewer
	accessBackoff struct{ min, max time.Duration }
	// recheck is Options.AccessRecheckPeriod (defaulted).
	recheck time.Duration
	// disk is the factory's cache directory (nil: Options.CacheDir empty).
	disk *factoryDisk
	// raw holds the JSON of the watch events' objects the informer
	// receives (Factory.rawJournal), for its journal (nil: none).
	raw *codec.RawObjects
	// namespacesChanged subscribes wake to changes of the server's
	// namespaces (nil: none are followed).
	namespacesChanged func(wake func()) (remove func())
}

var _ presence.Member = (*entry)(nil)

func newEntry(key spec, gvr schema.GroupVersionResource, cfg resourceConfig, p plan, funcs listwatch.Funcs, lists listwatch.ListBuilder, noWatchList bool, deps entryDeps) (*entry, error) {
	e := &entry{
		key: key, cfg: cfg, deps: deps, funcs: funcs, relist: newRelistPeriod(cfg.relistPeriod),
		logger: deps.logger.WithValues("gvr", gvr.String()),
		lc:     lifecycle.New(time.Now()),
		done:   make(chan struct{}), synced: make(chan struct{}), wake: make(chan struct{}, 1),
	}
	e.gvr.Store(&gvr)
	e.switchedTo = gvr.Version
	sel := listwatch.Selectors{Label: cfg.labelSelector, Field: cfg.fieldSelector, Tweak: cfg.tweak.f}
	e.shard.now, e.shard.source = cfg.shard, cfg.shardSource
	if cfg.shardSource != nil {
		e.shard.now, _ = cfg.shardSource.Current()
	}
	if e.sharded() {
		// e.funcs stays unfiltered: the scope check only asks whether a
		// list succeeds.
		funcs = e.shardFilter(funcs)
	}
	var inner toolscache.ListerWatcherWithContext
	idle := deps.watchIdle
	if len(cfg.namespaces) > 1 || cfg.permitted {
		mn := &listwatch.MultiNamespace{Funcs: funcs, Namespaces: cfg.namespaces, Selectors: sel, Lists: lists,
			Hook: e.namespacesListed, Next: e.nextAccessCheck, Recheck: deps.recheck, Resolve: e.resolveChecked}
		if cfg.permitted {
			if deps.review == nil {
				return nil, fmt.Errorf("%w: WithPermittedNamespaces needs a dynamic client to ask the server with", ErrInvalid)
			}
			p := &access.Permitter{Reviewer: deps.review, Group: gvr.Group, Resource: func() string { return e.currentGVR().Resource },
				Namespaces: cfg.candidates, Discover: true}
			mn.Resolve = func(ctx context.Context) (listwatch.NamespaceSet, error) { return namespaceSet(p.Resolve(ctx)) }
			mn.Quick = func(ctx context.Context) (listwatch.NamespaceSet, error) {
				return namespaceSet(p.ResolveNamespaces(ctx))
			}
			mn.Follow, mn.AllowNone, mn.PerNamespace = true, true, permittedReviewEvery
			// A change of the permitted set switches the cache inside
			// the open stream (e.lw.Keys below), not through the
			// reflector's relist and its back-off.
			mn.Switch = func() { e.lw.Switch() }
			if deps.namespacesChanged != nil {
				wake := make(chan struct{}, 1)
				mn.Wake = wake
				e.unsubscribe = deps.namespacesChanged(func() {
					select {
					case wake <- struct{}{}:
					default:
					}
				})
			}
		}
		inner = mn
		// A merged watch asks for no bookmarks (a quiet one would be
		// probed every period); its watch requests have a bound of their
		// own (listwatch.WatchOpenBound), and a resume that fails or
		// goes unanswered relists.
		idle = 0
		noWatchList = true
	} else {
		ns := ""
		if len(cfg.namespaces) == 1 {
			ns = cfg.namespaces[0]
		}
		inner = &listwatch.Single{Funcs: funcs, Namespace: ns, Selectors: sel}
	}
	e.server = &listwatch.Liveness{Inner: inner, Idle: max(idle, 0), Hooks: listwatch.LivenessHooks{
		Silent:  e.silent,
		Contact: e.contact,
	}}
	e.lw = &gate.ListerWatcher{
		Gate:   gate.New(false),
		Server: e.server,
		Hooks: gate.Hooks{
			ListStarted: e.listStarted,
			Listed:      e.listed,
			NotFound:    e.notFound,
			Emptied:     e.emptied,
			Waiting:     e.waiting,
			Watching:    e.watching,
		},
		EmptyList:   func(rv string) runtime.Object { o, _ := lists(rv, nil); return o },
		Cached:      func() []interface{} { return e.informer.GetStore().List() },
		AsWatched:   asWatched(cfg.metadataOnly),
		Bookmark:    bookmarkObject(cfg.metadataOnly),
		NoWatchList: noWatchList,
	}
	if cfg.shardSource != nil || cfg.permitted {
		// Dynamic sharding switches shards, and a permitted informer its
		// namespaces, inside the open stream; the gate keeps the keys it
		// handed the reflector for that.
		e.lw.Keys = &gate.KeySet{}
	}
	e.lw.CachedByKey = func(key string) (interface{}, bool) {
		o, ok, err := e.informer.GetStore().GetByKey(key)
		return o, ok && err == nil
	}
	if deps.disk != nil {
		if why, ok := diskEligible(key, deps.disk.secrets); ok {
			text := diskSpec(key)
			e.disk = &entryDisk{factory: deps.disk, spec: text, name: diskName(key, text), follow: key.follow, diffed: diskDiffedWhy(key),
				raw: deps.raw, held: len(p.transforms) == 0, kick: make(chan struct{}, 1)}
			e.lw.Hooks.Restored = e.restoredHook
			e.lw.Journal = diskJournal{e}
		} else {
			e.logger.V(2).Info("not kept on disk", "reason", why)
		}
	}
	e.lw.InitialLists = deps.initialLists
	e.lw.Hooks.WaitingForSlot = e.waitingForSlot
	e.lw.Access = e.accessCheck()
	var example runtime.Object = &unstructured.Unstructured{}
	if cfg.metadataOnly {
		example = &metav1.PartialObjectMetadata{}
	}
	opts := toolscache.SharedIndexInformerOptions{
		ResyncPeriod:      p.resync,
		Indexers:          p.indexers,
		ObjectDescription: gvr.String(),
	}
	e.metrics = e.newMetrics(&opts)
	e.informer = toolscache.NewSharedIndexInformerWithOptions(e.lw, example, opts)
	if t := p.transform(); t != nil {
		if err := e.informer.SetTransform(t); err != nil {
			return nil, err
		}
	}
	if err := e.informer.SetWatchErrorHandlerWithContext(e.watchErrorHandler); err != nil {
		return nil, err
	}
	if err := e.startMetrics(); err != nil {
		return nil, err
	}
	return e, nil
}

// asWatched returns a function that turns a cached object into a copy of
// the type the informer's reflector expects, for the deletes the gate
// delivers when a resource stops being served: cached objects are shared
// and transforms may mutate what they receive. A cached object of another
// type (a transform changed it) is decoded if it can be (cache.Compact),
// else reduced to its metadata. nil means the object cannot be described.
func asWatched(metadataOnly bool) func(obj interface{}) runtime.Object {
	return func(obj interface{}) runtime.Object {
		switch o := obj.(type) {
		case *metav1.PartialObjectMetadata:
			if metadataOnly {
				return o.DeepCopy()
			}
		case *unstructured.Unstructured:
			if !metadataOnly {
				return o.DeepCopy()
			}
		case interface {
			Decode() (*unstructured.Unstructured, error)
		}:
			if u, err := o.Decode(); err == nil && !metadataOnly {
				return u
			}
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			return nil
		}
		om := metav1.ObjectMeta{Namespace: m.GetNamespace(), Name: m.GetName(), UID: m.GetUID(),
			ResourceVersion: m.GetResourceVersion(), Labels: m.GetLabels(), OwnerReferences: m.GetOwnerReferences()}
		if metadataOnly {
			return &metav1.PartialObjectMetadata{ObjectMeta: om}
		}
		u := &unstructured.Unstructured{Object: map[string]interface{}{}}
		u.SetNamespace(om.Namespace)
		u.SetName(om.Name)
		u.SetUID(om.UID)
		u.SetResourceVersion(om.ResourceVersion)
		u.SetLabels(om.Labels)
		u.SetOwnerReferences(om.OwnerReferences)
		return u
	}
}

// bookmarkObject builds bookmark event objects of the reflector's type.
func bookmarkObject(metadataOnly bool) func(rv string) runtime.Object {
	return func(rv string) runtime.Object {
		if metadataOnly {
			return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv}}
		}
		u := &unstructured.Unstructured{Object: map[string]interface{}{}}
		u.SetResourceVersion(rv)
		return u
	}
}

// currentGVR is the resource the informer lists and watches now.
func (e *entry) currentGVR() schema.GroupVersionResource { return *e.gvr.Load() }

// presence.Member

func (e *entry) GVR() schema.GroupVersionResource { return e.currentGVR() }
func (e *entry) Follows() bool                    { return e.follow }
func (e *entry) Namespaced() bool                 { return len(e.cfg.namespaces) > 0 || e.cfg.permitted }

// Apply takes presence's verdict: it opens or closes the gate and tells
// the state machine.
func (e *entry) Apply(v presence.Verdict) {
	e.mu.Lock()
	sticky := e.lc.ConfigFailed()
	e.mu.Unlock()
	if sticky {
		return
	}
	if v.Err != nil {
		e.configError(v.Err, v.Reason)
		return
	}
	e.lw.SetServed(v.Served, v.Reason, v.Known)
	if v.Served {
		e.apply(lifecycle.Event{Kind: lifecycle.ResourceServed})
		return
	}
	e.apply(lifecycle.Event{Kind: lifecycle.ResourceRemoved, Reason: v.Reason, Err: e.notServed(v.Reason), Known: v.Known})
}

// MoveTo makes a following informer list and watch version v of its
// group-resource from now on: the current watch ends and the reflector
// relists at v, so handlers see an update per object that still exists
// (with its new apiVersion), a delete per object that does not, and an add
// per new one. The state is Syncing until that list has been taken in.
func (e *entry) MoveTo(v, reason string) {
	old := e.currentGVR()
	if old.Version == v {
		return
	}
	gvr := old.GroupResource().WithVersion(v)
	e.gvr.Store(&gvr)
	e.logger.Info("following the preferred version", "from", old.Version, "to", v, "reason", reason)
	e.apply(lifecycle.Event{Kind: lifecycle.VersionSwitched, Version: v, Reason: reason})
	e.diskMoved()
	e.lw.Relist()
	e.lw.SetServed(true, "", true)
}

// configError: the informer's options cannot work on this resource; it
// sends no request and stays Failed.
func (e *entry) configError(kind error, reason string) {
	ie := &InformerError{GVR: e.currentGVR(), Kind: kind, Err: errors.New(reason)}
	e.apply(lifecycle.Event{Kind: lifecycle.ConfigError, Err: ie, Reason: reason})
	e.lw.SetServed(false, reason, true)
}

// neverRuns records the state of an informer that could not be built:
// Failed with err, or Stopped with it when stopped.
func (e *entry) neverRuns(err error, stopped bool) {
	kind := lifecycle.ConfigError
	if stopped {
		kind = lifecycle.Stop
	}
	e.apply(lifecycle.Event{Kind: kind, Err: err, Reason: err.Error()})
}

// stop records Stopped, for reason.
func (e *entry) stop(reason string) {
	e.apply(lifecycle.Event{Kind: lifecycle.Stop, Reason: reason})
}

// run runs the informer until ctx ends; done is closed when it has.
func (e *entry) run(ctx context.Context) {
	defer close(e.done)
	open, reason, _ := e.lw.Gate.State()
	e.apply(lifecycle.Event{Kind: lifecycle.Start, Open: open, Reason: reason, Err: e.notServed(reason)})
	ctx = logr.NewContext(ctx, e.logger)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		e.monitorSync(ctx)
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		e.relistEvery(ctx)
	}()
	if e.shard.source != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.followShard(ctx)
		}()
	}
	if e.disk != nil {
		e.restore(ctx)
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.diskLoop(ctx)
		}()
	}
	e.informer.RunWithContext(ctx)
	wg.Wait()
	if e.unsubscribe != nil {
		e.unsubscribe()
	}
	if e.disk != nil {
		e.closeDisk()
	}
	stopped := "stopped"
	if r := e.stopReason.Load(); r != nil {
		stopped = *r
	}
	e.stop(stopped)
}

// monitorSync feeds the state machine what it cannot be told: whether
// client-go's informer has synced, the resourceVersion its cache has
// applied (storeRV: client-go's store's, so a relist counts once its
// Replace is applied, not once the reflector queued it) and, while a removal drains, whether the cache is empty
// (lifecycle.CacheChecked). It checks when nudged, on client-go's first
// sync (waited for, not polled), and every syncPoll while the machine
// polls.
func (e *entry) monitorSync(ctx context.Context) {
	t := time.NewTicker(syncPoll)
	defer t.Stop()
	firstSync := e.informer.HasSyncedChecker().Done()
	var sweep sweeper
	for {
		e.mu.Lock()
		removal := e.lc.Removal()
		e.mu.Unlock()
		ev := lifecycle.Event{Kind: lifecycle.CacheChecked, Removal: removal,
			InformerSynced: e.informer.HasSynced(), LastRV: e.storeRV()}
		if removal != 0 {
			ev.CacheEmpty = e.cacheEmpty()
			if !ev.CacheEmpty && sweep.due(removal, time.Now()) {
				e.lw.Sweep()
			}
		}
		out := e.apply(ev)
		var poll <-chan time.Time
		if out.Poll {
			poll = t.C
		}
		var first <-chan struct{}
		if !ev.InformerSynced {
			first = firstSync
		}
		select {
		case <-ctx.Done():
			return
		case <-poll:
		case <-first:
		case <-e.wake:
		}
	}
}

// syncPoll is the sync monitor's poll period while the machine polls.
const syncPoll = 20 * time.Millisecond

// sweeper paces the sync monitor's sweeps while a removal drains and the
// cache is not empty (gate.ListerWatcher.Sweep): the first firstSweep
// after the removal is seen, then at doubling gaps up to maxSweepGap. The
// removal's own deletes usually empty the cache before the first; a sweep
// catches adds the reflector had queued when those deletes were taken.
type sweeper struct {
	removal uint64
	next    time.Time
	gap     time.Duration
}

const (
	firstSweep  = 200 * time.Millisecond
	maxSweepGap = 2 * time.Second
)

// due reports whether a sweep for removal is due at now, and if so
// schedules the next.
func (s *sweeper) due(removal uint64, now time.Time) bool {
	if s.removal != removal {
		*s = sweeper{removal: removal, next: now.Add(firstSweep), gap: firstSweep}
		return false
	}
	if now.Before(s.next) {
		return false
	}
	s.gap = min(2*s.gap, maxSweepGap)
	s.next = now.Add(s.gap)
	return true
}

// cacheEmpty reports whether the cache holds no object, without listing
// its keys: the namespace index, always installed, drops a value when its
// last object goes.
func (e *entry) cacheEmpty() bool {
	return len(e.informer.GetIndexer().ListIndexFuncValues(toolscache.NamespaceIndex)) == 0
}

func (e *entry) nudge() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// apply feeds ev to the state machine under e.mu and applies the
// transition's effects in order: logs, metrics, the synced channel
// closed, the status published (publication is serialized per informer by
// pubMu; the object count is taken outside e.mu), the monitor nudged.
// An event without a time happens now.
func (e *entry) apply(ev lifecycle.Event) lifecycle.Output {
	if ev.At.IsZero() {
		ev.At = time.Now()
	}
	e.pubMu.Lock()
	defer e.pubMu.Unlock()
	e.mu.Lock()
	was := e.lc.State()
	var out lifecycle.Output
	e.lc, out = lifecycle.Next(e.lc, ev)
	if ev.Kind == lifecycle.VersionSwitched {
		e.switchedTo = ev.Version
	}
	publish := out.Effects&lifecycle.Publish != 0
	var st Status
	if publish {
		st = e.statusLocked()
	}
	e.mu.Unlock()
	for _, l := range out.Logs {
		e.logger.Info(l.Msg, l.KV...)
	}
	if out.Status.State != was {
		e.logger.V(2).Info("informer state", "state", out.Status.State, "reason", out.Status.Reason)
	}
	switch ev.Kind {
	case lifecycle.ListAnswered:
		e.metrics.relisted()
	case lifecycle.VersionSwitched:
		e.metrics.move(e.identity())
	}
	// Order: metrics, synced closed, status published. A caller told
	// "Synced" (OnStatusChange) finds HasSynced true: published first, a
	// waiter woken by the status could see HasSynced false and wait for a
	// change that never came (controllerruntime's GetInformer timed out
	// with the informer Synced). A caller whose WaitForCacheSync returned
	// finds the metrics saying Synced (TestScrape once read Syncing).
	if publish {
		e.metrics.state(st.State)
	}
	if out.Effects&lifecycle.CloseSynced != 0 {
		close(e.synced)
	}
	if publish {
		st.Objects = len(e.informer.GetStore().ListKeys())
		e.deps.publish(st)
	}
	if out.Effects&lifecycle.Nudge != 0 {
		e.nudge()
	}
	return out
}

func (e *entry) notServed(reason string) error {
	return &InformerError{GVR: e.currentGVR(), Kind: ErrNotServed, Err: errors.New(reason)}
}

func (e *entry) statusLocked() Status {
	v := e.lc.View()
	// The version the machine's state belongs to: the one before a switch
	// the machine has not yet been told of.
	gvr := e.currentGVR()
	gvr.Version = e.switchedTo
	st := Status{
		GVR:           gvr,
		Namespaces:    append([]string(nil), e.cfg.namespaces...),
		LabelSelector: e.cfg.labelSelector,
		FieldSelector: e.cfg.fieldSelector,
		MetadataOnly:  e.cfg.metadataOnly,
		Shard:         e.shard.current().Selector(),
		OutsideShard:  e.outsideShard.Load(),
		State:         State(v.State),
		Err:           v.Err,
		Reason:        v.Reason,
		Since:         v.Since,
		ContactErr:    v.ContactErr,
		HandlerPanics: e.panics,
	}
	st.Disk, st.CacheErr = e.disk.status()
	st.Restored = st.Disk.Restored
	if n := e.lastContact.Load(); n != 0 {
		st.LastContact = time.Unix(0, n)
	}
	if len(e.denied) > 0 {
		if e.cfg.permitted {
			st.NotPermitted = maps.Clone(e.denied)
		} else {
			st.Denied = maps.Clone(e.denied)
		}
	}
	if e.cfg.permitted {
		st.Permitted = append([]string{}, e.permittedNS...)
	}
	if n := e.nextCheck.Load(); n != 0 && (len(e.denied) > 0 || e.cfg.permitted) {
		st.NextAccessCheck = time.Unix(0, n)
	}
	if e.lastPanic != nil {
		st.LastHandlerPanic = e.lastPanic
	}
	return st
}

func (e *entry) status() Status {
	e.mu.Lock()
	st := e.statusLocked()
	e.mu.Unlock()
	// client-go's Store has no Len: ListKeys is the exact count it offers
	// (O(n)). Summing the namespace index's key lists copies as many keys,
	// and a count kept by an event handler would lag the store.
	st.Objects = len(e.informer.GetStore().ListKeys())
	return st
}

// gate.Hooks, called on the reflector's goroutine or a stream's.

func (e *entry) listStarted() {
	e.diskRequest(true)
	e.diskListing()
	e.apply(lifecycle.Event{Kind: lifecycle.ListStarted})
}

func (e *entry) listed(rv string) {
	e.apply(lifecycle.Event{Kind: lifecycle.ListAnswered, RV: rv})
	if rv != "" {
		// A list was handed to the reflector. (A watch-list stream calls
		// this with "" when it opens; its shard is checked when its
		// initial events end: shardListed.)
		e.relistIfStale()
	}
}

// notFound: the server answered 404 for the collection; the gate is
// closed. An informer asked for namespaces first checks whether the
// resource is served cluster-wide (a cluster-scoped resource asked for in
// a namespace): that is a configuration error, not "not served".
func (e *entry) notFound(err error) {
	e.logger.V(2).Info("resource not found on the server; waiting for it to be served", "err", err.Error())
	gvr := e.currentGVR()
	if e.Namespaced() && e.clusterScoped(gvr) {
		e.configError(ErrInvalid, fmt.Sprintf("%s is cluster-scoped; namespaces %v were given", gvr.GroupResource(), e.cfg.namespaces))
		return
	}
	e.deps.notFound(gvr)
}

// clusterScoped reports whether gvr is served cluster-wide: from
// discovery if it knows gvr, else by listing one object of it across all
// namespaces (a namespaced URL of a cluster-scoped resource is a 404).
func (e *entry) clusterScoped(gvr schema.GroupVersionResource) bool {
	if namespaced, ok := e.deps.lookupScope(gvr); ok {
		return !namespaced
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := e.funcs.List(ctx, metav1.NamespaceAll, metav1.ListOptions{Limit: 1})
	return err == nil
}

// watching: a server watch was handed to the reflector.
func (e *entry) watching() {
	e.diskRequest(false)
	e.apply(lifecycle.Event{Kind: lifecycle.WatchOpened})
}

// emptied: every cached object was handed over as a delete. Removed is
// published once the cache is empty, so that a caller told "Removed"
// finds the cache empty.
func (e *entry) emptied(reason string) {
	e.diskEmptied()
	e.apply(lifecycle.Event{Kind: lifecycle.CacheEmptied, Reason: reason, Err: e.notServed(reason)})
}

// waitingForSlot: the first list waits for an initial-list slot
// (Options.MaxConcurrentInitialLists).
func (e *entry) waitingForSlot() { e.apply(lifecycle.Event{Kind: lifecycle.SlotWaiting}) }

// waiting: the informer never listed and the gate is closed.
func (e *entry) waiting(reason string) {
	e.apply(lifecycle.Event{Kind: lifecycle.GateWaiting, Reason: reason, Err: e.notServed(reason)})
}

// outsideShardSeen: the server sent n objects outside the informer's
// shard (it ignores the shard selector); they were dropped. The first
// drop publishes a status change and is logged once.
func (e *entry) outsideShardSeen(n int) {
	e.metrics.outsideShard(n)
	if e.outsideShard.Add(int64(n)) != int64(n) {
		return
	}
	e.logger.Info("the server ignores the shard selector (ShardedListAndWatch off?); filtering on the client", "shard", e.shard.current().Selector())
	e.apply(lifecycle.Event{Kind: lifecycle.ShardIgnored})
}

// listwatch.LivenessHooks

func (e *entry) silent(idle time.Duration, where string) {
	e.logger.V(2).Info("nothing from the server; relisting to check it", "idle", idle.String(), "where", where)
}

// contact records whether the server could be reached: a status change is
// published when contact is lost and when it comes back, not per request.
func (e *entry) contact(err error) {
	if err == nil {
		e.lastContact.Store(time.Now().UnixNano())
		e.mu.Lock()
		lost := e.lc.ContactLost()
		e.mu.Unlock()
		if lost {
			e.apply(lifecycle.Event{Kind: lifecycle.ContactRegained})
		}
		return
	}
	ie := &InformerError{GVR: e.currentGVR(), Kind: ErrNoContact, Err: err}
	e.apply(lifecycle.Event{Kind: lifecycle.ContactLost, Err: ie, Reason: contactReason(err), Detail: err.Error()})
}

// contactReason says a lost contact for a status reason: ErrNoContact's
// words and the cause without the request client-go wraps around it (its
// method, URL and query, the dialled address), e.g. "no contact with the
// API server: connection refused".
func contactReason(err error) string {
	text := err.Error()
	var ue *url.Error
	var oe *net.OpError
	switch {
	case errors.As(err, &ue) && ue.Err != nil:
		text = strings.Replace(text, ue.Error(), innermost(ue).Error(), 1)
	case errors.As(err, &oe) && oe.Err != nil:
		text = strings.Replace(text, oe.Error(), innermost(oe).Error(), 1)
	}
	return ErrNoContact.Error() + ": " + text
}

// innermost drops the URL and operation wrappers of a transport error.
func innermost(err error) error {
	for {
		var ue *url.Error
		var oe *net.OpError
		switch {
		case errors.As(err, &ue) && ue.Err != nil:
			err = ue.Err
		case errors.As(err, &oe) && oe.Err != nil:
			err = oe.Err
		default:
			return err
		}
	}
}

// permittedReviewEvery bounds the re-checks of a WithPermittedNamespaces
// informer: its period is at least this times its namespaces, so they
// cost at most 10 rules reviews a second (600 a minute), shared by the
// factory's informers.
const permittedReviewEvery = 100 * time.Millisecond

// namespacesListed: a several-namespace list read some namespaces and
// not others (denied by the access check or refused by the server).
func (e *entry) namespacesListed(l listwatch.Listed) {
	denied := make(map[string]string, len(l.Denied))
	for ns, err := range l.Denied {
		denied[ns] = err.Error()
	}
	var ie error
	var held []string
	if e.cfg.permitted {
		held = []string{}
		if l.All {
			held = []string{metav1.NamespaceAll}
		} else {
			held = append(held, l.Names...)
			slices.Sort(held)
		}
	} else if len(l.Denied) > 0 {
		ie = &InformerError{GVR: e.currentGVR(), Kind: ErrForbidden, Err: listwatch.ForbiddenError(l.Denied)}
	}
	e.mu.Lock()
	changed := !maps.Equal(denied, e.denied) || !slices.Equal(held, e.permittedNS)
	e.denied, e.permittedNS = denied, held
	e.mu.Unlock()
	e.apply(lifecycle.Event{Kind: lifecycle.NamespacesForbidden, Err: ie, Changed: changed})
}

// nextAccessCheck records when the namespaces are checked again (zero:
// not), for Status.NextAccessCheck; it publishes nothing.
func (e *entry) nextAccessCheck(t time.Time) { e.nextCheck.Store(t.UnixNano()) }

// watchErrorHandler replaces client-go's default (which logs every
// failure): it records the error, typed, in the status, and logs a class
// of error once until it changes.
func (e *entry) watchErrorHandler(ctx context.Context, r *toolscache.Reflector, err error) {
	if err == nil || reflectorseam.IsWatchListFallback(err) || errors.Is(err, context.Canceled) {
		return
	}
	if reflectorseam.IsExpired(err) {
		// A relist follows; not a failure. Right after a restore, the
		// server could not resume from the stored resourceVersion.
		e.diskRequest(true)
		return
	}
	ie := classify(e.currentGVR(), err)
	kind := ie.(*InformerError).Kind
	class := lifecycle.Refused
	switch {
	case errors.Is(kind, ErrNotServed):
		class = lifecycle.NotServed
	case errors.Is(kind, ErrNoContact):
		class = lifecycle.NoContact
	case errors.Is(kind, ErrWatch):
		class = lifecycle.Broken
	}
	e.apply(lifecycle.Event{Kind: lifecycle.ListFailed, Err: ie, Reason: kind.Error(), Class: class, Detail: err.Error()})
}
