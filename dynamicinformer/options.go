package dynamicinformer

import (
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	ikcache "github.com/informerkit/informerkit/cache"
	"github.com/informerkit/informerkit/discoveryresolver"
	"github.com/informerkit/informerkit/dynamicinformer/internal/codec"
	"github.com/informerkit/informerkit/dynamicinformer/metrics"
	"github.com/informerkit/informerkit/shard"
)

// ResourceOption configures one informer (one ForResource or ForName call).
// It overrides the factory-wide default of the same setting
// (Options.Defaults).
type ResourceOption func(*resourceConfig)

// Options configures a factory (NewForConfig, NewSharedInformerFactory).
// The zero value of every field is its documented default, so Options{}
// is the default factory.
type Options struct {
	// Defaults apply to every informer of the factory; a ResourceOption
	// given to ForResource or ForName overrides them. The factory-wide
	// handler resync period is Defaults: []ResourceOption{WithResyncPeriod(d)}.
	Defaults []ResourceOption
	// Logger is the factory's logger; informers log with the key "gvr".
	// Zero (which is also what logr.Discard() returns): klog's
	// (klog.Background()), where client-go logs too. A failing list or
	// watch is logged once per kind of failure, not per retry; nothing is
	// logged at V(0) while all is well. For silence, give a logger whose
	// sink drops everything (funcr.New(func(string, string) {}, funcr.Options{})).
	Logger logr.Logger
	// Resolver is used by ForName, subscription.New and presence tracking
	// (discoveryresolver.New(discoveryClient) for a client of your own).
	// Nil: NewForConfig builds one from its config; a
	// NewSharedInformerFactory has none, so ForName and subscription.New return
	// ErrInvalid and presence relies on CRDs and 404 answers.
	Resolver *discoveryresolver.Resolver
	// MetadataClient lists and watches the informers with a MetadataOnly
	// projection. Nil: NewForConfig builds one from its config; without
	// one, MetadataOnly informers list and watch full objects through the
	// dynamic client and keep only their metadata (see Projection).
	MetadataClient metadata.Interface
	// DisableCRDTracking turns off the watch on CustomResourceDefinitions
	// that starts informers when their CRD is established and empties
	// them when it is deleted; presence is then learned from discovery
	// (every RediscoveryInterval) and from 404 answers. Without a dynamic
	// client CRDs are not tracked.
	DisableCRDTracking bool
	// RediscoveryInterval is how often discovery is refreshed to notice
	// resources that are not CRDs (aggregated APIs) appearing or going
	// away. Zero: 30 s; negative: no periodic refresh.
	RediscoveryInterval time.Duration
	// WatchIdleTimeout bounds the server's silence: when nothing has come
	// for it (no event or bookmark on the open watch, no answer to a
	// watch request), the watch ends and the informer relists with a
	// consistent, paginated list, whose error the Status reports (see the
	// package documentation, "Liveness"). Zero: 3 min (three bookmark
	// intervals); negative: off. Informers over several namespaces do not
	// use it.
	WatchIdleTimeout time.Duration
	// MaxConcurrentInitialLists bounds how many informers send their
	// first list at the same time; the others wait, Pending (see the
	// package documentation, "Start-up"). Zero: 50; negative: no bound.
	//
	// It is also the factory's bound on the memory its start-up needs
	// above the caches it fills. A first sync streamed (WatchList, the
	// default since Kubernetes 1.35) decodes each object into the cache
	// as it arrives and needs almost nothing more, whatever the bound;
	// a plain LIST holds each response body until it is decoded, so
	// informers listing together add their bodies. (A first LIST is
	// paginated: the reflector's first page at resourceVersion "0" is
	// sent as a consistent list, which the server pages, so a body is
	// one page of 500 objects, not the whole resource; a slot is held
	// for the first page only.) Measured with 100 informers of 1,000
	// objects starting at once over LIST before lists were paginated
	// (docs/PERFORMANCE.md, "Many informers starting at once"): the peak
	// heap above the settled caches was 34% of them without a bound, 29%
	// at 50, 22% at 4 (sync 3% faster than unbounded) and 15% at 1 (sync
	// 42% slower).
	MaxConcurrentInitialLists int
	// Metrics receives what the factory's informers do (an exporter: see
	// package dynamicinformer/metrics; prometheusmetrics implements it). Nil:
	// none, at no cost.
	Metrics metrics.Exporter
	// APIMachineryDecoding makes informers decode with client-go's
	// dynamic client codec, as client-go's own informers do, instead of
	// the fast decode path of NewForConfig's factories (see the package
	// documentation, "Decoding"). It changes nothing for
	// NewSharedInformerFactory, which always decodes with its client's
	// codec.
	APIMachineryDecoding bool
	// AccessRecheckPeriod is how often the namespaces of an informer
	// WithPermittedNamespaces are checked again (a grant, a revocation, a
	// namespace created or deleted is followed within about it), and how
	// often a several-namespace informer retries its denied or refused
	// namespaces. Checks of all informers fall on the same multiples of it,
	// so they share their reviews. Zero: 30 s (the cap of client-go's
	// reflector back-off). A WithPermittedNamespaces informer stretches it
	// to at least 100 ms per namespace it checks, so its rules reviews
	// stay under 10 a second (600 a minute: 1,000 namespaces are
	// re-checked every 100 s).
	AccessRecheckPeriod time.Duration
	// ContactCheckInterval is the contact heartbeat: when no request of
	// the factory has been answered for this long, it probes the server
	// (one SelfSubjectReview create), so that a server that stops
	// answering while every watch sits idle (a black hole, a frozen
	// process) is found within it and ContactCheckTimeout, and every
	// informer says so (Status.ContactErr, Synced turns Stale). Zero: 5 s;
	// negative: no heartbeat (contact is then checked only when a request
	// is slow or fails). While contact is lost the server is probed every
	// 1–2 s and the informers' requests wait for it (see the package
	// documentation, "Contact").
	ContactCheckInterval time.Duration
	// ContactCheckTimeout is how long a probe may go unanswered before
	// contact is lost. Zero: 10 s.
	ContactCheckTimeout time.Duration
	// CacheDir, if set, keeps each informer's cache on disk in this
	// directory (created with mode 0700; files 0600), so that a process
	// started again restores it instead of listing: the informer is
	// Restored at once, its handlers receive each restored object as an
	// add in the initial list, and its watch resumes from the stored
	// resourceVersion, so handlers then see only what changed while the
	// process was down. If the server cannot resume from it (410
	// Expired), the informer lists and handlers see only the difference,
	// as after every relist (see WithUnchangedRelistUpdates; the package
	// documentation, "Restart from disk", has every case and what is not
	// guaranteed). The directory is locked: a second
	// factory or process on it runs without it (Status.CacheErr says
	// why). A stored state of another cluster, CRD instance, spec or
	// format version, or a damaged one, is removed and the informer lists.
	// Needs a dynamic client (to read the kube-system namespace's and the
	// CRD's UID). An informer that follows the preferred version (ForName
	// without a version) is kept under the version it follows: after it
	// moved, or if another version is preferred at the next start, the
	// objects stored at the old version are not restored. An informer
	// over several namespaces, with WithPermittedNamespaces or with a
	// shard source (WithShardSource) is kept but always diffed: restored,
	// then what it watches now listed (each namespace), handlers given
	// only the difference. Two informers of a factory whose specs differ
	// only by their shard source share a stored state: the second is not
	// kept (Status.CacheErr). Informers with an unkeyed transform or tweak
	// are not kept. Empty: nothing is written.
	CacheDir string
	// CacheSecrets lets CacheDir keep Secrets; without it, Secrets are
	// never written to disk.
	CacheSecrets bool

	// Set by NewForConfig: the discovery client a resolver is built on
	// when Resolver is nil, and the fast decode path's clients.
	discovery       discovery.DiscoveryInterface
	decodingClients *codec.Clients
	// Tests only: presence's timings and the access re-check back-off
	// (zero: their defaults).
	presenceTimings struct{ ready, recheckMin, recheckMax time.Duration }
	accessBackoff   struct{ min, max time.Duration }
}

// resourceConfig is the options of one ForResource or ForName call,
// folded once (factoryConfig.merge). Its spec says which informer it
// shares; resolve makes the plan an informer is built from; entry.join
// merges the rest into a shared informer. The zero value means: all
// namespaces, no selectors, full objects, no tweak, no transform, no
// resync, the label index on.
type resourceConfig struct {
	namespaces    []string // empty: all namespaces
	permitted     bool     // WithPermittedNamespaces (namespaces empty)
	candidates    []string // its candidates, sorted
	labelSelector string
	fieldSelector string
	projection    Projection
	metadataOnly  bool // projection.MetadataOnly (set by merge)
	tweak         keyedTweak
	transform     keyedTransform
	indexers      toolscache.Indexers
	resync        *time.Duration
	unchanged     bool // WithUnchangedRelistUpdates (per handle)
	sharingKey    string
	own           uint64        // nonzero: an informer of its own (set by merge)
	accessCheck   bool          // WithAccessCheck
	relistPeriod  time.Duration // WithRelistPeriod; <= 0: none
	shard         shard.Shard   // zero: not sharded
	shardSource   shard.Source  // nil: none (WithShardSource)
}

// keyedTweak and keyedTransform are caller code named by a sharing key.
type keyedTweak struct {
	key string
	f   func(*metav1.ListOptions)
}

type keyedTransform struct {
	key string
	f   toolscache.TransformFunc
}

// factoryConfig is a factory's Options with every default applied
// (defaults); in it zero or negative durations and bounds mean off.
type factoryConfig struct {
	resource       resourceConfig
	logger         logr.Logger
	resolver       *discoveryresolver.Resolver
	discovery      discovery.DiscoveryInterface
	metadataClient metadata.Interface
	followCRDs     bool
	rediscovery    time.Duration    // <= 0: off
	watchIdle      time.Duration    // <= 0: off
	metrics        metrics.Exporter // nil: none (no handler added, client-go's informer metrics off)
	maxInitial     int              // <= 0: no bound
	// decodingClients: informers' fast decode path (NewForConfig), unless
	// apimachineryDecoding.
	decodingClients      *codec.Clients
	apimachineryDecoding bool
	presenceTimings      struct{ ready, recheckMin, recheckMax time.Duration }
	accessBackoff        struct{ min, max time.Duration }
	accessRecheck        time.Duration
	cacheDir             string // "": no disk cache
	cacheSecrets         bool
}

// Defaults of Options' zero values.
const (
	defaultRediscoveryInterval = 30 * time.Second
	// defaultWatchIdleTimeout is three times the API server's bookmark
	// interval (see docs/DESIGN.md, "Liveness").
	defaultWatchIdleTimeout = 3 * time.Minute
	// defaultMaxConcurrentInitialLists is the cap gitops-engine uses.
	defaultMaxConcurrentInitialLists = 50
	defaultAccessRecheck             = 30 * time.Second
)

// defaults is the one place where Options' zero values become defaults.
func defaults(o Options) factoryConfig {
	c := factoryConfig{
		logger:               o.Logger,
		resolver:             o.Resolver,
		discovery:            o.discovery,
		metadataClient:       o.MetadataClient,
		followCRDs:           !o.DisableCRDTracking,
		rediscovery:          o.RediscoveryInterval,
		watchIdle:            o.WatchIdleTimeout,
		metrics:              o.Metrics,
		maxInitial:           o.MaxConcurrentInitialLists,
		decodingClients:      o.decodingClients,
		apimachineryDecoding: o.APIMachineryDecoding,
		presenceTimings:      o.presenceTimings,
		accessBackoff:        o.accessBackoff,
		accessRecheck:        o.AccessRecheckPeriod,
		cacheDir:             o.CacheDir,
		cacheSecrets:         o.CacheSecrets,
	}
	if c.logger.GetSink() == nil {
		c.logger = klog.Background()
	}
	if c.rediscovery == 0 {
		c.rediscovery = defaultRediscoveryInterval
	}
	if c.watchIdle == 0 {
		c.watchIdle = defaultWatchIdleTimeout
	}
	if c.accessRecheck <= 0 {
		c.accessRecheck = defaultAccessRecheck
	}
	if c.maxInitial == 0 {
		c.maxInitial = defaultMaxConcurrentInitialLists
	}
	for _, opt := range o.Defaults {
		opt(&c.resource)
	}
	return c
}

// WithNamespaces limits the informer to the given namespaces. No argument
// or metav1.NamespaceAll ("") among them means all namespaces (so
// WithNamespaces() undoes a factory-wide default). With several
// namespaces the informer lists and watches each and merges them (see the
// package documentation for the cost). On a cluster-scoped resource it is
// ErrInvalid: from ForName, and in the Status of a
// ForResource informer (Failed) as soon as discovery or the server tells.
func WithNamespaces(ns ...string) ResourceOption {
	return func(c *resourceConfig) {
		c.namespaces = normalizeNamespaces(ns)
		c.permitted, c.candidates = false, nil
	}
}

// WithPermittedNamespaces makes the informer hold its resource's objects
// in exactly the namespaces where its user may list and watch it, and
// follow RBAC while it runs (it replaces WithNamespaces; the last of the
// two given wins). The namespaces are all of the server's when the user
// may list them, else candidates; permission is asked with the factory's
// shared reviews (a SelfSubjectRulesReview per namespace, shared by every
// resource; see the package documentation, "Permitted namespaces").
//
// When the user may list and watch the resource in all namespaces, one
// cluster-wide list and watch serves it (Status.Permitted is [""]);
// otherwise each permitted namespace is listed and watched (see
// WithNamespaces for the cost). The permission and the namespaces are
// checked again every Options.AccessRecheckPeriod (30 s; at least 100 ms
// per namespace checked), at once when a watch ends or is refused (a 403
// does not fail the informer), and, for a user who may watch namespaces
// (one namespace watch per factory), within seconds of a namespace being
// created or deleted; when they changed, the informer relists,
// so a namespace granted or created arrives as adds and one revoked or
// deleted leaves as deletes. Status.Permitted names the namespaces held,
// NotPermitted the others with the missing verbs, NextAccessCheck the next
// check. With no permitted namespace the informer is Synced and empty
// (not Failed: it holds exactly what the user may see). A user who may
// not list namespaces and gave no candidates gets Failed with
// ErrForbidden. It needs a dynamic client (ErrInvalid without one) and
// excludes a shard source.
func WithPermittedNamespaces(candidates ...string) ResourceOption {
	return func(c *resourceConfig) {
		c.namespaces, c.permitted = nil, true
		c.candidates = normalizeNamespaces(slices.DeleteFunc(slices.Clone(candidates), func(ns string) bool { return ns == metav1.NamespaceAll }))
	}
}

// WithLabelSelector restricts the informer to objects matching selector
// (label selector syntax; an invalid one is reported by ForResource's
// status and by ForName as ErrInvalid).
func WithLabelSelector(selector string) ResourceOption {
	return func(c *resourceConfig) { c.labelSelector = selector }
}

// WithFieldSelector restricts the informer to objects matching selector.
func WithFieldSelector(selector string) ResourceOption {
	return func(c *resourceConfig) { c.fieldSelector = selector }
}

// WithTweakListOptions edits list/watch options just before each request
// (after the selectors are set). Sharing: handles share an informer only
// if they give the same non-empty key, and the informer runs the first
// handle's f; with an empty key the informer is the handle's own.
func WithTweakListOptions(key string, f func(*metav1.ListOptions)) ResourceOption {
	return func(c *resourceConfig) { c.tweak = keyedTweak{key: key, f: f} }
}

// WithTransform sets a transform of the caller's (client-go's
// SetTransform): it runs on every object after the projection's
// transforms and before the Compactor (see Projection), before the cache
// and handlers see the object. Sharing: handles share an informer only if
// they give the same non-empty key, and the informer runs the first
// handle's f; with an empty key the informer is the handle's own.
//
// A transform the projection can express (managed fields, last-applied,
// field paths, compact) belongs in WithProjection: only there does it
// shape the decoding. Package cache's own are recognised here, so that
// each projection has one path: cache.StripManagedFields and
// cache.DropLastAppliedConfiguration become the Projection's
// StripManagedFields and DropLastApplied (the informer is the one
// WithProjection gives, shared with it, fast decode path included; key
// is not used); a cache.Project transform and a Compactor's Transform
// are refused with a *ProjectionTransformError (errors.Is ErrInvalid)
// naming the WithProjection to give. A func of your own that calls
// them, or a cache.Chain of them, is opaque.
func WithTransform(key string, f toolscache.TransformFunc) ResourceOption {
	return func(c *resourceConfig) { c.transform = keyedTransform{key: key, f: f} }
}

// ProjectionTransformError is the error of a WithTransform transform
// that is one of package cache's projections the Projection expresses
// only with arguments the factory cannot read back (cache.Project's
// field paths, a Compactor's options): the message names the
// WithProjection to give instead. It wraps ErrInvalid.
type ProjectionTransformError struct {
	// Transform is the transform given: "cache.Project(...)" or
	// "(*cache.Compactor).Transform".
	Transform string
	// Use is what to give instead, WithProjection(Projection{...}).
	Use string
}

func (e *ProjectionTransformError) Error() string {
	return fmt.Sprintf("%v: WithTransform(%s) is a projection: give %s instead, the one path that also shapes the decoding", ErrInvalid, e.Transform, e.Use)
}

// Unwrap returns ErrInvalid.
func (e *ProjectionTransformError) Unwrap() error { return ErrInvalid }

// Package cache's transforms, by code pointer (a cache.Project
// transform, a Compactor's Transform: every value made by one function
// literal or method value shares it).
var (
	stripManagedFieldsCode = transformCode(ikcache.StripManagedFields)
	dropLastAppliedCode    = transformCode(ikcache.DropLastAppliedConfiguration)
	projectCode            = transformCode(must(ikcache.Project()))
	compactorCode          = transformCode(ikcache.NewCompactor(ikcache.CompactorOptions{}).Transform)
)

func transformCode(f toolscache.TransformFunc) uintptr { return reflect.ValueOf(f).Pointer() }

func must(f toolscache.TransformFunc, err error) toolscache.TransformFunc {
	if err != nil {
		panic(err) // (cache.Project of no path cannot fail)
	}
	return f
}

// foldOwnTransform makes a WithTransform transform that is a projection
// of package cache's that the Projection holds as a flag that flag
// (once per ForResource or ForName call, in merge).
func (c *resourceConfig) foldOwnTransform() {
	if c.transform.f == nil {
		return
	}
	switch transformCode(c.transform.f) {
	case stripManagedFieldsCode:
		c.projection.StripManagedFields = true
	case dropLastAppliedCode:
		c.projection.DropLastApplied = true
	default:
		return
	}
	c.transform = keyedTransform{}
}

// ownTransformError refuses a WithTransform transform that is one of
// package cache's projections with arguments (see
// ProjectionTransformError).
func (c resourceConfig) ownTransformError() error {
	if c.transform.f == nil {
		return nil
	}
	switch transformCode(c.transform.f) {
	case projectCode:
		return &ProjectionTransformError{Transform: "cache.Project(...)", Use: `WithProjection(Projection{Fields: "path,..."})`}
	case compactorCode:
		return &ProjectionTransformError{Transform: "(*cache.Compactor).Transform", Use: "WithProjection(Projection{Compact: true, CompactOptions: ...})"}
	}
	return nil
}

// WithIndexers adds indexers. Indexers merge: a shared informer gets the
// union by name; a name it already has keeps its first function.
func WithIndexers(idx toolscache.Indexers) ResourceOption {
	return func(c *resourceConfig) {
		merged := toolscache.Indexers{}
		for k, v := range c.indexers {
			merged[k] = v
		}
		for k, v := range idx {
			merged[k] = v
		}
		c.indexers = merged
	}
}

// WithResyncPeriod sets the resync period of the handle's AddEventHandler
// (0: none). It is per handle; client-go's informer checks for resyncs at
// its first handle's period, so a later handle asking for a shorter
// nonzero one (or any, when the first asked for none) gets
// ErrOptionConflict. A resync replays the cache to handlers (an update
// per cached object, old == new): it sends no request and repairs nothing
// (see WithRelistPeriod).
func WithResyncPeriod(d time.Duration) ResourceOption {
	return func(c *resourceConfig) { c.resync = &d }
}

// WithUnchangedRelistUpdates gives the handle's handlers client-go's
// relist: an update for every cached object the relist finds again,
// unchanged ones included (old and new at the same resourceVersion).
//
// By default a relist — after a watch that could not resume (410
// Expired, a long outage), WithRelistPeriod's, a restored disk cache
// diffed against the server — tells handlers only what changed: an add
// per new object, an update per object whose resourceVersion changed, a
// delete per object gone. client-go's SharedIndexInformer (without
// resync checks) also delivers an update per unchanged object: 100,000
// updates after every long outage for a cache of 100,000. Ask for them
// only if a handler relies on them, for example to reconcile everything
// after each relist (WithResyncPeriod does that on a schedule, and is
// not affected: a resync still delivers every cached object, old and new
// the same object, to handlers with a resync period).
//
// It is per handle (the handlers added through its Informer()); handles
// that share the informer keep their own choice. The informer's metrics
// (metrics.Informer.Event) count the default delivery.
func WithUnchangedRelistUpdates() ResourceOption {
	return func(c *resourceConfig) { c.unchanged = true }
}

// WithLabelIndexKeys adds per-key label indexes for keys up front, so the
// first selector List on them is indexed too. It merges as WithIndexers
// does. Without it, every informer indexes labels on demand: the first
// label-selector List through a lister (Lister, genericlister.New) that
// needs an index for label key k adds a per-key index of k (at most 16
// keys), and later selector Lists on k use it.
func WithLabelIndexKeys(keys ...string) ResourceOption {
	return WithIndexers(ikcache.LabelKeyIndexers(keys...))
}

// WithAccessCheck turns the RBAC pre-flight on or off (default off; on for
// every informer with Options.Defaults). Before its
// first list the informer asks the server (reviews shared by the
// factory's informers; see the package documentation), whether
// its user may list and watch its resource in each of its namespaces (all
// namespaces when it has none). If not, its status is Failed with an error
// that errors.Is ErrForbidden and names the missing verbs and namespaces,
// no list or watch is sent, and the check is repeated 1 s later, doubling
// to every 30 s (the cap of client-go's reflector back-off), until access
// is granted; then the informer lists and syncs by itself. Without the
// check, a forbidden informer finds out from its first list's 403 and
// retries the list at the reflector's back-off.
//
// A review that cannot be made (the server cannot be reached, serves no
// authorization.k8s.io/v1, or refuses the review itself) does not hold the
// informer: it is logged once and the informer lists as it would without
// the check (the server's answer to the list decides). A factory without a
// dynamic client (metadata-only) skips the check. An informer over several
// namespaces waits until it may list and watch in one of them; it lists
// and watches the allowed ones, names the others in Status.Denied (with
// the missing verbs) and Status.Err, is not Ready while any is denied,
// and checks them again every Options.AccessRecheckPeriod (without the
// check, the same, from the server's 403). Otherwise only the first list
// is checked: access revoked later shows as the server's 403. On a shared
// informer it is on if any handle asks before the informer starts; once
// it has started, its first list has been answered (a 403 says
// ErrForbidden as the check would) and there is nothing left to check.
func WithAccessCheck(on bool) ResourceOption { return func(c *resourceConfig) { c.accessCheck = on } }

// WithRelistPeriod makes the informer list its resource from the server
// again about every d (jittered up to +10%), off by default (d <= 0). The
// open watch ends, the reflector sends a real, consistent LIST and
// replaces its store with the result: handlers see an add, update or
// delete for every object the cache had wrong (drift: an event lost
// between the server and the cache) and nothing for unchanged objects
// (see WithUnchangedRelistUpdates). The state
// stays Synced. Each relist costs one list of the whole resource (per
// namespace) and a short pause of the watch (the reflector's back-off
// before it lists again, 800 ms to 30 s, reset after 2 min without
// restarts), so periods much shorter than a few minutes keep the watch
// paused for a good part of the time. Unlike WithResyncPeriod, which only
// replays the cache to handlers, this goes to the server. On a shared
// informer the shortest period any handle asks for applies, to a running
// informer too.
func WithRelistPeriod(d time.Duration) ResourceOption {
	return func(c *resourceConfig) { c.relistPeriod = d }
}

// WithShard makes the informer hold only the objects of shard s (see
// package shard), so that several replicas can each cache a part of a
// resource: replica i of n passes shard.Static(i, n). The zero Shard
// undoes a factory-wide default.
//
// Every list request, every page of a paginated list and every watch
// carries s as metav1.ListOptions.ShardSelector (after the label and field
// selectors, before the tweak func). A server with the
// ShardedListAndWatch feature gate (alpha in Kubernetes 1.36) sends only
// the shard; a server without it ignores the selector and sends every
// object. Either way, every listed object and every watch event is
// checked with s.Contains before it reaches the cache, so the cache and
// the handlers see exactly the shard; a server that ignores the selector
// costs bandwidth and decoding, not correctness. Status.OutsideShard
// counts the objects dropped that way: it stays 0 while the server
// applies the selector.
//
// Objects never move between shards: UIDs and namespaces do not change.
// Sharding by namespace (shard.Split(shard.Namespace, i, n)) keeps each
// namespace in one replica but spreads badly (see shard.Namespace).
// Informers with different shards are different informers.
// WithShard and WithShardSource replace each other.
func WithShard(s shard.Shard) ResourceOption {
	return func(c *resourceConfig) { c.shard, c.shardSource = s, nil }
}

// WithShardSource makes the informer hold the shard src gives, and follow
// it as it changes (package shard/membership gives a replica's part of a
// group of replicas that agree on Leases). Requests and filtering are as
// for WithShard, with the current shard: a list keeps the shard of its
// first page for all its pages, a watch the shard it was opened with.
//
// When the shard changes, the informer switches to the new one with no
// restart, inside its open watch stream: one list of the new shard, then
// a watch from it. Handlers get a delete for each object that left the
// shard, an add for each object that entered, an update for each object
// that stayed and changed meanwhile (or whose add was still queued), and
// nothing for the others. A switch before the first sync, while a list is
// in flight, or whose list or watch fails, goes through client-go's
// reflector instead (a relist: same handler calls, but it waits for the
// reflector's backoff, 0.8 s doubling to 30 s while restarts follow each
// other). The informer keeps the keys it handed its reflector (about 90
// bytes per object) to know what left. The informer registers with src
// while it runs (shard.Source's Register) and reports what its cache
// holds: at a switch, the part of the old shard within the new one; the new shard
// once a list of it has been handed to the reflector (its objects then
// reach the cache in the informer's queue order).
//
// Informers given the same src share one informer. A source needs an
// informer over one namespace or all of them: with several namespaces the
// informer is Failed with ErrInvalid. WithShard and
// WithShardSource replace each other; nil undoes a factory-wide default.
func WithShardSource(src shard.Source) ResourceOption {
	return func(c *resourceConfig) { c.shard, c.shardSource = shard.Shard{}, src }
}

// WithSharingKey makes otherwise equal informers distinct, for callers
// who need an informer of their own.
func WithSharingKey(key string) ResourceOption { return func(c *resourceConfig) { c.sharingKey = key } }

func normalizeNamespaces(ns []string) []string {
	out := make([]string, 0, len(ns))
	for _, n := range ns {
		if n == metav1.NamespaceAll {
			return nil
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// merge folds the factory defaults and opts into one resourceConfig
// (once per ForResource or ForName call).
func (f factoryConfig) merge(opts []ResourceOption) resourceConfig {
	c := f.resource
	c.indexers = nil
	for _, o := range opts {
		o(&c)
	}
	merged := toolscache.Indexers{}
	for k, v := range f.resource.indexers {
		merged[k] = v
	}
	for k, v := range c.indexers {
		merged[k] = v
	}
	c.indexers = merged
	c.foldOwnTransform()
	c.metadataOnly = c.projection.MetadataOnly
	c.own = 0
	if (c.transform.f != nil && c.transform.key == "") || (c.tweak.f != nil && c.tweak.key == "") {
		c.own = ownInformers.Add(1)
	}
	return c
}

func (c resourceConfig) validate() error {
	if _, err := labels.Parse(c.labelSelector); err != nil {
		return fmt.Errorf("%w: label selector %q: %v", ErrInvalid, c.labelSelector, err)
	}
	if _, err := fields.ParseSelector(c.fieldSelector); err != nil {
		return fmt.Errorf("%w: field selector %q: %v", ErrInvalid, c.fieldSelector, err)
	}
	if c.shardSource != nil && c.permitted {
		return fmt.Errorf("%w: a shard source excludes WithPermittedNamespaces", ErrInvalid)
	}
	if c.shardSource != nil && len(c.namespaces) > 1 {
		return fmt.Errorf("%w: a shard source needs one namespace or all, not %v", ErrInvalid, c.namespaces)
	}
	if err := c.ownTransformError(); err != nil {
		return err
	}
	return c.projection.validate()
}

// resyncPeriod is the informer's default handler resync period.
func (c resourceConfig) resyncPeriod() time.Duration {
	if c.resync == nil {
		return 0
	}
	return *c.resync
}

// allIndexers are the informer's indexers: the namespace index (always:
// listers and the removal bookkeeping use it), the on-demand label index
// marker unless turned off, and the caller's.
func (c resourceConfig) allIndexers() toolscache.Indexers {
	indexers := toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc}
	for k, v := range ikcache.AutoLabelKeyIndexers() {
		indexers[k] = v
	}
	for k, v := range c.indexers {
		indexers[k] = v
	}
	return indexers
}
