package discoveryresolver

import (
	"context"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/fake"
)

// fakeDiscovery serves a controlled discovery document: groups in the given
// order (client-go's fake.FakeDiscovery orders groups randomly), optional
// per-group-version failures, a whole-round error, and a gate that holds
// rounds until released.
type fakeDiscovery struct {
	*fake.FakeDiscovery // the methods the resolver never calls

	mu     sync.Mutex // guards groups, lists, failed, err, gate
	groups []*metav1.APIGroup
	lists  []*metav1.APIResourceList
	failed map[schema.GroupVersion]error
	err    error
	gate   chan struct{} // when non-nil, rounds wait for it to close

	calls   atomic.Int32
	entered chan struct{} // receives (non-blocking) when a round starts
	starts  []time.Time   // guarded by mu: wall-clock start of every round

	own    map[schema.GroupVersion]*metav1.APIResourceList // guarded by mu; see setOwn
	ownErr map[schema.GroupVersion]error                   // guarded by mu: what gv's own endpoint fails with
}

func newFake(groups ...fakeGroup) *fakeDiscovery {
	f := &fakeDiscovery{FakeDiscovery: &fake.FakeDiscovery{}, entered: make(chan struct{}, 100)}
	f.set(groups...)
	return f
}

// fakeGroup is one API group: versions in server order, the first preferred.
type fakeGroup struct {
	name     string
	versions []fakeVersion
}

type fakeVersion struct {
	version   string
	resources []metav1.APIResource
}

func group(name string, versions ...fakeVersion) fakeGroup {
	return fakeGroup{name: name, versions: versions}
}

func version(v string, rs ...metav1.APIResource) fakeVersion {
	return fakeVersion{version: v, resources: rs}
}

var watchVerbs = metav1.Verbs{"create", "delete", "get", "list", "patch", "update", "watch"}

// res builds a namespaced, watchable resource; plural "crontabs" and kind
// "CronTab" give singular "crontab".
func res(plural, kind string, shortNames ...string) metav1.APIResource {
	return metav1.APIResource{Name: plural, SingularName: lowerASCII(kind), Kind: kind, Namespaced: true, Verbs: watchVerbs, ShortNames: shortNames}
}

func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

func clusterScoped(r metav1.APIResource) metav1.APIResource { r.Namespaced = false; return r }

func withVerbs(r metav1.APIResource, verbs ...string) metav1.APIResource {
	r.Verbs = verbs
	return r
}

func withCategories(r metav1.APIResource, cats ...string) metav1.APIResource {
	r.Categories = cats
	return r
}

func (f *fakeDiscovery) set(groups ...fakeGroup) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.groups, f.lists = nil, nil
	for _, g := range groups {
		ag := &metav1.APIGroup{Name: g.name}
		for i, v := range g.versions {
			gv := schema.GroupVersion{Group: g.name, Version: v.version}
			d := metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: v.version}
			ag.Versions = append(ag.Versions, d)
			if i == 0 {
				ag.PreferredVersion = d
			}
			f.lists = append(f.lists, &metav1.APIResourceList{GroupVersion: gv.String(), APIResources: v.resources})
		}
		f.groups = append(f.groups, ag)
	}
}

// roundStarts returns the wall-clock start of every round so far.
func (f *fakeDiscovery) roundStarts() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.starts...)
}

// fail makes gv fail discovery (its resource list is left out).
func (f *fakeDiscovery) fail(gv schema.GroupVersion, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failed == nil {
		f.failed = map[schema.GroupVersion]error{}
	}
	f.failed[gv] = err
}

func (f *fakeDiscovery) heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failed = nil
}

func (f *fakeDiscovery) setErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

func (f *fakeDiscovery) hold() (release func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := make(chan struct{})
	f.gate = g
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			if f.gate == g {
				f.gate = nil
			}
			f.mu.Unlock()
			close(g)
		})
	}
}

func (f *fakeDiscovery) ServerGroupsAndResources() ([]*metav1.APIGroup, []*metav1.APIResourceList, error) {
	return f.ServerGroupsAndResourcesWithContext(context.Background())
}

// ServerGroupsAndResourcesWithContext answers with the data set when the
// round starts, even if the round is held and the data changes meanwhile.
func (f *fakeDiscovery) ServerGroupsAndResourcesWithContext(ctx context.Context) ([]*metav1.APIGroup, []*metav1.APIResourceList, error) {
	f.calls.Add(1)
	select {
	case f.entered <- struct{}{}:
	default:
	}
	f.mu.Lock()
	f.starts = append(f.starts, time.Now())
	gate := f.gate
	groups, lists, err := f.answerLocked()
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
	return groups, lists, err
}

func (f *fakeDiscovery) answerLocked() ([]*metav1.APIGroup, []*metav1.APIResourceList, error) {
	if f.err != nil {
		return nil, nil, f.err
	}
	var lists []*metav1.APIResourceList
	for _, l := range f.lists {
		gv, _ := schema.ParseGroupVersion(l.GroupVersion)
		if _, bad := f.failed[gv]; bad {
			continue
		}
		c := *l
		c.APIResources = append([]metav1.APIResource(nil), l.APIResources...)
		lists = append(lists, &c)
	}
	groups := make([]*metav1.APIGroup, len(f.groups))
	for i, g := range f.groups {
		c := *g
		groups[i] = &c
	}
	if len(f.failed) > 0 {
		failed := map[schema.GroupVersion]error{}
		for k, v := range f.failed {
			failed[k] = v
		}
		return groups, lists, &discoveryErrGroupFailed{Groups: failed}
	}
	return groups, lists, nil
}

// fakeClock is a settable clock for the rate limit, with timers that fire
// when advance reaches them. With auto set, a new timer moves the clock to
// its deadline and fires at once: waiting costs no real time.
type fakeClock struct {
	mu     sync.Mutex // guards t, auto, timers
	t      time.Time
	auto   bool
	timers []*fakeTimer

	waiting chan struct{} // if non-nil, receives (non-blocking) when a timer is set
}

type fakeTimer struct {
	at time.Time
	c  chan time.Time // buffered: firing never blocks
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	c.timers = slices.DeleteFunc(c.timers, func(ft *fakeTimer) bool {
		if ft.at.After(c.t) {
			return false
		}
		ft.c <- c.t
		return true
	})
}

func (c *fakeClock) newTimer(d time.Duration) (<-chan time.Time, func()) {
	c.mu.Lock()
	ft := &fakeTimer{at: c.t.Add(d), c: make(chan time.Time, 1)}
	if c.auto {
		c.t = ft.at
		ft.c <- c.t
	} else {
		c.timers = append(c.timers, ft)
	}
	c.mu.Unlock()
	if c.waiting != nil {
		select {
		case c.waiting <- struct{}{}:
		default:
		}
	}
	return ft.c, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.timers = slices.DeleteFunc(c.timers, func(x *fakeTimer) bool { return x == ft })
	}
}

// pending returns the number of timers set and not yet fired or stopped.
func (c *fakeClock) pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

func withClock(c *fakeClock) Option {
	return func(o *options) {
		o.now = c.now
		o.newTimer = c.newTimer
	}
}

type discoveryErrGroupFailed = discovery.ErrGroupDiscoveryFailed

// setOwn sets what gv's own endpoint (/apis/group/version) answers; nil
// makes it answer 404. Without setOwn the endpoint answers from the
// aggregated data.
func (f *fakeDiscovery) setOwn(gv schema.GroupVersion, l *metav1.APIResourceList) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.own == nil {
		f.own = map[schema.GroupVersion]*metav1.APIResourceList{}
	}
	f.own[gv] = l
}

// setOwnErr makes gv's own endpoint fail with err (nil: answer again).
func (f *fakeDiscovery) setOwnErr(gv schema.GroupVersion, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ownErr == nil {
		f.ownErr = map[schema.GroupVersion]error{}
	}
	f.ownErr[gv] = err
}

func (f *fakeDiscovery) ServerResourcesForGroupVersionWithContext(_ context.Context, groupVersion string) (*metav1.APIResourceList, error) {
	gv, err := schema.ParseGroupVersion(groupVersion)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.ownErr[gv]; err != nil {
		return nil, err
	}
	if l, ok := f.own[gv]; ok {
		if l == nil {
			return nil, apierrors.NewNotFound(schema.GroupResource{}, groupVersion)
		}
		return l.DeepCopy(), nil
	}
	for _, l := range f.lists {
		if l.GroupVersion == groupVersion {
			return l.DeepCopy(), nil
		}
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{}, groupVersion)
}
