package dynamicinformer

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/dynamic"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"

	"github.com/informerkit/informerkit/discoveryresolver"
)

// crdGVR is the resource the factory watches to follow CRDs.
var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

const (
	readyTimeout = 5 * time.Second
	minRecheck   = 250 * time.Millisecond
	maxRecheck   = time.Minute
)

// presence decides, for every GVR an informer watches, whether the server
// serves it, and opens or closes the informers' gates. Its sources, in
// order of authority:
//
//  1. CustomResourceDefinitions, watched through the dynamic client: a
//     group/resource that has ever been backed by a CRD is served exactly
//     when an Established CRD serves the version;
//  2. discovery (the resolver), refreshed every rediscovery interval and
//     when a request answers 404: for built-in and aggregated APIs;
//  3. otherwise: assumed served; a 404 closes the gate and it is
//     re-checked with exponential backoff (250ms to 1m; a CRD is often
//     announced Established a moment before its handler serves it).
type presence struct {
	client     dynamic.Interface
	resolver   *discoveryresolver.Resolver
	followCRDs bool
	interval   time.Duration
	logger     logr.Logger

	mu            sync.Mutex // guards everything below
	informers     map[*sharedInformer]struct{}
	crdVersions   map[schema.GroupResource]map[string]bool // GRs ever backed by a CRD -> currently served versions
	crdByName     map[string]schema.GroupResource
	crdSynced     bool
	discoveryDone bool
	// ready is set once a first source has answered (discovery refreshed,
	// CRDs listed, or readyTimeout passed); until then gates stay closed so
	// an informer does not ask for a resource presence is about to rule out.
	ready          bool
	backoff        map[schema.GroupVersionResource]time.Duration
	timers         map[schema.GroupVersionResource]*time.Timer
	stopped        bool
	removeOnChange func()
	crdListeners   map[int]func() // called after a CRD changed
	nextListener   int
	ctx            context.Context // the run context, for re-checks
	rechecks       sync.WaitGroup  // scheduled or running re-check timers
}

func newPresence(client dynamic.Interface, resolver *discoveryresolver.Resolver, followCRDs bool, interval time.Duration, logger logr.Logger) *presence {
	return &presence{
		client: client, resolver: resolver, followCRDs: followCRDs, interval: interval, logger: logger,
		informers:   map[*sharedInformer]struct{}{},
		crdVersions: map[schema.GroupResource]map[string]bool{},
		crdByName:   map[string]schema.GroupResource{},
		backoff:     map[schema.GroupVersionResource]time.Duration{},
		timers:      map[schema.GroupVersionResource]*time.Timer{},
	}
}

// run follows CRDs and discovery until ctx ends.
func (p *presence) run(ctx context.Context) {
	var wg sync.WaitGroup
	p.mu.Lock()
	p.ctx = ctx
	p.mu.Unlock()
	if p.resolver == nil && !p.followCRDs {
		p.markReady("no presence source")
	} else {
		t := time.AfterFunc(readyTimeout, func() { p.markReady("presence sources slow") })
		defer t.Stop()
	}
	if p.resolver != nil {
		p.mu.Lock()
		p.removeOnChange = p.resolver.OnChange(func(discoveryresolver.Change) { p.reevaluateAll("discovery changed") })
		p.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.discoveryLoop(ctx)
		}()
	}
	if p.followCRDs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.crdLoop(ctx)
		}()
	}
	<-ctx.Done()
	wg.Wait()
	p.mu.Lock()
	p.stopped = true
	for gvr, t := range p.timers {
		if t.Stop() {
			p.rechecks.Done()
		}
		delete(p.timers, gvr)
	}
	remove := p.removeOnChange
	p.mu.Unlock()
	if remove != nil {
		remove()
	}
	p.rechecks.Wait()
}

func (p *presence) discoveryLoop(ctx context.Context) {
	if err := p.resolver.Refresh(ctx); err != nil {
		p.logger.V(1).Info("discovery failed; presence relies on CRDs and 404 answers until it works", "err", err.Error())
	}
	p.mu.Lock()
	p.discoveryDone = true
	p.mu.Unlock()
	p.markReady("discovery")
	if p.interval <= 0 {
		<-ctx.Done()
		return
	}
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = p.resolver.Refresh(ctx) // OnChange re-evaluates
		}
	}
}

// crdLoop runs an informer on CustomResourceDefinitions. If the caller may
// not list CRDs the informer never syncs and presence relies on discovery.
func (p *presence) crdLoop(ctx context.Context) {
	inf := toolscache.NewSharedIndexInformerWithOptions(
		&optionsListerWatcher{funcs: dynamicFuncs(p.client, func() schema.GroupVersionResource { return crdGVR }), noWatchList: watchlist.DoesClientNotSupportWatchListSemantics(p.client)},
		&unstructured.Unstructured{},
		toolscache.SharedIndexInformerOptions{ObjectDescription: "informerkit CRD tracker"})
	_ = inf.SetTransform(slimCRD)
	logged := false
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *toolscache.Reflector, err error) {
		if !logged {
			logged = true
			p.logger.V(1).Info("cannot watch CustomResourceDefinitions; following CRDs through discovery only", "err", err.Error())
		}
	})
	_, _ = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { p.crdChanged(obj, false) },
		UpdateFunc: func(_, obj interface{}) { p.crdChanged(obj, false) },
		DeleteFunc: func(obj interface{}) { p.crdChanged(obj, true) },
	})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			p.mu.Lock()
			p.crdSynced = true
			p.mu.Unlock()
			p.markReady("CRDs listed")
		}
	}()
	inf.RunWithContext(logr.NewContext(ctx, p.logger))
	wg.Wait()
}

// slimCRD keeps only what presence needs of a CRD (schemas can be 800 KB).
func slimCRD(obj interface{}) (interface{}, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	if _, slim := u.Object["established"]; slim {
		return u, nil // already slim: client-go may transform an object twice
	}
	group, _, _ := unstructured.NestedString(u.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(u.Object, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
	var slimVersions []interface{}
	for _, v := range versions {
		vm, ok := v.(map[string]interface{})
		if !ok {
			continue
		}
		slimVersions = append(slimVersions, map[string]interface{}{"name": vm["name"], "served": vm["served"]})
	}
	established := false
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		cm, ok := c.(map[string]interface{})
		if ok && cm["type"] == "Established" && cm["status"] == "True" {
			established = true
		}
	}
	slim := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": u.GetAPIVersion(), "kind": u.GetKind(),
		"metadata":    map[string]interface{}{"name": u.GetName(), "resourceVersion": u.GetResourceVersion(), "uid": string(u.GetUID())},
		"spec":        map[string]interface{}{"group": group, "names": map[string]interface{}{"plural": plural}, "versions": slimVersions},
		"established": established,
	}}
	if ts := u.GetDeletionTimestamp(); ts != nil {
		slim.SetDeletionTimestamp(ts)
	}
	return slim, nil
}

func (p *presence) crdChanged(obj interface{}, deleted bool) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
		deleted = true
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	group, _, _ := unstructured.NestedString(u.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(u.Object, "spec", "names", "plural")
	gr := schema.GroupResource{Group: group, Resource: plural}
	served := map[string]bool{}
	established, _, _ := unstructured.NestedBool(u.Object, "established")
	if !deleted && established && u.GetDeletionTimestamp() == nil {
		versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
		for _, v := range versions {
			vm, _ := v.(map[string]interface{})
			name, _ := vm["name"].(string)
			if s, _ := vm["served"].(bool); s && name != "" {
				served[name] = true
			}
		}
	}
	// The group-versions discovery must re-read: every version the CRD
	// names and every version it served before.
	var gvs []schema.GroupVersion
	versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
	for _, v := range versions {
		if vm, ok := v.(map[string]interface{}); ok {
			if name, _ := vm["name"].(string); name != "" {
				gvs = append(gvs, schema.GroupVersion{Group: group, Version: name})
			}
		}
	}
	p.mu.Lock()
	for v := range p.crdVersions[gr] {
		gvs = append(gvs, schema.GroupVersion{Group: group, Version: v})
	}
	if old, ok := p.crdByName[u.GetName()]; ok && old != gr {
		p.crdVersions[old] = map[string]bool{}
	}
	p.crdByName[u.GetName()] = gr
	p.crdVersions[gr] = served
	p.mu.Unlock()
	if p.resolver != nil {
		// The aggregated discovery document can lag behind CRD changes
		// for minutes; the group-versions' own endpoints do not.
		p.resolver.InvalidateGroupVersions(gvs...)
	}
	p.reevaluateGR(gr, fmt.Sprintf("CRD %s changed", u.GetName()))
	p.mu.Lock()
	listeners := make([]func(), 0, len(p.crdListeners))
	for _, l := range p.crdListeners {
		listeners = append(listeners, l)
	}
	p.mu.Unlock()
	for _, l := range listeners {
		l()
	}
}

// onCRDChange registers f to be called (from the CRD informer's handler
// goroutine, so f must not block) after any CRD changed.
func (p *presence) onCRDChange(f func()) (remove func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.crdListeners == nil {
		p.crdListeners = map[int]func(){}
	}
	id := p.nextListener
	p.nextListener++
	p.crdListeners[id] = f
	return func() {
		p.mu.Lock()
		delete(p.crdListeners, id)
		p.mu.Unlock()
	}
}

// markReady opens presence's answers and applies them to every gate.
func (p *presence) markReady(why string) {
	p.mu.Lock()
	p.ready = true
	p.mu.Unlock()
	p.reevaluateAll(why)
}

// evaluate says whether gvr is served: known is false when nothing
// authoritative is known (then the informer may try). p.mu must be held.
func (p *presence) evaluateLocked(gvr schema.GroupVersionResource) (open, known bool, reason string) {
	if !p.ready {
		return false, true, "waiting for discovery"
	}
	if p.crdSynced {
		if versions, ok := p.crdVersions[gvr.GroupResource()]; ok {
			if versions[gvr.Version] {
				return true, true, ""
			}
			if len(versions) == 0 {
				return false, true, fmt.Sprintf("no established CustomResourceDefinition serves %s", gvr.GroupResource())
			}
			return false, true, fmt.Sprintf("the CustomResourceDefinition for %s does not serve version %s", gvr.GroupResource(), gvr.Version)
		}
	}
	if p.resolver != nil && p.discoveryDone {
		if _, ok := p.resolver.Lookup(gvr); ok {
			return true, true, ""
		}
		if len(p.resolver.FailedGroups()) == 0 {
			return false, true, fmt.Sprintf("%s is not in discovery", gvr)
		}
	}
	return true, false, ""
}

// register adds an informer and says whether its gate starts open.
func (p *presence) register(si *sharedInformer) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.informers[si] = struct{}{}
	open, known, _ := p.evaluateLocked(si.currentGVR())
	return open || !known
}

func (p *presence) unregister(si *sharedInformer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.informers, si)
}

func (p *presence) reevaluateAll(reason string) {
	p.reevaluateWhere(func(schema.GroupVersionResource) bool { return true }, reason)
}

func (p *presence) reevaluateGR(gr schema.GroupResource, reason string) {
	p.reevaluateWhere(func(gvr schema.GroupVersionResource) bool { return gvr.GroupResource() == gr }, reason)
}

// reevaluateWhere re-evaluates every watched GVR that match selects.
func (p *presence) reevaluateWhere(match func(schema.GroupVersionResource) bool, reason string) {
	p.mu.Lock()
	gvrs := map[schema.GroupVersionResource]bool{}
	for si := range p.informers {
		if gvr := si.currentGVR(); match(gvr) {
			gvrs[gvr] = true
		}
	}
	p.mu.Unlock()
	for gvr := range gvrs {
		p.reevaluate(gvr, reason)
	}
}

// reevaluate applies what is known to the gates of gvr's informers. An
// informer whose gate was closed by a 404 and for which nothing
// authoritative is known stays closed until its re-check timer fires.
func (p *presence) reevaluate(gvr schema.GroupVersionResource, why string) {
	p.mu.Lock()
	open, known, reason := p.evaluateLocked(gvr)
	if _, waiting := p.timers[gvr]; waiting && !known {
		p.mu.Unlock()
		return
	}
	if known {
		if t, ok := p.timers[gvr]; ok && !open {
			if t.Stop() {
				p.rechecks.Done()
			}
			delete(p.timers, gvr)
		}
		if !open {
			delete(p.backoff, gvr)
		}
	}
	sis := p.informersLocked(gvr)
	sis, moves, v := p.followersLocked(gvr, sis, open, known)
	p.mu.Unlock()
	p.move(moves, v, reason)
	p.setGates(sis, open, reason, why)
}

// followersLocked splits off the informers that follow the preferred
// version when gvr's group-resource is known to prefer another version than
// gvr's: because gvr is no longer served, or because a version that ranks
// higher is now served alongside it (a CRD gaining v2). p.mu must be held.
func (p *presence) followersLocked(gvr schema.GroupVersionResource, sis []*sharedInformer, open, known bool) (stay, moves []*sharedInformer, version string) {
	if !known {
		return sis, nil, ""
	}
	v := p.preferredVersionLocked(gvr.GroupResource())
	if v == "" || v == gvr.Version {
		return sis, nil, ""
	}
	for _, si := range sis {
		if si.follow {
			moves = append(moves, si)
		} else {
			stay = append(stay, si)
		}
	}
	return stay, moves, v
}

// preferredVersionLocked is the version a following informer of gr should
// watch: for a CRD, the highest-priority served version in Kubernetes
// version order (v2 > v1 > v1beta1); otherwise discovery's preferred
// version; "" if gr is not served. p.mu must be held.
func (p *presence) preferredVersionLocked(gr schema.GroupResource) string {
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
	if p.resolver != nil && p.discoveryDone {
		if r, ok := p.resolver.Lookup(gr.WithVersion("")); ok {
			return r.GVR.Version
		}
	}
	return ""
}

// move switches following informers to version v and opens their gates
// (v is served).
func (p *presence) move(sis []*sharedInformer, v, reason string) {
	if reason == "" {
		// The old version is still served; v now ranks higher.
		reason = "version " + v + " is now the preferred version"
	}
	for _, si := range sis {
		si.switchVersion(v, reason)
	}
	p.setGates(sis, true, "", "following the preferred version")
}

func (p *presence) informersLocked(gvr schema.GroupVersionResource) []*sharedInformer {
	var out []*sharedInformer
	for si := range p.informers {
		if si.currentGVR() == gvr {
			out = append(out, si)
		}
	}
	return out
}

func (p *presence) setGates(sis []*sharedInformer, open bool, reason, why string) {
	for _, si := range sis {
		if si.gate.set(open, reason, why == notFoundTrigger) {
			si.logger.V(2).Info("resource presence changed", "served", open, "reason", reason, "trigger", why)
			if !open {
				si.lw.gateClosed(reason)
			}
		} else if !open && why != notFoundTrigger {
			// Already closed, often by a 404 that raced the CRD event:
			// the authoritative source's reason replaces the bare 404.
			si.refineRemoval(reason)
		}
	}
}

// notFoundTrigger is setGates' why for a gate closed by a 404 answer.
const notFoundTrigger = "request"

// observedNotFound: a list or watch of gvr answered 404. Close its gates,
// ask discovery again, and re-check after a backoff.
func (p *presence) observedNotFound(gvr schema.GroupVersionResource) {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return
	}
	d := p.backoff[gvr]
	if d == 0 {
		d = minRecheck
	}
	p.backoff[gvr] = min(2*d, maxRecheck)
	if _, ok := p.timers[gvr]; !ok {
		p.rechecks.Add(1)
		p.timers[gvr] = time.AfterFunc(d, func() {
			defer p.rechecks.Done()
			p.recheck(gvr)
		})
	}
	sis := p.informersLocked(gvr)
	p.mu.Unlock()
	p.setGates(sis, false, "the API server answered 404 Not Found", notFoundTrigger)
	if p.resolver != nil {
		p.resolver.Invalidate()
	}
}

func (p *presence) recheck(gvr schema.GroupVersionResource) {
	p.mu.Lock()
	ctx := p.ctx
	p.mu.Unlock()
	if p.resolver != nil && ctx != nil {
		_ = p.resolver.Refresh(ctx)
	}
	p.mu.Lock()
	delete(p.timers, gvr)
	if p.stopped {
		p.mu.Unlock()
		return
	}
	open, known, reason := p.evaluateLocked(gvr)
	sis := p.informersLocked(gvr)
	sis, moves, v := p.followersLocked(gvr, sis, open, known)
	p.mu.Unlock()
	p.move(moves, v, reason)
	p.setGates(sis, open || !known, reason, "re-check after 404")
}
