package factorytest

import (
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/test/controlplane"
)

// requestCounter counts the list and watch requests for the ConfigMaps of
// one namespace, at the transport.
type requestCounter struct {
	path string

	mu             sync.Mutex // guards lists, watches
	lists, watches int
}

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, c.path) {
			c.mu.Lock()
			if req.URL.Query().Get("watch") == "true" {
				c.watches++
			} else {
				c.lists++
			}
			c.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

func (c *requestCounter) counts() (lists, watches int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lists, c.watches
}

// TestShareEqualProjections: two handles asking for equal projections —
// the same value built separately, one through a closure, with fields in
// another order — share one informer: one list and one watch reach the
// server; a different projection makes a second informer.
func TestShareEqualProjections(t *testing.T) {
	ctx := ctxT(t, 2*time.Minute)
	ns := unique("share")
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	createConfigMaps(t, ctx, 3, func(i int) *corev1.ConfigMap { return decodingConfigMap(ns, i) })
	leaks := controlplane.SnapshotGoroutines()
	counter := &requestCounter{path: "/namespaces/" + ns + "/configmaps"}
	cfg := cp.Config()
	cfg.Wrap(counter.wrap)
	f := newFactory(t, cfg)
	inNS := dynamicinformer.WithNamespaces(ns)
	stripped := func() dynamicinformer.ResourceOption {
		return func() dynamicinformer.ResourceOption {
			return dynamicinformer.WithProjection(dynamicinformer.Projection{StripManagedFields: true, Fields: "data,metadata.name"})
		}()
	}
	h1 := f.ForResource(configmaps, inNS, stripped())
	h2 := f.ForResource(configmaps, inNS, dynamicinformer.WithProjection(dynamicinformer.Projection{StripManagedFields: true, Fields: "metadata.name, data"}))
	if h1.Informer().GetIndexer() != h2.Informer().GetIndexer() {
		t.Fatal("equal projections got two informers")
	}
	f.Start(ctx)
	eventually(t, ctx, "sync", func() bool { return h1.Informer().HasSynced() && h2.Informer().HasSynced() })
	time.Sleep(500 * time.Millisecond) // a second list or watch would be on its way
	if lists, watches := counter.counts(); lists+watches > 2 || watches > 1 || lists > 1 {
		t.Fatalf("%d lists and %d watches for one shared informer, want one list and one watch (or one watch-list)", lists, watches)
	}
	if got := len(h1.Informer().GetStore().List()); got != 3 {
		t.Fatalf("cache holds %d objects", got)
	}
	other := f.ForResource(configmaps, inNS, dynamicinformer.WithProjection(dynamicinformer.Projection{StripManagedFields: true}))
	eventually(t, ctx, "second informer sync", other.Informer().HasSynced)
	if other.Informer().GetIndexer() == h1.Informer().GetIndexer() {
		t.Fatal("different projections shared one informer")
	}
	f.Shutdown()
	leaks.VerifyNoLeaks(t)
}

// TestSharedRelistPeriod: a second handle asking a running shared
// informer (no relist) for a relist every 300 ms gets it against the real
// server: list (or watch-list) requests keep coming, the state stays Synced; a third
// handle whose resync period the informer cannot honour is Failed with
// ErrOptionConflict and the shared informer goes on.
func TestSharedRelistPeriod(t *testing.T) {
	ctx := ctxT(t, 2*time.Minute)
	ns := unique("relist")
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	createConfigMaps(t, ctx, 2, func(i int) *corev1.ConfigMap { return decodingConfigMap(ns, i) })
	leaks := controlplane.SnapshotGoroutines()
	counter := &requestCounter{path: "/namespaces/" + ns + "/configmaps"}
	cfg := cp.Config()
	cfg.Wrap(counter.wrap)
	f := newFactory(t, cfg)
	inNS := dynamicinformer.WithNamespaces(ns)
	h1 := f.ForResource(configmaps, inNS)
	f.Start(ctx)
	eventually(t, ctx, "sync", h1.Informer().HasSynced)
	time.Sleep(time.Second)
	lists, watches := counter.counts()
	before := lists + watches
	h2 := f.ForResource(configmaps, inNS, dynamicinformer.WithRelistPeriod(300*time.Millisecond))
	if h2.Informer().GetIndexer() != h1.Informer().GetIndexer() || h2.Status().Err != nil {
		t.Fatalf("second handle: %+v", h2.Status())
	}
	eventually(t, ctx, "relists", func() bool { lists, watches := counter.counts(); return lists+watches >= before+4 })
	if st := h1.Status(); st.State != dynamicinformer.Synced || st.Objects != 2 {
		t.Fatalf("status %+v", st)
	}
	bad := f.ForResource(configmaps, inNS, dynamicinformer.WithResyncPeriod(time.Minute))
	if st := bad.Status(); st.State != dynamicinformer.Failed || !errors.Is(st.Err, dynamicinformer.ErrOptionConflict) {
		t.Fatalf("conflicting handle: %+v", st)
	}
	if st := h1.Status(); st.State != dynamicinformer.Synced {
		t.Fatalf("shared informer after the conflict: %+v", st)
	}
	f.Shutdown()
	leaks.VerifyNoLeaks(t)
}
