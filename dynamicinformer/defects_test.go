package dynamicinformer

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/discoveryresolver"
)

// TestWatchErrorOnSyncedInformerLeavesErrNil (issue 20, defect 3): a watch
// that fails once on a synced informer, which the reflector resumes by
// itself, must not leave Status.Err set on the recovered informer.
func TestWatchErrorOnSyncedInformerLeavesErrNil(t *testing.T) {
	noLeaks := newGoroutinesCheck()
	client := fakeClient(widget("a", "w1", nil))
	var watches atomic.Int32
	var first *watch.RaceFreeFakeWatcher
	var mu sync.Mutex
	client.PrependWatchReactor("widgets", func(clienttesting.Action) (bool, watch.Interface, error) {
		switch watches.Add(1) {
		case 1:
			w := watch.NewRaceFreeFake()
			mu.Lock()
			first = w
			mu.Unlock()
			return true, w, nil
		case 2:
			return true, nil, errors.New("connection reset by peer (injected)")
		}
		return false, nil, nil
	})
	f := NewSharedInformerFactory(client, Options{DisableCRDTracking: true, Logger: quiet})
	h := f.ForResource(widgets)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Start(ctx)
	waitFor(t, func() bool { return h.Status().State == Synced })
	mu.Lock()
	first.Stop() // the server ends the watch; the next one fails once
	mu.Unlock()
	waitFor(t, func() bool { return watches.Load() >= 3 })
	if _, err := client.Resource(widgets).Namespace("a").Create(ctx, widget("a", "w2", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return h.Status().Objects == 2 })
	if st := h.Status(); st.State != Synced || st.Err != nil {
		t.Fatalf("after a recovered watch failure: state %s, Err %v; want Synced, nil", st.State, st.Err)
	}
	f.Shutdown()
	noLeaks(t)
}

// TestReleaseFromOwnHandler (issue 20, defect 4): Release of the last
// handle, called from that informer's own event handler, returns (it used
// to wait for the informer, which waited for the handler).
func TestReleaseFromOwnHandler(t *testing.T) {
	noLeaks := newGoroutinesCheck()
	f := NewSharedInformerFactory(fakeClient(widget("a", "w1", nil)), Options{DisableCRDTracking: true, Logger: quiet})
	h := f.ForResource(widgets)
	released := make(chan struct{})
	var once sync.Once
	if _, err := h.Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(any) {
		once.Do(func() {
			h.Release()
			close(released)
		})
	}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Start(ctx)
	select {
	case <-released:
	case <-time.After(10 * time.Second):
		t.Fatal("Release called from the informer's own handler did not return")
	}
	waitFor(t, func() bool { return h.Status().State == Stopped })
	f.Shutdown()
	noLeaks(t)
}

// TestStateSyncedWhenWaitForCacheSyncReturns (issue 20, defect 9): right
// after WaitForCacheSync reports true, Status says Synced (no poller
// behind it).
func TestStateSyncedWhenWaitForCacheSyncReturns(t *testing.T) {
	for i := 0; i < 20; i++ {
		f := NewSharedInformerFactory(fakeClient(widget("a", "w1", nil)), Options{DisableCRDTracking: true, Logger: quiet})
		h := f.ForResource(widgets)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		f.Start(ctx)
		if !f.WaitForCacheSync(ctx)[widgets] {
			t.Fatal("not synced")
		}
		if st := h.Status(); st.State != Synced || !h.Informer().HasSynced() {
			t.Fatalf("run %d: WaitForCacheSync returned true, state %s, HasSynced %v", i, st.State, h.Informer().HasSynced())
		}
		cancel()
		f.Shutdown()
	}
}

// blockingDiscovery is a fake discovery client whose rounds wait for
// release.
func blockingDiscovery(release <-chan struct{}) *fakediscovery.FakeDiscovery {
	d := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}
	d.Resources = []*metav1.APIResourceList{{GroupVersion: "example.com/v1", APIResources: []metav1.APIResource{
		{Name: "widgets", Namespaced: true, Kind: "Widget", Verbs: metav1.Verbs{"list", "watch"}},
	}}}
	d.AddReactor("*", "*", func(clienttesting.Action) (bool, kruntime.Object, error) {
		<-release
		return false, nil, nil
	})
	return d
}

// TestPendingWhileCheckingHasNoError (issue 20, defect 12): before any
// presence source has answered, a started informer is Pending with no
// error (checking); then it syncs. "not served" is never said of it.
func TestPendingWhileCheckingHasNoError(t *testing.T) {
	release := make(chan struct{})
	f := NewSharedInformerFactory(fakeClient(widget("a", "w1", nil)), Options{DisableCRDTracking: true, Logger: quiet, Resolver: discoveryresolver.New(blockingDiscovery(release))})
	var mu sync.Mutex
	var seen []Status
	defer f.OnStatusChange(func(s Status) { mu.Lock(); seen = append(seen, s); mu.Unlock() })()
	h := f.ForResource(widgets)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Start(ctx)
	waitFor(t, func() bool { st := h.Status(); return st.State == Pending && st.Reason != "not started" })
	st := h.Status()
	if st.Err != nil || st.Reason != "checking whether the resource is served" {
		t.Fatalf("before presence answered: %s %q err %v", st.State, st.Reason, st.Err)
	}
	close(release)
	waitFor(t, func() bool { return h.Status().State == Synced })
	f.Shutdown()
	mu.Lock()
	defer mu.Unlock()
	for _, s := range seen {
		if errors.Is(s.Err, ErrNotServed) {
			t.Fatalf("a served resource reported %s %q: %v", s.State, s.Reason, s.Err)
		}
	}
}

// TestUnreachableServerSetsContactErr (issue 20, defect 13, the unit
// half; the real-server test stops and restarts a server): requests that
// cannot connect set Status.ContactErr (ErrNoContact, wrapping the
// connection error).
func TestUnreachableServerSetsContactErr(t *testing.T) {
	noLeaks := newGoroutinesCheck()
	client, err := dynamic.NewForConfig(&rest.Config{Host: "http://127.0.0.1:1", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	f := NewSharedInformerFactory(client, Options{DisableCRDTracking: true, Logger: quiet})
	h := f.ForResource(widgets)
	var published atomic.Int32
	defer f.OnStatusChange(func(s Status) {
		if s.ContactErr != nil {
			published.Add(1)
		}
	})()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Start(ctx)
	waitFor(t, func() bool { return h.Status().ContactErr != nil })
	st := h.Status()
	if !errors.Is(st.ContactErr, ErrNoContact) {
		t.Fatalf("ContactErr %v: want ErrNoContact", st.ContactErr)
	}
	if !st.LastContact.IsZero() {
		t.Fatalf("LastContact %v for a server never reached", st.LastContact)
	}
	waitFor(t, func() bool { return published.Load() >= 1 })
	time.Sleep(2 * time.Second) // several reflector retries
	if n := published.Load(); n != 1 {
		t.Fatalf("contact loss published %d times; want once, not per retry", n)
	}
	f.Shutdown()
	noLeaks(t)
}

// TestClusterScopedInNamespaceIsAConfigError (issue 20, defect 10, the
// unit half): a namespace asked of a resource discovery knows to be
// cluster-scoped is Failed with ErrInvalid, and no
// request is sent.
func TestClusterScopedInNamespaceIsAConfigError(t *testing.T) {
	nsGVR := schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	d := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}
	d.Resources = []*metav1.APIResourceList{{GroupVersion: "v1", APIResources: []metav1.APIResource{
		{Name: "namespaces", Namespaced: false, Kind: "Namespace", Verbs: metav1.Verbs{"list", "watch"}},
	}}}
	client := fakeClient()
	var requests atomic.Int32
	client.PrependReactor("*", "namespaces", func(clienttesting.Action) (bool, kruntime.Object, error) {
		requests.Add(1)
		return false, nil, nil
	})
	client.PrependWatchReactor("namespaces", func(clienttesting.Action) (bool, watch.Interface, error) {
		requests.Add(1)
		return false, nil, nil
	})
	f := NewSharedInformerFactory(client, Options{DisableCRDTracking: true, Logger: quiet, Resolver: discoveryresolver.New(d)})
	h := f.ForResource(nsGVR, WithNamespaces("default"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Start(ctx)
	waitFor(t, func() bool { return h.Status().State == Failed })
	if st := h.Status(); !errors.Is(st.Err, ErrInvalid) {
		t.Fatalf("status %s %v: want ErrInvalid", st.State, st.Err)
	}
	time.Sleep(300 * time.Millisecond)
	if n := requests.Load(); n != 0 {
		t.Fatalf("%d requests sent for a misconfigured informer", n)
	}
	f.Shutdown()
}
