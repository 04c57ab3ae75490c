package crcachetest

import (
	"context"
	"errors"
	"github.com/informerkit/informerkit/test/controlplane"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/informerkit/informerkit/controllerruntime"
	"github.com/informerkit/informerkit/dynamicinformer"
)

// TestCRCancelledContextIsNotNotServed: a read or GetInformer whose ctx
// has already ended, for a kind the cache has not looked up yet (its
// discovery resolver has no snapshot: discovery must be asked), answers
// as controller-runtime's cache does — ErrCacheNotStarted before Start,
// a Timeout after — and does not record the served kind as not served:
// its informer is the resource's (not a not-served placeholder that
// says it has synced), and a read with a live ctx lists the objects.
// (Before: the cancelled lookup made the kind "not served": an informer
// with HasSynced true and no error, and reads answered a NotServedError,
// a NotFound that client.IgnoreNotFound swallows.)
func TestCRCancelledContextIsNotNotServed(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 2*time.Minute)
	ns := newNamespace(t, ctx)
	w := newWidgetCRD()
	w.install(t, ctx)
	w.create(t, ctx, ns, "a", nil)
	c, err := controllerruntime.NewCache(cp.Config(), crcache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()

	// Before Start: what controller-runtime answers, and nothing recorded.
	err = c.List(cancelled, w.ulist(), client.InNamespace(ns))
	if notStarted := (&crcache.ErrCacheNotStarted{}); !errors.As(err, &notStarted) {
		t.Fatalf("List before Start with a cancelled ctx = %v, want ErrCacheNotStarted (controller-runtime's answer)", err)
	}
	inf, err := c.GetInformer(ctx, w.u(), crcache.BlockUntilSynced(false))
	if err != nil {
		t.Fatal(err)
	}
	if st := inf.(*controllerruntime.Informer).Status(); errors.Is(st.Err, dynamicinformer.ErrNotServed) || st.GVR != w.gvr || inf.HasSynced() {
		t.Fatalf("after a cancelled lookup, the informer of a served kind: %s GVR %q err %v, HasSynced %v; want GVR %s, not ErrNotServed, not synced before Start", st.State, st.GVR, st.Err, inf.HasSynced(), w.gvr)
	}
	if err := c.RemoveInformer(ctx, w.u()); err != nil {
		t.Fatal(err)
	}

	runCache(t, ctx, c)
	err = c.List(cancelled, w.ulist(), client.InNamespace(ns))
	if !apierrors.IsTimeout(err) || apierrors.IsNotFound(err) {
		t.Fatalf("List with a cancelled ctx = %v (NotFound %v), want a Timeout (as controller-runtime's cache answers), not a NotFound", err, apierrors.IsNotFound(err))
	}
	inf, err = c.GetInformer(cancelled, w.u())
	if !apierrors.IsTimeout(err) || inf != nil {
		t.Fatalf("GetInformer with a cancelled ctx = %v, %v; want no informer and a Timeout", inf, err)
	}
	l := w.ulist()
	if err := c.List(ctx, l, client.InNamespace(ns)); err != nil {
		t.Fatalf("List with a live ctx after the cancelled ones: %v", err)
	}
	if len(l.Items) != 1 {
		t.Fatalf("List with a live ctx: %d objects, want 1", len(l.Items))
	}
}
