// Package presence decides, for every resource an informer watches,
// whether the API server serves it, and tells the informers (Members).
//
// Its sources, in order of authority:
//
//  1. CustomResourceDefinitions, watched through the dynamic client
//     (crd.go): a group-resource that has ever been backed by a CRD is
//     served exactly when an Established CRD serves the version;
//  2. discovery (the resolver), refreshed every rediscovery interval, after
//     CRD changes and after a 404: for built-in and aggregated APIs, and
//     for scope (a namespace asked of a cluster-scoped resource);
//  3. otherwise the resource is assumed served; a 404 closes the gate of
//     the informer that met it, and the resource is re-checked after a
//     backoff.
//
// Presence calls members (Apply, MoveTo) from its own goroutines, with no
// lock of its own held; members never call presence back synchronously
// from those calls.
package presence

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/dynamic"

	"github.com/informerkit/informerkit/discoveryresolver"
)

// ErrNamespaceOnClusterScoped: a namespace was asked of a cluster-scoped
// resource. dynamicinformer exports the same value.
var ErrNamespaceOnClusterScoped = fmt.Errorf("%w: namespace option on a cluster-scoped resource", ErrInvalid)

// ErrInvalid is dynamicinformer.ErrInvalid (an option or argument that
// cannot be honoured by any informer); it lives here so that presence's
// verdicts wrap it.
var ErrInvalid = errors.New("invalid option")

// CheckingReason is the reason of a Verdict given before any source has
// answered.
const CheckingReason = "checking whether the resource is served"

// Qualified spells a GVR as kubectl takes it fully qualified, the way
// reasons and errors name a resource to an operator:
// later.v1.never.example.com, configmaps.v1 (core group) — not
// schema.GroupVersionResource's Go form ("never.example.com/v1,
// Resource=later").
func Qualified(gvr schema.GroupVersionResource) string {
	if gvr.Group == "" {
		return gvr.Resource + "." + gvr.Version
	}
	return gvr.Resource + "." + gvr.Version + "." + gvr.Group
}

// Verdict is what presence says of a member's resource.
type Verdict struct {
	// Served: the member may list and watch.
	Served bool
	// Known: an authoritative source (CRDs, discovery) said so; false when
	// the resource is assumed served, or a 404 closed the gate and a
	// re-check is pending.
	Known bool
	// Checking: no source has answered yet; the member waits, and its
	// status says so without an error.
	Checking bool
	// Reason says why the resource is not served.
	Reason string
	// Err is a configuration error (ErrNamespaceOnClusterScoped) that no
	// retry cures; Served is false.
	Err error
}

// Member is an informer as presence sees it. Methods must be safe for
// concurrent use and must not block.
type Member interface {
	// GVR is the resource the member watches now.
	GVR() schema.GroupVersionResource
	// Follows: the member moves to its group-resource's preferred version.
	Follows() bool
	// Namespaced: the member asks for particular namespaces.
	Namespaced() bool
	// Apply tells the member a new verdict.
	Apply(v Verdict)
	// MoveTo switches a following member to version v (served).
	MoveTo(v, reason string)
}

// Config configures a Presence. Zero durations take the defaults below.
type Config struct {
	// CRDs is the client used to watch CustomResourceDefinitions; nil
	// turns that source off.
	CRDs dynamic.Interface
	// Resolver is the discovery source; nil turns it off.
	Resolver *discoveryresolver.Resolver
	// Rediscovery is how often discovery is refreshed (<= 0: never
	// periodically; still after CRD changes and 404 answers).
	Rediscovery time.Duration
	Logger      logr.Logger

	ReadyTimeout time.Duration // default 5s: sources slower than this are not waited for
	RecheckMin   time.Duration // default 250ms: first re-check after a 404
	RecheckMax   time.Duration // default 1m: backoff cap, and the re-check of a resource only a CRD could bring
}

func (c *Config) defaults() {
	if c.ReadyTimeout <= 0 {
		c.ReadyTimeout = 5 * time.Second
	}
	if c.RecheckMin <= 0 {
		c.RecheckMin = 250 * time.Millisecond
	}
	if c.RecheckMax <= 0 {
		c.RecheckMax = time.Minute
	}
}

// Presence follows the sources and gives members verdicts. Create it with
// New, register members, and Run it; members registered before Run wait
// (Checking) until a source answers.
type Presence struct {
	cfg Config
	log logr.Logger

	wantRefresh chan struct{} // asks the discovery loop for a round (coalesced)

	mu            sync.Mutex // guards everything below
	members       map[Member]struct{}
	crdVersions   map[schema.GroupResource]map[string]bool // group-resources ever backed by a CRD -> served versions
	crdByName     map[string]schema.GroupResource
	crdSynced     bool
	discoveryDone bool // discovery has answered: a snapshot exists (a round failed as a whole is no answer)
	ready         bool
	backoff       map[schema.GroupVersionResource]time.Duration
	timers        map[schema.GroupVersionResource]*time.Timer
	stopped       bool
	ctx           context.Context // the run context, for re-checks
	crdListeners  map[int]func()
	nextListener  int
	rechecks      sync.WaitGroup // scheduled or running re-check timers
}

// New returns a Presence. It starts nothing.
func New(cfg Config) *Presence {
	cfg.defaults()
	p := &Presence{
		cfg: cfg, log: cfg.Logger,
		wantRefresh:  make(chan struct{}, 1),
		members:      map[Member]struct{}{},
		crdVersions:  map[schema.GroupResource]map[string]bool{},
		crdByName:    map[string]schema.GroupResource{},
		backoff:      map[schema.GroupVersionResource]time.Duration{},
		timers:       map[schema.GroupVersionResource]*time.Timer{},
		crdListeners: map[int]func(){},
	}
	if cfg.Resolver == nil && cfg.CRDs == nil {
		p.ready = true // nothing to ask: every resource is assumed served
	}
	return p
}

// Run follows the sources until ctx ends, then stops every re-check and
// returns when all its goroutines have ended.
func (p *Presence) Run(ctx context.Context) {
	var wg sync.WaitGroup
	p.mu.Lock()
	p.ctx = ctx
	p.mu.Unlock()
	// The readiness timer is joined like a re-check timer.
	p.rechecks.Add(1)
	ready := time.AfterFunc(p.cfg.ReadyTimeout, func() {
		defer p.rechecks.Done()
		p.markReady("presence sources slow")
	})
	var removeOnChange func()
	if p.cfg.Resolver != nil {
		removeOnChange = p.cfg.Resolver.OnChange(func(discoveryresolver.Change) { p.reevaluateAll("discovery changed") })
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.discoveryLoop(ctx)
		}()
	}
	if p.cfg.CRDs != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.crdLoop(ctx)
		}()
	}
	<-ctx.Done()
	wg.Wait()
	if ready.Stop() {
		p.rechecks.Done()
	}
	p.mu.Lock()
	p.stopped = true
	for gvr, t := range p.timers {
		if t.Stop() {
			p.rechecks.Done()
		}
		delete(p.timers, gvr)
	}
	p.mu.Unlock()
	if removeOnChange != nil {
		removeOnChange()
	}
	p.rechecks.Wait()
}

// discoveryLoop refreshes discovery at start, every Rediscovery interval,
// and when asked (refreshSoon). A refresh asked because of a CRD change
// is repeated a few times while a CRD serves a resource discovery does
// not list yet (a CRD is announced Established a moment before discovery
// shows it).
func (p *Presence) discoveryLoop(ctx context.Context) {
	err := p.cfg.Resolver.Refresh(ctx)
	if err != nil && ctx.Err() == nil {
		p.log.V(1).Info("discovery failed; presence relies on CRDs and 404 answers until it works", "err", err.Error())
	}
	p.discoveryAnswered(err)
	p.markReady("discovery")
	var tick <-chan time.Time
	if p.cfg.Rediscovery > 0 {
		t := time.NewTicker(p.cfg.Rediscovery)
		defer t.Stop()
		tick = t.C
	}
	var retry *time.Timer
	var retryC <-chan time.Time
	retries := 0
	defer func() {
		if retry != nil {
			retry.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			if gvs := p.discoveryAbsentGVs(); len(gvs) > 0 {
				p.cfg.Resolver.Invalidate(gvs...)
			}
		case <-p.wantRefresh:
			retries = 0
		case <-retryC:
			retryC = nil
		}
		p.discoveryAnswered(p.cfg.Resolver.Refresh(ctx)) // OnChange re-evaluates
		if p.crdAheadOfDiscovery() && retries < 5 {
			retries++
			if retry == nil {
				retry = time.NewTimer(time.Duration(retries) * p.cfg.RecheckMin)
			} else {
				retry.Reset(time.Duration(retries) * p.cfg.RecheckMin)
			}
			retryC = retry.C
		}
	}
}

// discoveryAnswered records the outcome of a discovery round: with no
// error, or only some group-versions failed, the resolver holds a snapshot
// and discovery's word counts; a round that failed as a whole (or was
// cancelled) is no answer. The first answer after Run's start re-evaluates
// every member (the round's own change was delivered before this).
func (p *Presence) discoveryAnswered(err error) {
	var partial *discoveryresolver.GroupDiscoveryError
	if err != nil && !errors.As(err, &partial) {
		return
	}
	p.mu.Lock()
	first, ready := !p.discoveryDone, p.ready
	p.discoveryDone = true
	p.mu.Unlock()
	if first && ready {
		p.reevaluateAll("discovery answered")
	}
}

// discoveryAbsentGVs returns the group-versions of members that
// discovery alone calls not served (no CRD is known for their
// group-resource: without read access to CRDs, discovery is all presence
// has). The aggregated discovery document can lag minutes behind a
// resource that returns to a group-version that still exists (its CRD
// deleted and created again while another CRD of the group stays); the
// group-version's own endpoint does not (discoveryresolver's Invalidate
// with group-versions), so each periodic round reads these there.
func (p *Presence) discoveryAbsentGVs() []schema.GroupVersion {
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := map[schema.GroupVersion]bool{}
	var out []schema.GroupVersion
	for m := range p.members {
		gvr := m.GVR()
		if _, crd := p.crdVersions[gvr.GroupResource()]; crd && p.crdSynced {
			continue
		}
		if v := p.verdictLocked(m); v.Known && !v.Served && !v.Checking && v.Err == nil && !seen[gvr.GroupVersion()] {
			seen[gvr.GroupVersion()] = true
			out = append(out, gvr.GroupVersion())
		}
	}
	return out
}

// refreshSoon asks the discovery loop for a round; requests made while
// one is pending are merged.
func (p *Presence) refreshSoon() {
	if p.cfg.Resolver == nil {
		return
	}
	select {
	case p.wantRefresh <- struct{}{}:
	default:
	}
}

// crdAheadOfDiscovery reports whether an Established CRD serves a version
// that discovery does not list.
func (p *Presence) crdAheadOfDiscovery() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for gr, versions := range p.crdVersions {
		for v, served := range versions {
			if served {
				if _, ok := p.cfg.Resolver.Lookup(gr.WithVersion(v)); !ok {
					return true
				}
			}
		}
	}
	return false
}

// OnCRDChange registers f to be called after any CRD changed (from the
// CRD informer's handler goroutine: f must not block).
func (p *Presence) OnCRDChange(f func()) (remove func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	id := p.nextListener
	p.nextListener++
	p.crdListeners[id] = f
	return func() {
		p.mu.Lock()
		delete(p.crdListeners, id)
		p.mu.Unlock()
	}
}

// markReady: a source answered (or the wait ran out); verdicts stop
// saying Checking.
func (p *Presence) markReady(why string) {
	p.mu.Lock()
	was := p.ready
	p.ready = true
	p.mu.Unlock()
	if !was {
		p.log.V(2).Info("presence ready", "why", why)
	}
	p.reevaluateAll(why)
}

// Ready reports whether a source has answered.
func (p *Presence) Ready() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ready
}

// verdictLocked is what is known of m's resource. p.mu must be held.
func (p *Presence) verdictLocked(m Member) Verdict {
	gvr := m.GVR()
	if !p.ready {
		return Verdict{Checking: true, Known: true, Reason: CheckingReason}
	}
	if p.crdSynced {
		if versions, ok := p.crdVersions[gvr.GroupResource()]; ok {
			if versions[gvr.Version] {
				return p.scopeLocked(m, Verdict{Served: true, Known: true})
			}
			if len(versions) == 0 {
				return Verdict{Known: true, Reason: fmt.Sprintf("no established CustomResourceDefinition serves %s", gvr.GroupResource())}
			}
			return Verdict{Known: true, Reason: fmt.Sprintf("the CustomResourceDefinition for %s does not serve version %s", gvr.GroupResource(), gvr.Version)}
		}
	}
	if p.cfg.Resolver != nil && p.discoveryDone {
		if _, ok := p.cfg.Resolver.Lookup(gvr); ok {
			return p.scopeLocked(m, Verdict{Served: true, Known: true})
		}
		if len(p.cfg.Resolver.FailedGroups()) == 0 {
			return Verdict{Known: true, Reason: fmt.Sprintf("%s is not in discovery", Qualified(gvr))}
		}
	}
	return Verdict{Served: true}
}

// scopeLocked turns a served verdict into a configuration error when m
// asks for namespaces and discovery says the resource is cluster-scoped.
func (p *Presence) scopeLocked(m Member, v Verdict) Verdict {
	if !m.Namespaced() || p.cfg.Resolver == nil || !p.discoveryDone {
		return v
	}
	if r, ok := p.cfg.Resolver.Lookup(m.GVR()); ok && !r.Namespaced {
		return Verdict{Known: true, Err: ErrNamespaceOnClusterScoped,
			Reason: fmt.Sprintf("%s is cluster-scoped; namespaces were given", m.GVR().GroupResource())}
	}
	return v
}

// Register adds m and returns its first verdict: the member applies it
// itself before it starts, then calls Applied.
func (p *Presence) Register(m Member) Verdict {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.members[m] = struct{}{}
	return p.verdictLocked(m)
}

// Applied: m has applied v, the verdict Register returned. A
// re-evaluation may have applied a later verdict before m applied that
// one (reevaluate); then m's resource is re-evaluated, so that m is left
// with what is known now.
func (p *Presence) Applied(m Member, v Verdict) {
	if gvr := m.GVR(); p.changedSince(gvr, []decision{{m, v}}) {
		p.reevaluate(gvr, "the verdict changed while it was applied", false)
	}
}

// Unregister removes m; it gets no further calls once Unregister returns,
// except one already in progress.
func (p *Presence) Unregister(m Member) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.members, m)
}

func (p *Presence) reevaluateAll(why string) {
	p.reevaluateWhere(func(schema.GroupVersionResource) bool { return true }, why)
}

func (p *Presence) reevaluateGR(gr schema.GroupResource, why string) {
	p.reevaluateWhere(func(gvr schema.GroupVersionResource) bool { return gvr.GroupResource() == gr }, why)
}

// reevaluateWhere re-evaluates every member whose GVR match selects.
func (p *Presence) reevaluateWhere(match func(schema.GroupVersionResource) bool, why string) {
	p.mu.Lock()
	gvrs := map[schema.GroupVersionResource]bool{}
	for m := range p.members {
		if gvr := m.GVR(); match(gvr) {
			gvrs[gvr] = true
		}
	}
	p.mu.Unlock()
	for gvr := range gvrs {
		p.reevaluate(gvr, why, false)
	}
}

// maxReapplies bounds the passes of one reevaluate (reapplied).
const maxReapplies = 3

// decision is a verdict reevaluate gave a member.
type decision struct {
	m Member
	v Verdict
}

// reevaluate applies what is known to gvr's members. A member whose gate a
// 404 closed, and of whose resource nothing authoritative is known, keeps
// it closed until its re-check (recheck true) runs.
//
// Verdicts are applied outside p.mu, so two re-evaluations may apply in
// the other order than they decided: one that decided from a discovery
// snapshot a later round replaced could apply after the re-evaluation of
// that round, and its verdict (say, not in discovery) would stay until
// discovery changes again — possibly never. So after applying, each pass
// decides again and applies again what changed meanwhile: the last
// re-evaluation to apply leaves what is known now.
func (p *Presence) reevaluate(gvr schema.GroupVersionResource, why string, recheck bool) {
	for pass := 0; pass < maxReapplies; pass++ {
		applied := p.reevaluateOnce(gvr, why, recheck && pass == 0)
		if !p.changedSince(gvr, applied) {
			return
		}
		why = "the verdict changed while it was applied"
	}
}

// changedSince reports whether any member of applied, still registered
// and still at gvr (a member that moved was re-evaluated at its new GVR),
// would now be given another verdict.
func (p *Presence) changedSince(gvr schema.GroupVersionResource, applied []decision) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return false
	}
	for _, d := range applied {
		if _, ok := p.members[d.m]; !ok || d.m.GVR() != gvr {
			continue
		}
		if v := p.verdictLocked(d.m); !sameVerdict(v, d.v) {
			return true
		}
	}
	return false
}

// sameVerdict reports whether a and b say the same.
func sameVerdict(a, b Verdict) bool {
	return a.Served == b.Served && a.Known == b.Known && a.Checking == b.Checking && a.Reason == b.Reason && a.Err == b.Err
}

// reevaluateOnce is one pass of reevaluate; it returns the verdicts it
// applied.
func (p *Presence) reevaluateOnce(gvr schema.GroupVersionResource, why string, recheck bool) []decision {
	p.mu.Lock()
	if recheck {
		delete(p.timers, gvr)
	}
	if p.stopped {
		p.mu.Unlock()
		return nil
	}
	_, waiting := p.timers[gvr]
	var apply []decision
	var moves []Member
	preferred := ""
	for m := range p.members {
		if m.GVR() != gvr {
			continue
		}
		v := p.verdictLocked(m)
		if waiting && !v.Known {
			continue
		}
		if v.Known && !v.Served {
			if t, ok := p.timers[gvr]; ok {
				if t.Stop() {
					p.rechecks.Done()
				}
				delete(p.timers, gvr)
			}
			delete(p.backoff, gvr)
		}
		if v.Known && m.Follows() && v.Err == nil {
			if preferred == "" {
				preferred = p.preferredVersionLocked(gvr.GroupResource())
			}
			if preferred != "" && preferred != gvr.Version {
				moves = append(moves, m)
				continue
			}
		}
		apply = append(apply, decision{m, v})
	}
	p.mu.Unlock()
	for _, m := range moves {
		reason := fmt.Sprintf("version %s is now the preferred version", preferred)
		m.MoveTo(preferred, reason)
	}
	for _, d := range apply {
		d.m.Apply(d.v)
	}
	if len(apply) > 0 || len(moves) > 0 {
		p.log.V(3).Info("re-evaluated", "gvr", gvr.String(), "why", why, "moved", len(moves))
	}
	return apply
}

// preferredVersionLocked is the version a following member of gr should
// watch: for a CRD, the highest served version in Kubernetes version order
// (v2 > v1 > v1beta1); otherwise discovery's preferred version; "" if gr
// is not served. p.mu must be held.
func (p *Presence) preferredVersionLocked(gr schema.GroupResource) string {
	if p.crdSynced {
		if versions, ok := p.crdVersions[gr]; ok {
			best := ""
			for v, served := range versions {
				if served && (best == "" || version.CompareKubeAwareVersionStrings(v, best) > 0) {
					best = v
				}
			}
			return best
		}
	}
	if p.cfg.Resolver != nil && p.discoveryDone {
		if r, ok := p.cfg.Resolver.Lookup(gr.WithVersion("")); ok {
			return r.GVR.Version
		}
	}
	return ""
}

// NotFound: a request of gvr answered 404 (the member that met it has
// closed its own gate). Presence asks discovery again and re-checks gvr
// after a backoff: from RecheckMin doubling to RecheckMax, or RecheckMax
// at once when CRDs are known, no CRD backs gvr's group-resource and there
// is no discovery (then only a CRD could bring it, and CRD events reopen
// the gate without waiting).
func (p *Presence) NotFound(gvr schema.GroupVersionResource) {
	p.mu.Lock()
	if p.stopped || p.ctx == nil {
		p.mu.Unlock()
		return
	}
	d := p.backoff[gvr]
	if d == 0 {
		d = p.cfg.RecheckMin
		if _, crd := p.crdVersions[gvr.GroupResource()]; p.crdSynced && !crd && p.cfg.Resolver == nil {
			d = p.cfg.RecheckMax
		}
	}
	p.backoff[gvr] = min(2*d, p.cfg.RecheckMax)
	if _, ok := p.timers[gvr]; !ok {
		p.rechecks.Add(1)
		p.timers[gvr] = time.AfterFunc(d, func() {
			defer p.rechecks.Done()
			p.recheck(gvr)
		})
	}
	p.mu.Unlock()
	if p.cfg.Resolver != nil {
		// The group-version's own endpoint too: the aggregated document
		// can lag behind it (discoveryAbsentGVs).
		p.cfg.Resolver.Invalidate(gvr.GroupVersion())
	}
}

func (p *Presence) recheck(gvr schema.GroupVersionResource) {
	p.mu.Lock()
	ctx := p.ctx
	p.mu.Unlock()
	if p.cfg.Resolver != nil && ctx != nil {
		// Rate-limited and shared: many informers meeting 404s at once
		// cost one round.
		p.discoveryAnswered(p.cfg.Resolver.RefreshIfStale(ctx, 0))
	}
	p.reevaluate(gvr, "re-check after 404", true)
}
