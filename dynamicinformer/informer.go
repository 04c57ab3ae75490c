package dynamicinformer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/dynamicinformer/internal/access"
	"github.com/informerkit/informerkit/dynamicinformer/internal/gate"
	"github.com/informerkit/informerkit/dynamicinformer/internal/listwatch"
	"github.com/informerkit/informerkit/dynamicinformer/internal/presence"
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

	informer toolscache.SharedIndexInformer
	lw       *gate.ListerWatcher
	server   *listwatch.Liveness
	logger   logr.Logger
	metrics  *entryMetrics // nil without WithMetrics

	refs   int                // guarded by Factory.mu
	cancel context.CancelFunc // set when started; guarded by Factory.mu

	done       chan struct{} // closed when the informer's goroutines have ended
	synced     chan struct{} // closed when the state first becomes Synced
	syncedOnce sync.Once
	wake       chan struct{} // nudges the sync monitor

	shard        entryShard             // WithShard, WithShardSource
	outsideShard atomic.Int64           // objects the server sent outside the shard, dropped
	lastContact  atomic.Int64           // unix nanoseconds of the last request the server answered
	stopReason   atomic.Pointer[string] // what Stopped will say (set before the run context is cancelled)

	pubMu        sync.Mutex // serializes publishing, so statuses are published in order; taken before mu
	mu           sync.Mutex // guards the status fields below
	state        State
	err          error
	reason       string
	since        time.Time
	started      bool
	everSynced   bool
	watchOpen    bool // a server watch was handed to the reflector since the last removal
	awaitRelist  bool // a removal or version switch happened; Synced again after a real relist
	relisted     bool // that relist returned, at relistRV
	relistRV     string
	removal      string    // why the resource was removed, until the cache is empty and Removed is published
	removalSince time.Time // when removal was set
	lastErrKind  error     // to log an error class once, not on every retry
	configErr    error     // a configuration error no retry cures (wrong scope); sticky
	contactErr   error     // the server cannot be reached (nil: it can)
	forbiddenNS  error     // some namespaces of a multi-namespace informer are forbidden
	accessErr    error     // the access check's last denial, until access is granted
	panics       int64     // panics recovered from handlers added through the handle
	lastPanic    *eventhandler.PanicError
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
	// review answers access questions for WithAccessCheck (nil: no
	// client to ask); accessBackoff is the re-check back-off (zero:
	// access's defaults).
	review        access.Review
	accessBackoff struct{ min, max time.Duration }
}

var _ presence.Member = (*entry)(nil)

func newEntry(key spec, gvr schema.GroupVersionResource, cfg resourceConfig, p plan, funcs listwatch.Funcs, lists listwatch.ListBuilder, noWatchList bool, deps entryDeps) (*entry, error) {
	e := &entry{
		key: key, cfg: cfg, deps: deps, funcs: funcs, relist: newRelistPeriod(cfg.relistPeriod),
		logger: deps.logger.WithValues("gvr", gvr.String()),
		state:  Pending, reason: "not started", since: time.Now(),
		done: make(chan struct{}), synced: make(chan struct{}), wake: make(chan struct{}, 1),
	}
	e.gvr.Store(&gvr)
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
	if len(cfg.namespaces) > 1 {
		inner = &listwatch.MultiNamespace{Funcs: funcs, Namespaces: cfg.namespaces, Selectors: sel, Lists: lists,
			ForbiddenNamespaces: e.forbiddenNamespaces}
		// A merged watch asks for no bookmarks (a quiet one would be
		// probed every period) and every restart relists anyway.
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
	if cfg.shardSource != nil {
		// Dynamic sharding switches shards inside the open stream; the
		// gate keeps the keys it handed the reflector for that.
		e.lw.Keys = &gate.KeySet{}
		e.lw.CachedByKey = func(key string) (interface{}, bool) {
			o, ok, err := e.informer.GetStore().GetByKey(key)
			return o, ok && err == nil
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
func (e *entry) Namespaced() bool                 { return len(e.cfg.namespaces) > 0 }

// Apply takes presence's verdict: it opens or closes the gate and keeps
// the status in step.
func (e *entry) Apply(v presence.Verdict) {
	e.mu.Lock()
	sticky := e.configErr != nil
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
		return
	}
	e.update(func() bool {
		switch {
		case e.removal != "" && v.Known:
			e.removal = v.Reason // not yet published: the authoritative reason wins
			return false
		case e.state == Removed && v.Known && e.reason != v.Reason:
			return e.setLocked(Removed, e.notServed(v.Reason), v.Reason)
		case e.state == Pending && e.started:
			return e.pendingLocked(v.Reason)
		}
		return false
	})
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
	e.update(func() bool {
		e.metrics.move(e.identity())
		e.awaitRelist, e.relisted = true, false
		if e.state == Synced || e.state == Syncing || e.state == Removed {
			return e.setLocked(Syncing, nil, "following version "+v+": "+reason)
		}
		return false
	})
	e.lw.Relist()
	e.lw.SetServed(true, "", true)
}

// configError: the informer's options cannot work on this resource; it
// sends no request and stays Failed.
func (e *entry) configError(kind error, reason string) {
	ie := &InformerError{GVR: e.currentGVR(), Kind: kind, Err: errors.New(reason)}
	e.update(func() bool {
		e.configErr = ie
		return e.setLocked(Failed, ie, reason)
	})
	e.lw.SetServed(false, reason, true)
}

// run runs the informer until ctx ends; done is closed when it has.
func (e *entry) run(ctx context.Context) {
	defer close(e.done)
	e.update(func() bool {
		e.started = true
		open, reason, _ := e.lw.Gate.State()
		if e.state == Pending && !open && e.configErr == nil {
			return e.pendingLocked(reason)
		}
		return false
	})
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
	e.informer.RunWithContext(ctx)
	wg.Wait()
	reason := "stopped"
	if r := e.stopReason.Load(); r != nil {
		reason = *r
	}
	e.setState(Stopped, nil, reason)
}

// monitorSync moves the state to Synced once the cache holds a complete
// list: on the first sync when client-go's informer has synced (waited
// for, not polled); after a removal or a version switch when the
// reflector has taken in the real list that followed (its last-synced
// resourceVersion reached that list's: polled every 20 ms while it is
// due). It also publishes Removed once a removal has emptied the cache.
func (e *entry) monitorSync(ctx context.Context) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	firstSync := e.informer.HasSyncedChecker().Done()
	for {
		e.mu.Lock()
		syncing := e.state == Syncing
		watchOpen := e.watchOpen
		await, listed, listRV := e.awaitRelist, e.relisted, e.relistRV
		removal, removalSince := e.removal, e.removalSince
		e.mu.Unlock()
		if removal != "" && (e.cacheEmpty() || time.Since(removalSince) > removalGrace) {
			e.update(func() bool {
				if e.removal != removal {
					return false
				}
				e.removal = ""
				return e.setLocked(Removed, e.notServed(removal), removal)
			})
			removal = ""
		}
		informerSynced := e.informer.HasSynced()
		// Synced means the list is in the cache and the watch runs: with
		// list+watch the watch opens after the list has been taken in.
		if syncing && informerSynced && watchOpen && (!await || listed && rvReached(e.informer.LastSyncResourceVersion(), listRV)) {
			e.update(func() bool {
				if e.state != Syncing {
					return false
				}
				e.everSynced = true
				e.awaitRelist, e.relisted = false, false
				return e.setLocked(Synced, nil, "")
			})
		}
		var poll <-chan time.Time
		if removal != "" || syncing && informerSynced && await {
			poll = t.C
		}
		var first <-chan struct{}
		if !informerSynced {
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

// cacheEmpty reports whether the cache holds no object, without listing
// its keys: the namespace index, always installed, drops a value when its
// last object goes.
func (e *entry) cacheEmpty() bool {
	return len(e.informer.GetIndexer().ListIndexFuncValues(toolscache.NamespaceIndex)) == 0
}

// removalGrace bounds how long Removed waits for the cache to empty: an
// add in flight while the removal's deletes were taken stays cached until
// the resource returns.
const removalGrace = 5 * time.Second

// rvReached reports whether the reflector's last-synced resourceVersion
// has reached want (etcd's are integers; others: any real one other than
// the synthetic one).
func rvReached(last, want string) bool {
	if last == "" || last == gate.SyntheticRV {
		return false
	}
	l, err1 := strconv.ParseUint(last, 10, 64)
	w, err2 := strconv.ParseUint(want, 10, 64)
	if err1 != nil || err2 != nil {
		return true
	}
	return l >= w
}

func (e *entry) nudge() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// update runs f under e.mu; if f reports a change, the new status is
// published (in order: publishing is serialized per informer; the object
// count is taken outside e.mu).
func (e *entry) update(f func() bool) {
	e.pubMu.Lock()
	defer e.pubMu.Unlock()
	e.mu.Lock()
	changed := f()
	var st Status
	if changed {
		st = e.statusLocked()
	}
	synced := e.everSynced
	e.mu.Unlock()
	if changed {
		st.Objects = len(e.informer.GetStore().ListKeys())
		e.deps.publish(st)
		e.metrics.state(st.State)
	}
	if synced {
		e.syncedOnce.Do(func() { close(e.synced) })
	}
}

func (e *entry) setState(s State, err error, reason string) {
	e.update(func() bool { return e.setLocked(s, err, reason) })
}

// setLocked records a state and reports whether anything changed. e.mu
// must be held.
func (e *entry) setLocked(s State, err error, reason string) bool {
	if e.state == Stopped {
		return false
	}
	if e.state == s && e.err == err && e.reason == reason {
		return false
	}
	if e.state != s {
		e.since = time.Now()
		e.logger.V(2).Info("informer state", "state", s, "reason", reason)
	}
	e.state, e.err, e.reason = s, err, reason
	return true
}

// pendingLocked sets Pending for a resource the gate keeps closed: with no
// error while presence is still checking, with ErrNotServed once a source
// (or the server's 404) said it is not served. e.mu must be held.
func (e *entry) pendingLocked(reason string) bool {
	if reason == presence.CheckingReason || reason == "" {
		return e.setLocked(Pending, nil, presence.CheckingReason)
	}
	return e.setLocked(Pending, e.notServed(reason), "waiting for the resource to be served: "+reason)
}

func (e *entry) notServed(reason string) error {
	return &InformerError{GVR: e.currentGVR(), Kind: ErrNotServed, Err: errors.New(reason)}
}

func (e *entry) statusLocked() Status {
	st := Status{
		GVR:           e.currentGVR(),
		Namespaces:    append([]string(nil), e.cfg.namespaces...),
		LabelSelector: e.cfg.labelSelector,
		FieldSelector: e.cfg.fieldSelector,
		MetadataOnly:  e.cfg.metadataOnly,
		Shard:         e.shard.current().Selector(),
		OutsideShard:  e.outsideShard.Load(),
		State:         e.state,
		Err:           e.err,
		Reason:        e.reason,
		Since:         e.since,
		ContactErr:    e.contactErr,
		HandlerPanics: e.panics,
	}
	if st.Err == nil && e.forbiddenNS != nil && (e.state == Syncing || e.state == Synced) {
		st.Err = e.forbiddenNS
	}
	if n := e.lastContact.Load(); n != 0 {
		st.LastContact = time.Unix(0, n)
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
	e.update(func() bool {
		if e.state == Pending || e.state == Removed || e.removal != "" || e.state == Failed && e.configErr == nil {
			e.removal = "" // served again before the removal was published
			if e.state == Failed {
				return false // stays Failed until a list succeeds
			}
			return e.setLocked(Syncing, nil, "listing")
		}
		return false
	})
}

func (e *entry) listed(rv string) {
	e.update(func() bool {
		changed := false
		if e.state != Synced && e.state != Syncing {
			changed = e.setLocked(Syncing, nil, "listing")
		}
		if e.awaitRelist {
			// A removal or a version switch waits for this real list.
			e.relisted, e.relistRV = true, rv
		}
		e.metrics.relisted()
		e.lastErrKind = nil
		return changed
	})
	if rv != "" {
		// A list was handed to the reflector. (A watch-list stream calls
		// this with "" when it opens; its shard is checked when its
		// initial events end: shardListed.)
		e.relistIfStale()
	}
	e.nudge()
}

// notFound: the server answered 404 for the collection; the gate is
// closed. An informer asked for namespaces first checks whether the
// resource is served cluster-wide (a cluster-scoped resource asked for in
// a namespace): that is a configuration error, not "not served".
func (e *entry) notFound(err error) {
	e.logger.V(2).Info("resource not found on the server; waiting for it to be served", "err", err.Error())
	gvr := e.currentGVR()
	if len(e.cfg.namespaces) > 0 && e.clusterScoped(gvr) {
		e.configError(ErrNamespaceOnClusterScoped, fmt.Sprintf("%s is cluster-scoped; namespaces %v were given", gvr.GroupResource(), e.cfg.namespaces))
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
	e.mu.Lock()
	open := e.watchOpen
	e.watchOpen = true
	e.mu.Unlock()
	if !open {
		e.nudge()
	}
}

// emptied: every cached object was handed over as a delete. Removed is
// published by the sync monitor once the cache is empty, so that a caller
// told "Removed" finds the cache empty.
func (e *entry) emptied(reason string) {
	e.update(func() bool {
		e.awaitRelist, e.relisted, e.watchOpen = true, false, false
		e.removal, e.removalSince = reason, time.Now()
		return false
	})
	e.nudge()
}

// waitingForSlot: the first list waits for an initial-list slot
// (WithMaxConcurrentInitialLists).
func (e *entry) waitingForSlot() {
	e.update(func() bool {
		if e.state != Pending || e.configErr != nil {
			return false
		}
		return e.setLocked(Pending, nil, WaitingForSlotReason)
	})
}

func (e *entry) waiting(reason string) {
	e.update(func() bool {
		if e.state == Removed || e.removal != "" || e.configErr != nil {
			return false
		}
		return e.pendingLocked(reason)
	})
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
	e.update(func() bool { return true })
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
		lost := e.contactErr != nil
		e.mu.Unlock()
		if lost {
			e.update(func() bool {
				e.contactErr = nil
				return true
			})
			e.logger.Info("contact with the API server restored")
		}
		return
	}
	ie := &InformerError{GVR: e.currentGVR(), Kind: ErrNoContact, Err: err}
	e.update(func() bool {
		first := e.contactErr == nil
		e.contactErr = ie
		if first {
			e.logger.Info("lost contact with the API server", "err", err.Error())
		}
		return first
	})
}

// forbiddenNamespaces: a multi-namespace list was refused in some
// namespaces (empty: none).
func (e *entry) forbiddenNamespaces(forbidden map[string]error) {
	e.update(func() bool {
		var ie error
		if len(forbidden) > 0 {
			first := forbidden[firstKey(forbidden)]
			ie = &InformerError{GVR: e.currentGVR(), Kind: ErrForbidden, Err: fmt.Errorf("%s: %w", listwatch.ForbiddenMessage(forbidden), first)}
		}
		was := e.forbiddenNS
		e.forbiddenNS = ie
		return (was == nil) != (ie == nil) || ie != nil && was.Error() != ie.Error()
	})
}

func firstKey(m map[string]error) string {
	best := ""
	for k := range m {
		if best == "" || k < best {
			best = k
		}
	}
	return best
}

// watchErrorHandler replaces client-go's default (which logs every
// failure): it records the error, typed, in the status, and logs a class
// of error once until it changes.
func (e *entry) watchErrorHandler(ctx context.Context, r *toolscache.Reflector, err error) {
	if err == nil || errors.Is(err, gate.ErrNotServedFallback) || errors.Is(err, gate.ErrRelistFallback) || errors.Is(err, listwatch.ErrProbeFallback) ||
		errors.Is(err, listwatch.ErrWatchListDeclined) || errors.Is(err, context.Canceled) {
		return
	}
	if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		return // a relist follows; not a failure
	}
	ie := classify(e.currentGVR(), err)
	kind := ie.(*InformerError).Kind
	e.update(func() bool {
		if e.lastErrKind != kind {
			e.lastErrKind = kind
			e.logger.Info("list/watch failed; retrying with backoff", "err", err.Error())
		}
		switch {
		case errors.Is(kind, ErrNotServed) || e.configErr != nil:
			return false // the gate handles it (Pending/Removed)
		case errors.Is(kind, ErrNoContact):
			// The server was not reached: ContactErr says so (the liveness
			// layer and, for NewForConfig, the transport set it); Failed is
			// for answers that refuse.
			return false
		case e.state == Synced && errors.Is(kind, ErrWatch):
			// A broken watch on a synced cache: the reflector resumes by
			// itself.
			return false
		case e.state == Failed && e.err != nil && e.err.Error() == ie.Error():
			return false // the same failure again: keep the status, and its Since
		default:
			return e.setLocked(Failed, ie, kind.Error())
		}
	})
}
