package presence

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/discoveryresolver"
)

// Issue 20, defect 12: before any source answered, a member's verdict is
// Checking with no error (the old code reported "resource not served" at
// every start). Once the CRD list answers, a resource no CRD backs is
// assumed served, and a CRD-backed resource the CRD does not serve is
// known not served, with a reason.
func TestCheckingUntilASourceAnswers(t *testing.T) {
	c := crdClient(crd("gadgets", true, v("v1")), crd("things", false, v("v1")))
	p := New(Config{CRDs: c})
	widgets := newMember(gvr("v1", "widgets"))
	gadgetsV2 := newMember(gvr("v2", "gadgets"))
	gadgetsV1 := newMember(gvr("v1", "gadgets"))
	things := newMember(gvr("v1", "things"))
	for _, m := range []*member{widgets, gadgetsV2, gadgetsV1, things} {
		got := p.Register(m)
		if !got.Checking || got.Served || got.Err != nil || got.Reason != CheckingReason {
			t.Fatalf("%v: first verdict %+v, want Checking without an error", m.GVR(), got)
		}
	}
	if p.Ready() {
		t.Fatal("ready before Run")
	}
	run(t, p)
	widgets.waitVerdict(t, "widgets assumed served", assumedServed)
	gadgetsV1.waitVerdict(t, "gadgets v1 served", knownServed)
	got := gadgetsV2.waitVerdict(t, "gadgets v2 not served", knownNotServed)
	if !strings.Contains(got.Reason, "does not serve version v2") {
		t.Fatalf("reason %q", got.Reason)
	}
	got = things.waitVerdict(t, "things not served", knownNotServed)
	if !strings.Contains(got.Reason, "no established CustomResourceDefinition") {
		t.Fatalf("reason %q", got.Reason)
	}
	if !p.Ready() {
		t.Fatal("not ready after the CRD list")
	}
	// A member registered now gets the verdict at once.
	if v := p.Register(newMember(gvr("v1", "gadgets"))); !knownServed(v) {
		t.Fatalf("late register %+v", v)
	}
}

// Without any source, everything is assumed served at once.
func TestNoSources(t *testing.T) {
	p := New(Config{})
	if !p.Ready() {
		t.Fatal("a presence without sources is not ready")
	}
	if v := p.Register(newMember(gvr("v1", "widgets"))); !assumedServed(v) {
		t.Fatalf("verdict %+v", v)
	}
}

// CRD events: add, update (a version unserved), delete, and a delete seen
// as DeletedFinalStateUnknown; OnCRDChange listeners hear each, until
// removed.
func TestCRDEvents(t *testing.T) {
	c := crdClient()
	p := New(Config{CRDs: c})
	gadgets := newMember(gvr("v1", "gadgets"))
	p.Register(gadgets)
	var changes atomic.Int32
	remove := p.OnCRDChange(func() { changes.Add(1) })
	run(t, p)
	gadgets.waitVerdict(t, "assumed served (no CRD yet)", assumedServed)
	waitWatching(t, c)

	createCRD(t, c, crd("gadgets", true, v("v1")))
	gadgets.waitVerdict(t, "served once the CRD is established", knownServed)
	waitFor(t, "a CRD change", func() bool { return changes.Load() == 1 })

	updateCRD(t, c, crd("gadgets", true, unserved("v1"), v("v2")))
	got := gadgets.waitVerdict(t, "not served once v1 is unserved", knownNotServed)
	if !strings.Contains(got.Reason, "does not serve version v1") {
		t.Fatalf("reason %q", got.Reason)
	}
	updateCRD(t, c, crd("gadgets", true, v("v1")))
	gadgets.waitVerdict(t, "served again", knownServed)

	deleteCRD(t, c, "gadgets."+group)
	got = gadgets.waitVerdict(t, "not served once deleted", knownNotServed)
	if !strings.Contains(got.Reason, "no established CustomResourceDefinition serves gadgets.example.com") {
		t.Fatalf("reason %q", got.Reason)
	}
	waitFor(t, "four CRD changes", func() bool { return changes.Load() == 4 })

	remove()
	createCRD(t, c, crd("gadgets", true, v("v1")))
	gadgets.waitVerdict(t, "served after re-creation", knownServed)
	if n := changes.Load(); n != 4 {
		t.Fatalf("a removed listener was called (%d calls)", n)
	}
	// A delete whose final state is unknown, and a CRD being deleted
	// (deletionTimestamp set) both stop serving.
	p.crdChanged(toolscache.DeletedFinalStateUnknown{Key: "gadgets." + group, Obj: crd("gadgets", true, v("v1"))}, false)
	gadgets.waitVerdict(t, "not served after a tombstone", knownNotServed)
	deleting := crd("gadgets", true, v("v1"))
	now := metav1.Now()
	deleting.SetDeletionTimestamp(&now)
	slim, _ := slimCRD(deleting)
	p.crdChanged(slim, false)
	p.crdChanged("not an object", false) // ignored
	if v, _ := gadgets.last(); !knownNotServed(v) {
		t.Fatalf("a CRD being deleted still serves: %+v", v)
	}
}

// slimCRD keeps what presence reads, is idempotent (client-go may
// transform an object twice) and passes other types through.
func TestSlimCRD(t *testing.T) {
	full := crd("gadgets", true, v("v1"), unserved("v2"))
	now := metav1.Now()
	full.SetDeletionTimestamp(&now)
	out, err := slimCRD(full)
	if err != nil {
		t.Fatal(err)
	}
	s := out.(*unstructured.Unstructured)
	if established, _, _ := unstructured.NestedBool(s.Object, "established"); !established {
		t.Fatal("established lost")
	}
	versions, _, _ := unstructured.NestedSlice(s.Object, "spec", "versions")
	if len(versions) != 2 || versions[0].(map[string]interface{})["schema"] != nil {
		t.Fatalf("versions %v", versions)
	}
	if s.GetDeletionTimestamp() == nil || s.GetName() != "gadgets."+group {
		t.Fatal("metadata lost")
	}
	again, _ := slimCRD(s)
	if again != s {
		t.Fatal("slimming a slim CRD copied it")
	}
	if o, _ := slimCRD("x"); o != "x" {
		t.Fatal("a non-object was changed")
	}
}

// Version following: a following member moves to the CRD's highest served
// version when the CRD serves v2 beside v1, and when its version stops
// being served; a member that does not follow is told its version is not
// served.
func TestVersionFollowing(t *testing.T) {
	c := crdClient(crd("gadgets", true, v("v1")), crd("things", true, v("v1"), unserved("v2")))
	p := New(Config{CRDs: c})
	gadgets := newMember(gvr("v1", "gadgets"))
	gadgets.follows = true
	things := newMember(gvr("v1", "things"))
	things.follows = true
	pinned := newMember(gvr("v1", "things"))
	for _, m := range []*member{gadgets, things, pinned} {
		p.Register(m)
	}
	run(t, p)
	gadgets.waitVerdict(t, "gadgets v1 served", knownServed)
	things.waitVerdict(t, "things v1 served", knownServed)
	waitWatching(t, c)
	if m := gadgets.movedTo(); len(m) != 0 {
		t.Fatalf("moved %v while v1 was the only version", m)
	}

	// v2 beside v1: v2 is preferred.
	updateCRD(t, c, crd("gadgets", true, v("v1"), v("v2")))
	waitFor(t, "gadgets moved to v2", func() bool { return slices.Equal(gadgets.movedTo(), []string{"v2"}) })
	if gadgets.GVR().Version != "v2" {
		t.Fatalf("gvr %v", gadgets.GVR())
	}

	// v1 stops being served, v2 is: following members move, the pinned one
	// is not served.
	updateCRD(t, c, crd("things", true, unserved("v1"), v("v2")))
	waitFor(t, "things moved to v2", func() bool { return slices.Equal(things.movedTo(), []string{"v2"}) })
	got := pinned.waitVerdict(t, "pinned not served", knownNotServed)
	if !strings.Contains(got.Reason, "does not serve version v1") || len(pinned.movedTo()) != 0 {
		t.Fatalf("pinned: %+v, moves %v", got, pinned.movedTo())
	}
	// At v2 a following member stays (v2 is preferred): a re-evaluation
	// gives it the verdict instead of a move.
	p.reevaluateAll("test")
	things.waitVerdict(t, "things at v2 served", knownServed)
	if m := things.movedTo(); len(m) != 1 {
		t.Fatalf("moves %v", m)
	}
}

// Without CRDs, a following member moves to discovery's preferred version.
func TestVersionFollowingDiscovery(t *testing.T) {
	d := discoveryOf(
		resourceList(group+"/v2", apiResource("widgets", true)),
		resourceList(group+"/v1", apiResource("widgets", true)),
	)
	p := New(Config{Resolver: resolverOf(d)})
	m := newMember(gvr("v1", "widgets"))
	m.follows = true
	p.Register(m)
	run(t, p)
	waitFor(t, "moved to v2", func() bool { return slices.Equal(m.movedTo(), []string{"v2"}) })
}

// Scope: discovery says the resource is cluster-scoped and the member asks
// for namespaces: a configuration error, not "not served"; a member that
// does not ask for namespaces is served; a resource discovery does not
// list is not served.
func TestScope(t *testing.T) {
	d := discoveryOf(resourceList(group+"/v1", apiResource("clusterwidgets", false), apiResource("widgets", true)))
	p := New(Config{Resolver: resolverOf(d)})
	nsd := newMember(gvr("v1", "clusterwidgets"))
	nsd.namespaced = true
	all := newMember(gvr("v1", "clusterwidgets"))
	nsWidgets := newMember(gvr("v1", "widgets"))
	nsWidgets.namespaced = true
	missing := newMember(gvr("v1", "gizmos"))
	for _, m := range []*member{nsd, all, nsWidgets, missing} {
		if v := p.Register(m); !v.Checking {
			t.Fatalf("first verdict %+v", v)
		}
	}
	run(t, p)
	got := nsd.waitVerdict(t, "scope error", func(v Verdict) bool { return v.Err != nil })
	if !errors.Is(got.Err, ErrNamespaceOnClusterScoped) || got.Served || !got.Known || !strings.Contains(got.Reason, "cluster-scoped") {
		t.Fatalf("verdict %+v", got)
	}
	all.waitVerdict(t, "cluster-wide member served", knownServed)
	nsWidgets.waitVerdict(t, "namespaced resource served", knownServed)
	got = missing.waitVerdict(t, "not in discovery", knownNotServed)
	if want := Qualified(missing.GVR()) + " is not in discovery"; got.Reason != want || strings.Contains(got.Reason, "Resource=") {
		t.Fatalf("reason %q, want %q (the resource as kubectl names it)", got.Reason, want)
	}
	// A following member with a scope error is not moved.
	nsd2 := newMember(gvr("v1", "clusterwidgets"))
	nsd2.namespaced, nsd2.follows = true, true
	if v := p.Register(nsd2); !errors.Is(v.Err, ErrNamespaceOnClusterScoped) {
		t.Fatalf("verdict %+v", v)
	}
}

// A 404 closes nothing in presence but schedules a re-check: after
// RecheckMin, doubling up to RecheckMax. Until it runs, re-evaluations
// leave the member alone (nothing authoritative is known); the re-check
// then gives the verdict again.
func TestNotFoundBackoff(t *testing.T) {
	const minD, maxD = 50 * time.Millisecond, 100 * time.Millisecond
	p := New(Config{RecheckMin: minD, RecheckMax: maxD})
	m := newMember(gvr("v1", "widgets"))
	p.Register(m)
	p.NotFound(m.GVR()) // before Run: nothing to schedule on
	run(t, p)
	time.Sleep(2 * minD)
	if n := m.count(); n != 0 {
		t.Fatalf("%d verdicts from a 404 reported before Run", n)
	}
	var delays []time.Duration
	for i, want := range []time.Duration{minD, 2 * minD, maxD, maxD} { // uncapped: 50, 100, 200, 400ms
		before := m.count()
		start := time.Now()
		p.NotFound(m.GVR())
		p.NotFound(m.GVR()) // a second 404 meanwhile does not add a re-check
		p.reevaluateAll("another member changed")
		if m.count() != before {
			t.Fatalf("round %d: a re-evaluation reopened a member waiting for its re-check", i)
		}
		waitFor(t, "the re-check", func() bool { return m.count() > before })
		took := time.Since(start)
		delays = append(delays, took)
		if took < want*9/10 {
			t.Fatalf("round %d: re-checked after %v, before %v (delays %v)", i, took, want, delays)
		}
		if v, _ := m.last(); !assumedServed(v) {
			t.Fatalf("re-check verdict %+v", v)
		}
		if m.count() != before+1 {
			t.Fatalf("round %d: %d verdicts from one re-check", i, m.count()-before)
		}
	}
	// The backoff doubled, but not past the cap: the last delays are
	// about RecheckMax, not 200 and 400ms.
	if delays[3] > 3*maxD {
		t.Fatalf("delays %v: the cap was not applied", delays)
	}
}

// A re-check refreshes discovery (a 404 invalidated it).
func TestNotFoundRefreshesDiscovery(t *testing.T) {
	d := discoveryOf(resourceList(group+"/v1", apiResource("widgets", true)))
	p := New(Config{Resolver: resolverOf(d), RecheckMin: 20 * time.Millisecond})
	m := newMember(gvr("v1", "widgets"))
	p.Register(m)
	run(t, p)
	m.waitVerdict(t, "served", knownServed)
	before, applied := rounds(d), m.count()
	p.NotFound(m.GVR())
	waitFor(t, "a discovery round from the re-check", func() bool { return rounds(d) > before })
	waitFor(t, "the re-check's verdict", func() bool { return m.count() > applied })
	if v, _ := m.last(); !knownServed(v) {
		t.Fatalf("verdict %+v", v)
	}
}

// An authoritative "not served" while a re-check is pending cancels it.
func TestKnownNotServedCancelsRecheck(t *testing.T) {
	c := crdClient(crd("gadgets", true, v("v1")))
	p := New(Config{CRDs: c, RecheckMin: time.Hour})
	m := newMember(gvr("v1", "gadgets"))
	p.Register(m)
	run(t, p)
	m.waitVerdict(t, "served", knownServed)
	waitWatching(t, c)
	p.NotFound(m.GVR())
	p.mu.Lock()
	pending := len(p.timers)
	p.mu.Unlock()
	if pending != 1 {
		t.Fatalf("%d re-checks pending after a 404", pending)
	}
	deleteCRD(t, c, "gadgets."+group)
	m.waitVerdict(t, "not served", knownNotServed)
	p.mu.Lock()
	pending, backoff := len(p.timers), len(p.backoff)
	p.mu.Unlock()
	if pending != 0 || backoff != 0 {
		t.Fatalf("%d re-checks, %d backoffs left after the CRD said not served", pending, backoff)
	}
}

// Issue 20, defect 6: with CRD tracking but no discovery, a resource no
// CRD serves that answered 404 can only come back through a CRD, and CRD
// events reopen it at once: its re-check waits RecheckMax. The old code
// re-checked it at 250 ms, 500 ms, 1 s, 2 s, ... — each re-check a list
// answered 404 again (6 lists in 20 s). The member here does what an
// informer does: every re-check that lets it list meets a 404 again.
func TestNotFoundWithoutDiscoveryWaitsForCRD(t *testing.T) {
	c := crdClient()
	const recheckMax = 2 * time.Second
	p := New(Config{CRDs: c, RecheckMin: 250 * time.Millisecond, RecheckMax: recheckMax})
	m := newMember(gvr("v1", "gadgets"))
	p.Register(m)
	run(t, p)
	m.waitVerdict(t, "assumed served", assumedServed)
	waitWatching(t, c)
	var lists atomic.Int32
	var crdThere atomic.Bool
	m.mu.Lock()
	m.onApply = func(v Verdict) {
		if v.Served && !crdThere.Load() {
			lists.Add(1)
			go p.NotFound(m.GVR()) // the list answered 404 again
		}
	}
	m.mu.Unlock()
	start := time.Now()
	p.NotFound(m.GVR()) // the first list answered 404
	time.Sleep(3 * time.Second)
	if n := lists.Load(); n > 1 {
		t.Fatalf("%d re-checks in %v without discovery and without a CRD, want at most 1 (at RecheckMax %v)", n, time.Since(start), recheckMax)
	}
	// The CRD appears: the member is served at once, not at the next
	// re-check.
	crdThere.Store(true)
	created := time.Now()
	createCRD(t, c, crd("gadgets", true, v("v1")))
	m.waitVerdict(t, "served once the CRD exists", knownServed)
	if took := time.Since(created); took > time.Second {
		t.Fatalf("served %v after the CRD appeared", took)
	}
}

// Issue 20, defect 8: when the CRD list is forbidden and there is no
// discovery, that is an answer: presence is ready at once, not after
// ReadyTimeout (the old code made every informer's first sync wait 5 s).
func TestForbiddenCRDListIsAnAnswer(t *testing.T) {
	c := crdClient()
	c.PrependReactor("list", "customresourcedefinitions", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(CRDResource.GroupResource(), "", errors.New("RBAC: no"))
	})
	p := New(Config{CRDs: c, ReadyTimeout: 5 * time.Second})
	m := newMember(gvr("v1", "widgets"))
	if v := p.Register(m); !v.Checking {
		t.Fatalf("first verdict %+v", v)
	}
	start := time.Now()
	run(t, p)
	m.waitVerdict(t, "assumed served", assumedServed)
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("ready after %v with a forbidden CRD list, want well under ReadyTimeout (5s)", took)
	}
	if !p.Ready() {
		t.Fatal("not ready")
	}
}

// A client that panics on CRDs (client-go's fake dynamic client without
// the CRD list kind) is an unavailable source, not a crash.
func TestPanickingCRDClient(t *testing.T) {
	c := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
	p := New(Config{CRDs: c})
	m := newMember(gvr("v1", "widgets"))
	p.Register(m)
	run(t, p)
	m.waitVerdict(t, "assumed served", assumedServed)
}

// Slow sources are waited for at most ReadyTimeout.
func TestReadyTimeout(t *testing.T) {
	block := make(chan struct{})
	c := crdClient()
	c.PrependReactor("list", "customresourcedefinitions", func(k8stesting.Action) (bool, runtime.Object, error) {
		<-block
		return true, nil, errors.New("too late")
	})
	p := New(Config{CRDs: c, ReadyTimeout: 100 * time.Millisecond})
	m := newMember(gvr("v1", "widgets"))
	p.Register(m)
	stop := run(t, p)
	time.Sleep(50 * time.Millisecond)
	if p.Ready() {
		t.Fatal("ready before the timeout with no answer")
	}
	m.waitVerdict(t, "assumed served after the timeout", assumedServed)
	close(block)
	stop()
}

// Issue 20, defect 5 (the presence half): with Rediscovery 0, discovery is
// asked once at start and then only when something calls for it (a CRD
// change, a 404) — never on a timer. The old code polled every second once
// a subscription existed.
func TestNoPeriodicDiscoveryWhenOff(t *testing.T) {
	d := discoveryOf(resourceList(group+"/v1", apiResource("widgets", true)))
	p := New(Config{Resolver: resolverOf(d), Rediscovery: 0})
	m := newMember(gvr("v1", "widgets"))
	p.Register(m)
	run(t, p)
	m.waitVerdict(t, "served", knownServed)
	initial := rounds(d)
	time.Sleep(2 * time.Second)
	if n := rounds(d); initial != 1 || n != initial {
		t.Fatalf("discovery rounds: %d at start, %d after 2s with rediscovery off; want 1 and no more", initial, n)
	}
	// With an interval, rounds come on it.
	d2 := discoveryOf(resourceList(group+"/v1", apiResource("widgets", true)))
	p2 := New(Config{Resolver: resolverOf(d2), Rediscovery: 100 * time.Millisecond})
	run(t, p2)
	waitFor(t, "periodic rounds", func() bool { return rounds(d2) >= 4 })
}

// A CRD change asks discovery for a round; while an Established CRD
// serves a version discovery does not list yet, the round is repeated a
// few times (discovery lags behind CRDs), then it stops.
func TestCRDChangeRefreshesDiscovery(t *testing.T) {
	d := discoveryOf(resourceList(group+"/v1", apiResource("widgets", true)))
	c := crdClient()
	p := New(Config{CRDs: c, Resolver: resolverOf(d), RecheckMin: 10 * time.Millisecond})
	m := newMember(gvr("v1", "gadgets"))
	p.Register(m)
	run(t, p)
	m.waitVerdict(t, "not in discovery", knownNotServed)
	waitWatching(t, c)
	before := rounds(d)
	createCRD(t, c, crd("gadgets", true, v("v1")))
	// The CRD is authoritative: served at once, though discovery lags.
	m.waitVerdict(t, "served by its CRD", knownServed)
	waitFor(t, "discovery retries", func() bool { return rounds(d) >= before+3 })
	time.Sleep(500 * time.Millisecond) // 5 retries at 10ms, 20ms, ... 50ms are over
	settled := rounds(d)
	time.Sleep(300 * time.Millisecond)
	if n := rounds(d); n != settled || n > before+7 {
		t.Fatalf("discovery rounds kept coming: %d before the CRD, %d, then %d", before, settled, n)
	}
}

// Unregistered members get no further verdicts.
func TestUnregister(t *testing.T) {
	c := crdClient()
	p := New(Config{CRDs: c})
	m := newMember(gvr("v1", "gadgets"))
	p.Register(m)
	run(t, p)
	m.waitVerdict(t, "assumed served", assumedServed)
	waitWatching(t, c)
	p.Unregister(m)
	n := m.count()
	createCRD(t, c, crd("gadgets", true, v("v1")))
	other := newMember(gvr("v1", "gadgets"))
	p.Register(other)
	waitFor(t, "the CRD seen", func() bool { return knownServed(p.Register(newMember(gvr("v1", "gadgets")))) })
	if m.count() != n {
		t.Fatal("an unregistered member got a verdict")
	}
}

// Run stops every re-check and joins every goroutine; after Run, 404s
// schedule nothing and re-evaluations tell nobody.
func TestRunShutdownJoinsEverything(t *testing.T) {
	d := discoveryOf(resourceList(group+"/v1", apiResource("widgets", true)))
	c := crdClient(crd("gadgets", true, v("v1")))
	p := New(Config{CRDs: c, Resolver: resolverOf(d), Rediscovery: 50 * time.Millisecond, RecheckMin: time.Hour})
	m := newMember(gvr("v1", "widgets"))
	p.Register(m)
	stop := run(t, p)
	m.waitVerdict(t, "served", knownServed)
	p.NotFound(m.GVR())
	p.NotFound(gvr("v1", "gadgets"))
	start := time.Now()
	stop() // cancels, waits for Run, checks for leaked goroutines
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("Run took %v to return with re-checks pending an hour", took)
	}
	n := m.count()
	p.NotFound(m.GVR())
	p.reevaluateAll("after stop")
	p.mu.Lock()
	timers := len(p.timers)
	p.mu.Unlock()
	if timers != 0 || m.count() != n {
		t.Fatalf("after Run: %d timers, %d new verdicts", timers, m.count()-n)
	}
}

// Verdicts are applied outside presence's lock, so a re-evaluation that
// decided from an older discovery snapshot can apply after the one that
// decided from the newer: here the first is held before it applies "not
// in discovery" while a round brings the resource and its re-evaluation
// applies "served". The stale verdict must not be the last: otherwise the
// member stays Removed until discovery changes again (the soak's
// access-check informer, whose user cannot watch CRDs, stayed Removed
// after a CRD was re-created).
func TestStaleVerdictIsNotTheLast(t *testing.T) {
	d := discoveryOf()
	r := resolverOf(d)
	p := New(Config{Resolver: r})
	m := &slowMember{member: newMember(gvr("v1", "gadgets"))}
	p.Register(m)
	run(t, p)
	m.waitVerdict(t, "not in discovery", knownNotServed)

	m.hold(func(v Verdict) bool { return !v.Served })
	stale := make(chan struct{})
	go func() {
		defer close(stale)
		p.reevaluate(m.GVR(), "test: decided before the round", false)
	}()
	<-m.held // decided "not in discovery", not yet applied

	discover(t, d, r, resourceList(group+"/v1", apiResource("gadgets", true)))
	m.waitVerdict(t, "served after the round", knownServed)
	close(m.release)
	<-stale
	if v, _ := m.last(); !knownServed(v) {
		t.Fatalf("last verdict %+v, decided before the round that brought the resource", v)
	}
}

// slowMember is a member whose Apply can be held before it takes the
// verdict (hold: the first verdict matching; held is closed then, and
// the verdict is taken once release is closed).
type slowMember struct {
	*member
	once          sync.Once
	match         func(Verdict) bool
	held, release chan struct{}
}

func (m *slowMember) hold(match func(Verdict) bool) {
	m.member.mu.Lock()
	m.match, m.held, m.release = match, make(chan struct{}), make(chan struct{})
	m.member.mu.Unlock()
}

func (m *slowMember) Apply(v Verdict) {
	m.member.mu.Lock()
	match := m.match
	m.member.mu.Unlock()
	if match != nil && match(v) {
		m.once.Do(func() {
			close(m.held)
			<-m.release
		})
	}
	m.member.Apply(v)
}

// The verdict Register returns is applied by the member itself; a
// re-evaluation may apply a later one first. Applied leaves the member
// with what is known now.
func TestRegisterVerdictIsNotTheLast(t *testing.T) {
	d := discoveryOf()
	r := resolverOf(d)
	p := New(Config{Resolver: r})
	first := newMember(gvr("v1", "gadgets"))
	p.Register(first)
	run(t, p)
	first.waitVerdict(t, "not in discovery", knownNotServed)

	m := newMember(gvr("v1", "gadgets"))
	v := p.Register(m)
	if !knownNotServed(v) {
		t.Fatalf("Register's verdict %+v", v)
	}
	discover(t, d, r, resourceList(group+"/v1", apiResource("gadgets", true)))
	m.waitVerdict(t, "served after the round", knownServed)
	m.Apply(v) // late, as an informer applies Register's verdict itself
	p.Applied(m, v)
	if last, _ := m.last(); !knownServed(last) {
		t.Fatalf("last verdict %+v, Register's", last)
	}
}

// discover makes d serve lists from now on and runs a discovery round of
// r (its change delivered when it returns).
func discover(t *testing.T, d *fakediscovery.FakeDiscovery, r *discoveryresolver.Resolver, lists ...*metav1.APIResourceList) {
	t.Helper()
	d.Lock()
	d.Resources = lists
	d.Unlock()
	if err := r.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// laggingDiscovery answers the aggregated discovery document from stale
// (what the server's aggregated document said before a resource came
// back) and each group-version's own endpoint from the embedded current
// one, as kube-apiserver does for minutes after a CRD is created again in
// a group-version that kept another CRD.
type laggingDiscovery struct {
	*fakediscovery.FakeDiscovery
	stale *fakediscovery.FakeDiscovery
}

func (l *laggingDiscovery) ServerGroupsAndResources() ([]*metav1.APIGroup, []*metav1.APIResourceList, error) {
	return l.stale.ServerGroupsAndResources()
}

func (l *laggingDiscovery) ServerGroupsAndResourcesWithContext(ctx context.Context) ([]*metav1.APIGroup, []*metav1.APIResourceList, error) {
	return l.stale.ServerGroupsAndResourcesWithContext(ctx)
}

// Without read access to CRDs, a resource discovery called gone comes
// back within a rediscovery interval though the aggregated discovery
// document still lacks it: each periodic round reads the group-version's
// own endpoint for members discovery calls not served (found by the soak:
// an informer Removed for minutes after its CRD was created again).
func TestNotServedByDiscoveryReadsOwnEndpoint(t *testing.T) {
	stale := discoveryOf(resourceList(group+"/v1", apiResource("gizmos", true)))
	current := discoveryOf(resourceList(group+"/v1", apiResource("gizmos", true)))
	d := &laggingDiscovery{FakeDiscovery: current, stale: stale}
	p := New(Config{Resolver: discoveryresolver.New(d), Rediscovery: 50 * time.Millisecond})
	m := newMember(gvr("v1", "widgets"))
	p.Register(m)
	run(t, p)
	m.waitVerdict(t, "not in discovery", func(v Verdict) bool { return v.Known && !v.Served })
	// widgets is served again; the aggregated document does not say so.
	current.Lock()
	current.Resources = []*metav1.APIResourceList{resourceList(group+"/v1", apiResource("gizmos", true), apiResource("widgets", true))}
	current.Unlock()
	m.waitVerdict(t, "served, from the group-version's own endpoint", knownServed)
}
