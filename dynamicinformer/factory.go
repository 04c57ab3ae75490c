package dynamicinformer

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	ikcache "github.com/informerkit/informerkit/cache"
	"github.com/informerkit/informerkit/discoveryresolver"
)

// SharedInformerFactory hands out shared informers keyed by GVR and options.
// All methods are safe for concurrent use.
type SharedInformerFactory interface {
	// ForResource returns a handle on the informer for gvr with the given
	// options, creating it if needed. Calls with the same GVR and the same
	// options share one informer (one list+watch). If the factory is
	// started, a new informer starts at once. It never fails: problems
	// (resource not served, invalid selector, forbidden) show in the
	// handle's Status. After Shutdown it returns a handle whose informer
	// never runs and whose Status says Stopped with ErrShutdown.
	ForResource(gvr schema.GroupVersionResource, opts ...ResourceOption) GenericInformer
	// ForName resolves a kubectl-style name ("ct", "deployments.apps",
	// "Deployment.v1.apps") through discovery and returns an informer for
	// it, as ForResource does. If the name gives no version, the informer
	// follows the resource's preferred version: when another version
	// becomes preferred (a CRD gains a higher version, e.g. v2 beside v1)
	// or its version stops being served (a CRD version unserved, an API
	// version removed), it moves to the preferred served version of the
	// same group-resource instead of going Removed; handlers then receive
	// an update per object (with the new apiVersion), and GVR and Status
	// report the new version. Such informers are shared
	// only with other ForName informers without a version. Unknown, ambiguous, non-watchable names and subresources are
	// discoveryresolver errors (errors.Is ErrNotFound, ErrNotWatchable,
	// ErrSubresource; errors.As *AmbiguousError); a namespace option on a
	// cluster-scoped resource is ErrNamespaceOnClusterScoped; a selector
	// that does not parse is ErrInvalidSelector.
	ForName(ctx context.Context, ref string, opts ...ResourceOption) (GenericInformer, error)
	// Start starts every informer not yet started. It may be called again;
	// informers created later start by themselves. Informers run until ctx
	// of the first Start ends, Shutdown, or their last Release.
	Start(ctx context.Context)
	// WaitForCacheSync waits until every started informer has synced or
	// ctx ends, and reports per GVR whether all its informers synced.
	WaitForCacheSync(ctx context.Context) map[schema.GroupVersionResource]bool
	// Shutdown stops every informer and returns when every goroutine the
	// factory started has ended. Later calls return at once.
	Shutdown()
}

// Factory is the concrete factory; it has everything SharedInformerFactory
// has plus status reporting.
type Factory interface {
	SharedInformerFactory
	// Statuses lists the status of every informer, sorted by GVR.
	Statuses() []Status
	// OnStatusChange calls f for every status change of any informer, in
	// order, from one goroutine. Call remove to stop.
	OnStatusChange(f func(Status)) (remove func())
	// Resolver is the discovery resolver in use (nil without one).
	Resolver() *discoveryresolver.Resolver
	// Subscribe watches every resource matching filter and follows
	// discovery as resources appear and vanish; see Subscription.
	Subscribe(ctx context.Context, filter discoveryresolver.Filter, handler func(Event), opts ...ResourceOption) (*Subscription, error)
}

type factory struct {
	client   dynamic.Interface
	cfg      factoryConfig
	notifier *statusNotifier
	presence *presence

	mu        sync.Mutex // guards informers, started, runCtx, cancel, shutdown
	informers map[string]*sharedInformer
	started   bool
	runCtx    context.Context
	cancel    context.CancelFunc
	shutdown  bool
	closed    chan struct{}  // closed by Shutdown
	wg        sync.WaitGroup // every goroutine the factory started
}

var _ Factory = (*factory)(nil)

// NewSharedInformerFactory returns a factory on client. defaultResync is the
// default handler resync period (0: none).
func NewSharedInformerFactory(client dynamic.Interface, defaultResync time.Duration, opts ...Option) Factory {
	cfg := defaults(defaultResync)
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.resolver == nil && cfg.discovery != nil {
		cfg.resolver = discoveryresolver.New(cfg.discovery, discoveryresolver.WithLogger(cfg.logger.WithName("resolver")))
	}
	f := &factory{
		client:    client,
		cfg:       cfg,
		notifier:  newStatusNotifier(),
		informers: map[string]*sharedInformer{},
		closed:    make(chan struct{}),
	}
	f.presence = newPresence(client, cfg.resolver, cfg.followCRDs, cfg.rediscovery, cfg.logger.WithName("presence"))
	return f
}

// NewForConfig builds the dynamic, discovery and metadata clients from cfg
// and returns a factory with ForName, CRD tracking and MetadataOnly support.
func NewForConfig(cfg *rest.Config, defaultResync time.Duration, opts ...Option) (Factory, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	all := append([]Option{WithDiscovery(disc), WithMetadataClient(md)}, opts...)
	return NewSharedInformerFactory(dyn, defaultResync, all...), nil
}

func (f *factory) Resolver() *discoveryresolver.Resolver { return f.cfg.resolver }

func (f *factory) ForResource(gvr schema.GroupVersionResource, opts ...ResourceOption) GenericInformer {
	h, _ := f.forResource(gvr, f.cfg.merge(opts), false)
	return h
}

// forResource returns a handle on the informer for gvr and cfg, creating
// it if needed. A following informer (see ForName) is shared only with
// other following informers of the same group-resource.
func (f *factory) forResource(gvr schema.GroupVersionResource, cfg resourceConfig, follow bool) (*InformerHandle, error) {
	key := gvr.String() + "#" + cfg.sharingIdentity()
	if follow {
		key = "follow:" + gvr.GroupResource().String() + "#" + cfg.sharingIdentity()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.shutdown {
		return f.deadHandle(gvr, cfg, ErrShutdown), ErrShutdown
	}
	if si, ok := f.informers[key]; ok {
		si.refs++
		if len(cfg.indexers) > 0 {
			// HasIndex, not GetIndexers: client-go returns its indexer
			// map unlocked, and listers may add label indexes meanwhile
			// (so one at a time: a lost race on one name is not an error).
			indexer := si.informer.GetIndexer()
			for name, fn := range cfg.indexers {
				if ikcache.HasIndex(indexer, name) {
					continue
				}
				if err := si.informer.AddIndexers(toolscache.Indexers{name: fn}); err != nil && !ikcache.HasIndex(indexer, name) {
					si.logger.Error(err, "cannot add an indexer to a shared informer", "index", name)
				}
			}
		}
		return &InformerHandle{si: si}, nil
	}
	if err := cfg.validate(); err != nil {
		return f.deadHandle(gvr, cfg, &InformerError{GVR: gvr, Kind: ErrInvalidSelector, Err: err}), err
	}
	si, err := newSharedInformer(f, key, gvr, cfg, true)
	if err != nil {
		return f.deadHandle(gvr, cfg, &InformerError{GVR: gvr, Kind: err, Err: err}), err
	}
	si.follow = follow
	si.gate.set(f.presence.register(si), "not served", false)
	si.refs = 1
	f.informers[key] = si
	if f.started {
		f.startLocked(si)
	}
	return &InformerHandle{si: si}, nil
}

// deadHandle is returned where an informer cannot be built: its informer
// never runs, its status says why.
func (f *factory) deadHandle(gvr schema.GroupVersionResource, cfg resourceConfig, err error) *InformerHandle {
	cfg.labelSelector, cfg.fieldSelector = "", "" // keep the dead informer constructible
	si, buildErr := newSharedInformer(f, "", gvr, cfg, false)
	if buildErr != nil {
		cfg.metadataOnly = false
		si, _ = newSharedInformer(f, "", gvr, cfg, false)
	}
	si.state, si.err, si.reason = Failed, err, err.Error()
	if err == ErrShutdown {
		si.state = Stopped
	}
	close(si.done)
	return &InformerHandle{si: si}
}

func (f *factory) ForName(ctx context.Context, ref string, opts ...ResourceOption) (GenericInformer, error) {
	if f.cfg.resolver == nil {
		return nil, ErrNoResolver
	}
	res, err := f.cfg.resolver.Resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	cfg := f.cfg.merge(opts)
	if !res.Namespaced && len(cfg.namespaces) > 0 {
		return nil, fmt.Errorf("%w: %s is cluster-scoped, namespaces %v given", ErrNamespaceOnClusterScoped, res.GVR.GroupResource(), cfg.namespaces)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
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

func (f *factory) Start(ctx context.Context) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.shutdown {
		return
	}
	if !f.started {
		f.started = true
		f.runCtx, f.cancel = context.WithCancel(ctx)
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			f.presence.run(f.runCtx)
		}()
	}
	for _, si := range f.informers {
		if si.cancel == nil {
			f.startLocked(si)
		}
	}
}

// startLocked runs si under the factory's run context. f.mu must be held.
func (f *factory) startLocked(si *sharedInformer) {
	ctx, cancel := context.WithCancel(f.runCtx)
	si.cancel = cancel
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		si.run(ctx)
	}()
}

func (f *factory) WaitForCacheSync(ctx context.Context) map[schema.GroupVersionResource]bool {
	f.mu.Lock()
	var sis []*sharedInformer
	for _, si := range f.informers {
		if si.cancel != nil {
			sis = append(sis, si)
		}
	}
	f.mu.Unlock()
	res := map[schema.GroupVersionResource]bool{}
	for _, si := range sis {
		synced := toolscache.WaitForCacheSync(ctx.Done(), si.informer.HasSynced)
		gvr := si.currentGVR()
		if prev, ok := res[gvr]; ok {
			synced = synced && prev
		}
		res[gvr] = synced
	}
	return res
}

func (f *factory) Shutdown() {
	f.mu.Lock()
	if !f.shutdown {
		close(f.closed)
	}
	f.shutdown = true
	cancel := f.cancel
	sis := make([]*sharedInformer, 0, len(f.informers))
	for _, si := range f.informers {
		sis = append(sis, si)
	}
	f.informers = map[string]*sharedInformer{}
	f.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	for _, si := range sis {
		if si.cancel != nil {
			si.cancel()
		}
		f.presence.unregister(si)
	}
	f.wg.Wait()
	for _, si := range sis {
		si.setState(Stopped, nil, "factory shut down")
	}
	f.notifier.close()
}

// release drops one reference; the last one stops the informer and waits
// for its goroutines.
func (f *factory) release(si *sharedInformer) {
	f.mu.Lock()
	if si.key == "" { // a dead handle
		f.mu.Unlock()
		return
	}
	si.refs--
	if si.refs > 0 {
		f.mu.Unlock()
		return
	}
	if f.informers[si.key] == si {
		delete(f.informers, si.key)
	}
	cancel := si.cancel
	f.mu.Unlock()
	f.presence.unregister(si)
	if cancel != nil {
		cancel()
		<-si.done
	}
	si.setState(Stopped, nil, "released")
}

func (f *factory) Statuses() []Status {
	f.mu.Lock()
	sis := make([]*sharedInformer, 0, len(f.informers))
	for _, si := range f.informers {
		sis = append(sis, si)
	}
	f.mu.Unlock()
	out := make([]Status, 0, len(sis))
	for _, si := range sis {
		out = append(out, si.status())
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

func (f *factory) OnStatusChange(fn func(Status)) func() { return f.notifier.subscribe(fn) }
