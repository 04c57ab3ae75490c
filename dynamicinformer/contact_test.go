package dynamicinformer

import (
	"context"
	"errors"
	"net/url"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	clienttesting "k8s.io/client-go/testing"
)

// TestClientFactoryReportsLostContact: a factory built on a client sees
// no transport. When the server is gone the way client-go's REST client
// hides it — the open watch ends and the next watch request does not
// return (the client retries it) — the factory probes, finds the server
// unreachable, and every informer's Status has ContactErr (ErrNoContact)
// within seconds; when the probe is answered again, it clears.
func TestClientFactoryReportsLostContact(t *testing.T) {
	noLeaks := newGoroutinesCheck()
	fake := fakeClient(widget("a", "w0", nil))
	var down atomic.Bool
	up := make(chan struct{})
	var mu sync.Mutex
	var current *watch.FakeWatcher
	fake.PrependWatchReactor("widgets", func(clienttesting.Action) (bool, watch.Interface, error) {
		w := watch.NewFake()
		mu.Lock()
		current = w
		mu.Unlock()
		return true, w, nil
	})
	// The REST client retrying a watch, as long as the server is gone
	// (outside the fake, whose reactors run under one lock).
	client := &stallingClient{Interface: fake, stall: func(ctx context.Context) {
		if down.Load() {
			select {
			case <-up:
			case <-ctx.Done():
			}
		}
	}}
	var probes atomic.Int64
	fake.PrependReactor("create", "selfsubjectreviews", func(clienttesting.Action) (bool, runtime.Object, error) {
		probes.Add(1)
		if down.Load() {
			return true, nil, &url.Error{Op: "Post", URL: "https://api/apis/authentication.k8s.io/v1/selfsubjectreviews", Err: syscall.ECONNREFUSED}
		}
		return true, nil, nil
	})
	f := NewSharedInformerFactory(client, Options{DisableCRDTracking: true})
	h := f.ForResource(widgets)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f.Start(ctx)
	waitFor(t, func() bool { return h.Status().State == Synced })
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return current != nil })
	if n := probes.Load(); n != 0 {
		t.Fatalf("%d probes while the server answered at once", n)
	}

	lost := time.Now()
	down.Store(true)
	mu.Lock()
	current.Stop() // the server went away: the open watch ends
	mu.Unlock()
	waitFor(t, func() bool { return h.Status().ContactErr != nil })
	took := time.Since(lost)
	st := h.Status()
	if !errors.Is(st.ContactErr, ErrNoContact) || !errors.Is(st.ContactErr, syscall.ECONNREFUSED) || st.State != Stale {
		t.Fatalf("state %s, ContactErr %v", st.State, st.ContactErr)
	}
	// The reason says it in words, without the request's URL.
	if st.Reason != "no contact with the API server: connection refused" || st.Err != nil {
		t.Fatalf("Stale: reason %q, err %v", st.Reason, st.Err)
	}
	if took > 5*time.Second {
		t.Fatalf("lost contact reported after %v", took)
	}
	t.Logf("lost contact reported %v after the watch ended (%d probes)", took.Round(time.Millisecond), probes.Load())

	down.Store(false)
	close(up)
	waitFor(t, func() bool { return h.Status().ContactErr == nil })
	if st := h.Status(); st.State != Synced || st.Reason != "" {
		t.Fatalf("contact back: state %s, reason %q", st.State, st.Reason)
	}
	f.Shutdown()
	noLeaks(t)
}

// stallingClient is a dynamic client whose watch requests first call
// stall, and whose SelfSubjectReview creates (the contact probe) first
// call stallProbe, if set. It is not a watch-list client (as the fake it
// wraps).
type stallingClient struct {
	dynamic.Interface
	stall, stallProbe func(context.Context)
}

func (c *stallingClient) IsWatchListSemanticsUnSupported() bool { return true }

func (c *stallingClient) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	if gvr == selfSubjectReviews && c.stallProbe != nil {
		return probeStallResource{NamespaceableResourceInterface: c.Interface.Resource(gvr), stall: c.stallProbe}
	}
	return stallingResource{NamespaceableResourceInterface: c.Interface.Resource(gvr), stall: c.stall}
}

type stallingResource struct {
	dynamic.NamespaceableResourceInterface
	stall func(context.Context)
}

func (r stallingResource) Namespace(ns string) dynamic.ResourceInterface {
	return stallingNamespaced{ResourceInterface: r.NamespaceableResourceInterface.Namespace(ns), stall: r.stall}
}

func (r stallingResource) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	r.stall(ctx)
	return r.NamespaceableResourceInterface.Watch(ctx, opts)
}

type stallingNamespaced struct {
	dynamic.ResourceInterface
	stall func(context.Context)
}

func (r stallingNamespaced) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	r.stall(ctx)
	return r.ResourceInterface.Watch(ctx, opts)
}

// TestInformerStartedWithoutContact: an informer started after its
// factory lost contact says so at once (ContactErr, ErrNoContact), though
// its own list never returns and the probes, still unanswered, change
// nothing: contact changes reach only the informers there at the change.
// When the server answers again, it clears.
func TestInformerStartedWithoutContact(t *testing.T) {
	noLeaks := newGoroutinesCheck()
	fake := fakeClient(widget("a", "w0", nil))
	up := make(chan struct{})
	var down atomic.Bool
	down.Store(true)
	fake.PrependReactor("create", "selfsubjectreviews", func(clienttesting.Action) (bool, runtime.Object, error) {
		if down.Load() {
			return true, nil, &url.Error{Op: "Post", URL: "https://api/apis/authentication.k8s.io/v1/selfsubjectreviews", Err: syscall.ECONNREFUSED}
		}
		return true, nil, nil
	})
	// Lists and watches wait, as behind a black hole, until the server is up.
	client := &blackHoleClient{stallingClient{Interface: fake, stall: func(ctx context.Context) {
		select {
		case <-up:
		case <-ctx.Done():
		}
	}}}
	f := NewSharedInformerFactory(client, Options{DisableCRDTracking: true})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f.Start(ctx)
	lostErr := &url.Error{Op: "Get", URL: "https://api/apis/example.com/v1/widgets", Err: syscall.ECONNREFUSED}
	f.contact.observe(lostErr) // the factory lost contact before the informer exists
	made := time.Now()
	h := f.ForResource(widgets)
	waitFor(t, func() bool { return h.Status().ContactErr != nil })
	if took := time.Since(made); took > 2*time.Second {
		t.Errorf("ContactErr %v after the informer was made; want at once", took)
	}
	if st := h.Status(); !errors.Is(st.ContactErr, ErrNoContact) || st.State == Synced || st.State == Stale {
		t.Fatalf("informer made without contact: state %s, ContactErr %v", st.State, st.ContactErr)
	}
	down.Store(false)
	close(up)
	waitFor(t, func() bool { st := h.Status(); return st.State == Synced && st.ContactErr == nil })
	f.Shutdown()
	noLeaks(t)
}

// blackHoleClient is a stallingClient whose lists stall too.
type blackHoleClient struct{ stallingClient }

func (c *blackHoleClient) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return blackHoleResource{stallingResource{NamespaceableResourceInterface: c.Interface.Resource(gvr), stall: c.stall}}
}

type blackHoleResource struct{ stallingResource }

func (r blackHoleResource) List(ctx context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	r.stall(ctx)
	return r.NamespaceableResourceInterface.List(ctx, opts)
}

func (r blackHoleResource) Namespace(ns string) dynamic.ResourceInterface {
	return blackHoleNamespaced{stallingNamespaced{ResourceInterface: r.NamespaceableResourceInterface.Namespace(ns), stall: r.stall}}
}

type blackHoleNamespaced struct{ stallingNamespaced }

func (r blackHoleNamespaced) List(ctx context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	r.stall(ctx)
	return r.ResourceInterface.List(ctx, opts)
}

// TestContactHeartbeat: a server that stops answering while the informer's
// watch sits idle (nothing fails, nothing is slow: a black hole) is found
// by the heartbeat — one probe after ContactCheckInterval without an
// answer, lost when it is not answered within ContactCheckTimeout — and
// the informer turns Stale; a probe answered again makes it Synced. While
// the server answers, the heartbeat sends one probe per interval of
// silence, no more.
func TestContactHeartbeat(t *testing.T) {
	noLeaks := newGoroutinesCheck()
	fake := fakeClient(widget("a", "w0", nil))
	var hole atomic.Bool
	var probes atomic.Int64
	fake.PrependReactor("create", "selfsubjectreviews", func(clienttesting.Action) (bool, runtime.Object, error) {
		probes.Add(1)
		return true, nil, nil
	})
	// The fake's reactors run under one lock: the black hole is outside.
	blackHoled := &stallingClient{Interface: fake, stall: func(context.Context) {}, stallProbe: func(ctx context.Context) {
		if hole.Load() {
			<-ctx.Done()
		}
	}}
	const every, timeout = 100 * time.Millisecond, 300 * time.Millisecond
	f := NewSharedInformerFactory(blackHoled, Options{DisableCRDTracking: true, ContactCheckInterval: every, ContactCheckTimeout: timeout})
	h := f.ForResource(widgets)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f.Start(ctx)
	waitFor(t, func() bool { return h.Status().State == Synced })
	// Heartbeats while the server answers: one per interval at most.
	quiet := time.Now()
	n0 := probes.Load()
	waitFor(t, func() bool { return probes.Load() >= n0+3 })
	if n, d := probes.Load()-n0, time.Since(quiet); time.Duration(n-1)*every > d {
		t.Fatalf("%d heartbeats in %v: more than one per %v", n, d, every)
	}
	if c := f.Contact(); c.Err != nil || h.Status().State != Synced {
		t.Fatalf("answered heartbeats: contact %+v, state %s", c, h.Status().State)
	}

	hole.Store(true)
	waitFor(t, func() bool { return f.Contact().Err != nil })
	c := f.Contact()
	st := h.Status()
	if !errors.Is(c.Err, ErrNoContact) || !errors.Is(c.Err, context.DeadlineExceeded) || st.State != Stale || !errors.Is(st.ContactErr, ErrNoContact) {
		t.Fatalf("black hole: contact %+v, state %s, ContactErr %v", c, st.State, st.ContactErr)
	}
	if st.Since.Before(c.Since) {
		t.Fatalf("Stale at %v, before contact was lost at %v", st.Since, c.Since)
	}
	hole.Store(false)
	waitFor(t, func() bool { return f.Contact().Err == nil })
	waitFor(t, func() bool { return h.Status().State == Synced })
	if st := h.Status(); st.ContactErr != nil || st.Since.Before(f.Contact().Since) {
		t.Fatalf("contact back: %+v", st)
	}
	f.Shutdown()
	noLeaks(t)
}

type probeStallResource struct {
	dynamic.NamespaceableResourceInterface
	stall func(context.Context)
}

func (r probeStallResource) Create(ctx context.Context, obj *unstructured.Unstructured, opts metav1.CreateOptions, sub ...string) (*unstructured.Unstructured, error) {
	r.stall(ctx)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return r.NamespaceableResourceInterface.Create(ctx, obj, opts, sub...)
}
