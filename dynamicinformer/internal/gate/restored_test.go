package gate

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/informerkit/informerkit/dynamicinformer/internal/listwatch"
	"github.com/informerkit/informerkit/dynamicinformer/internal/reflectorseam"
)

// A restored list answers the first list (after the gate opens) without
// the server; a watch-list request falls back to it; later lists go to
// the server.
func TestRestoredAnswersFirstList(t *testing.T) {
	leaks(t)
	f := newFixture(t, true, 0)
	var restoredAt string
	f.lw.Hooks.Restored = func(rv string) { restoredAt = rv }
	l := &unstructured.UnstructuredList{Object: map[string]interface{}{"apiVersion": "example.com/v1", "kind": "WidgetList"}}
	l.SetResourceVersion("7")
	l.Items = []unstructured.Unstructured{*widget("a", "5")}
	f.lw.SetRestored(l)
	if _, err := f.lw.WatchWithContext(context.Background(), metav1.ListOptions{SendInitialEvents: truePtr()}); !errors.Is(err, reflectorseam.ErrRestoredFallback) {
		t.Fatalf("watch-list: %v, want ErrRestoredFallback", err)
	}
	o, err := f.lw.ListWithContext(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rv, _ := listwatch.ListRV(o); rv != "7" || restoredAt != "7" || f.lw.Phase() != Serving {
		t.Fatalf("list at %q, hook %q, phase %v", rv, restoredAt, f.lw.Phase())
	}
	if lists, watches := f.inner.counts(); lists != 0 || watches != 0 {
		t.Fatalf("server asked: %d lists, %d watches", lists, watches)
	}
	if f.hooks.has("listStarted") {
		t.Fatalf("hooks %v: a restored list is not a list", f.hooks.snapshot())
	}
	// Once taken, the next list is the server's.
	o, err = f.lw.ListWithContext(context.Background(), metav1.ListOptions{})
	if rv, _ := listwatch.ListRV(o); err != nil || rv != "10" {
		t.Fatalf("second list at %q (%v), want the server's", rv, err)
	}
	w, err := f.lw.WatchWithContext(context.Background(), metav1.ListOptions{SendInitialEvents: truePtr()})
	if errors.Is(err, reflectorseam.ErrRestoredFallback) {
		t.Fatal("restored fallback after the restored list was taken")
	}
	if w != nil {
		w.Stop()
	}
}

// A list restored for a resource that is gone (SetRestoredGone) answers
// the first list even while the gate is closed; the watch that follows
// deletes each object of that list — whether the informer's cache holds
// them yet or not (its FIFO may not have been popped: here it is empty) —
// and the phase becomes Emptied, without a request to the server.
func TestRestoredGoneIsDeleted(t *testing.T) {
	leaks(t)
	f := newFixture(t, false, 0)
	f.cache.objs = nil
	var restoredAt string
	f.lw.Hooks.Restored = func(rv string) { restoredAt = rv }
	l := &unstructured.UnstructuredList{Object: map[string]interface{}{"apiVersion": "example.com/v1", "kind": "WidgetList"}}
	l.SetResourceVersion("7")
	l.Items = []unstructured.Unstructured{*widget("w1", "5")}
	f.lw.SetRestoredGone(l, "the CustomResourceDefinition was deleted")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	o, err := f.lw.ListWithContext(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rv, _ := listwatch.ListRV(o); rv != "7" || restoredAt != "7" {
		t.Fatalf("list at %q, hook %q; want the restored list", rv, restoredAt)
	}
	w, err := f.lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "7"})
	if err != nil {
		t.Fatal(err)
	}
	evs := drain(t, w, -1)
	if len(evs) != 2 || evs[0].Type != watch.Deleted || evs[1].Type != watch.Bookmark {
		t.Fatalf("events %v, want a delete and a bookmark", evs)
	}
	if f.lw.Phase() != Emptied || !f.hooks.has("emptied") {
		t.Fatalf("phase %v, hooks %v; want Emptied", f.lw.Phase(), f.hooks.snapshot())
	}
	if lists, watches := f.inner.counts(); lists != 0 || watches != 0 {
		t.Fatalf("server asked: %d lists, %d watches", lists, watches)
	}
}

// A list restored as stale (SetRestoredStale: stored during a list)
// answers the first list without the server, then the watch answers
// "expired" without asking the server, and the next list is the
// server's (a fresh one, which the reflector's Replace diffs against the
// restored objects).
func TestRestoredStaleRelists(t *testing.T) {
	leaks(t)
	f := newFixture(t, true, 0)
	l := &unstructured.UnstructuredList{Object: map[string]interface{}{"apiVersion": "example.com/v1", "kind": "WidgetList"}}
	l.SetResourceVersion("7")
	l.Items = []unstructured.Unstructured{*widget("a", "5")}
	f.lw.SetRestoredStale(l)
	o, err := f.lw.ListWithContext(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rv, _ := listwatch.ListRV(o); rv != "7" || f.lw.Phase() != Relisting {
		t.Fatalf("restored list at %q, phase %v; want 7, Relisting", rv, f.lw.Phase())
	}
	if _, err := f.lw.WatchWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "7"}); !reflectorseam.IsExpired(err) {
		t.Fatalf("watch from the stale list: %v, want expired", err)
	}
	if lists, watches := f.inner.counts(); lists != 0 || watches != 0 {
		t.Fatalf("server asked: %d lists, %d watches", lists, watches)
	}
	o, err = f.lw.ListWithContext(context.Background(), metav1.ListOptions{})
	if rv, _ := listwatch.ListRV(o); err != nil || rv != "10" || !f.hooks.has("listStarted") {
		t.Fatalf("next list at %q (%v), hooks %v; want the server's, a list started", rv, err, f.hooks.snapshot())
	}
	if lists, _ := f.inner.counts(); lists != 1 {
		t.Fatalf("server lists %d, want 1", lists)
	}
}
