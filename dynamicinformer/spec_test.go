package dynamicinformer

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"

	ikcache "github.com/informerkit/informerkit/cache"
	"github.com/informerkit/informerkit/discoveryresolver"
	"github.com/informerkit/informerkit/internal/labelindex"
)

// Each merged option of the package documentation's table, on a second
// handle of a shared informer: the rule applies, nothing is dropped.

// TestRelistPeriodMergesToTheShortest: a second handle asking a running
// informer (that relists every hour, or never) for a relist every 50 ms
// gets it: the informer lists again and again. A longer period asked
// later changes nothing.
func TestRelistPeriodMergesToTheShortest(t *testing.T) {
	for _, first := range []time.Duration{0, time.Hour} {
		t.Run(first.String(), func(t *testing.T) {
			noLeaks := newGoroutinesCheck()
			client := fakeClient(widget("a", "w1", nil))
			f := NewSharedInformerFactory(client, Options{DisableCRDTracking: true})
			h1 := f.ForResource(widgets, WithRelistPeriod(first))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			f.Start(ctx)
			waitFor(t, func() bool { return h1.Status().State == Synced })
			lists := func() int { return countActions(client, "list", widgets, "") }
			time.Sleep(200 * time.Millisecond)
			if n := lists(); n != 1 {
				t.Fatalf("%d lists before the second handle, want 1", n)
			}
			h2 := f.ForResource(widgets, WithRelistPeriod(50*time.Millisecond))
			if h2.Informer().GetIndexer() != h1.Informer().GetIndexer() || h2.Status().Err != nil {
				t.Fatalf("second handle: shared %v, err %v", h2.Informer().GetIndexer() == h1.Informer().GetIndexer(), h2.Status().Err)
			}
			waitFor(t, func() bool { return lists() >= 3 })
			h3 := f.ForResource(widgets, WithRelistPeriod(2*time.Hour))
			if got := h3.e.relist.get(); got != 50*time.Millisecond {
				t.Fatalf("relist period %v after a longer one was asked, want 50ms", got)
			}
			if st := h1.Status(); st.State != Synced {
				t.Fatalf("status %+v", st)
			}
			f.Shutdown()
			noLeaks(t)
		})
	}
}

// TestAccessCheckOnIfAnyAsks: a second handle asking for the access check
// before the informer starts turns it on for the shared informer (a
// review is made before the first list); a handle asking after the start
// shares the informer and changes nothing (its first list was answered).
func TestAccessCheckOnIfAnyAsks(t *testing.T) {
	noLeaks := newGoroutinesCheck()
	client := fakeClient(widget("a", "w1", nil))
	r := &rbac{allowed: map[string]bool{"/list": true, "/watch": true}}
	client.PrependReactor("create", "selfsubjectaccessreviews", r.react)
	f := NewSharedInformerFactory(client, Options{DisableCRDTracking: true})
	h1 := f.ForResource(widgets)
	h2 := f.ForResource(widgets, WithAccessCheck(true))
	if h1.Informer().GetIndexer() != h2.Informer().GetIndexer() || !h1.e.cfg.accessCheck {
		t.Fatal("the access check asked by the second handle is not on")
	}
	plain := f.ForResource(widgets, WithSharingKey("plain"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Start(ctx)
	waitFor(t, func() bool { return h1.Status().State == Synced && plain.Status().State == Synced })
	r.mu.Lock()
	reviews := r.reviews
	r.mu.Unlock()
	if reviews != 2 { // list and watch, for h1's informer only
		t.Fatalf("%d reviews, want 2", reviews)
	}
	late := f.ForResource(widgets, WithSharingKey("plain"), WithAccessCheck(true))
	if late.Informer().GetIndexer() != plain.Informer().GetIndexer() || late.Status().State != Synced {
		t.Fatalf("late handle: %+v", late.Status())
	}
	f.Shutdown()
	noLeaks(t)
}

// TestIndexersAndAutoLabelIndexMerge: indexers are the union by name (a
// name the informer has keeps its function), and the on-demand label index
// is on for every informer.
func TestIndexersAndAutoLabelIndexMerge(t *testing.T) {
	f := NewSharedInformerFactory(fakeClient(), Options{DisableCRDTracking: true})
	defer f.Shutdown()
	first := func(interface{}) ([]string, error) { return []string{"first"}, nil }
	second := func(interface{}) ([]string, error) { return []string{"second"}, nil }
	h1 := f.ForResource(widgets, WithIndexers(toolscache.Indexers{"x": first}))
	idx := h1.Informer().GetIndexer()
	h2 := f.ForResource(widgets, WithIndexers(toolscache.Indexers{"x": second, "y": second}), WithLabelIndexKeys("app"))
	if h2.Informer().GetIndexer() != h1.Informer().GetIndexer() {
		t.Fatal("not shared")
	}
	for _, name := range []string{"x", "y", labelindex.AutoLabelKeyIndex, labelindex.LabelKeyIndexName("app")} {
		if !ikcache.HasIndex(idx, name) {
			t.Errorf("index %q missing after the second handle", name)
		}
	}
	if err := idx.Add(widget("a", "w", nil)); err != nil {
		t.Fatal(err)
	}
	if keys, _ := idx.IndexKeys("x", "first"); len(keys) != 1 {
		t.Error(`index "x" lost its first function`)
	}
}

// TestResyncPeriodPerHandle: each handle's handlers resync at its own
// period (client-go's minimum is 1 s): the first handle's every second, a
// second handle's (asking for none) never, a third's every 2 s; a handle asking for a shorter period than the informer
// checks at is Failed with ErrOptionConflict naming WithResyncPeriod, and
// the shared informer goes on.
func TestResyncPeriodPerHandle(t *testing.T) {
	noLeaks := newGoroutinesCheck()
	f := NewSharedInformerFactory(fakeClient(widget("a", "w1", nil)), Options{DisableCRDTracking: true})
	h1 := f.ForResource(widgets, WithResyncPeriod(time.Second))
	h2 := f.ForResource(widgets, WithResyncPeriod(0))
	h3 := f.ForResource(widgets, WithResyncPeriod(2*time.Second))
	bad := f.ForResource(widgets, WithResyncPeriod(500*time.Millisecond))
	if h2.Informer().GetIndexer() != h1.Informer().GetIndexer() || h3.Informer().GetIndexer() != h1.Informer().GetIndexer() || bad.Informer().GetIndexer() == h1.Informer().GetIndexer() {
		t.Fatal("sharing")
	}
	st := bad.Status()
	if st.State != Failed || !errors.Is(st.Err, ErrOptionConflict) || !strings.Contains(st.Err.Error(), "WithResyncPeriod") {
		t.Fatalf("conflicting handle: %+v", st)
	}
	bad.Release()
	var resyncs [3]atomic.Int64
	for i, h := range []*InformerHandle{h1, h2, h3} {
		if _, err := h.Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{UpdateFunc: func(_, _ interface{}) { resyncs[i].Add(1) }}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Start(ctx)
	waitFor(t, func() bool { return resyncs[0].Load() >= 4 })
	if n := resyncs[1].Load(); n != 0 {
		t.Errorf("handle without resync got %d", n)
	}
	if n, fast := resyncs[2].Load(), resyncs[0].Load(); n == 0 || n > fast/2+1 {
		t.Errorf("2 s handle resynced %d times against %d for the 1 s one", n, fast)
	}
	if st := h1.Status(); st.State != Synced {
		t.Errorf("shared informer: %+v", st)
	}
	f.Shutdown()
	noLeaks(t)
}

// TestOptionConflictFromForName: ForName returns ErrOptionConflict, and
// the shared informer keeps its handles.
func TestOptionConflictFromForName(t *testing.T) {
	d := newLockedDiscovery(widgetResources("widgets"))
	f := NewSharedInformerFactory(lcClient(), Options{Defaults: []ResourceOption{WithResyncPeriod(time.Minute)}, Resolver: discoveryresolver.New(d), DisableCRDTracking: true, Logger: quiet})
	defer f.Shutdown()
	ctx := context.Background()
	h, err := f.ForName(ctx, "widgets.v1.example.com")
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.ForName(ctx, "widgets.v1.example.com", WithResyncPeriod(time.Second))
	if !errors.Is(err, ErrOptionConflict) || !strings.Contains(err.Error(), "WithResyncPeriod") {
		t.Fatalf("ForName: %v, want ErrOptionConflict naming WithResyncPeriod", err)
	}
	if again, err := f.ForName(ctx, "widgets.v1.example.com", WithResyncPeriod(2*time.Minute)); err != nil || again.Informer().GetIndexer() != h.Informer().GetIndexer() {
		t.Fatalf("a longer period: %v", err)
	}
	if _, err := f.ForName(ctx, "widgets", WithProjection(Projection{Fields: "spec..x"})); !errors.Is(err, ErrInvalid) {
		t.Fatalf("invalid projection: %v", err)
	}
	if h.Status().Err != nil {
		t.Fatalf("shared informer: %+v", h.Status())
	}
	if st := f.ForResource(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"},
		WithProjection(Projection{Compact: true, MetadataOnly: true})).Status(); st.State != Failed || !errors.Is(st.Err, ErrInvalid) {
		t.Fatalf("invalid projection status: %+v", st)
	}
}
