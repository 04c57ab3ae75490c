package bench

import (
	"context"
	"fmt"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	cgdynamicinformer "k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	ikcache "github.com/informerkit/informerkit/cache"
	ikcontrollerruntime "github.com/informerkit/informerkit/controllerruntime"
	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/genericlister"
)

// Resource is one benchmarked resource: its GVR for informerkit and
// client-go, its GVK for controller-runtime.
type Resource struct {
	GVR schema.GroupVersionResource
	GVK schema.GroupVersionKind
}

// Handler receives every added or updated object as the implementation's
// handler sees it (decoded for compact mode).
type Handler func(obj interface{})

// Instance is one implementation's informers over some resources. Watch and
// AddHandler act as one consumer each: they ask the implementation's
// public entry point for the resource's informer (sharing whatever it
// shares) before Start. Stop tears everything down; an Instance is used
// once. Methods other than Start, Stop and Synced are not called
// concurrently.
type Instance interface {
	// Watch registers one consumer of r without a handler.
	Watch(r Resource) error
	// AddHandler registers one consumer of r with handler h.
	AddHandler(r Resource, h Handler) error
	// Start starts every registered informer.
	Start(ctx context.Context)
	// Synced reports whether every registered informer has synced.
	Synced() bool
	// Len is the number of objects cached for r.
	Len(r Resource) int
	// Get, ListNamespace and ListSelector read the cache through the
	// implementation's usual reader and return the number of objects.
	Get(r Resource, ns, name string) error
	ListNamespace(r Resource, ns string) (int, error)
	ListSelector(r Resource, sel labels.Selector) (int, error)
	// Stop stops every informer and waits for what it can wait for.
	Stop()
}

// ViewReader is implemented by instances whose cache can also be read
// without decoding (informerkit's compact mode: genericlister's GetCompact
// and ListCompact); measureCache adds rows for those reads.
type ViewReader interface {
	GetView(r Resource, ns, name string) error
	ListNamespaceView(r Resource, ns string) (int, error)
}

// Impl is an implementation under test.
type Impl struct {
	// Name labels the implementation's rows ("informerkit", "client-go", ...).
	Name string
	// Peer is true for the implementations informerkit is compared with.
	Peer bool
	// New builds an Instance on cfg.
	New func(cfg *rest.Config) (Instance, error)
	// SyncOnly: only the initial sync is measured (the limit row); its
	// Instance supports Watch, Start, Synced, Len and Stop.
	SyncOnly bool
	// WidgetOnly: the implementation reads typed objects of the suite's
	// own resource (Widget), so the many-resources scenario, whose CRDs
	// have no Go type, skips it.
	WidgetOnly bool
}

// Names of the implementations DefaultImpls returns.
const (
	InformerKit         = "informerkit"
	InformerKitStripped = "ik StripManagedFields"
	// InformerKitCompact is compact mode as the factory offers it
	// (a compact Projection: a Compactor per informer, objects decoded straight
	// from the JSON to the compact encoding).
	InformerKitCompact  = "ik Compact"
	InformerKitMetadata = "ik MetadataOnly"
	// InformerKitAPIMachinery is informerkit with Options.APIMachineryDecoding
	// (client-go's decode path).
	InformerKitAPIMachinery = "ik APIMachineryDecoding"
	ClientGo                = "client-go dynamicinformer"
	ControllerRuntime       = "controller-runtime cache"
	// InformerKitNewCache is informerkit's controller-runtime cache
	// (module controllerruntime, NewCache) reading Unstructured objects, as
	// ControllerRuntime does.
	InformerKitNewCache = "ik NewCache"
	// InformerKitNewCacheTyped is informerkit's controller-runtime cache
	// reading typed objects (Widget, registered in Scheme).
	InformerKitNewCacheTyped = "ik NewCache typed"
	// ControllerRuntimeTyped is controller-runtime's cache reading typed
	// objects (Widget), its usual use.
	ControllerRuntimeTyped = "controller-runtime cache typed"
	// ControllerRuntimePerNamespace and InformerKitNewCachePerNamespace
	// read Unstructured objects with a cache.Config per namespace
	// (PerNamespaceOptions): one informer per namespace config in both.
	ControllerRuntimePerNamespace   = "controller-runtime cache per-namespace"
	InformerKitNewCachePerNamespace = "ik NewCache per-namespace"
)

// PerNamespaceImpls are controller-runtime's cache and NewCache with
// PerNamespaceOptions (not among DefaultImpls: informerkit's informers
// are one per namespace config there, not one per resource; ikbench
// -impls selects them by name).
func PerNamespaceImpls() []Impl {
	return []Impl{
		{Name: ControllerRuntimePerNamespace, Peer: true, New: newControllerRuntimeWith(crcache.New, false, PerNamespaceOptions)},
		{Name: InformerKitNewCachePerNamespace, New: newControllerRuntimeWith(ikcontrollerruntime.NewCache, false, PerNamespaceOptions)},
	}
}

// PerNamespaceOptions are the per-namespace cache.Options of the
// per-namespace rows: each of the objects' namespaces with a label
// selector of its own (each selects all its objects, so the caches hold
// N), and NamespaceAll for the others (the latency scenario's): 11
// informers per kind, one per namespace config.
func PerNamespaceOptions() crcache.Options {
	nss := map[string]crcache.Config{crcache.AllNamespaces: {}}
	for i := 0; i < Namespaces; i++ {
		sel, err := labels.Parse(fmt.Sprintf("app!=none-%d", i))
		if err != nil {
			panic(err)
		}
		nss[namespaceName(i)] = crcache.Config{LabelSelector: sel}
	}
	return crcache.Options{DefaultNamespaces: nss}
}

// DefaultImpls are informerkit's factory with default options, with each
// memory option and with client-go's decode path, client-go's
// dynamicinformer, controller-runtime's cache and informerkit's
// (controllerruntime.NewCache) each reading Unstructured and typed
// objects, and the limit row (LimitImpl).
func DefaultImpls() []Impl {
	ik := func(name string, opts ...dynamicinformer.ResourceOption) Impl {
		return Impl{Name: name, New: func(cfg *rest.Config) (Instance, error) {
			f, err := dynamicinformer.NewForConfig(cfg, dynamicinformer.Options{
				Defaults:             opts,
				APIMachineryDecoding: name == InformerKitAPIMachinery,
			})
			if err != nil {
				return nil, err
			}
			inst := &ikInstance{factory: f, compact: name == InformerKitCompact, handles: map[schema.GroupVersionResource][]*dynamicinformer.InformerHandle{}}
			if inst.compact {
				return ikViewInstance{inst}, nil
			}
			return inst, nil
		}}
	}
	return []Impl{
		ik(InformerKit),
		ik(InformerKitStripped, dynamicinformer.WithProjection(dynamicinformer.Projection{StripManagedFields: true})),
		ik(InformerKitCompact, dynamicinformer.WithProjection(dynamicinformer.Projection{Compact: true})),
		ik(InformerKitMetadata, dynamicinformer.WithProjection(dynamicinformer.Projection{MetadataOnly: true})),
		ik(InformerKitAPIMachinery),
		{Name: ClientGo, Peer: true, New: newClientGo},
		{Name: ControllerRuntime, Peer: true, New: newControllerRuntime(crcache.New, false)},
		{Name: InformerKitNewCache, New: newControllerRuntime(ikcontrollerruntime.NewCache, false)},
		{Name: ControllerRuntimeTyped, Peer: true, WidgetOnly: true, New: newControllerRuntime(crcache.New, true)},
		{Name: InformerKitNewCacheTyped, WidgetOnly: true, New: newControllerRuntime(ikcontrollerruntime.NewCache, true)},
		LimitImpl(),
	}
}

// informerkit

type ikInstance struct {
	factory *dynamicinformer.Factory
	compact bool // wrap handlers in cache.DecodingHandler
	handles map[schema.GroupVersionResource][]*dynamicinformer.InformerHandle
}

func (i *ikInstance) handle(r Resource) *dynamicinformer.InformerHandle {
	h := i.factory.ForResource(r.GVR)
	i.handles[r.GVR] = append(i.handles[r.GVR], h)
	return h
}

func (i *ikInstance) Watch(r Resource) error { i.handle(r); return nil }

func (i *ikInstance) AddHandler(r Resource, h Handler) error {
	var eh toolscache.ResourceEventHandler = handlerFuncs(h)
	if i.compact {
		eh = ikcache.DecodingHandler(eh)
	}
	_, err := i.handle(r).Informer().AddEventHandler(eh)
	return err
}

func (i *ikInstance) Start(ctx context.Context) { i.factory.Start(ctx) }

func (i *ikInstance) Synced() bool {
	for _, hs := range i.handles {
		for _, h := range hs {
			if !h.Informer().HasSynced() {
				return false
			}
		}
	}
	return true
}

func (i *ikInstance) first(r Resource) *dynamicinformer.InformerHandle { return i.handles[r.GVR][0] }

func (i *ikInstance) Len(r Resource) int { return len(i.first(r).Informer().GetStore().ListKeys()) }

func (i *ikInstance) Get(r Resource, ns, name string) error {
	_, err := i.first(r).Lister().ByNamespace(ns).Get(name)
	return err
}

func (i *ikInstance) ListNamespace(r Resource, ns string) (int, error) {
	objs, err := i.first(r).Lister().ByNamespace(ns).List(labels.Everything())
	return len(objs), err
}

func (i *ikInstance) ListSelector(r Resource, sel labels.Selector) (int, error) {
	objs, err := i.first(r).Lister().List(sel)
	return len(objs), err
}

func (i *ikInstance) Stop() { i.factory.Shutdown() }

// ikViewInstance is compact mode, whose cache can be read without
// decoding.
type ikViewInstance struct{ *ikInstance }

func (i ikViewInstance) GetView(r Resource, ns, name string) error {
	_, err := genericlister.New(i.first(r).Informer().GetIndexer(), i.first(r).GVR().GroupResource()).Namespace(ns).GetCompact(name)
	return err
}

func (i ikViewInstance) ListNamespaceView(r Resource, ns string) (int, error) {
	objs, err := genericlister.New(i.first(r).Informer().GetIndexer(), i.first(r).GVR().GroupResource()).Namespace(ns).ListCompact(labels.Everything())
	return len(objs), err
}

// client-go

type clientGoInstance struct {
	factory cgdynamicinformer.DynamicSharedInformerFactory
	used    map[schema.GroupVersionResource]bool
	cancel  context.CancelFunc
}

func newClientGo(cfg *rest.Config) (Instance, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &clientGoInstance{
		factory: cgdynamicinformer.NewDynamicSharedInformerFactory(dyn, 0),
		used:    map[schema.GroupVersionResource]bool{},
	}, nil
}

func (c *clientGoInstance) Watch(r Resource) error {
	c.factory.ForResource(r.GVR).Informer()
	c.used[r.GVR] = true
	return nil
}

func (c *clientGoInstance) AddHandler(r Resource, h Handler) error {
	c.used[r.GVR] = true
	_, err := c.factory.ForResource(r.GVR).Informer().AddEventHandler(handlerFuncs(h))
	return err
}

func (c *clientGoInstance) Start(ctx context.Context) {
	ctx, c.cancel = context.WithCancel(ctx)
	c.factory.Start(ctx.Done())
}

func (c *clientGoInstance) Synced() bool {
	for gvr := range c.used {
		if !c.factory.ForResource(gvr).Informer().HasSynced() {
			return false
		}
	}
	return true
}

func (c *clientGoInstance) Len(r Resource) int {
	return len(c.factory.ForResource(r.GVR).Informer().GetStore().ListKeys())
}

func (c *clientGoInstance) Get(r Resource, ns, name string) error {
	_, err := c.factory.ForResource(r.GVR).Lister().ByNamespace(ns).Get(name)
	return err
}

func (c *clientGoInstance) ListNamespace(r Resource, ns string) (int, error) {
	objs, err := c.factory.ForResource(r.GVR).Lister().ByNamespace(ns).List(labels.Everything())
	return len(objs), err
}

func (c *clientGoInstance) ListSelector(r Resource, sel labels.Selector) (int, error) {
	objs, err := c.factory.ForResource(r.GVR).Lister().List(sel)
	return len(objs), err
}

func (c *clientGoInstance) Stop() {
	if c.cancel != nil {
		c.cancel()
	}
	c.factory.Shutdown()
}

// controller-runtime

// crInstance is a controller-runtime cache.Cache: controller-runtime's
// own or informerkit's (controllerruntime.NewCache), read as a controller
// reads it (GetInformer, Get, List with deep copies).
type crInstance struct {
	cache     crcache.Cache
	typed     bool // Widget objects (Scheme), else Unstructured
	informers map[schema.GroupVersionKind]crcache.Informer
	cancel    context.CancelFunc
	done      sync.WaitGroup
	ctx       context.Context
}

// silenceControllerRuntime gives controller-runtime a logger, which it
// otherwise complains about (with a stack trace) on first use.
var silenceControllerRuntime sync.Once

// newControllerRuntime builds the cache with newCache; typed reads Widget
// objects through Scheme, else Unstructured with the default options.
func newControllerRuntime(newCache crcache.NewCacheFunc, typed bool) func(cfg *rest.Config) (Instance, error) {
	return newControllerRuntimeWith(newCache, typed, func() crcache.Options { return crcache.Options{} })
}

// newControllerRuntimeWith is newControllerRuntime with the options
// options returns.
func newControllerRuntimeWith(newCache crcache.NewCacheFunc, typed bool, options func() crcache.Options) func(cfg *rest.Config) (Instance, error) {
	return func(cfg *rest.Config) (Instance, error) {
		silenceControllerRuntime.Do(func() { crlog.SetLogger(logr.Discard()) })
		opts := options()
		if typed {
			opts.Scheme = Scheme
		}
		c, err := newCache(cfg, opts)
		if err != nil {
			return nil, err
		}
		return &crInstance{cache: c, typed: typed, informers: map[schema.GroupVersionKind]crcache.Informer{}, ctx: context.Background()}, nil
	}
}

// object is an empty object of r's kind; list an empty list of it.
func (c *crInstance) object(r Resource) (crclient.Object, error) {
	if c.typed {
		obj, err := Scheme.New(r.GVK)
		if err != nil {
			return nil, err
		}
		return obj.(crclient.Object), nil
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(r.GVK)
	return u, nil
}

func (c *crInstance) list(r Resource, opts ...crclient.ListOption) (int, error) {
	listGVK := r.GVK.GroupVersion().WithKind(r.GVK.Kind + "List")
	var l crclient.ObjectList
	if c.typed {
		obj, err := Scheme.New(listGVK)
		if err != nil {
			return 0, err
		}
		l = obj.(crclient.ObjectList)
	} else {
		ul := &unstructured.UnstructuredList{}
		ul.SetGroupVersionKind(listGVK)
		l = ul
	}
	if err := c.cache.List(c.ctx, l, opts...); err != nil {
		return 0, err
	}
	return meta.LenList(l), nil
}

func (c *crInstance) informer(r Resource) (crcache.Informer, error) {
	obj, err := c.object(r)
	if err != nil {
		return nil, err
	}
	inf, err := c.cache.GetInformer(c.ctx, obj)
	if err != nil {
		return nil, err
	}
	c.informers[r.GVK] = inf
	return inf, nil
}

func (c *crInstance) Watch(r Resource) error { _, err := c.informer(r); return err }

func (c *crInstance) AddHandler(r Resource, h Handler) error {
	inf, err := c.informer(r)
	if err != nil {
		return err
	}
	_, err = inf.AddEventHandler(handlerFuncs(h))
	return err
}

func (c *crInstance) Start(ctx context.Context) {
	ctx, c.cancel = context.WithCancel(ctx)
	c.done.Add(1)
	go func() {
		defer c.done.Done()
		_ = c.cache.Start(ctx)
	}()
}

func (c *crInstance) Synced() bool {
	for _, inf := range c.informers {
		if !inf.HasSynced() {
			return false
		}
	}
	return true
}

func (c *crInstance) Len(r Resource) int {
	si, ok := c.informers[r.GVK].(toolscache.SharedIndexInformer)
	if !ok {
		// An informer per namespace config (no store of its own): the
		// cache's List, without copies.
		n, err := c.list(r, crclient.UnsafeDisableDeepCopy)
		if err != nil {
			return -1
		}
		return n
	}
	return len(si.GetStore().ListKeys())
}

func (c *crInstance) Get(r Resource, ns, name string) error {
	obj, err := c.object(r)
	if err != nil {
		return err
	}
	if err := c.cache.Get(c.ctx, crclient.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
		return err
	}
	if w, ok := obj.(*Widget); obj.GetName() != name || ok && len(w.Spec.Template.Spec.Containers) != 3 {
		return fmt.Errorf("%w: Get %s/%s read %s/%s (%T)", ErrSanity, ns, name, obj.GetNamespace(), obj.GetName(), obj)
	}
	return nil
}

func (c *crInstance) ListNamespace(r Resource, ns string) (int, error) {
	return c.list(r, crclient.InNamespace(ns))
}

func (c *crInstance) ListSelector(r Resource, sel labels.Selector) (int, error) {
	return c.list(r, crclient.MatchingLabelsSelector{Selector: sel})
}

func (c *crInstance) Stop() {
	if c.cancel != nil {
		c.cancel()
	}
	c.done.Wait()
}

func handlerFuncs(h Handler) toolscache.ResourceEventHandlerFuncs {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { h(obj) },
		UpdateFunc: func(_, obj interface{}) { h(obj) },
	}
}

// seqOf reads the benchmark's sequence annotation from any object an
// implementation hands a handler.
func seqOf(obj interface{}) (int, bool) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return 0, false
	}
	s, ok := m.GetAnnotations()[seqAnnotation]
	if !ok {
		return 0, false
	}
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil {
		return 0, false
	}
	return n, true
}
