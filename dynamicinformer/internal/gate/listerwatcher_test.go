package gate

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/dynamicinformer/internal/listwatch"
	"github.com/informerkit/informerkit/dynamicinformer/internal/reflectorseam"
)

func TestPendingListBlocksUntilOpen(t *testing.T) {
	leaks(t)
	f := newFixture(t, false, 0)
	done := make(chan runtime.Object)
	go func() {
		o, _ := f.lw.ListWithContext(context.Background(), metav1.ListOptions{})
		done <- o
	}()
	select {
	case <-done:
		t.Fatal("List returned while the resource was never served")
	case <-time.After(100 * time.Millisecond):
	}
	if lists, _ := f.inner.counts(); f.hooks.last() != "waiting" || lists != 0 {
		t.Fatalf("hooks %v, lists %d", f.hooks.snapshot(), lists)
	}
	if f.lw.Phase() != Pending {
		t.Fatalf("phase %v", f.lw.Phase())
	}
	f.lw.SetServed(true, "", true)
	o := <-done
	if rv, _ := listwatch.ListRV(o); rv != "10" {
		t.Fatalf("got list rv %q, want the server's", rv)
	}
	if f.lw.Phase() != Serving || !slices.Equal(f.hooks.snapshot(), []string{"waiting", "listStarted", "listed"}) {
		t.Fatalf("phase %v hooks %v", f.lw.Phase(), f.hooks.snapshot())
	}
}

func TestPendingListHonoursContext(t *testing.T) {
	leaks(t)
	f := newFixture(t, false, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := f.lw.ListWithContext(ctx, metav1.ListOptions{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v", err)
	}
}

// Removal and return happen inside watch streams: the watch after the
// gate closed delivers a delete per cached object and a bookmark at the
// synthetic version; watches then wait without asking the server; when
// the gate opens, the waiting watch lists fresh, delivers an add per
// object and a bookmark at the list's version, then the server's events.
func TestRemovalAndReturnInStream(t *testing.T) {
	leaks(t)
	f := newFixture(t, true, 0)
	ctx := context.Background()
	w := listAndWatch(t, f.lw)
	w.Stop() // the reflector stops a watch it leaves
	drain(t, w, -1)
	lists, watches := f.inner.counts()
	f.lw.SetServed(false, "CRD deleted", true)
	w, err := f.lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "10"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := summary(drain(t, w, -1)), []string{"DELETED:w1@5", "BOOKMARK:@" + SyntheticRV}; !slices.Equal(got, want) {
		t.Fatalf("removal stream %v, want %v", got, want)
	}
	if f.hooks.last() != "emptied" || f.lw.Phase() != Emptied {
		t.Fatalf("hooks %v phase %v", f.hooks.snapshot(), f.lw.Phase())
	}
	// Watch-list requests fall back to list; plain watches wait quietly.
	if _, err := f.lw.WatchWithContext(ctx, metav1.ListOptions{SendInitialEvents: truePtr()}); !errors.Is(err, ErrNotServedFallback) {
		t.Fatalf("watch-list while removed: %v", err)
	}
	done := watchAsync(f.lw, metav1.ListOptions{ResourceVersion: SyntheticRV})
	notReturned(t, done, 100*time.Millisecond)
	if l, w := f.inner.counts(); l != lists || w != watches {
		t.Fatalf("requests reached the server while removed: lists %d->%d, watches %d->%d", lists, l, watches, w)
	}
	// The resource is back with another object.
	f.inner.set(func(s *stubLW) { s.items = append(s.items, widget("w2", "9")) })
	f.cache.set() // the removal emptied the cache
	f.lw.SetServed(true, "", true)
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got, want := summary(drain(t, r.w, 3)), []string{"ADDED:w1@5", "ADDED:w2@9", "BOOKMARK:@10"}; !slices.Equal(got, want) {
		t.Fatalf("return stream %v, want %v", got, want)
	}
	if o := f.inner.lastList(); o.ResourceVersion != "" {
		t.Fatalf("refill list sent rv %q", o.ResourceVersion)
	}
	if o, _ := f.inner.lastWatch(); o.ResourceVersion != "10" {
		t.Fatalf("refill watch from rv %q, want the list's", o.ResourceVersion)
	}
	if f.hooks.last() != "listed" || f.lw.Phase() != Serving {
		t.Fatalf("hooks %v phase %v", f.hooks.snapshot(), f.lw.Phase())
	}
	_, server := f.inner.lastWatch()
	server.Add(widget("w3", "11"))
	if got := summary(drain(t, r.w, 1)); !slices.Equal(got, []string{"ADDED:w3@11"}) {
		t.Fatalf("server event after refill: %v", got)
	}
	r.w.Stop()
	drain(t, r.w, -1)
}

// Issue 20, defect 1: a CRD that comes back after longer than the
// liveness bound must not skip the in-stream refill. The old relistWatch
// listed, then computed the watch's time left from the last sign of life
// before the removal (zero after a long one) and cancelled the watch at
// once, so the reflector backed off and listed again. Here the resource
// is gone for twice the idle bound; when it returns, the waiting watch
// delivers the adds and the bookmark, and then keeps forwarding the
// server's watch: no probe error, no expired event, no silence reported.
func TestReturnAfterLongerThanIdleBoundRefillsInStream(t *testing.T) {
	leaks(t)
	const idle = 400 * time.Millisecond
	f := newFixture(t, true, idle)
	w := listAndWatch(t, f.lw)
	f.lw.SetServed(false, "CRD deleted", true)
	if got := summary(drain(t, w, -1)); !slices.Equal(got, []string{"DELETED:w1@5", "BOOKMARK:@" + SyntheticRV}) {
		t.Fatalf("removal %v", got)
	}
	if f.lw.Phase() != Emptied {
		t.Fatalf("phase %v", f.lw.Phase())
	}
	f.cache.set()
	done := watchAsync(f.lw, metav1.ListOptions{ResourceVersion: SyntheticRV, AllowWatchBookmarks: true})
	time.Sleep(2 * idle) // longer than the bound, gate closed
	if f.lw.Server.ProbeDue() {
		t.Fatal("a removed resource was judged silent")
	}
	f.lw.SetServed(true, "", true)
	r := returned(t, done)
	if r.err != nil {
		t.Fatalf("refill after a long removal: %v, want the refill stream", r.err)
	}
	if got := summary(drain(t, r.w, 2)); !slices.Equal(got, []string{"ADDED:w1@5", "BOOKMARK:@10"}) {
		t.Fatalf("refill %v", got)
	}
	_, server := f.inner.lastWatch()
	time.Sleep(idle / 4)
	server.Add(widget("w2", "11"))
	if got := summary(drain(t, r.w, 1)); !slices.Equal(got, []string{"ADDED:w2@11"}) {
		t.Fatalf("after the refill the stream gave %v, want the server's event", got)
	}
	if server.IsStopped() || f.hooks.has("silent") {
		t.Fatalf("server watch stopped %v, hooks %v", server.IsStopped(), f.hooks.snapshot())
	}
	if lists, _ := f.inner.counts(); lists != 2 {
		t.Fatalf("%d lists, want the first and the refill's", lists)
	}
	r.w.Stop()
	drain(t, r.w, -1)
}

// A refill the reflector stops before its bookmark went out leaves a
// cache that may be incomplete: the next plain watch answers "expired"
// (Relisting) and the next list is fresh.
func TestInterruptedRefillRelists(t *testing.T) {
	leaks(t)
	f := newFixture(t, true, 0)
	ctx := context.Background()
	if _, err := f.lw.ListWithContext(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	f.lw.SetServed(false, "gone", true)
	w, _ := f.lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "10"})
	drain(t, w, -1)
	f.lw.SetServed(true, "", true)
	w, err := f.lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: SyntheticRV})
	if err != nil {
		t.Fatal(err)
	}
	w.Stop() // before the adds and the bookmark went out
	drain(t, w, -1)
	if f.lw.Phase() != Relisting {
		t.Fatalf("phase %v, want Relisting", f.lw.Phase())
	}
	if _, err := f.lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "10"}); !apierrors.IsResourceExpired(err) {
		t.Fatalf("watch after an interrupted refill: %v, want expired (relist)", err)
	}
	if _, err := f.lw.ListWithContext(ctx, metav1.ListOptions{ResourceVersion: "10"}); err != nil {
		t.Fatal(err)
	}
	if o := f.inner.lastList(); o.ResourceVersion != "" || f.lw.Phase() != Serving {
		t.Fatalf("relist sent rv %q, phase %v", o.ResourceVersion, f.lw.Phase())
	}
}

// A relist while the gate is closed (after a watch error, say) answers the
// synthetic empty list once, then waits; the list after the return is
// fresh.
func TestRelistWhileClosedAfterRemovalWaits(t *testing.T) {
	leaks(t)
	f := newFixture(t, true, 0)
	ctx := context.Background()
	if _, err := f.lw.ListWithContext(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	f.lw.SetServed(false, "gone", true)
	o, err := f.lw.ListWithContext(ctx, metav1.ListOptions{ResourceVersion: "10"})
	if err != nil {
		t.Fatal(err)
	}
	if l := o.(*unstructured.UnstructuredList); len(l.Items) != 0 || l.GetResourceVersion() != SyntheticRV {
		t.Fatalf("removed resource listed %d items at %q", len(l.Items), l.GetResourceVersion())
	}
	if lists, _ := f.inner.counts(); f.hooks.last() != "emptied" || lists != 1 || f.lw.Phase() != Emptied {
		t.Fatalf("hooks %v, lists %d, phase %v", f.hooks.snapshot(), lists, f.lw.Phase())
	}
	listed := make(chan error, 1)
	go func() {
		_, err := f.lw.ListWithContext(ctx, metav1.ListOptions{ResourceVersion: SyntheticRV})
		listed <- err
	}()
	select {
	case err := <-listed:
		t.Fatalf("list returned (%v) while removed", err)
	case <-time.After(100 * time.Millisecond):
	}
	if f.hooks.last() == "waiting" {
		t.Fatal("an emptied informer reported Waiting (only never-listed ones do)")
	}
	f.lw.SetServed(true, "", true)
	if err := <-listed; err != nil {
		t.Fatal(err)
	}
	if o := f.inner.lastList(); o.ResourceVersion != "" {
		t.Fatalf("synthetic resourceVersion %q sent to the server", o.ResourceVersion)
	}
}

// A 404 answer closes the gate (not authoritatively) and tells the hook;
// the list then waits for the gate instead of retrying the server.
func TestListNotFoundClosesGate(t *testing.T) {
	leaks(t)
	f := newFixture(t, true, 0)
	f.inner.set(func(s *stubLW) { s.listErr = notFound() })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := f.lw.ListWithContext(ctx, metav1.ListOptions{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v", err)
	}
	if lists, _ := f.inner.counts(); lists != 1 {
		t.Fatalf("a 404 led to %d lists, want 1 then waiting", lists)
	}
	open, reason, _ := f.lw.Gate.State()
	if open || reason != NotFoundReason || !f.hooks.has("notFound") {
		t.Fatalf("gate open %v reason %q hooks %v", open, reason, f.hooks.snapshot())
	}
	// An authoritative reason replaces the 404's; a later 404 does not
	// replace an authoritative one.
	f.lw.SetServed(false, "CRD deleted", true)
	f.lw.SetServed(false, NotFoundReason, false)
	if _, reason, _ := f.lw.Gate.State(); reason != "CRD deleted" {
		t.Fatalf("reason %q", reason)
	}
}

// Other list errors go to the reflector.
func TestListError(t *testing.T) {
	f := newFixture(t, true, 0)
	boom := apierrors.NewForbidden(widgets.GroupResource(), "", errors.New("no"))
	f.inner.set(func(s *stubLW) { s.listErr = boom })
	if _, err := f.lw.List(metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("err %v", err)
	}
	if f.lw.Phase() != Pending {
		t.Fatalf("phase %v after a failed list", f.lw.Phase())
	}
	// A later page goes to the server as it is, whatever the gate says.
	f.inner.set(func(s *stubLW) { s.listErr = nil })
	f.lw.SetServed(false, "x", true)
	if _, err := f.lw.ListWithContext(context.Background(), metav1.ListOptions{Continue: "c", Limit: 5}); err != nil {
		t.Fatal(err)
	}
	if o := f.inner.lastList(); o.Continue != "c" || o.Limit != 5 {
		t.Fatalf("page sent %+v", o)
	}
}

// The gate closing while a stream is open finishes that stream with the
// removal; the next watch waits for the resource (no second removal).
func TestClosingFinishesTheOpenStream(t *testing.T) {
	leaks(t)
	f := newFixture(t, true, 0)
	w := listAndWatch(t, f.lw)
	_, server := f.inner.lastWatch()
	server.Add(widget("w1", "12"))
	if got := summary(drain(t, w, 1)); !slices.Equal(got, []string{"ADDED:w1@12"}) {
		t.Fatalf("server event %v", got)
	}
	f.lw.SetServed(false, "CRD deleted", true)
	if got, want := summary(drain(t, w, -1)), []string{"DELETED:w1@5", "BOOKMARK:@" + SyntheticRV}; !slices.Equal(got, want) {
		t.Fatalf("finished stream %v, want %v", got, want)
	}
	if _, watches := f.inner.counts(); f.hooks.last() != "emptied" || watches != 1 || !server.IsStopped() {
		t.Fatalf("hooks %v, watches %d, server stopped %v", f.hooks.snapshot(), watches, server.IsStopped())
	}
	done := watchAsync(f.lw, metav1.ListOptions{ResourceVersion: SyntheticRV})
	notReturned(t, done, 100*time.Millisecond)
	f.lw.SetServed(true, "", true)
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	r.w.Stop()
	drain(t, r.w, -1)
}

// A removal stream the reflector stops before it was read leaves the
// phase as it was: the next watch delivers the removal again.
func TestStoppedRemovalStartsOver(t *testing.T) {
	leaks(t)
	f := newFixture(t, true, 0)
	if _, err := f.lw.ListWithContext(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	f.lw.SetServed(false, "gone", true)
	w, err := f.lw.WatchWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "10"})
	if err != nil {
		t.Fatal(err)
	}
	w.Stop()
	// Nobody reads while the stream sees the stop; a drain right away
	// could read the removal (the stream picks at random between a ready
	// stop and a ready reader), and a read removal is delivered.
	time.Sleep(200 * time.Millisecond)
	drain(t, w, -1)
	if f.lw.Phase() != Serving || f.hooks.has("emptied") {
		t.Fatalf("phase %v hooks %v after an unread removal", f.lw.Phase(), f.hooks.snapshot())
	}
	w, err = f.lw.WatchWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "10"})
	if err != nil {
		t.Fatal(err)
	}
	if got := summary(drain(t, w, -1)); len(got) != 2 || f.lw.Phase() != Emptied {
		t.Fatalf("second removal %v phase %v", got, f.lw.Phase())
	}
}

// Relist (the informer follows another version) ends the open stream with
// "expired"; the next list is fresh. Outside Serving it does nothing.
func TestRelistEndsStreamExpired(t *testing.T) {
	leaks(t)
	f := newFixture(t, true, 0)
	ctx := context.Background()
	f.lw.Relist()
	if f.lw.Phase() != Pending {
		t.Fatalf("Relist before any list moved to %v", f.lw.Phase())
	}
	w := listAndWatch(t, f.lw)
	f.lw.Relist()
	evs := drain(t, w, -1)
	if len(evs) != 1 || evs[0].Type != watch.Error || !apierrors.IsResourceExpired(apierrors.FromObject(evs[0].Object)) {
		t.Fatalf("relist ended the stream with %v, want one expired error", summary(evs))
	}
	if f.lw.Phase() != Relisting {
		t.Fatalf("phase %v", f.lw.Phase())
	}
	// A watch-list request in Relisting falls back to a list: a relist is
	// a real LIST, fresh.
	if _, err := f.lw.WatchWithContext(ctx, metav1.ListOptions{SendInitialEvents: truePtr()}); !errors.Is(err, ErrRelistFallback) {
		t.Fatalf("watch-list while relisting: %v, want ErrRelistFallback", err)
	}
	o, err := f.lw.ListWithContext(ctx, metav1.ListOptions{ResourceVersion: "10"})
	if err != nil || o == nil || f.inner.lastList().ResourceVersion != "" {
		t.Fatalf("relist: %v, resourceVersion %q sent (want a fresh list)", err, f.inner.lastList().ResourceVersion)
	}
}

// A Relist asked while a list is in flight (a shard switch during the
// list) is not lost: that list may predate it, so the watch after it
// answers "expired" and the reflector lists again.
func TestRelistDuringListIsKept(t *testing.T) {
	leaks(t)
	f := newFixture(t, true, 0)
	ctx := context.Background()
	if _, err := f.lw.ListWithContext(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	f.inner.set(func(s *stubLW) { s.onList = f.lw.Relist })
	if _, err := f.lw.ListWithContext(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if f.lw.Phase() != Relisting {
		t.Fatalf("phase after a list that a Relist overtook: %v, want Relisting", f.lw.Phase())
	}
	if _, err := f.lw.WatchWithContext(ctx, metav1.ListOptions{}); !apierrors.IsResourceExpired(err) {
		t.Fatalf("watch after it: %v, want expired", err)
	}
	f.inner.set(func(s *stubLW) { s.onList = nil })
	if _, err := f.lw.ListWithContext(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if f.lw.Phase() != Serving {
		t.Fatalf("phase after the next list: %v, want Serving", f.lw.Phase())
	}
}

// Relisting with the gate closed: the next list empties the cache.
func TestRelistingThenClosedEmpties(t *testing.T) {
	f := newFixture(t, true, 0)
	if _, err := f.lw.ListWithContext(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	f.lw.Relist()
	f.lw.SetServed(false, "gone", true)
	o, err := f.lw.ListWithContext(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rv, _ := listwatch.ListRV(o); rv != SyntheticRV || f.lw.Phase() != Emptied {
		t.Fatalf("rv %q phase %v", rv, f.lw.Phase())
	}
}

// The first sync of a never-served resource streams (a watch-list
// request) once the gate opens: it does not fall back to a LIST.
func TestPendingWatchListWaitsThenStreams(t *testing.T) {
	leaks(t)
	f := newFixture(t, false, 0)
	done := watchAsync(f.lw, metav1.ListOptions{SendInitialEvents: truePtr()})
	notReturned(t, done, 100*time.Millisecond)
	if _, watches := f.inner.counts(); f.hooks.last() != "waiting" || watches != 0 {
		t.Fatalf("hooks %v, watches %d", f.hooks.snapshot(), watches)
	}
	f.lw.SetServed(true, "", true)
	r := <-done
	lists, watches := f.inner.counts()
	if r.err != nil || watches != 1 || lists != 0 {
		t.Fatalf("err %v, watches %d, lists %d", r.err, watches, lists)
	}
	f.hooks.mu.Lock()
	listed := slices.Clone(f.hooks.listed)
	f.hooks.mu.Unlock()
	if f.lw.Phase() != Serving || !slices.Equal(listed, []string{""}) {
		t.Fatalf("phase %v listed %q", f.lw.Phase(), listed)
	}
	r.w.Stop()
	drain(t, r.w, -1)
}

// A 404 on a watch of a served resource: the gate closes and the watch is
// the removal stream; a watch-list request gets the error.
func TestWatchNotFound(t *testing.T) {
	leaks(t)
	f := newFixture(t, true, 0)
	if _, err := f.lw.ListWithContext(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	f.inner.set(func(s *stubLW) { s.watchErr = notFound() })
	w, err := f.lw.WatchWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "10"})
	if err != nil {
		t.Fatalf("watch 404 while serving: %v, want the removal stream", err)
	}
	if got := summary(drain(t, w, -1)); !slices.Equal(got, []string{"DELETED:w1@5", "BOOKMARK:@" + SyntheticRV}) {
		t.Fatalf("removal %v", got)
	}
	if open, reason, _ := f.lw.Gate.State(); open || reason != NotFoundReason || !f.hooks.has("notFound") {
		t.Fatalf("gate %v %q hooks %v", open, reason, f.hooks.snapshot())
	}

	g := newFixture(t, true, 0)
	g.inner.set(func(s *stubLW) { s.watchErr = notFound() })
	if _, err := g.lw.WatchWithContext(context.Background(), metav1.ListOptions{SendInitialEvents: truePtr()}); !apierrors.IsNotFound(err) {
		t.Fatalf("watch-list 404: %v", err)
	}
	// Other watch errors go to the reflector.
	h := newFixture(t, true, 0)
	h.inner.set(func(s *stubLW) { s.watchErr = apierrors.NewInternalError(errors.New("x")) })
	if _, err := h.lw.Watch(metav1.ListOptions{}); !apierrors.IsInternalError(err) {
		t.Fatalf("watch err %v", err)
	}
}

// A CRD is announced Established a moment before its handler serves it:
// the refill's 404 closes the gate and the same watch waits for the
// re-check instead of going back to the reflector's backoff.
func TestRefillNotFoundWaitsInStream(t *testing.T) {
	leaks(t)
	f := newFixture(t, true, 0)
	w := listAndWatch(t, f.lw)
	f.lw.SetServed(false, "gone", true)
	drain(t, w, -1)
	f.inner.set(func(s *stubLW) { s.listErr = notFound() })
	done := watchAsync(f.lw, metav1.ListOptions{ResourceVersion: SyntheticRV})
	f.lw.SetServed(true, "", true)
	// The refill meets the 404 and waits again.
	deadline := time.Now().Add(5 * time.Second)
	for !f.hooks.has("notFound") && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	notReturned(t, done, 100*time.Millisecond)
	if open, _, _ := f.lw.Gate.State(); open {
		t.Fatal("gate open after the refill's 404")
	}
	f.inner.set(func(s *stubLW) { s.listErr = nil })
	f.lw.SetServed(true, "", true)
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := summary(drain(t, r.w, 2)); !slices.Equal(got, []string{"ADDED:w1@5", "BOOKMARK:@10"}) {
		t.Fatalf("refill %v", got)
	}
	r.w.Stop()
	drain(t, r.w, -1)

	// A refill whose watch fails returns the error; a 404 there closes the gate.
	g := newFixture(t, true, 0)
	w = listAndWatch(t, g.lw)
	g.lw.SetServed(false, "gone", true)
	drain(t, w, -1)
	g.inner.set(func(s *stubLW) { s.watchErr = apierrors.NewInternalError(errors.New("x")) })
	g.lw.SetServed(true, "", true)
	if _, err := g.lw.WatchWithContext(context.Background(), metav1.ListOptions{ResourceVersion: SyntheticRV}); !apierrors.IsInternalError(err) {
		t.Fatalf("refill watch error: %v", err)
	}
	g.inner.set(func(s *stubLW) { s.watchErr = notFound() })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := g.lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: SyntheticRV}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("refill watch 404: %v, want waiting until the context ends", err)
	}
	if open, reason, _ := g.lw.Gate.State(); open || reason != NotFoundReason {
		t.Fatalf("gate %v %q", open, reason)
	}
}

// A refill delivers a delete for a cached object the list does not have
// (an add that was in flight during the removal).
func TestRefillDeletesStaleCachedObjects(t *testing.T) {
	leaks(t)
	f := newFixture(t, true, 0)
	w := listAndWatch(t, f.lw)
	f.lw.SetServed(false, "gone", true)
	drain(t, w, -1)
	f.cache.set(widget("w0", "3"), "not an object") // left over
	f.lw.SetServed(true, "", true)
	w, err := f.lw.WatchWithContext(context.Background(), metav1.ListOptions{ResourceVersion: SyntheticRV})
	if err != nil {
		t.Fatal(err)
	}
	if got := summary(drain(t, w, 3)); !slices.Equal(got, []string{"ADDED:w1@5", "DELETED:w0@3", "BOOKMARK:@10"}) {
		t.Fatalf("refill %v", got)
	}
	w.Stop()
	drain(t, w, -1)
}

// A watch that meets a closed gate in Emptied with a cancelled context
// returns the context's error; a watch in Relisting whose gate reopened
// but that is no longer Emptied tells the reflector to list.
func TestWatchWaitingEndsWithContext(t *testing.T) {
	leaks(t)
	f := newFixture(t, false, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if _, err := f.lw.WatchWithContext(ctx, metav1.ListOptions{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v", err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel2()
	if _, err := f.lw.WatchWithContext(ctx2, metav1.ListOptions{SendInitialEvents: truePtr()}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("watch-list err %v", err)
	}
	// Pending, gate open, plain watch of a never-listed informer: the
	// waiting loop sees a phase other than Emptied and asks for a list.
	g := newFixture(t, false, 0)
	done := watchAsync(g.lw, metav1.ListOptions{})
	notReturned(t, done, 50*time.Millisecond)
	g.lw.SetServed(true, "", true)
	if r := <-done; !apierrors.IsResourceExpired(r.err) {
		t.Fatalf("err %v, want expired (list first)", r.err)
	}
}

// If the gate closes while the watch request is in flight, the stream
// delivers the removal at once.
func TestGateClosedDuringWatchRequest(t *testing.T) {
	leaks(t)
	f := newFixture(t, true, 0)
	if _, err := f.lw.ListWithContext(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	f.inner.set(func(s *stubLW) { s.onWatch = func() { f.lw.SetServed(false, "gone meanwhile", true) } })
	w, err := f.lw.WatchWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "10"})
	if err != nil {
		t.Fatal(err)
	}
	if got := summary(drain(t, w, -1)); !slices.Equal(got, []string{"DELETED:w1@5", "BOOKMARK:@" + SyntheticRV}) {
		t.Fatalf("stream %v, want the removal", got)
	}
	if f.lw.Phase() != Emptied {
		t.Fatalf("phase %v", f.lw.Phase())
	}
}

// The liveness layer sits below the gate: a due probe makes the gate's
// plain watch answer "expired" (the reflector lists, through the probe).
func TestProbeBelowGate(t *testing.T) {
	leaks(t)
	f := newFixture(t, true, 30*time.Millisecond)
	if _, err := f.lw.ListWithContext(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(60 * time.Millisecond)
	if _, err := f.lw.WatchWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "10"}); !apierrors.IsResourceExpired(err) {
		t.Fatalf("watch with a probe due: %v", err)
	}
	if _, err := f.lw.ListWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "10"}); err != nil {
		t.Fatal(err)
	}
	if o := f.inner.lastList(); o.Limit != listwatch.ProbePageSize || o.ResourceVersion != "" {
		t.Fatalf("list after silence %+v, want a probe", o)
	}
}

func TestMisc(t *testing.T) {
	for p, want := range map[Phase]string{Pending: "Pending", Serving: "Serving", Emptied: "Emptied", Relisting: "Relisting"} {
		if p.String() != want {
			t.Fatalf("%d: %q", p, p.String())
		}
	}
	f := newFixture(t, true, 0)
	if f.lw.IsWatchListSemanticsUnSupported() {
		t.Fatal("NoWatchList false reported as unsupported")
	}
	f.lw.NoWatchList = true
	if !f.lw.IsWatchListSemanticsUnSupported() {
		t.Fatal("NoWatchList not reported")
	}
}

// A watch-list stream answered 429 (an API server's watch cache still
// initializing: the first request for a custom resource after its CRD was
// created) falls back to a plain list at once, which the server serves;
// client-go's reflector would otherwise retry the stream after its
// back-off (about 1 s) — every empty custom resource listed a second
// late. The slot of the first list is not held by the refused stream.
func TestWatchListRefused429FallsBackToList(t *testing.T) {
	leaks(t)
	f := newFixture(t, true, 0)
	f.lw.InitialLists = NewSlots(1)
	ctx := context.Background()
	f.inner.set(func(s *stubLW) {
		s.watchErr = apierrors.NewTooManyRequests("storage is (re)initializing", 1)
	})
	_, err := f.lw.WatchWithContext(ctx, metav1.ListOptions{SendInitialEvents: truePtr(), AllowWatchBookmarks: true})
	if !errors.Is(err, ErrNotReadyFallback) || !reflectorseam.IsWatchListFallback(err) {
		t.Fatalf("watch-list answered 429: %v, want the fallback to list", err)
	}
	if !f.lw.InitialLists.TryAcquire() {
		t.Fatal("the refused stream still holds the initial-list slot")
	}
	f.lw.InitialLists.Release()
	if _, err := f.lw.ListWithContext(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("the fallback list: %v", err)
	}
	if f.lw.Phase() != Serving {
		t.Fatalf("phase %v after the fallback list, want Serving", f.lw.Phase())
	}
	// Other errors of a stream are the reflector's to handle, as before.
	f.inner.set(func(s *stubLW) { s.watchErr = apierrors.NewInternalError(errors.New("boom")) })
	if _, err := f.lw.WatchWithContext(ctx, metav1.ListOptions{SendInitialEvents: truePtr()}); reflectorseam.IsWatchListFallback(err) || !apierrors.IsInternalError(err) {
		t.Fatalf("watch-list answered 500: %v, want the server's error", err)
	}
}

// The informer's queue lags the streams: a delete the server sent may not
// be in the cache yet when the gate closes, nor the removal's deletes
// when the resource returns. Neither the removal nor the refill hands
// the reflector a second delete for such a key (a handler would be told
// of the delete of an object it no longer holds); a key handed again
// after its delete is deleted again.
func TestRemovalAndRefillSkipQueuedDeletes(t *testing.T) {
	leaks(t)
	f := newFixture(t, true, 0)
	f.cache.set(widget("w1", "5"), widget("w2", "6"))
	f.lw.CachedByKey = f.cachedByKey
	w := listAndWatch(t, f.lw)
	_, server := f.inner.lastWatch()
	server.Delete(widget("w2", "7"))
	if got := summary(drain(t, w, 1)); !slices.Equal(got, []string{"DELETED:w2@7"}) {
		t.Fatalf("server's delete: %v", got)
	}
	waitDeleteQueued(t, f.lw, "a/w2")
	// The cache still holds w2 (its delete is queued) when the gate closes.
	f.lw.SetServed(false, "CRD deleted", true)
	if got, want := summary(drain(t, w, -1)), []string{"DELETED:w1@5", "BOOKMARK:@" + SyntheticRV}; !slices.Equal(got, want) {
		t.Fatalf("removal %v, want %v (no second delete of w2)", got, want)
	}
	// Back with w3, the cache still holding w1 and w2 (nothing taken in).
	f.inner.set(func(s *stubLW) { s.items = []*unstructured.Unstructured{widget("w3", "9")} })
	f.lw.SetServed(true, "", true)
	w, err := f.lw.WatchWithContext(context.Background(), metav1.ListOptions{ResourceVersion: SyntheticRV})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := summary(drain(t, w, 2)), []string{"ADDED:w3@9", "BOOKMARK:@10"}; !slices.Equal(got, want) {
		t.Fatalf("refill %v, want %v (the deletes of w1 and w2 are on the way)", got, want)
	}
	// w3 deleted by the server, then handed again (created anew) and the
	// gate closes with w3 cached: the removal deletes it.
	_, server = f.inner.lastWatch()
	server.Delete(widget("w3", "11"))
	server.Add(widget("w3", "12"))
	drain(t, w, 2)
	f.cache.set(widget("w3", "12"))
	f.lw.SetServed(false, "CRD deleted", true)
	if got, want := summary(drain(t, w, -1)), []string{"DELETED:w3@12", "BOOKMARK:@" + SyntheticRV}; !slices.Equal(got, want) {
		t.Fatalf("second removal %v, want %v", got, want)
	}
}

// TestQueuedDeleteForgottenWhenListed: a key whose delete was handed to
// the reflector and then listed again — created anew and brought back by
// a relist, whose Replace puts it in the cache without any watch event
// the gate sees — is deleted by the next removal. (It used to count as
// "delete on the way" for ever: the object stayed cached after its
// resource was removed and after it came back; the soak saw it as extra
// objects after a CRD was deleted and re-created.)
func TestQueuedDeleteForgottenWhenListed(t *testing.T) {
	leaks(t)
	f := newFixture(t, true, 0)
	f.cache.set(widget("w1", "5"), widget("w2", "6"))
	f.lw.CachedByKey = f.cachedByKey
	f.inner.set(func(s *stubLW) { s.items = []*unstructured.Unstructured{widget("w1", "5"), widget("w2", "6")} })
	w := listAndWatch(t, f.lw)
	_, server := f.inner.lastWatch()
	server.Delete(widget("w2", "7"))
	if got := summary(drain(t, w, 1)); !slices.Equal(got, []string{"DELETED:w2@7"}) {
		t.Fatalf("server's delete: %v", got)
	}
	waitDeleteQueued(t, f.lw, "a/w2")
	f.cache.set(widget("w1", "5")) // taken in
	w.Stop()
	// w2 is created again; the watch ends and the reflector relists:
	// the list brings w2 back, its Replace puts it in the cache.
	f.inner.set(func(s *stubLW) { s.items = []*unstructured.Unstructured{widget("w1", "5"), widget("w2", "8")} })
	w = listAndWatch(t, f.lw)
	defer w.Stop()
	f.cache.set(widget("w1", "5"), widget("w2", "8"))
	f.lw.SetServed(false, "CRD deleted", true)
	got := summary(drain(t, w, -1))
	slices.Sort(got)
	if want := []string{"BOOKMARK:@" + SyntheticRV, "DELETED:w1@5", "DELETED:w2@8"}; !slices.Equal(got, want) {
		t.Fatalf("removal %v, want %v (w2 listed after its delete is cached: it is deleted too)", got, want)
	}
}

// cachedByKey is CachedByKey over the fixture's cache.
func (f *fixture) cachedByKey(key string) (interface{}, bool) {
	for _, o := range f.cache.list() {
		if k, _ := toolscache.MetaNamespaceKeyFunc(o); k == key {
			return o, true
		}
	}
	return nil, false
}

// waitDeleteQueued waits until the delete of key a reader took is
// recorded as queued (the stream records it just after the reader took it).
func waitDeleteQueued(t *testing.T, lw *ListerWatcher, key string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !lw.deleteQueued(key); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the delete of %s was never recorded as queued", key)
		}
	}
}

// TestSweepDeletesAddsTakenInAfterTheRemoval: the removal's deletes are
// taken from the cache; an add the reflector had queued but the cache had
// not taken in (w2 here) reaches the cache after them. Sweep makes the
// watch waiting for the resource's return hand a delete for it — and none
// for w1, whose delete is on the way — and then wait again. (Under load,
// an informer published Removed with such objects cached: the removal's
// grace ran out with the cache never emptying.)
func TestSweepDeletesAddsTakenInAfterTheRemoval(t *testing.T) {
	leaks(t)
	f := newFixture(t, true, 0)
	f.lw.CachedByKey = f.cachedByKey
	w := listAndWatch(t, f.lw)
	_, server := f.inner.lastWatch()
	server.Add(widget("w2", "7"))
	if got := summary(drain(t, w, 1)); !slices.Equal(got, []string{"ADDED:w2@7"}) {
		t.Fatalf("server's add: %v", got)
	}
	// The gate closes with w2's add still queued: the cache holds w1 only.
	f.lw.SetServed(false, "CRD deleted", true)
	if got, want := summary(drain(t, w, -1)), []string{"DELETED:w1@5", "BOOKMARK:@" + SyntheticRV}; !slices.Equal(got, want) {
		t.Fatalf("removal %v, want %v", got, want)
	}
	waitDeleteQueued(t, f.lw, "a/w1")
	done := watchAsync(f.lw, metav1.ListOptions{ResourceVersion: SyntheticRV})
	notReturned(t, done, 100*time.Millisecond)
	// w2's add is taken in; w1's delete is not yet.
	f.cache.set(widget("w1", "5"), widget("w2", "7"))
	f.lw.Sweep()
	r := returned(t, done)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got, want := summary(drain(t, r.w, -1)), []string{"DELETED:w2@7", "BOOKMARK:@" + SyntheticRV}; !slices.Equal(got, want) {
		t.Fatalf("sweep %v, want %v (no second delete of w1)", got, want)
	}
	if f.lw.Phase() != Emptied {
		t.Fatalf("phase %v after the sweep, want Emptied", f.lw.Phase())
	}
	// The next watch waits again and does not reach the server.
	lists, watches := f.inner.counts()
	done = watchAsync(f.lw, metav1.ListOptions{ResourceVersion: SyntheticRV})
	notReturned(t, done, 100*time.Millisecond)
	if l, w := f.inner.counts(); l != lists || w != watches {
		t.Fatalf("requests reached the server after the sweep: lists %d->%d, watches %d->%d", lists, l, watches, w)
	}
	// The resource returns: the waiting watch refills as before.
	f.cache.set()
	f.lw.SetServed(true, "", true)
	r = returned(t, done)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := summary(drain(t, r.w, 2)); !slices.Equal(got, []string{"ADDED:w1@5", "BOOKMARK:@10"}) {
		t.Fatalf("refill %v", got)
	}
	r.w.Stop()
	drain(t, r.w, -1)
}
