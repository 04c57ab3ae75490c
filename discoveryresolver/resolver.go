package discoveryresolver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

// Resolver maps references to served resources using the API server's
// discovery. All methods are safe for concurrent use.
//
// The resolver holds one immutable snapshot of discovery. Answers for names
// in the snapshot are map lookups. A reference the snapshot does not know (a
// miss) is answered from a discovery round that started after the call: it
// runs one, or waits for the next one the minimum refresh interval allows.
// At most one round runs at a time; concurrent misses, Refresh calls and
// invalidated lookups share it. The resolver starts
// no goroutines: a round runs in the goroutine of the caller that started
// it, and a waiting caller waits in its own.
type Resolver struct {
	client discovery.DiscoveryInterfaceWithContext
	cached discovery.CachedDiscoveryInterface // non-nil if the client caches; invalidated before each round
	opts   options
	log    logr.Logger

	snap    atomic.Pointer[snapshot] // nil until the first successful round
	stale   atomic.Bool              // set by Invalidate: the next lookup refreshes first
	started atomic.Uint64            // number of rounds started; written under mu, read without it

	mu         sync.Mutex // guards round, last, lastStart, failedKeys, listeners, nextID, pending, delivering, direct
	round      *round     // the round in flight, nil if none
	last       *round     // the latest round that ended and was not abandoned, nil if none
	lastStart  time.Time  // start of the latest round, abandoned or not: the rate limit counts from it
	failedKeys string     // failing group-versions of the latest round, for logging changes only
	listeners  []listener
	nextID     int
	pending    []Change                     // changes not yet delivered, in order
	delivering bool                         // a goroutine is delivering pending changes
	direct     map[schema.GroupVersion]bool // read from their own endpoints until aggregated discovery agrees
}

type listener struct {
	id int
	f  func(Change)
}

// New returns a Resolver that asks client. It does no network I/O: the
// first call that needs discovery runs the first round.
//
// Pass a plain discovery client (discovery.NewDiscoveryClientForConfig);
// client-go uses aggregated discovery (two requests per round) when the
// server offers it. A caching client (memory or disk) defeats refreshes; if
// client implements discovery.CachedDiscoveryInterface, the resolver calls
// its Invalidate before every round.
//
// Defaults: logr.Discard(), a minimum refresh interval of one second, ambiguous among
// non-core groups (see WithServerGroupOrder).
func New(client discovery.DiscoveryInterface, opts ...Option) *Resolver {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	r := &Resolver{
		client: discovery.ToDiscoveryInterfaceWithContext(client),
		opts:   o,
		log:    o.logger.WithName("discoveryresolver"),
	}
	if c, ok := client.(discovery.CachedDiscoveryInterface); ok {
		r.cached = c
	}
	return r
}

// Resolve maps a reference typed the way kubectl accepts it — plural,
// singular, short name or kind (any case), optionally qualified as
// "name.group" or "name.version.group" ("deployments.v1.apps",
// "Deployment.apps", "pods.v1." for the core group) — to the served
// resource, at the group's preferred version unless the reference names a
// version.
//
// A reference the snapshot does not know is looked up again in a discovery
// round that started after the call, which may mean waiting, bounded by
// ctx, for the minimum refresh interval to end (see WithMinRefreshInterval).
//
// Errors: a *ResolveError wrapping ErrNotFound (with ctx's error or a
// discovery error beside it if no newer round could answer), ErrSubresource
// or ErrNotWatchable (with the Resource also returned), an *AmbiguousError,
// or a *ResolveError wrapping a discovery error when discovery never
// succeeded. See the package documentation for how ties are settled.
func (r *Resolver) Resolve(ctx context.Context, ref string) (Resource, error) {
	if strings.Contains(ref, "/") {
		return Resource{}, &ResolveError{Ref: ref, Err: ErrSubresource}
	}
	if ref == "" {
		return Resource{}, &ResolveError{Ref: ref, Err: ErrNotFound}
	}
	return r.lookupOrRefresh(ctx, func() string { return ref }, func(s *snapshot) result { return s.resolve(ref) })
}

// ResolveGVR returns the resource served at gvr. An empty Version means the
// preferred version of gvr's group-resource. Resource must be the plural
// name as discovery spells it. Errors are as for Resolve, with Ref set to
// gvr.String().
func (r *Resolver) ResolveGVR(ctx context.Context, gvr schema.GroupVersionResource) (Resource, error) {
	if strings.Contains(gvr.Resource, "/") {
		return Resource{}, &ResolveError{Ref: gvr.String(), Err: ErrSubresource}
	}
	return r.lookupOrRefresh(ctx, gvr.String, func(s *snapshot) result { return s.resolveGVR(gvr) })
}

// resolveGVK returns the resource whose kind is gvk. An empty Version means
// the preferred version that serves the kind. The kind is matched exactly
// first, then ignoring case. If several resources of one group-version
// share the kind, the error is an *AmbiguousError. Errors are otherwise as
// for Resolve, with Ref set to gvk.String().
func (r *Resolver) resolveGVK(ctx context.Context, gvk schema.GroupVersionKind) (Resource, error) {
	return r.lookupOrRefresh(ctx, gvk.String, func(s *snapshot) result { return s.resolveGVK(gvk) })
}

// Lookup returns the cached resource served at gvr, without any network
// I/O and without refreshing, even when invalidated. An empty Version means
// the preferred version of gvr's group-resource, as for ResolveGVR. It
// reports false if the current snapshot does not serve gvr.
func (r *Resolver) Lookup(gvr schema.GroupVersionResource) (Resource, bool) {
	s := r.snap.Load()
	if s == nil {
		return Resource{}, false
	}
	res := s.resolveGVR(gvr)
	if !res.found() {
		return Resource{}, false
	}
	return s.entries[res.idx].res.clone(), true
}

// Resources returns the preferred version of every served resource
// (watchable or not), in discovery order: groups as the server orders them,
// then resources as the group lists them. It runs a discovery round first
// only if there is no snapshot yet or it was invalidated. The slice and its
// elements are the caller's.
func (r *Resolver) Resources(ctx context.Context) ([]Resource, error) {
	return r.Match(ctx, Filter{})
}

// allVersions is Resources over every served version of every resource.
func (r *Resolver) allVersions(ctx context.Context) ([]Resource, error) {
	s, err := r.current(ctx)
	if s == nil {
		return nil, err
	}
	out := make([]Resource, len(s.entries))
	for i := range s.entries {
		out[i] = s.entries[i].res.clone()
	}
	return out, nil
}

// Match returns the preferred version of every served resource that f
// matches, in discovery order, with the same freshness rules as Resources.
func (r *Resolver) Match(ctx context.Context, f Filter) ([]Resource, error) {
	s, err := r.current(ctx)
	if s == nil {
		return nil, err
	}
	out := make([]Resource, 0, len(s.order))
	for _, i := range s.order {
		if f.matches(s.entries[i].res) {
			out = append(out, s.entries[i].res.clone())
		}
	}
	return out, nil
}

// FailedGroups returns the group-versions whose discovery failed in the
// latest round, with their errors; empty when none failed. The map is the
// caller's.
func (r *Resolver) FailedGroups() map[schema.GroupVersion]error {
	s := r.snap.Load()
	if s == nil {
		return nil
	}
	return copyGroupErrors(s.failed)
}

// Invalidate marks the cached discovery as outdated: the next Resolve*,
// Resources, Match or RefreshIfStale call runs a round first (or joins the
// one in flight), without waiting for the minimum refresh interval; if
// that round fails as a whole, answers come from the previous data. The
// factory calls it when a CustomResourceDefinition changed. Lookup never refreshes.
//
// With gvs, the next rounds also read gvs from their own discovery
// endpoints (/apis/group/version), not only from the aggregated discovery
// document, until the document agrees: the aggregated document can lag
// behind a resource added to a group-version that already existed
// (minutes were observed with Kubernetes 1.37), while the group-version's
// own endpoint is served by apiextensions-apiserver from the CRDs
// themselves. A caching discovery client answers those reads from its
// cache, so the factory gives the resolver a non-caching one. Marks
// accumulate until each group-version's own endpoint and the aggregated
// document agree (or it is gone from both).
func (r *Resolver) Invalidate(gvs ...schema.GroupVersion) {
	if len(gvs) > 0 {
		r.mu.Lock()
		if r.direct == nil {
			r.direct = map[schema.GroupVersion]bool{}
		}
		for _, gv := range gvs {
			r.direct[gv] = true
		}
		r.mu.Unlock()
	}
	r.stale.Store(true)
}

// readDirect reads the group-versions marked by Invalidate
// from their own endpoints and puts what they serve in place of the
// aggregated document's entries; a group-version is unmarked once the
// aggregated document says the same (the same resource names, or both
// without it).
func (r *Resolver) readDirect(ctx context.Context, groups []*metav1.APIGroup, lists []*metav1.APIResourceList, failed map[schema.GroupVersion]error) ([]*metav1.APIGroup, []*metav1.APIResourceList, map[schema.GroupVersion]error) {
	r.mu.Lock()
	gvs := make([]schema.GroupVersion, 0, len(r.direct))
	for gv := range r.direct {
		gvs = append(gvs, gv)
	}
	r.mu.Unlock()
	if len(gvs) == 0 {
		return groups, lists, failed
	}
	lists = slices.Clone(lists)
	byGV := map[schema.GroupVersion]int{}
	for i, l := range lists {
		if l == nil {
			continue
		}
		if gv, err := schema.ParseGroupVersion(l.GroupVersion); err == nil {
			byGV[gv] = i
		}
	}
	copied := false // failed is the caller's until copied
	for _, gv := range gvs {
		own, err := r.client.ServerResourcesForGroupVersionWithContext(ctx, gv.String())
		i, listed := byGV[gv]
		switch {
		case apierrors.IsNotFound(err):
			if !listed || len(lists[i].APIResources) == 0 {
				r.undirect(gv)
			} else {
				lists[i] = nil // gone, whatever the aggregated document says
			}
		case err != nil || own == nil:
			// Not the aggregated document's answer: it is what lags for a
			// group-version marked here. The group-version failed this
			// round, so it keeps what the last snapshot had (a resource
			// served a moment ago must not look removed: a subscription
			// would release its informer and start it again).
			if err == nil {
				err = fmt.Errorf("group-version %s: its own discovery endpoint answered nothing", gv)
			}
			if listed {
				lists[i] = nil
			} else if prev := r.snap.Load(); prev != nil && prev.servesGroupVersion(gv) {
				groups = withGroupVersion(groups, gv) // read here last round: keep its place
			}
			if !copied {
				failed, copied = copyGroupErrors(failed), true
			}
			if failed == nil {
				failed = map[schema.GroupVersion]error{}
			}
			failed[gv] = err
			continue
		case listed:
			if sameResourceNames(lists[i], own) {
				r.undirect(gv)
			}
			lists[i] = own
		default:
			lists = append(lists, own)
			groups = withGroupVersion(groups, gv)
		}
		if _, bad := failed[gv]; bad && err == nil {
			if !copied {
				failed, copied = copyGroupErrors(failed), true
			}
			delete(failed, gv)
		}
	}
	return groups, lists, failed
}

func (r *Resolver) undirect(gv schema.GroupVersion) {
	r.mu.Lock()
	delete(r.direct, gv)
	r.mu.Unlock()
}

func sameResourceNames(a, b *metav1.APIResourceList) bool {
	names := func(l *metav1.APIResourceList) []string {
		out := make([]string, 0, len(l.APIResources))
		for _, res := range l.APIResources {
			out = append(out, res.Name)
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(names(a), names(b))
}

// withGroupVersion returns groups with gv in it (copies, never modifies
// what discovery returned).
func withGroupVersion(groups []*metav1.APIGroup, gv schema.GroupVersion) []*metav1.APIGroup {
	v := metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: gv.Version}
	out := slices.Clone(groups)
	for i, g := range out {
		if g == nil || g.Name != gv.Group {
			continue
		}
		if slices.ContainsFunc(g.Versions, func(x metav1.GroupVersionForDiscovery) bool { return x.Version == gv.Version }) {
			return out
		}
		c := g.DeepCopy()
		c.Versions = append(c.Versions, v)
		out[i] = c
		return out
	}
	return append(out, &metav1.APIGroup{Name: gv.Group, Versions: []metav1.GroupVersionForDiscovery{v}, PreferredVersion: v})
}

// OnChange registers f to be called with the differences found by every
// later discovery round that changes the set of served group-version-
// resources. The first round reports every resource as Added. Calls are
// sequential, in the order of the rounds, and made without any resolver
// lock held, from the goroutine that ran a round; f may call any method of
// the resolver. f owns the Change it receives. The returned remove stops
// later calls (a call in progress finishes); it is idempotent.
func (r *Resolver) OnChange(f func(Change)) (remove func()) {
	r.mu.Lock()
	r.nextID++
	id := r.nextID
	r.listeners = append(r.listeners, listener{id: id, f: f})
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.listeners = slices.DeleteFunc(r.listeners, func(l listener) bool { return l.id == id })
	}
}

// lookupOrRefresh answers from the snapshot, and on a miss from a round that
// started after the call (see refresh). ref is called only to build an
// error.
func (r *Resolver) lookupOrRefresh(ctx context.Context, ref func() string, find func(*snapshot) result) (Resource, error) {
	seen := r.started.Load() // rounds that started before the call cannot answer its miss
	s, err := r.current(ctx)
	if s == nil {
		return Resource{}, &ResolveError{Ref: ref(), Err: err}
	}
	res := find(s)
	if res.answered() {
		return r.answer(s, ref, res, nil)
	}
	err = r.refresh(ctx, false, func(rd *round) bool { return rd.seq > seen })
	if s2 := r.snap.Load(); s2 != s {
		s = s2
		res = find(s)
	}
	return r.answer(s, ref, res, err)
}

// answer turns a lookup result into what Resolve* return. refreshErr is the
// error of the round a miss waited for (or of the wait): a whole-round
// discovery error or ctx's error is joined to ErrNotFound, since the
// snapshot that did not know the reference may be older than the call.
func (r *Resolver) answer(s *snapshot, refFn func() string, res result, refreshErr error) (Resource, error) {
	if res.found() {
		e := &s.entries[res.idx]
		if !e.watchable {
			return e.res.clone(), &ResolveError{Ref: refFn(), Err: ErrNotWatchable}
		}
		return e.res.clone(), nil
	}
	ref := refFn()
	if res.ambiguous() {
		cands := make([]Resource, len(res.cands))
		for i, c := range res.cands {
			cands[i] = s.entries[c].res.clone()
		}
		return Resource{}, &AmbiguousError{Ref: ref, Candidates: cands}
	}
	errs := []error{ErrNotFound}
	if len(s.failed) > 0 {
		errs = append(errs, &GroupDiscoveryError{Groups: copyGroupErrors(s.failed)})
	}
	var gde *GroupDiscoveryError
	if refreshErr != nil && !errors.As(refreshErr, &gde) { // a *GroupDiscoveryError is s.failed, added above
		errs = append(errs, refreshErr)
	}
	if len(errs) == 1 {
		return Resource{}, &ResolveError{Ref: ref, Err: ErrNotFound}
	}
	return Resource{}, &ResolveError{Ref: ref, Err: errors.Join(errs...)}
}

// runRound fetches discovery, swaps in a new snapshot and returns what
// changed (nil if nothing did). A whole-round failure leaves the snapshot
// as it was.
func (r *Resolver) runRound(ctx context.Context) (*Change, error) {
	start := r.opts.now()
	if r.cached != nil {
		r.cached.Invalidate()
	}
	groups, lists, err := r.client.ServerGroupsAndResourcesWithContext(ctx)
	var failed map[schema.GroupVersion]error
	if err != nil {
		if gerr, ok := discovery.GroupDiscoveryFailedErrorGroups(err); ok && (len(groups) > 0 || len(lists) > 0) {
			failed = gerr
		} else {
			r.log.V(1).Info("discovery failed", "err", err.Error())
			return nil, err
		}
	}
	groups, lists, failed = r.readDirect(ctx, groups, lists, failed)
	prev := r.snap.Load()
	s := buildSnapshot(discoveryData{groups: groups, lists: lists, failed: failed}, prev, r.opts.serverGroupOrder)
	r.snap.Store(s)
	change := diff(prev, s)
	r.log.V(1).Info("discovery refreshed", "resources", len(s.entries), "added", len(change.Added),
		"removed", len(change.Removed), "failedGroupVersions", len(failed), "duration", r.opts.now().Sub(start))
	r.logFailures(failed)
	if len(failed) > 0 {
		err = &GroupDiscoveryError{Groups: copyGroupErrors(failed)}
	}
	if len(change.Added) == 0 && len(change.Removed) == 0 {
		return nil, err
	}
	return &change, err
}

// logFailures logs at V(0) only when the set of failing group-versions
// changes, so that an aggregated API that stays down is not logged on every
// round.
func (r *Resolver) logFailures(failed map[schema.GroupVersion]error) {
	keys := make([]string, 0, len(failed))
	for gv := range failed {
		keys = append(keys, gv.String())
	}
	slices.Sort(keys)
	joined := strings.Join(keys, ",")
	r.mu.Lock()
	changed := joined != r.failedKeys
	r.failedKeys = joined
	r.mu.Unlock()
	if !changed {
		return
	}
	if len(keys) == 0 {
		r.log.Info("discovery recovered for every group-version")
		return
	}
	r.log.Info("discovery failed for some group-versions; their resources keep their last known state", "groupVersions", keys)
}

// deliver hands pending changes to the listeners, one change at a time, in
// order, outside the lock. Only one goroutine delivers at a time; a round
// that finishes while another goroutine delivers (for example a round
// started from inside a callback) leaves its change to that goroutine.
func (r *Resolver) deliver() {
	r.mu.Lock()
	if r.delivering {
		r.mu.Unlock()
		return
	}
	r.delivering = true
	for len(r.pending) > 0 {
		c := r.pending[0]
		r.pending = r.pending[1:]
		for i := 0; i < len(r.listeners); i++ {
			l := r.listeners[i]
			r.mu.Unlock()
			l.f(c.clone())
			r.mu.Lock()
			// l may have been removed meanwhile; continue after it.
			i = slices.IndexFunc(r.listeners, func(x listener) bool { return x.id > l.id }) - 1
			if i < -1 {
				break
			}
		}
	}
	r.delivering = false
	r.mu.Unlock()
}

func (c Change) clone() Change {
	out := Change{Added: make([]Resource, len(c.Added)), Removed: make([]Resource, len(c.Removed))}
	for i, x := range c.Added {
		out.Added[i] = x.clone()
	}
	for i, x := range c.Removed {
		out.Removed[i] = x.clone()
	}
	return out
}

// diff lists the GVRs of next not in prev (Added) and of prev not in next
// (Removed), sorted.
func diff(prev, next *snapshot) Change {
	var c Change
	for _, e := range next.entries {
		if prev == nil {
			c.Added = append(c.Added, e.res)
			continue
		}
		if _, ok := prev.byGVR[e.res.GVR]; !ok {
			c.Added = append(c.Added, e.res)
		}
	}
	if prev != nil {
		for _, e := range prev.entries {
			if _, ok := next.byGVR[e.res.GVR]; !ok {
				c.Removed = append(c.Removed, e.res)
			}
		}
	}
	byGVR := func(a, b Resource) int {
		return cmp.Or(cmp.Compare(a.GVR.Group, b.GVR.Group), cmp.Compare(a.GVR.Version, b.GVR.Version), cmp.Compare(a.GVR.Resource, b.GVR.Resource))
	}
	slices.SortFunc(c.Added, byGVR)
	slices.SortFunc(c.Removed, byGVR)
	return c
}

func (s *snapshot) resolveGVR(gvr schema.GroupVersionResource) result {
	if gvr.Version == "" {
		if i, ok := s.preferred[gvr.GroupResource()]; ok {
			return result{idx: i}
		}
		return notFound
	}
	if i, ok := s.byGVR[gvr]; ok {
		return result{idx: i}
	}
	return notFound
}

func (s *snapshot) resolveGVK(gvk schema.GroupVersionKind) result {
	var idxs []int
	if gvk.Version != "" {
		idxs = s.byGVK[gvk]
	} else {
		idxs = s.byGK[gvk.GroupKind()]
	}
	if len(idxs) == 0 {
		// Kinds are CamelCase; accept any case, as for Resolve.
		for _, h := range s.names[strings.ToLower(gvk.Kind)] {
			e := &s.entries[h.idx]
			if h.class == classKind && e.res.GVK.Group == gvk.Group && (gvk.Version == "" || e.res.GVK.Version == gvk.Version) {
				idxs = append(idxs, h.idx)
			}
		}
	}
	switch len(idxs) {
	case 0:
		return notFound
	case 1:
		return result{idx: idxs[0]}
	}
	return s.choose(slices.Clone(idxs))
}
