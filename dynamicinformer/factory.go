package dynamicinformer

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"

	ikcache "github.com/informerkit/informerkit/cache"
	"github.com/informerkit/informerkit/discoveryresolver"
	"github.com/informerkit/informerkit/dynamicinformer/internal/access"
	"github.com/informerkit/informerkit/dynamicinformer/internal/codec"
	"github.com/informerkit/informerkit/dynamicinformer/internal/gate"
	"github.com/informerkit/informerkit/dynamicinformer/internal/listwatch"
	"github.com/informerkit/informerkit/dynamicinformer/internal/presence"
)

// Factory hands out shared informers keyed by GVR and options. All its
// methods are safe for concurrent use. Create it with NewForConfig or
// NewSharedInformerFactory.
//
// # Goroutines and blocking
//
// Start runs each informer on goroutines the factory owns (client-go's
// reflector, its processor, one per handler, and a sync monitor), plus the
// presence sources (a CRD informer, a discovery loop, re-check timers)
// and, once something subscribes, one goroutine that calls
// OnStatusChange callbacks in order. Shutdown cancels and waits for every
// one of them. Release does not wait for an informer's goroutines, so it
// may be called from that informer's own event handler; Shutdown must not
// be (it waits for the handler). Goroutines of what is built on the
// factory (package subscription) are not the factory's: they end on Done,
// and their own Stop waits for them.
// Status callbacks run on the notifier goroutine: a slow callback delays
// other status callbacks, never an informer; they may call any method of
// the factory or a handle except Shutdown.
type Factory struct {
	client   dynamic.Interface
	cfg      factoryConfig
	notifier *statusNotifier
	presence *presence.Presence
	metrics  *metricsDeps // nil without Options.Metrics
	contact  *contactMonitor
	// reviews answers the access checks of every informer (nil: no client).
	reviews *access.Reviewer
	// namespaces lists, then watches, the server's namespaces for
	// WithPermittedNamespaces (nil: no client).
	namespaces *namespaceWatch
	// initialLists bounds the informers' concurrent first lists.
	initialLists *gate.Slots
	// disk is Options.CacheDir's directory (nil: none).
	disk *factoryDisk

	mu        sync.Mutex // guards informers, started, runCtx, cancel, shutdown
	informers map[spec]*entry
	started   bool
	runCtx    context.Context
	cancel    context.CancelFunc
	shutdown  bool
	closed    chan struct{}  // closed by Shutdown
	wg        sync.WaitGroup // every goroutine the factory started
}

// NewSharedInformerFactory returns a factory on client. It is the factory
// NewForConfig returns, with one difference: its informers decode with
// client's codec (client-go's dynamic client decoding), since there is no
// rest.Config to build the fast decode path from. Contact with the API
// server (Status.ContactErr) is followed from the informers' requests and
// a probe, as for NewForConfig. Without opts.Resolver, ForName and
// subscription.New return ErrInvalid and presence relies on CRDs and 404
// answers; without opts.MetadataClient, MetadataOnly informers go through
// client (see Projection). client may be nil if opts.MetadataClient is
// set and every informer is MetadataOnly; CRDs are then not tracked, and
// an informer that needs client is Failed with ErrInvalid.
func NewSharedInformerFactory(client dynamic.Interface, opts Options) *Factory {
	return newFactory(client, newContactMonitor(), opts)
}

// newFactory is every factory: contact is the factory's contact monitor
// (NewForConfig's also sees the transport).
func newFactory(client dynamic.Interface, contact *contactMonitor, opts Options) *Factory {
	cfg := defaults(opts)
	if cfg.resolver == nil && cfg.discovery != nil {
		cfg.resolver = discoveryresolver.New(cfg.discovery, discoveryresolver.WithLogger(cfg.logger.WithName("resolver")))
	}
	f := &Factory{
		client:    client,
		cfg:       cfg,
		notifier:  newStatusNotifier(),
		informers: map[spec]*entry{},
		closed:    make(chan struct{}),
		metrics:   newMetricsDeps(cfg.metrics),
		contact:   contact,
	}
	if client != nil {
		f.reviews = f.newReviewer(access.DynamicClient(client))
		if cfg.cacheDir != "" {
			f.disk = &factoryDisk{path: cfg.cacheDir, secrets: cfg.cacheSecrets, client: client}
		}
	}
	contact.probeThrough(client)
	contact.configure(opts)
	contact.setOnChange(f.contactChanged)
	f.initialLists = gate.NewSlots(cfg.maxInitial)
	pc := presence.Config{Resolver: cfg.resolver, Rediscovery: cfg.rediscovery, Logger: cfg.logger.WithName("presence")}
	if cfg.followCRDs && client != nil {
		pc.CRDs = client
	}
	pc.ReadyTimeout, pc.RecheckMin, pc.RecheckMax = cfg.presenceTimings.ready, cfg.presenceTimings.recheckMin, cfg.presenceTimings.recheckMax
	f.presence = presence.New(pc)
	return f
}

// NewForConfig builds the dynamic, discovery and metadata clients from cfg
// (opts.Resolver and opts.MetadataClient, if set, are used instead of the
// last two) and returns a factory on them; it also sees every request at
// the transport, for contact (Status.ContactErr).
func NewForConfig(cfg *rest.Config, opts Options) (*Factory, error) {
	monitor := newContactMonitor()
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(monitor.wrap)
	cfg.Wrap(notReadyNoWait)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	clients, err := codec.NewClients(cfg)
	if err != nil {
		return nil, err
	}
	if opts.MetadataClient == nil {
		if opts.MetadataClient, err = metadata.NewForConfig(cfg); err != nil {
			return nil, err
		}
	}
	reviews, err := access.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	opts.discovery, opts.decodingClients = disc, clients
	f := newFactory(dyn, monitor, opts)
	f.reviews = f.newReviewer(reviews) // a request budget of their own
	return f, nil
}

// Resolver is the discovery resolver in use (nil without one).
func (f *Factory) Resolver() *discoveryresolver.Resolver { return f.cfg.resolver }

// ForResource returns a handle on the informer for gvr with the given
// options, creating it if needed. Calls with the same GVR and the same
// distinguishing options share one informer (one list+watch); the other
// options merge (see the package documentation, "Sharing"). If the
// factory is started, a new informer starts at once. It never fails:
// problems (resource not served, invalid selector or projection,
// forbidden, a namespace asked of a cluster-scoped resource, an option
// the shared informer cannot honour) show in the handle's Status. After
// Shutdown it returns a handle whose informer never runs and whose Status
// says Stopped with ErrStopped.
func (f *Factory) ForResource(gvr schema.GroupVersionResource, opts ...ResourceOption) *InformerHandle {
	h, _ := f.forResource(gvr, f.cfg.merge(opts), false)
	return h
}

// forResource returns a handle on the informer for gvr and cfg (folded
// once by merge), creating it if needed: cfg is validated and resolved
// into a plan only then. A following informer (see ForName) is shared
// only with other following informers of the same group-resource. A
// handle that cannot join its shared informer is dead (Failed with
// ErrOptionConflict); the informer is unaffected.
func (f *Factory) forResource(gvr schema.GroupVersionResource, cfg resourceConfig, follow bool) (*InformerHandle, error) {
	key := cfg.spec(gvr, follow)
	f.mu.Lock()
	if f.shutdown {
		f.mu.Unlock()
		return f.deadHandle(gvr, cfg, ErrStopped), ErrStopped
	}
	if e, ok := f.informers[key]; ok {
		err := e.join(cfg, e.cancel != nil)
		if err == nil {
			e.refs++
		}
		f.mu.Unlock()
		if err != nil {
			return f.deadHandle(gvr, cfg, err), err
		}
		return f.handle(e, cfg), nil
	}
	f.mu.Unlock()
	if err := cfg.validate(); err != nil {
		return f.deadHandle(gvr, cfg, &InformerError{GVR: gvr, Kind: ErrInvalid, Err: err}), err
	}
	e, err := f.newEntry(key, gvr, cfg, resolve(cfg, f.fastDecoding()))
	if err != nil {
		kind := err
		if errors.Is(err, ErrInvalid) {
			kind = ErrInvalid
		}
		return f.deadHandle(gvr, cfg, &InformerError{GVR: gvr, Kind: kind, Err: err}), err
	}
	e.follow = follow
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.shutdown {
		return f.deadHandle(gvr, cfg, ErrStopped), ErrStopped
	}
	if other, ok := f.informers[key]; ok { // created meanwhile by another caller
		e.metrics.end()
		if err := other.join(cfg, other.cancel != nil); err != nil {
			return f.deadHandle(gvr, cfg, err), err
		}
		other.refs++
		return f.handle(other, cfg), nil
	}
	v := f.presence.Register(e)
	e.Apply(v)
	f.presence.Applied(e, v)
	e.refs = 1
	f.informers[key] = e
	if f.started {
		f.startLocked(e)
	}
	return f.handle(e, cfg), nil
}

func (f *Factory) handle(e *entry, cfg resourceConfig) *InformerHandle {
	h := newHandle(e, f.release)
	h.resync = cfg.resyncPeriod()
	h.unchanged = cfg.unchanged
	return h
}

// join merges what a new handle's cfg asks for into its shared informer
// e, by each option's rule (the package documentation's table). started
// says whether e runs. f.mu is held. On ErrOptionConflict nothing changed.
func (e *entry) join(cfg resourceConfig, started bool) error {
	// Handler resync: per handle, within the period client-go's informer
	// checks at (its first handle's; it cannot be lowered once running).
	if d, base := cfg.resyncPeriod(), e.cfg.resyncPeriod(); d > 0 && (base <= 0 || d < base) {
		return &InformerError{GVR: e.currentGVR(), Kind: ErrOptionConflict, Err: fmt.Errorf(
			"WithResyncPeriod(%v): the shared informer resyncs at most every %v (its first handle's period; WithSharingKey gives an informer of its own)", d, base)}
	}
	// Access check: on if any handle asks before the informer starts.
	if cfg.accessCheck && !e.cfg.accessCheck && !started {
		e.cfg.accessCheck = true
		e.lw.Access = e.accessCheck()
	}
	// Relist period: the shortest asked, applied to a running informer.
	e.relist.lower(cfg.relistPeriod)
	// Indexers: the union by name; the auto label index: on if any asks.
	e.addIndexers(cfg.allIndexers())
	return nil
}

// addIndexers adds indexers a new handle asks for to a shared informer;
// a name it has keeps its function. HasIndex, not GetIndexers: client-go
// returns its indexer map unlocked, and listers may add label indexes
// meanwhile (so one at a time: a lost race on one name is not an error).
func (e *entry) addIndexers(indexers toolscache.Indexers) {
	indexer := e.informer.GetIndexer()
	for name, fn := range indexers {
		if ikcache.HasIndex(indexer, name) {
			continue
		}
		if err := e.informer.AddIndexers(toolscache.Indexers{name: fn}); err != nil && !ikcache.HasIndex(indexer, name) {
			e.logger.Error(err, "cannot add an indexer to a shared informer", "index", name)
		}
	}
}

// newEntry builds an informer's machinery for gvr, cfg and its plan p.
func (f *Factory) newEntry(key spec, gvr schema.GroupVersionResource, cfg resourceConfig, p plan) (*entry, error) {
	deps := entryDeps{
		logger:    f.cfg.logger,
		publish:   f.notifier.publish,
		notFound:  f.presence.NotFound,
		watchIdle: f.cfg.watchIdle,
		metrics:   f.metrics,
		lookupScope: func(gvr schema.GroupVersionResource) (bool, bool) {
			if f.cfg.resolver == nil {
				return false, false
			}
			r, ok := f.cfg.resolver.Lookup(gvr)
			return r.Namespaced, ok
		},
	}
	deps.initialLists = f.initialLists
	deps.review = f.reviews
	deps.accessBackoff = f.cfg.accessBackoff
	deps.recheck = f.cfg.accessRecheck
	deps.disk = f.disk
	if f.namespaces != nil {
		deps.namespacesChanged = f.namespaces.subscribe
	}
	var e *entry
	current := func() schema.GroupVersionResource {
		if e == nil {
			return gvr
		}
		return e.currentGVR()
	}
	var funcs listwatch.Funcs
	var lists listwatch.ListBuilder
	var client any
	switch {
	case p.client == metadataClient && f.cfg.metadataClient != nil:
		md := f.cfg.metadataClient
		funcs = listwatch.Funcs{
			List: func(ctx context.Context, ns string, o metav1.ListOptions) (runtime.Object, error) {
				return md.Resource(current()).Namespace(ns).List(ctx, o)
			},
			Watch: func(ctx context.Context, ns string, o metav1.ListOptions) (watch.Interface, error) {
				return md.Resource(current()).Namespace(ns).Watch(ctx, o)
			},
		}
		lists, client = listwatch.MetadataLists, md
	case f.client == nil && p.client == metadataClient:
		return nil, fmt.Errorf("%w: a MetadataOnly informer needs Options.MetadataClient or a dynamic client; the factory has neither", ErrInvalid)
	case f.client == nil:
		return nil, fmt.Errorf("%w: the informer's projection needs a dynamic client; the factory has none (only MetadataOnly informers can do without)", ErrInvalid)
	default:
		dyn := f.listWatchClient(p)
		if d, raw, ok := f.rawJournal(key, p); ok {
			dyn, deps.raw = d, raw
		}
		funcs = listwatch.Funcs{
			List: func(ctx context.Context, ns string, o metav1.ListOptions) (runtime.Object, error) {
				return dyn.Resource(current()).Namespace(ns).List(ctx, o)
			},
			Watch: func(ctx context.Context, ns string, o metav1.ListOptions) (watch.Interface, error) {
				return dyn.Resource(current()).Namespace(ns).Watch(ctx, o)
			},
		}
		lists, client = listwatch.UnstructuredLists(current), dyn
		if p.client == metadataClient { // no metadata client: full objects, reduced before the cache
			funcs, lists = listwatch.MetadataOnly(funcs), listwatch.MetadataLists
		}
	}
	// Requests the contact layer sends again are counted as the
	// informer's own (its metrics' request hook, set once the entry is
	// built and before it starts).
	var retried func(verb string, err error)
	funcs = f.contact.funcs(funcs, func(verb string, err error) {
		if retried != nil {
			retried(verb, err)
		}
	})
	e, err := newEntry(key, gvr, cfg, p, funcs, lists, watchlist.DoesClientNotSupportWatchListSemantics(client), deps)
	if e != nil {
		retried = e.server.Hooks.Request
	}
	return e, err
}

// deadHandle is returned where an informer cannot be built: its informer
// never runs, its status says why.
func (f *Factory) deadHandle(gvr schema.GroupVersionResource, cfg resourceConfig, err error) *InformerHandle {
	cfg.labelSelector, cfg.fieldSelector = "", "" // keep the dead informer constructible
	cfg.projection, cfg.metadataOnly, cfg.relistPeriod, cfg.accessCheck = Projection{}, false, 0, false
	deps := entryDeps{logger: f.cfg.logger, publish: func(Status) {}, notFound: func(schema.GroupVersionResource) {},
		lookupScope: func(schema.GroupVersionResource) (bool, bool) { return false, false }}
	nop := listwatch.Funcs{
		List:  func(context.Context, string, metav1.ListOptions) (runtime.Object, error) { return nil, err },
		Watch: func(context.Context, string, metav1.ListOptions) (watch.Interface, error) { return nil, err },
	}
	e, _ := newEntry(spec{}, gvr, cfg, plan{indexers: cfg.allIndexers()}, nop, listwatch.UnstructuredLists(func() schema.GroupVersionResource { return gvr }), true, deps)
	e.neverRuns(err, err == ErrStopped)
	close(e.done)
	return newHandle(e, nil)
}

// ForName resolves a kubectl-style name ("ct", "deployments.apps",
// "Deployment.v1.apps") through discovery and returns an informer for it,
// as ForResource does. If the name gives no version, the informer follows
// the resource's preferred version: when another version becomes
// preferred (a CRD gains a higher version, e.g. v2 beside v1) or its
// version stops being served (a CRD version unserved, an API version
// removed), it moves to the preferred served version of the same
// group-resource instead of going Removed; handlers then receive an
// update per object (with the new apiVersion), and GVR and Status report
// the new version. Such informers are shared only with other ForName
// informers without a version. Unknown, ambiguous, non-watchable names
// and subresources are discoveryresolver errors (errors.Is ErrNotFound,
// ErrNotWatchable, ErrSubresource; errors.As *AmbiguousError); a
// namespace option on a cluster-scoped resource is
// ErrInvalid; a selector that does not parse is
// ErrInvalid, a projection ErrInvalid; an option the
// shared informer cannot honour is ErrOptionConflict. Without a resolver
// (Options.Resolver) it returns ErrInvalid.
func (f *Factory) ForName(ctx context.Context, ref string, opts ...ResourceOption) (*InformerHandle, error) {
	if f.cfg.resolver == nil {
		return nil, errNoResolver("ForName")
	}
	res, err := f.cfg.resolver.Resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	cfg := f.cfg.merge(opts)
	if !res.Namespaced && len(cfg.namespaces) > 0 {
		return nil, fmt.Errorf("%w: %s is cluster-scoped, namespaces %v given", ErrInvalid, res.GVR.GroupResource(), cfg.namespaces)
	}
	h, err := f.forResource(res.GVR, cfg, !versionPinned(ref, res.GVR))
	if err != nil {
		return nil, err
	}
	return h, nil
}

// versionPinned reports whether ref names gvr's version explicitly, as in
// "deployments.v1.apps", "Deployment.v1.apps" or "pods.v1".
func versionPinned(ref string, gvr schema.GroupVersionResource) bool {
	parts := strings.SplitN(ref, ".", 3)
	if len(parts) < 2 || parts[1] != gvr.Version {
		return false
	}
	if len(parts) == 2 {
		return gvr.Group == ""
	}
	return strings.EqualFold(parts[2], gvr.Group)
}

// Start starts every informer not yet started, and the presence sources.
// It may be called again; informers created later start by themselves.
// Informers run until ctx of the first Start ends, Shutdown, or their last
// Release.
func (f *Factory) Start(ctx context.Context) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.shutdown {
		return
	}
	if !f.started {
		f.started = true
		f.runCtx, f.cancel = context.WithCancel(ctx)
		f.wg.Add(2)
		go func() {
			defer f.wg.Done()
			f.presence.Run(f.runCtx)
		}()
		go func() {
			defer f.wg.Done()
			f.contact.run(f.runCtx)
		}()
	}
	for _, e := range f.informers {
		if e.cancel == nil {
			f.startLocked(e)
		}
	}
}

// startLocked runs e under the factory's run context. f.mu must be held.
func (f *Factory) startLocked(e *entry) {
	ctx, cancel := context.WithCancel(f.runCtx)
	e.cancel = cancel
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		f.tellContact(e)
		e.run(ctx)
	}()
}

// WaitForCacheSync waits until every started informer has synced (its
// handle's HasSynced: the Synced status is recorded) or ctx ends, and
// reports per GVR whether all its informers synced. It does not poll.
func (f *Factory) WaitForCacheSync(ctx context.Context) map[schema.GroupVersionResource]bool {
	f.mu.Lock()
	var es []*entry
	for _, e := range f.informers {
		if e.cancel != nil {
			es = append(es, e)
		}
	}
	f.mu.Unlock()
	res := map[schema.GroupVersionResource]bool{}
	for _, e := range es {
		synced := false
		select {
		case <-e.synced:
			synced = true
		case <-ctx.Done():
			select {
			case <-e.synced:
				synced = true
			default:
			}
		}
		gvr := e.currentGVR()
		if prev, ok := res[gvr]; ok {
			synced = synced && prev
		}
		res[gvr] = synced
	}
	return res
}

// Shutdown stops every informer and returns when every goroutine the
// factory started has ended (see Goroutines and blocking). Later calls
// return at once. Do not call it from an event handler or a status
// callback.
func (f *Factory) Shutdown() {
	f.mu.Lock()
	if !f.shutdown {
		close(f.closed)
	}
	f.shutdown = true
	cancel := f.cancel
	es := make([]*entry, 0, len(f.informers))
	for _, e := range f.informers {
		es = append(es, e)
	}
	f.informers = map[spec]*entry{}
	f.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	for _, e := range es {
		if e.cancel != nil {
			e.cancel()
		}
		f.presence.Unregister(e)
	}
	f.wg.Wait()
	for _, e := range es {
		e.stop("factory shut down")
	}
	if f.disk != nil {
		f.disk.close()
	}
	f.notifier.close()
}

// Done is closed when Shutdown begins. What is built on the factory and
// runs goroutines of its own (package subscription) ends them on it;
// Shutdown does not wait for those: their own Stop does.
func (f *Factory) Done() <-chan struct{} { return f.closed }

// release drops one reference; the last one stops the informer without
// waiting for it (its goroutines are the factory's: Shutdown joins them).
func (f *Factory) release(e *entry) {
	f.mu.Lock()
	e.refs--
	if e.refs > 0 {
		f.mu.Unlock()
		return
	}
	if f.informers[e.key] == e {
		delete(f.informers, e.key)
	}
	cancel := e.cancel
	f.mu.Unlock()
	f.presence.Unregister(e)
	if cancel != nil {
		released := "released"
		e.stopReason.Store(&released)
		cancel()
		return
	}
	e.stop("released")
}

// contactChanged: the contact monitor found the server lost (err) or
// back (nil).
// Every informer's status says so.
func (f *Factory) contactChanged(err error) {
	f.mu.Lock()
	es := make([]*entry, 0, len(f.informers))
	for _, e := range f.informers {
		es = append(es, e)
	}
	f.mu.Unlock()
	for _, e := range es {
		e.contact(err)
	}
}

// ContactStatus is what a factory knows of its contact with the API
// server, which every informer's Status follows (ContactErr; Stale while
// a Synced informer has no contact).
type ContactStatus struct {
	// Err is set while the server cannot be reached: errors.Is
	// ErrNoContact, wrapping the connection error or the unanswered probe.
	Err error
	// Since is when contact was last lost or regained (zero: neither yet).
	Since time.Time
}

// Contact reports the factory's contact with the API server. Safe for
// concurrent use.
func (f *Factory) Contact() ContactStatus {
	err, since := f.contact.state()
	if err != nil {
		err = fmt.Errorf("%w: %w", ErrNoContact, err)
	}
	return ContactStatus{Err: err, Since: since}
}

// Statuses lists the status of every informer, sorted by GVR, then
// namespaces and selectors.
func (f *Factory) Statuses() []Status {
	f.mu.Lock()
	es := make([]*entry, 0, len(f.informers))
	for _, e := range f.informers {
		es = append(es, e)
	}
	f.mu.Unlock()
	out := make([]Status, 0, len(es))
	for _, e := range es {
		out = append(out, e.status())
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].GVR.String() != out[j].GVR.String() {
			return out[i].GVR.String() < out[j].GVR.String()
		}
		return fmt.Sprint(out[i].Namespaces, out[i].LabelSelector, out[i].FieldSelector) <
			fmt.Sprint(out[j].Namespaces, out[j].LabelSelector, out[j].FieldSelector)
	})
	return out
}

// OnStatusChange calls fn for every status change of any informer, in
// order, from one goroutine (see Goroutines and blocking). When fn is
// given an informer's first Synced status, its handles' HasSynced already
// return true. Call remove to stop.
func (f *Factory) OnStatusChange(fn func(Status)) (remove func()) { return f.notifier.subscribe(fn) }

// newReviewer is the factory's shared Reviewer on c; it reads namespaces
// (for WithPermittedNamespaces) from the factory's namespace watch, which
// lists them through the factory's dynamic client.
func (f *Factory) newReviewer(c access.Client) *access.Reviewer {
	r := access.NewReviewer(c)
	if f.namespaces == nil {
		f.namespaces = newNamespaceWatch(f.client, f.runBackground, f.cfg.logger.WithName("namespaces"))
	}
	r.ListNamespaces = f.namespaces.names
	return r
}

// runBackground runs fn on a goroutine of the factory's run, which
// Shutdown waits for (false: the factory is not running).
func (f *Factory) runBackground(fn func(ctx context.Context)) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.started || f.shutdown {
		return false
	}
	ctx := f.runCtx
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		fn(ctx)
	}()
	return true
}

var namespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
