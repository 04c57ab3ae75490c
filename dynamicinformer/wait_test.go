package dynamicinformer

import (
	"context"
	"errors"
	"net"
	"net/url"
	"runtime"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
)

// Read-your-writes on a fake client: a write's resourceVersion (or the
// object itself) is waited for until the cache has it; a version the
// cache has not reached ends with the context; bad input and informers
// that cannot catch up get typed errors at once.
func TestWaitForResourceVersion(t *testing.T) {
	before := runtime.NumGoroutine()
	client := fakeClient(rvWidget("a", "w1", "10"))
	f := NewSharedInformerFactory(client, Options{DisableCRDTracking: true})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h := f.ForResource(widgets)
	multi := f.ForResource(widgets, WithNamespaces("a", "b"))
	f.Start(ctx)
	if !f.WaitForCacheSync(ctx)[widgets] {
		t.Fatal("not synced")
	}

	created, err := client.Resource(widgets).Namespace("a").Create(ctx, rvWidget("a", "w2", "20"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.WaitForResourceVersion(ctx, created.GetResourceVersion()); err != nil {
		t.Fatalf("WaitForResourceVersion(20): %v", err)
	}
	if _, err := h.Lister().ByNamespace("a").Get("w2"); err != nil {
		t.Fatalf("after the wait the lister lacks the write: %v", err)
	}
	updated := rvWidget("a", "w1", "30")
	updated.SetLabels(map[string]string{"v": "2"})
	if _, err := client.Resource(widgets).Namespace("a").Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := multi.WaitForObject(ctx, updated); err != nil {
		t.Fatalf("WaitForObject on a several-namespace informer: %v", err)
	}
	if o, err := multi.Lister().ByNamespace("a").Get("w1"); err != nil || o.(metav1.Object).GetLabels()["v"] != "2" {
		t.Fatalf("after the wait the lister has %v, %v; want the update", o, err)
	}

	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	if err := h.WaitForResourceVersion(short, "40"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting for a version nobody wrote: %v, want DeadlineExceeded", err)
	}
	for _, c := range []struct {
		h  *InformerHandle
		rv string
	}{{h, "abc"}, {h, "0"}, {h, ""}, {multi, "30"}} {
		if err := c.h.WaitForResourceVersion(ctx, c.rv); !errors.Is(err, ErrInvalid) {
			t.Errorf("WaitForResourceVersion(%q) (namespaces %v) = %v, want ErrInvalid", c.rv, c.h.e.cfg.namespaces, err)
		}
	}

	h.Release()
	if err := h.WaitForResourceVersion(ctx, "50"); !errors.Is(err, ErrStopped) {
		t.Fatalf("released informer: %v, want ErrStopped", err)
	}
	f.Shutdown()
	if err := multi.WaitForObject(ctx, rvWidget("a", "w9", "99")); !errors.Is(err, ErrStopped) {
		t.Fatalf("after shutdown: %v, want ErrStopped", err)
	}
	checkNoLeaks(t, before)
}

// A Failed informer ends the wait with its Status.Err (here ErrForbidden,
// with the server's 403).
func TestWaitForResourceVersionFailed(t *testing.T) {
	client := fakeClient()
	client.PrependReactor("list", "widgets", func(k8stesting.Action) (bool, kruntime.Object, error) {
		return true, nil, apierrors.NewForbidden(widgets.GroupResource(), "", errors.New("no access"))
	})
	f := NewSharedInformerFactory(client, Options{DisableCRDTracking: true})
	defer f.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h := f.ForResource(widgets)
	f.Start(ctx)
	err := h.WaitForResourceVersion(ctx, "10")
	var se *apierrors.StatusError
	if !errors.Is(err, ErrForbidden) || !errors.As(err, &se) || !apierrors.IsForbidden(se) {
		t.Fatalf("forbidden informer: %v, want ErrForbidden wrapping the server's 403", err)
	}
}

// A Stale informer (contact lost on a synced cache) answers a wait its
// cache has already reached, and keeps waiting — without failing — for a
// version it has not: here the write arrives while it is still Stale.
func TestWaitForResourceVersionStale(t *testing.T) {
	before := runtime.NumGoroutine()
	client := fakeClient(rvWidget("a", "w1", "10"))
	f := NewSharedInformerFactory(client, Options{DisableCRDTracking: true})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h := f.ForResource(widgets)
	f.Start(ctx)
	if !f.WaitForCacheSync(ctx)[widgets] {
		t.Fatal("not synced")
	}
	if _, err := client.Resource(widgets).Namespace("a").Create(ctx, rvWidget("a", "w2", "20"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := h.WaitForResourceVersion(ctx, "20"); err != nil {
		t.Fatalf("WaitForResourceVersion(20): %v", err)
	}

	// The informer's requests meet a refused connection.
	h.e.contact(&url.Error{Op: "Get", URL: "https://api.example:6443/apis/demo.example.com/v1/widgets?watch=true",
		Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}})
	st := h.Status()
	if st.State != Stale || st.Reason != "no contact with the API server: connection refused" || st.Err != nil || !errors.Is(st.ContactErr, ErrNoContact) {
		t.Fatalf("after contact lost: state %s, reason %q, err %v, ContactErr %v", st.State, st.Reason, st.Err, st.ContactErr)
	}
	if !h.Informer().HasSynced() {
		t.Fatal("HasSynced false while Stale")
	}
	if err := h.WaitForResourceVersion(ctx, "20"); err != nil {
		t.Fatalf("Stale, cache at 20: WaitForResourceVersion(20) = %v, want nil", err)
	}
	done := make(chan error, 1)
	go func() { done <- h.WaitForResourceVersion(ctx, "40") }()
	select {
	case err := <-done:
		t.Fatalf("Stale, cache at 20: WaitForResourceVersion(40) returned %v before the cache got there", err)
	case <-time.After(200 * time.Millisecond):
	}
	if _, err := client.Resource(widgets).Namespace("a").Create(ctx, rvWidget("a", "w4", "40"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("WaitForResourceVersion(40) once the cache has it: %v", err)
	}

	h.e.contact(nil)
	if st := h.Status(); st.State != Synced || st.Reason != "" || st.ContactErr != nil {
		t.Fatalf("after contact regained: state %s, reason %q, ContactErr %v", st.State, st.Reason, st.ContactErr)
	}
	f.Shutdown()
	checkNoLeaks(t, before)
}

// WaitForDeletion waits while the cache holds the deleted object (same
// UID), returns once the delete is in, and is not held by an object of the
// same name created again.
func TestWaitForDeletion(t *testing.T) {
	before := runtime.NumGoroutine()
	w1 := rvWidget("a", "w1", "10")
	w1.SetUID("uid-1")
	client := fakeClient(w1)
	f := NewSharedInformerFactory(client, Options{DisableCRDTracking: true})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h := f.ForResource(widgets)
	multi := f.ForResource(widgets, WithNamespaces("a", "b"))
	f.Start(ctx)
	if !f.WaitForCacheSync(ctx)[widgets] {
		t.Fatal("not synced")
	}
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	if err := h.WaitForDeletion(short, w1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting for the deletion of a cached object nobody deleted: %v, want DeadlineExceeded", err)
	}
	if err := client.Resource(widgets).Namespace("a").Delete(ctx, "w1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, x := range []*InformerHandle{h, multi} {
		if err := x.WaitForDeletion(ctx, w1); err != nil {
			t.Fatalf("WaitForDeletion (namespaces %v): %v", x.e.cfg.namespaces, err)
		}
		if _, err := x.Lister().ByNamespace("a").Get("w1"); !apierrors.IsNotFound(err) {
			t.Fatalf("after the wait (namespaces %v) the lister still has w1: %v", x.e.cfg.namespaces, err)
		}
	}
	// Created again under another UID: the old object's deletion is done.
	again := rvWidget("a", "w1", "20")
	again.SetUID("uid-2")
	if _, err := client.Resource(widgets).Namespace("a").Create(ctx, again, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := h.WaitForObject(ctx, again); err != nil {
		t.Fatal(err)
	}
	if err := h.WaitForDeletion(ctx, w1); err != nil {
		t.Fatalf("the old object's deletion after the name was used again: %v", err)
	}
	if err := h.WaitForDeletion(ctx, rvWidget("a", "w1", "x")); !errors.Is(err, ErrInvalid) {
		t.Fatalf("an incomparable resourceVersion: %v, want ErrInvalid", err)
	}
	h.Release()
	if err := h.WaitForDeletion(ctx, again); !errors.Is(err, ErrStopped) {
		t.Fatalf("released informer: %v, want ErrStopped", err)
	}
	f.Shutdown()
	checkNoLeaks(t, before)
}
