package gate

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	toolscache "k8s.io/client-go/tools/cache"
)

// waitSeen polls cond for up to 20 s (client-go's reflector waits its
// backoff, 0.8–1.6 s, between a watch that ended early and the next),
// failing with what was awaited and what was seen.
func waitSeen(t *testing.T, what string, cond func() bool, seen func() string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 20*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("timed out waiting for %s; saw %s", what, seen())
	}
}

// The resource goes while a watch-list stream that restarted the
// reflector has delivered some of its initial events but not the bookmark
// that ends them. client-go's reflector keeps such a stream's events in a
// store of its own and drops them if the stream ends without that
// bookmark, so the removal's deletes must not be handed inside it: the
// cache would keep every object (found beside a CPU hog: Removed
// published with 5 objects cached and no delete delivered). Driven with
// client-go's real SharedIndexInformer.
func TestRemovalDuringWatchListInitialEventsEmptiesTheCache(t *testing.T) {
	leaks(t)
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, true)
	f := newFixture(t, true, 0)
	journal := &recLog{}
	f.lw.Journal = journal
	inf := toolscache.NewSharedIndexInformerWithOptions(f.lw, &unstructured.Unstructured{}, toolscache.SharedIndexInformerOptions{})
	f.lw.Cached = inf.GetStore().List
	var deletes atomic.Int64
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		DeleteFunc: func(interface{}) { deletes.Add(1) },
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); inf.RunWithContext(ctx) }()
	defer wg.Wait()
	defer cancel()

	requests := func() string {
		lists, watches := f.inner.counts()
		return fmt.Sprintf("lists %d, watches %d, hooks %v", lists, watches, f.hooks.snapshot())
	}
	// The first sync streams: w1, then the bookmark ending the initial
	// events.
	waitSeen(t, "the first watch-list request", func() bool { _, w := f.inner.counts(); return w == 1 }, requests)
	opts, server := f.inner.lastWatch()
	if opts.SendInitialEvents == nil || !*opts.SendInitialEvents {
		t.Fatalf("first request %+v, want a watch-list request", opts)
	}
	server.Add(widget("w1", "5"))
	server.Action(watch.Bookmark, endBookmark("10"))
	waitSeen(t, "w1 cached", func() bool { return inf.HasSynced() && len(inf.GetStore().List()) == 1 }, requests)

	// The stream ends (a cut connection): the reflector streams again,
	// and the new stream delivers w1 but not yet its bookmark.
	server.Stop()
	waitSeen(t, "the second watch-list request", func() bool { _, w := f.inner.counts(); return w == 2 }, requests)
	opts, server = f.inner.lastWatch()
	if opts.SendInitialEvents == nil || !*opts.SendInitialEvents {
		t.Fatalf("second request %+v, want a watch-list request", opts)
	}
	journal.take()
	server.Add(widget("w1", "5"))
	var calls []string
	waitSeen(t, "the reflector to take w1's initial event", func() bool {
		calls = append(calls, journal.take()...)
		return slices.Contains(calls, "taken ADDED:w1@5")
	}, requests)

	// The CRD is deleted.
	f.lw.SetServed(false, "CRD deleted", true)
	waitSeen(t, "the cache emptied, with one delete delivered", func() bool {
		return len(inf.GetStore().List()) == 0 && deletes.Load() == 1
	}, func() string {
		return fmt.Sprintf("cached %d, deletes %d, phase %v, %s", len(inf.GetStore().List()), deletes.Load(), f.lw.Phase(), requests())
	})
	if f.lw.Phase() != Emptied || !f.hooks.has("emptied") {
		t.Fatalf("phase %v, hooks %v; want Emptied, told emptied", f.lw.Phase(), f.hooks.snapshot())
	}
	// No request reached the server for the removal.
	if lists, watches := f.inner.counts(); lists != 0 || watches != 2 {
		t.Fatalf("server saw lists %d, watches %d after the removal; want 0, 2", lists, watches)
	}
}

// A list that waits in Emptied (the gate closed) answers an empty list
// when Sweep is asked: its Replace deletes objects the cache still holds.
func TestSweepAnswersWaitingListEmpty(t *testing.T) {
	leaks(t)
	f := newFixture(t, true, 0)
	w := listAndWatch(t, f.lw)
	f.lw.SetServed(false, "CRD deleted", true)
	drain(t, w, -1)
	if f.lw.Phase() != Emptied {
		t.Fatalf("phase %v after the removal, want Emptied", f.lw.Phase())
	}
	done := make(chan runtime.Object, 1)
	errc := make(chan error, 1)
	go func() {
		l, err := f.lw.ListWithContext(context.Background(), metav1.ListOptions{})
		errc <- err
		done <- l
	}()
	select {
	case <-errc:
		t.Fatal("the list returned while the gate is closed and no sweep was asked")
	case <-time.After(100 * time.Millisecond):
	}
	lists, _ := f.inner.counts()
	f.lw.Sweep()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting list did not answer the sweep")
	}
	l := (<-done).(*unstructured.UnstructuredList)
	if len(l.Items) != 0 || l.GetResourceVersion() != SyntheticRV {
		t.Fatalf("swept list: %d items at %q, want none at %q", len(l.Items), l.GetResourceVersion(), SyntheticRV)
	}
	if after, _ := f.inner.counts(); after != lists || f.lw.Phase() != Emptied {
		t.Fatalf("lists %d->%d, phase %v; want no request, still Emptied", lists, after, f.lw.Phase())
	}
}

func endBookmark(rv string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "example.com/v1", "kind": "Widget"}}
	u.SetResourceVersion(rv)
	u.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
	return u
}
