package dynamicinformer

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"
)

// backoff is an access re-check back-off for Options.accessBackoff.
func backoff(lo, hi time.Duration) struct{ min, max time.Duration } {
	return struct{ min, max time.Duration }{lo, hi}
}

// rbac answers SelfSubjectAccessReviews of a fake dynamic client from a
// set of allowed "namespace/verb" pairs ("" namespace: all namespaces).
type rbac struct {
	mu      sync.Mutex // guards allowed, reviews, err
	allowed map[string]bool
	reviews int
	err     error
}

func (r *rbac) react(a clienttesting.Action) (bool, kruntime.Object, error) {
	u := a.(clienttesting.CreateAction).GetObject().(*unstructured.Unstructured)
	ns, _, _ := unstructured.NestedString(u.Object, "spec", "resourceAttributes", "namespace")
	verb, _, _ := unstructured.NestedString(u.Object, "spec", "resourceAttributes", "verb")
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reviews++
	if r.err != nil {
		return true, nil, r.err
	}
	out := u.DeepCopy()
	_ = unstructured.SetNestedField(out.Object, r.allowed[ns+"/"+verb], "status", "allowed")
	return true, out, nil
}

func (r *rbac) allow(keys ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range keys {
		r.allowed[k] = true
	}
}

// An informer whose user may list but not watch is Failed with
// ErrForbidden naming watch, sends no list, and syncs by itself once
// watch is granted; Shutdown leaves no goroutine.
func TestAccessCheckDeniedThenGranted(t *testing.T) {
	noLeaks := newGoroutinesCheck()
	client := fakeClient(widget("a", "w1", nil), widget("a", "w2", nil))
	r := &rbac{allowed: map[string]bool{"a/list": true}}
	client.PrependReactor("create", "selfsubjectaccessreviews", r.react)
	f := NewSharedInformerFactory(client, Options{DisableCRDTracking: true, accessBackoff: backoff(10*time.Millisecond, 40*time.Millisecond)})
	h := f.ForResource(widgets, WithNamespaces("a"), WithAccessCheck(true))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Start(ctx)
	waitFor(t, func() bool { return h.Status().State == Failed })
	st := h.Status()
	var ie *InformerError
	if !errors.Is(st.Err, ErrForbidden) || !errors.As(st.Err, &ie) {
		t.Fatalf("status error %v, want ErrForbidden", st.Err)
	}
	if want := "may not watch widgets.example.com in namespace a"; !strings.Contains(st.Err.Error(), want) || !strings.Contains(st.Reason, want) {
		t.Fatalf("status %q / %q, want it to say %q", st.Err, st.Reason, want)
	}
	// Re-checked on the back-off, and still nothing sent.
	waitFor(t, func() bool { r.mu.Lock(); defer r.mu.Unlock(); return r.reviews >= 8 })
	if n := countActions(client, "list", widgets, "") + countActions(client, "watch", widgets, ""); n != 0 {
		t.Fatalf("%d list/watch requests while access was denied, want 0", n)
	}
	if s := h.Status(); s.State != Failed {
		t.Fatalf("state %v after re-checks, want Failed", s.State)
	}
	r.allow("a/watch")
	waitFor(t, func() bool { return h.Status().State == Synced })
	if st := h.Status(); st.Err != nil || st.Objects != 2 {
		t.Fatalf("after the grant: %+v, want Synced with 2 objects and no error", st)
	}
	f.Shutdown()
	noLeaks(t)
}

// A review that cannot be made does not hold the informer: it lists as
// without the check.
func TestAccessCheckUnavailableProceeds(t *testing.T) {
	client := fakeClient(widget("a", "w1", nil))
	r := &rbac{allowed: map[string]bool{}, err: errors.New("the server could not find the requested resource")}
	client.PrependReactor("create", "selfsubjectaccessreviews", r.react)
	f := NewSharedInformerFactory(client, Options{Defaults: []ResourceOption{WithAccessCheck(true)}, DisableCRDTracking: true})
	h := f.ForResource(widgets)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Start(ctx)
	waitFor(t, func() bool { return h.Status().State == Synced })
	r.mu.Lock()
	reviews := r.reviews
	r.mu.Unlock()
	if reviews != 1 || h.Status().Objects != 1 {
		t.Fatalf("%d reviews, %d objects; want 1 review (failed) and the object listed", reviews, h.Status().Objects)
	}
	f.Shutdown()
}

// Without the option no review is made.
func TestAccessCheckOffByDefault(t *testing.T) {
	client := fakeClient(widget("a", "w1", nil))
	r := &rbac{allowed: map[string]bool{}}
	client.PrependReactor("create", "selfsubjectaccessreviews", r.react)
	f := NewSharedInformerFactory(client, Options{DisableCRDTracking: true})
	h := f.ForResource(widgets)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Start(ctx)
	waitFor(t, func() bool { return h.Status().State == Synced })
	if countActions(client, "create", schema.GroupVersionResource{Group: "authorization.k8s.io", Version: "v1", Resource: "selfsubjectaccessreviews"}, "") != 0 {
		t.Fatal("a review was made without WithAccessCheck")
	}
	f.Shutdown()
}

// Released while it waits for access: the informer stops (its re-checks
// end with it, no goroutine of their own) and asks nothing more.
func TestAccessCheckReleasedWhileDenied(t *testing.T) {
	noLeaks := newGoroutinesCheck()
	client := fakeClient(widget("a", "w1", nil))
	r := &rbac{allowed: map[string]bool{}}
	client.PrependReactor("create", "selfsubjectaccessreviews", r.react)
	f := NewSharedInformerFactory(client, Options{DisableCRDTracking: true, accessBackoff: backoff(5*time.Millisecond, 5*time.Millisecond)})
	h := f.ForResource(widgets, WithAccessCheck(true))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Start(ctx)
	waitFor(t, func() bool { r.mu.Lock(); defer r.mu.Unlock(); return r.reviews >= 6 })
	h.Release()
	waitFor(t, func() bool { return h.Status().State == Stopped })
	r.mu.Lock()
	after := r.reviews
	r.mu.Unlock()
	time.Sleep(100 * time.Millisecond)
	r.mu.Lock()
	later := r.reviews
	r.mu.Unlock()
	if later != after {
		t.Fatalf("%d reviews after the informer stopped, want none", later-after)
	}
	f.Shutdown()
	noLeaks(t)
}
