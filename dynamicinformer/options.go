package dynamicinformer

import (
	"fmt"
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
	"github.com/informerkit/informerkit/shard"
)

// TweakListOptionsFunc edits the list and watch options of an informer just
// before each request (client-go's dynamicinformer.TweakListOptionsFunc).
type TweakListOptionsFunc func(*metav1.ListOptions)

// Option configures a factory. Options that also exist as ResourceOption set
// the factory-wide default that a per-resource option overrides.
type Option func(*factoryConfig)

// ResourceOption configures one informer (one ForResource or ForName call).
// It overrides the factory-wide default of the same setting.
type ResourceOption func(*resourceConfig)

// resourceConfig is the options of one ForResource or ForName call,
// folded once (factoryConfig.merge). Its spec says which informer it
// shares; resolve makes the plan an informer is built from; entry.join
// merges the rest into a shared informer. The zero value means: all
// namespaces, no selectors, full objects, no tweak, no transform, no
// resync, the label index on.
type resourceConfig struct {
	namespaces    []string // empty: all namespaces
	labelSelector string
	fieldSelector string
	projection    Projection
	metadataOnly  bool // projection.MetadataOnly (set by merge)
	tweak         keyedTweak
	transform     keyedTransform
	indexers      toolscache.Indexers
	resync        *time.Duration
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
	f   TweakListOptionsFunc
}

type keyedTransform struct {
	key string
	f   toolscache.TransformFunc
}

type factoryConfig struct {
	resource       resourceConfig
	logger         logr.Logger
	resolver       *discoveryresolver.Resolver
	discovery      discovery.DiscoveryInterface
	metadataClient metadata.Interface
	followCRDs     bool
	rediscovery    time.Duration
	watchIdle      time.Duration
	metrics        Metrics // nil: none (no handler added, client-go's informer metrics off)
	maxInitial     int     // WithMaxConcurrentInitialLists; <= 0: no bound
	// decodingClients: informers' fast decode path (NewForConfig), unless
	// apimachineryDecoding (WithAPIMachineryDecoding).
	decodingClients      *codec.Clients
	apimachineryDecoding bool
	// presenceTimings override presence's defaults (tests only).
	presenceTimings struct{ ready, recheckMin, recheckMax time.Duration }
	// accessBackoff overrides the access re-check back-off (tests only;
	// zero: access.DefaultMinBackoff, DefaultMaxBackoff).
	accessBackoff struct{ min, max time.Duration }
}

// defaults is the one place where every default is set.
func defaults(defaultResync time.Duration) factoryConfig {
	return factoryConfig{
		resource: resourceConfig{
			resync: &defaultResync,
		},
		logger:      klog.Background(),
		followCRDs:  true,
		rediscovery: 30 * time.Second,
		watchIdle:   defaultWatchIdleTimeout,
		metrics:     nil, // WithMetrics: none, at no cost
		maxInitial:  defaultMaxConcurrentInitialLists,
	}
}

// defaultWatchIdleTimeout is the default of WithWatchIdleTimeout: three
// times the API server's bookmark interval. kube-apiserver's watch cache
// sends each watch that asked for bookmarks (client-go's reflector does) one
// about every minute once the resource's revision has moved past the
// watch's (a 1.37 server did so every 60 s on a resource nobody wrote to;
// one gap was 120 s), and one 2 s before the watch's timeout (5 to 10 min
// for client-go's reflector).
const defaultWatchIdleTimeout = 3 * time.Minute

// WithWatchIdleTimeout sets the informers' liveness bound: when nothing
// has come from the server for d — no event or bookmark on the open watch,
// or no answer to a watch request (client-go retries 429 answers inside
// one request for minutes) — the watch ends and the informer relists to
// check the server, with a consistent list paginated like client-go's own
// (page size 500), which the server answers from storage when its watch
// cache cannot initialize. Until such a list succeeds, every retry is one,
// at the reflector's backoff (800 ms doubling to 30 s); the list's error
// is reported as usual (for an object the server cannot read from its
// storage: Failed, ErrStoreRead). The case it exists for: when the server
// cannot decode an object in storage, its watch cache stops: open watches
// get nothing (not even bookmarks), then are closed, and new watch
// requests are answered 429 "storage is (re)initializing" — which
// client-go's reflector retries forever without relisting or telling its
// error handler, so without this bound the informer would stay Synced with
// a cache that silently stops changing.
//
// A healthy resource costs one list per d only if its watch receives no
// bookmark for d (servers whose watch cache does not advance on a quiet
// resource). Default 3 minutes (three times the API server's bookmark
// interval); zero or negative turns it
// off. Informers over several namespaces do not use it (their merged
// watch asks for no bookmarks); each of their watch restarts relists, in
// pages, which meets the same server error once the server closes the
// broken cache's watches (about 30 s after an object became unreadable).
func WithWatchIdleTimeout(d time.Duration) Option {
	return func(c *factoryConfig) { c.watchIdle = d }
}

// WithLogger sets the factory's logger. Informers log with the key "gvr".
// Default: klog's (klog.Background()), where client-go logs too, so a
// failing list or watch is visible as client-go users expect — once per
// kind of failure, not per retry. While all is well nothing is logged at
// V(0). Pass logr.Discard() for silence.
func WithLogger(l logr.Logger) Option { return func(c *factoryConfig) { c.logger = l } }

// WithResolver makes ForName, Subscribe and presence tracking use r
// (discoveryresolver.New(discoveryClient) for a client of your own;
// NewForConfig builds one from its config unless given r). Without it a
// NewSharedInformerFactory's ForName returns ErrNoResolver and informers
// of resources that are not served wait in Pending until their CRD appears.
func WithResolver(r *discoveryresolver.Resolver) Option {
	return func(c *factoryConfig) { c.resolver = r }
}

// withDiscovery builds a discoveryresolver.Resolver on d for the factory
// unless WithResolver gives one (NewForConfig).
func withDiscovery(d discovery.DiscoveryInterface) Option {
	return func(c *factoryConfig) { c.discovery = d }
}

// WithMetadataClient supplies the metadata client that MetadataOnly
// informers use.
func WithMetadataClient(m metadata.Interface) Option {
	return func(c *factoryConfig) { c.metadataClient = m }
}

// WithoutCRDTracking turns off the watch on CustomResourceDefinitions that
// starts informers when their CRD is established and empties them when it
// is deleted. Without it, presence is learned from discovery only (every
// rediscovery interval) and from 404 answers.
func WithoutCRDTracking() Option { return func(c *factoryConfig) { c.followCRDs = false } }

// WithRediscoveryInterval sets how often discovery is refreshed to notice
// resources that are not CRDs (aggregated APIs) appearing or going away.
// Default 30s. Zero or negative disables periodic refreshes.
func WithRediscoveryInterval(d time.Duration) Option {
	return func(c *factoryConfig) { c.rediscovery = d }
}

// WithDefaults applies resource options to every informer of the factory;
// a ResourceOption passed to ForResource or ForName overrides them.
func WithDefaults(opts ...ResourceOption) Option {
	return func(c *factoryConfig) {
		for _, o := range opts {
			o(&c.resource)
		}
	}
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
func WithTweakListOptions(key string, f TweakListOptionsFunc) ResourceOption {
	return func(c *resourceConfig) { c.tweak = keyedTweak{key: key, f: f} }
}

// WithTransform sets a transform of the caller's (client-go's
// SetTransform): it runs on every object after the projection's
// transforms and before the Compactor (see Projection), before the cache
// and handlers see the object. Sharing: handles share an informer only if
// they give the same non-empty key, and the informer runs the first
// handle's f; with an empty key the informer is the handle's own. A
// transform the projection can express (managed fields, last-applied,
// field paths, compact) belongs in WithProjection: only there does it
// shape the decoding.
func WithTransform(key string, f toolscache.TransformFunc) ResourceOption {
	return func(c *resourceConfig) { c.transform = keyedTransform{key: key, f: f} }
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
// every informer with WithDefaults(WithAccessCheck(true))). Before its
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
// namespaces waits until it may list and watch in all of them (without
// the check, the allowed namespaces sync and Status.Err names the
// forbidden ones). Only the first list is
// checked: access revoked later shows as the server's 403. On a shared
// informer it is on if any handle asks before the informer starts; once
// it has started, its first list has been answered (a 403 says
// ErrForbidden as the check would) and there is nothing left to check.
func WithAccessCheck(on bool) ResourceOption { return func(c *resourceConfig) { c.accessCheck = on } }

// WithRelistPeriod makes the informer list its resource from the server
// again about every d (jittered up to +10%), off by default (d <= 0). The
// open watch ends, the reflector sends a real, consistent LIST and
// replaces its store with the result: handlers see an add, update or
// delete for every object the cache had wrong (drift: an event lost
// between the server and the cache) and, for unchanged objects, what a
// resync delivers (only to handlers that asked for resyncs). The state
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
	if c.shardSource != nil && len(c.namespaces) > 1 {
		return fmt.Errorf("%w: a shard source needs one namespace or all, not %v", ErrInvalid, c.namespaces)
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
