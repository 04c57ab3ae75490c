package controllerruntime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/go-logr/logr"

	"github.com/informerkit/informerkit/discoveryresolver"
	"github.com/informerkit/informerkit/dynamicinformer"
)

// defaultSyncPeriod is controller-runtime's default SyncPeriod (a resync).
const defaultSyncPeriod = 10 * time.Hour

// resolveTimeout bounds the discovery lookup of a kind the resolver does
// not know (one discovery round); the kind is then taken as not served.
const resolveTimeout = 5 * time.Second

var (
	_ cache.Cache    = (*Cache)(nil)
	_ cache.Informer = (*Informer)(nil)
)

// NewCache is a cache.NewCacheFunc backed by one informerkit
// dynamicinformer factory (NewForConfig with a zero
// dynamicinformer.Options): manager.Options{NewCache: controllerruntime.NewCache}.
// See the package documentation for what differs from controller-runtime's
// cache. Options it cannot honour are an *UnsupportedOptionError.
func NewCache(config *rest.Config, opts cache.Options) (cache.Cache, error) {
	return New(config, opts, dynamicinformer.Options{})
}

// NewCacheFunc is NewCache with factory options of the caller's (metrics,
// logger, defaults for every informer).
func NewCacheFunc(factoryOpts dynamicinformer.Options) cache.NewCacheFunc {
	return func(config *rest.Config, opts cache.Options) (cache.Cache, error) {
		return New(config, opts, factoryOpts)
	}
}

// New is NewCache returning the concrete *Cache (Factory gives the
// informers' Status and the factory's metrics).
func New(config *rest.Config, opts cache.Options, factoryOpts dynamicinformer.Options) (*Cache, error) {
	if config == nil {
		return nil, errors.New("informerkit controller-runtime cache: nil rest.Config")
	}
	if opts.Scheme == nil {
		opts.Scheme = scheme.Scheme
	}
	defaults, byGVK, err := newPlans(opts, opts.NewInformer != nil)
	if err != nil {
		return nil, err
	}
	f, err := dynamicinformer.NewForConfig(config, factoryOpts)
	if err != nil {
		return nil, err
	}
	c := &Cache{
		scheme:      opts.Scheme,
		mapper:      opts.Mapper,
		factory:     f,
		defaults:    defaults,
		byGVK:       byGVK,
		failMissing: opts.ReaderFailOnMissingInformer,
		newInformer: opts.NewInformer,
		entries:     map[entryKey]*entry{},
		kinds:       map[kindKey]*kindCache{},
		startedCh:   make(chan struct{}),
		stoppedCh:   make(chan struct{}),
		changed:     make(chan struct{}),
		logger:      factoryOpts.Logger,
		wake:        make(chan struct{}, 1),
	}
	if opts.NewInformer != nil {
		if c.clients.dynamic, err = dynamic.NewForConfig(config); err != nil {
			f.Shutdown()
			return nil, err
		}
		if c.clients.metadata, err = metadata.NewForConfig(config); err != nil {
			f.Shutdown()
			return nil, err
		}
	}
	c.pend.full = true // at Start: the kinds asked for before
	if r := f.Resolver(); r != nil {
		c.removeChange = r.OnChange(c.resourcesChanged)
	}
	return c, nil
}

// Cache is a controller-runtime cache.Cache over one informerkit
// dynamicinformer factory. Its methods are safe for concurrent use.
type Cache struct {
	scheme      *runtime.Scheme
	mapper      meta.RESTMapper
	factory     *dynamicinformer.Factory
	defaults    kindPlan
	byGVK       map[schema.GroupVersionKind]kindPlan
	failMissing bool
	// newInformer is Options.NewInformer: when set, each informer is the
	// one it returns (over clients), not the factory's.
	newInformer  func(toolscache.ListerWatcher, runtime.Object, time.Duration, toolscache.Indexers) toolscache.SharedIndexInformer
	clients      customClients
	logger       logr.Logger
	removeChange func() // nil without a resolver

	mu            sync.Mutex // guards entries, kinds, started, stopped, runCtx, customPending; writes of unresolved
	entries       map[entryKey]*entry
	kinds         map[kindKey]*kindCache
	started       bool
	stopped       bool
	runCtx        context.Context // Start's, once started
	customPending []customRun     // custom informers made before Start
	startedCh     chan struct{}
	stoppedCh     chan struct{} // closed when Start ends
	// hasStopped is stopped, read without c.mu (by entry.status, which
	// may run where c.mu is held).
	hasStopped atomic.Bool
	// unresolved counts the entries without a factory informer (an upper
	// bound; atomic so that resourcesChanged takes no lock of c's: it may
	// run in a discovery round of a call made under c.mu).
	unresolved atomic.Int64

	// pend is what followPending has to look at: wake is signalled
	// (without blocking) when it changes.
	pend struct {
		mu    sync.Mutex                   // guards the fields below
		gen   uint64                       // discovery changes seen
		added []discoveryresolver.Resource // served since followPending last looked (while some kind is unresolved)
		full  bool                         // look every unresolved kind up again
	}
	wake chan struct{}
	wg   sync.WaitGroup // followPending

	changedMu sync.Mutex
	changed   chan struct{} // closed and replaced on every status change
}

// Factory is the informerkit factory behind the cache: Statuses,
// OnStatusChange, and the metrics of its Options.
func (c *Cache) Factory() *dynamicinformer.Factory { return c.factory }

func (c *Cache) notify() {
	c.changedMu.Lock()
	close(c.changed)
	c.changed = make(chan struct{})
	c.changedMu.Unlock()
}

func (c *Cache) changes() <-chan struct{} {
	c.changedMu.Lock()
	defer c.changedMu.Unlock()
	return c.changed
}

func (c *Cache) isStopped() bool { return c.hasStopped.Load() }

func (c *Cache) isStarted() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.started
}

// class is what the cache holds of a kind's objects.
type class int

const (
	classUnstructured class = iota
	classMetadata
	classTyped
)

// kindKey names a kindCache.
type kindKey struct {
	gvk   schema.GroupVersionKind
	class class
}

// entryKey names an informer: its kind, class and group (the kindPlan
// group's key; "" for a kind's only informer).
type entryKey struct {
	gvk   schema.GroupVersionKind
	class class
	group string
}

func classOf(obj runtime.Object) class {
	switch obj.(type) {
	case runtime.Unstructured:
		return classUnstructured
	case *metav1.PartialObjectMetadata, *metav1.PartialObjectMetadataList:
		return classMetadata
	}
	return classTyped
}

func (c *Cache) plan(gvk schema.GroupVersionKind) kindPlan {
	if p, ok := c.byGVK[gvk]; ok {
		return p
	}
	return c.defaults
}

// kindFor returns the kind's informers, making them unless reader is set
// and ReaderFailOnMissingInformer is.
func (c *Cache) kindFor(ctx context.Context, gvk schema.GroupVersionKind, cl class, reader bool) (*kindCache, error) {
	key := kindKey{gvk: gvk, class: cl}
	c.mu.Lock()
	k, ok := c.kinds[key]
	c.mu.Unlock()
	if ok {
		return k, nil
	}
	if reader && c.failMissing {
		return nil, &cache.ErrResourceNotCached{GVK: gvk}
	}
	var newObj func() (runtime.Object, error)
	if cl == classTyped {
		if _, err := c.scheme.New(gvk); err != nil {
			return nil, err
		}
		newObj = func() (runtime.Object, error) { return c.scheme.New(gvk) }
	}
	gen := c.discoveryGen()
	gvr, namespaced, known, err := c.lookup(ctx, gvk)
	if err != nil {
		if reader && !c.isStarted() {
			// What controller-runtime's cache answers a read before
			// Start, whatever its ctx.
			return nil, &cache.ErrCacheNotStarted{}
		}
		return nil, err
	}
	p := c.plan(gvk)
	groups := []group{{oc: p.cluster}}
	if known && !namespaced && p.namespacesSet {
		return nil, fmt.Errorf("type %s is not namespaced, but its %s.Namespaces setting is not nil", gvk, p.name)
	}
	if p.perNamespace && (!known || namespaced) {
		// A kind not known yet is taken as namespaced.
		groups = p.groups
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if k, ok := c.kinds[key]; ok {
		return k, nil
	}
	k = &kindCache{}
	if len(groups) > 1 || groups[0].key != "" {
		k.byNS = map[string]*entry{}
	}
	infs := make([]*Informer, 0, len(groups))
	for _, g := range groups {
		e := c.newEntryLocked(gvk, cl, g, p.cluster, newObj, known, gvr, namespaced)
		k.entries = append(k.entries, e)
		infs = append(infs, e.inf)
		for _, ns := range g.namespaces {
			k.byNS[ns] = e
		}
		if g.key == "all" {
			k.all = e
		}
	}
	if len(infs) == 1 {
		k.inf = infs[0]
	} else {
		k.inf = newMultiInformer(c, fmt.Sprintf("informers of %s", gvk), infs)
	}
	c.kinds[key] = k
	if !known && c.discoveryGen() != gen {
		c.lookAgain() // a change may have come before the entries were here
	}
	return k, nil
}

// newEntryLocked makes the informer of group g of a kind. cluster is the
// kind's config if it is cluster-scoped: a kind not known yet is taken as
// namespaced, and its group informers take cluster's settings if it turns
// out cluster-scoped (they then share one factory informer unless a
// transform makes each its own). c.mu is held.
func (c *Cache) newEntryLocked(gvk schema.GroupVersionKind, cl class, g group, cluster objConfig, newObj func() (runtime.Object, error), known bool, gvr schema.GroupVersionResource, namespaced bool) *entry {
	settings := func(oc objConfig) (objConfig, toolscache.TransformFunc) {
		if cl == classMetadata {
			// As controller-runtime's metadata informers: objects carry their kind.
			oc.transform = setGVK(gvk, oc.transform)
		}
		return oc, transform(newObj, oc.transform)
	}
	oc, t := settings(g.oc)
	clusterOC, clusterT := settings(cluster)
	options := func(namespaced bool) []dynamicinformer.ResourceOption {
		oc, t := oc, t
		if !namespaced && g.key != "" {
			oc, t = clusterOC, clusterT
		}
		ropts := []dynamicinformer.ResourceOption{
			dynamicinformer.WithAccessCheck(true),
			dynamicinformer.WithLabelSelector(oc.label),
			dynamicinformer.WithFieldSelector(oc.field),
			dynamicinformer.WithResyncPeriod(oc.resync),
		}
		if namespaced && len(g.namespaces) > 0 {
			ropts = append(ropts, dynamicinformer.WithNamespaces(g.namespaces...))
		}
		if cl == classMetadata {
			ropts = append(ropts, dynamicinformer.WithProjection(dynamicinformer.Projection{MetadataOnly: true}))
		}
		if t != nil {
			ropts = append(ropts, dynamicinformer.WithTransform("", t))
		}
		return ropts
	}
	e := &entry{
		c: c, gvk: gvk, class: cl, group: g.key, noDeepCopy: oc.noDeepCopy, options: options,
		namespaces: g.namespaces, oc: oc, transform: t,
		fieldIndexes: map[string]toolscache.IndexFunc{},
	}
	if g.key != "" {
		e.clusterOC, e.clusterTransform = &clusterOC, clusterT
	}
	e.inf = &Informer{e: e}
	if known {
		e.gvr, e.namespaced = gvr, namespaced
		e.handle, e.custom, e.stopCustom = c.makeInformer(e, gvr, namespaced)
	} else {
		// No source knows the kind: wait for a resource that serves it
		// (followPending), whatever its plural and scope.
		e.placeholder = toolscache.NewSharedIndexInformer(&toolscache.ListWatch{}, &unstructured.Unstructured{}, 0, toolscache.Indexers{})
		c.unresolved.Add(1)
	}
	c.entries[entryKey{gvk: gvk, class: cl, group: g.key}] = e
	return e
}

// transform is the informer's transform: the conversion of an
// Unstructured to the typed object (newObj non-nil), then the user's.
func transform(newObj func() (runtime.Object, error), user toolscache.TransformFunc) toolscache.TransformFunc {
	if newObj == nil {
		return user
	}
	return func(in any) (any, error) {
		if u, ok := in.(*unstructured.Unstructured); ok {
			obj, err := newObj()
			if err != nil {
				return nil, err
			}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
				return nil, fmt.Errorf("converting %s %s/%s to %T: %w", u.GroupVersionKind(), u.GetNamespace(), u.GetName(), obj, err)
			}
			// As client-go's typed informers (controller-runtime's cache):
			// cached typed objects carry no TypeMeta; deep-copied reads set it.
			obj.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
			in = obj
		}
		if user != nil {
			return user(in)
		}
		return in, nil
	}
}

// setGVK sets gvk on each PartialObjectMetadata, then runs user.
func setGVK(gvk schema.GroupVersionKind, user toolscache.TransformFunc) toolscache.TransformFunc {
	return func(in any) (any, error) {
		if m, ok := in.(*metav1.PartialObjectMetadata); ok {
			m.SetGroupVersionKind(gvk)
		}
		if user != nil {
			return user(in)
		}
		return in, nil
	}
}

// lookup maps gvk to its served resource: through informerkit's
// discovery resolver (which follows CRDs), then the Mapper. known is false
// when neither knows the kind (a CRD not installed yet): that is decided
// only from an answer of discovery (or of the Mapper), never because the
// caller's ctx ended or discovery did not answer. Then err is a
// *LookupError and the kind is left as it was (nothing is recorded), so
// that the next lookup asks again.
func (c *Cache) lookup(ctx context.Context, gvk schema.GroupVersionKind) (gvr schema.GroupVersionResource, namespaced, known bool, err error) {
	if c.newInformer != nil && c.mapper != nil {
		// Custom informers (Options.NewInformer): the Mapper decides
		// first, as in controller-runtime's cache, which asks nothing
		// else (a test's fake informers and Mapper need no server).
		if m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
			return m.Resource, m.Scope.Name() != meta.RESTScopeNameRoot, true, nil
		}
	}
	var noAnswer error // why discovery gave no answer
	if r := c.factory.Resolver(); r != nil {
		rctx, cancel := context.WithTimeout(ctx, resolveTimeout)
		res, err := r.Resolve(rctx, gvk.Kind+"."+gvk.Version+"."+gvk.Group)
		cancel()
		switch {
		case err == nil && res.GVK == gvk:
			return res.GVR, res.Namespaced, true, nil
		case isContextError(err):
			// The resolver answers a miss whose wait for a discovery
			// round ended with ErrNotFound joined with the context's
			// error: the round that would have answered did not run.
			noAnswer = err
		case err == nil || errors.Is(err, discoveryresolver.ErrNotFound):
			all, lerr := r.Resources(ctx)
			if lerr != nil {
				noAnswer = lerr
				break
			}
			for _, res := range all {
				if res.GVK == gvk {
					return res.GVR, res.Namespaced, true, nil
				}
			}
		default:
			noAnswer = err
		}
	}
	if c.mapper != nil {
		if m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
			return m.Resource, m.Scope.Name() != meta.RESTScopeNameRoot, true, nil
		}
	}
	if noAnswer != nil {
		if ctx.Err() != nil {
			noAnswer = fmt.Errorf("%w (%w)", ctx.Err(), noAnswer)
		}
		return schema.GroupVersionResource{}, false, false, &LookupError{GVK: gvk, Err: noAnswer}
	}
	return schema.GroupVersionResource{}, false, false, nil
}

func isContextError(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// discoveryGen counts the discovery changes seen.
func (c *Cache) discoveryGen() uint64 {
	c.pend.mu.Lock()
	defer c.pend.mu.Unlock()
	return c.pend.gen
}

// lookAgain asks followPending to look every unresolved kind up again.
func (c *Cache) lookAgain() {
	c.pend.mu.Lock()
	c.pend.full = true
	c.pend.mu.Unlock()
	c.wakeFollower()
}

func (c *Cache) wakeFollower() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// resourcesChanged is the resolver's OnChange callback: it keeps the
// resources added while some kind is unresolved, for followPending. It
// runs on the goroutine of a discovery round, and does not block.
func (c *Cache) resourcesChanged(ch discoveryresolver.Change) {
	some := c.unresolved.Load() > 0
	c.pend.mu.Lock()
	c.pend.gen++
	if some {
		c.pend.added = append(c.pend.added, ch.Added...)
	}
	c.pend.mu.Unlock()
	if some {
		c.wakeFollower()
	}
}

// followPending gives each unresolved kind its informer once a resource
// of that group, version and kind is served (discovery, which follows
// CRDs, reports it), until ctx ends.
func (c *Cache) followPending(ctx context.Context) {
	for {
		c.pend.mu.Lock()
		added, full := c.pend.added, c.pend.full
		c.pend.added, c.pend.full = nil, false
		c.pend.mu.Unlock()
		c.resolvePending(ctx, added, full)
		select {
		case <-ctx.Done():
			return
		case <-c.wake:
		}
	}
}

func (c *Cache) resolvePending(ctx context.Context, added []discoveryresolver.Resource, full bool) {
	c.mu.Lock()
	var pending []*entry
	for _, e := range c.entries {
		if !e.isResolved() {
			pending = append(pending, e)
		}
	}
	c.unresolved.Store(int64(len(pending)))
	c.mu.Unlock()
	for _, e := range pending {
		var gvr schema.GroupVersionResource
		var namespaced, found bool
		for _, r := range added {
			if r.GVK == e.gvk {
				gvr, namespaced, found = r.GVR, r.Namespaced, true
				break
			}
		}
		if !found && full {
			gvr, namespaced, found, _ = c.lookup(ctx, e.gvk) // no answer: looked up again at the next change
		}
		if !found {
			continue
		}
		c.mu.Lock()
		if c.entries[entryKey{gvk: e.gvk, class: e.class, group: e.group}] == e && !c.stopped {
			e.resolved(gvr, namespaced)
		}
		c.mu.Unlock()
	}
}

func (c *Cache) gvkOf(obj runtime.Object) (schema.GroupVersionKind, error) {
	return apiutil.GVKForObject(obj, c.scheme)
}

// Get reads one object from the kind's cache (see client.Reader). Before
// Start it is *cache.ErrCacheNotStarted; while the kind is not served,
// a *NotServedError (errors.Is ErrResourceNotServed); while the informer
// syncs it waits, bounded by ctx. A namespace the cache does not hold
// (DefaultNamespaces or ByObject.Namespaces without it nor
// NamespaceAll) is a *NamespaceNotCachedError, as controller-runtime's
// cache answers an error.
func (c *Cache) Get(ctx context.Context, key client.ObjectKey, out client.Object, opts ...client.GetOption) error {
	gvk, err := c.gvkOf(out)
	if err != nil {
		return err
	}
	k, err := c.kindFor(ctx, gvk, classOf(out), true)
	if err != nil {
		return err
	}
	if !c.isStarted() {
		return &cache.ErrCacheNotStarted{}
	}
	e, ok := k.forNamespace(key.Namespace)
	if !ok {
		return &NamespaceNotCachedError{GVK: gvk, Namespace: key.Namespace, Name: key.Name}
	}
	src, err := e.wait(ctx, waitRead)
	if err != nil {
		return err
	}
	return e.get(src, key, out, opts...)
}

// List reads the kind's cache (see client.Reader), as Get does; the label
// selector is answered from informerkit's label index. Over all
// namespaces of a kind held per namespace config, it is each informer's
// objects one after the other (Limit counted over them all).
func (c *Cache) List(ctx context.Context, out client.ObjectList, opts ...client.ListOption) error {
	var lo client.ListOptions
	lo.ApplyOptions(opts)
	if lo.Continue != "" {
		return fmt.Errorf("continue list option is not supported by the cache")
	}
	gvk, err := c.gvkOf(out)
	if err != nil {
		return err
	}
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	cl := classOf(out)
	if cl == classTyped {
		if _, err := c.scheme.New(gvk); err != nil {
			return err
		}
	}
	k, err := c.kindFor(ctx, gvk, cl, true)
	if err != nil {
		return err
	}
	if !c.isStarted() {
		return &cache.ErrCacheNotStarted{}
	}
	entries := k.readers()
	if lo.Namespace != "" {
		e, ok := k.forNamespace(lo.Namespace)
		if !ok {
			return &NamespaceNotCachedError{GVK: gvk, Namespace: lo.Namespace, List: true}
		}
		entries = []*entry{e}
	}
	var items []runtime.Object
	for _, e := range entries {
		src, err := e.wait(ctx, waitRead)
		if err != nil {
			return err
		}
		got, err := e.items(src, lo)
		if err != nil {
			return err
		}
		if items == nil {
			items = got
		} else {
			items = append(items, got...)
		}
		if lo.Limit > 0 {
			if lo.Limit -= int64(len(got)); lo.Limit <= 0 {
				break
			}
		}
	}
	if items == nil {
		items = []runtime.Object{}
	}
	if err := meta.SetList(out, items); err != nil {
		return err
	}
	out.SetContinue("continue-not-supported")
	return nil
}

// GetInformer returns the informer of obj's kind, making it if needed.
// With BlockUntilSynced (the default) on a started cache it waits until
// the informer has synced, its resource is found not served (it then
// syncs by itself once served), or it fails (a forbidden resource: the
// error names the verbs and namespaces), bounded by ctx. A kind held per
// namespace config has one informer per config: the Informer returned
// adds handlers and indexers to each (it is then not an *Informer).
func (c *Cache) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	gvk, err := c.gvkOf(obj)
	if err != nil {
		return nil, err
	}
	return c.getInformer(ctx, gvk, classOf(obj), opts)
}

// GetInformerForKind is GetInformer for a kind registered in the scheme
// (a typed informer, as controller-runtime's).
func (c *Cache) GetInformerForKind(ctx context.Context, gvk schema.GroupVersionKind, opts ...cache.InformerGetOption) (cache.Informer, error) {
	if _, err := c.scheme.New(gvk); err != nil {
		return nil, err
	}
	return c.getInformer(ctx, gvk, classTyped, opts)
}

func (c *Cache) getInformer(ctx context.Context, gvk schema.GroupVersionKind, cl class, opts []cache.InformerGetOption) (cache.Informer, error) {
	k, err := c.kindFor(ctx, gvk, cl, false)
	if err != nil {
		return nil, err
	}
	var o cache.InformerGetOptions
	for _, opt := range opts {
		opt(&o)
	}
	if (o.BlockUntilSynced == nil || *o.BlockUntilSynced) && c.isStarted() {
		for _, e := range k.entries {
			if _, err := e.wait(ctx, waitInformer); err != nil {
				return nil, err
			}
		}
	}
	return k.inf, nil
}

// RemoveInformer stops the informers of obj's kind (their handlers get
// no more events) and forgets them; a later GetInformer makes new ones.
func (c *Cache) RemoveInformer(_ context.Context, obj client.Object) error {
	gvk, err := c.gvkOf(obj)
	if err != nil {
		return err
	}
	key := kindKey{gvk: gvk, class: classOf(obj)}
	c.mu.Lock()
	k, ok := c.kinds[key]
	delete(c.kinds, key)
	if ok {
		for _, e := range k.entries {
			delete(c.entries, entryKey{gvk: gvk, class: e.class, group: e.group})
		}
	}
	c.mu.Unlock()
	if !ok {
		return nil
	}
	for _, e := range k.entries {
		e.mu.Lock()
		e.removed = true
		h, stop := e.handle, e.stopCustom
		e.mu.Unlock()
		release(h, stop)
	}
	return nil
}

// NeedLeaderElection is false, as for controller-runtime's cache: a
// manager starts the cache on every replica, not only on the elected one
// (a cache handed to manager.Add would otherwise join the
// leader-election group, and a standby replica's reads would block).
func (c *Cache) NeedLeaderElection() bool { return false }

// Start runs the informers, those made before and after, until ctx ends,
// then shuts the factory down (every goroutine it started has ended when
// Start returns). A second Start is an error.
func (c *Cache) Start(ctx context.Context) error {
	c.mu.Lock()
	if c.started {
		c.mu.Unlock()
		return errors.New("informer already started")
	}
	c.started = true
	c.runCtx = ctx
	for _, r := range c.customPending {
		c.startCustomLocked(r.ctx, r.inf)
	}
	c.customPending = nil
	close(c.startedCh)
	c.mu.Unlock()
	// Status changes are followed from Start (a goroutine of the
	// factory's: a cache never started leaves none behind); nothing
	// runs before, and the notify makes every read ask again.
	removeStatus := c.factory.OnStatusChange(func(dynamicinformer.Status) { c.notify() })
	c.notify()
	if c.newInformer == nil {
		// With Options.NewInformer every informer is a custom one: the
		// factory (and its discovery and CRD watch) has nothing to run.
		c.factory.Start(ctx)
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.followPending(ctx)
	}()
	<-ctx.Done()
	c.wg.Wait()
	c.mu.Lock()
	c.stopped = true
	c.hasStopped.Store(true)
	c.mu.Unlock()
	close(c.stoppedCh)
	if c.removeChange != nil {
		c.removeChange()
	}
	removeStatus()
	c.factory.Shutdown()
	return nil
}

// WaitForCacheSync waits until the cache is started and every informer
// has synced, bounded by ctx (false if it ends first). An informer whose
// resource is not served counts as synced: it holds nothing and will sync
// by itself when the resource is served (so that one missing CRD does not
// hold every controller of the manager).
func (c *Cache) WaitForCacheSync(ctx context.Context) bool {
	select {
	case <-c.startedCh:
	case <-ctx.Done():
		return false
	}
	c.mu.Lock()
	entries := make([]*entry, 0, len(c.entries))
	for _, e := range c.entries {
		entries = append(entries, e)
	}
	c.mu.Unlock()
	for _, e := range entries {
		if e.isCustom() {
			if _, err := e.wait(ctx, waitInformer); err != nil {
				return false
			}
			continue
		}
		for !e.inf.HasSynced() {
			ch := c.changes()
			if e.inf.HasSynced() {
				break
			}
			select {
			case <-ch:
			case <-ctx.Done():
				return false
			}
		}
	}
	return true
}

// IndexField adds a field index to the informers of obj's kind, for List
// with a field selector (client.MatchingFields), as controller-runtime's.
func (c *Cache) IndexField(ctx context.Context, obj client.Object, field string, extractValue client.IndexerFunc) error {
	gvk, err := c.gvkOf(obj)
	if err != nil {
		return err
	}
	k, err := c.kindFor(ctx, gvk, classOf(obj), false)
	if err != nil {
		return err
	}
	for _, e := range k.entries {
		if err := e.indexField(field, extractValue); err != nil {
			return err
		}
	}
	return nil
}
