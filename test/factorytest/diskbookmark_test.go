package factorytest

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/test/controlplane"
)

// watchRVs records the resourceVersion of every watch request for a
// resource, and counts its lists.
type watchRVs struct {
	resource string
	mu       sync.Mutex
	rvs      []string
	lists    int
}

func (w *watchRVs) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		if q := req.URL.Query(); strings.HasSuffix(req.URL.Path, "/"+w.resource) {
			w.mu.Lock()
			if q.Get("watch") == "true" {
				w.rvs = append(w.rvs, q.Get("resourceVersion"))
			} else {
				w.lists++
			}
			w.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

func (w *watchRVs) listed() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lists
}

func (w *watchRVs) list() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.rvs...)
}

// TestRestartCatchesUpWithBookmark: on the real server (a CRD, served
// from the watch cache, which sends each watch a bookmark about every
// minute), a restored informer of a quiet resource reports
// Disk.CaughtUp once it has applied a bookmark at or past the server's
// resourceVersion at its start, with no list; and it journals that
// bookmark: the next restart watches from it, not from the resource's
// last change.
func TestRestartCatchesUpWithBookmark(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 12*time.Minute)
	gvr, _ := installCRD(t, ctx)
	ns := unique("diskbm")
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	createN(t, ctx, gvr, ns, 3, nil)
	dir := t.TempDir()
	leaks := controlplane.SnapshotGoroutines()
	run := func() (*dynamicinformer.Factory, *dynamicinformer.InformerHandle, *watchRVs) {
		cfg := cp.Config()
		w := &watchRVs{resource: gvr.Resource}
		cfg.Wrap(w.wrap)
		f := newFactory(t, cfg, dynamicinformer.Options{CacheDir: dir})
		h := f.ForResource(gvr, dynamicinformer.WithNamespaces(ns))
		f.Start(ctx)
		eventually(t, ctx, "Synced", func() bool { return h.Status().State == dynamicinformer.Synced })
		return f, h, w
	}
	f1, h1, _ := run()
	var lastChange uint64
	for _, o := range h1.Informer().GetStore().List() {
		m, _ := meta.Accessor(o)
		rv, _ := strconv.ParseUint(m.GetResourceVersion(), 10, 64)
		lastChange = max(lastChange, rv)
	}
	f1.Shutdown()
	// Writes elsewhere move the server past the resource's last change.
	if err := cp.CreateNamespace(ctx, unique("diskbm-other")); err != nil {
		t.Fatal(err)
	}

	f2, h2, w2 := run()
	if st := h2.Status(); st.Disk.Start != dynamicinformer.DiskResumed && st.Disk.Start != "" {
		t.Fatalf("restart: %+v; want a resumed start", st.Disk)
	}
	start := time.Now()
	// (A bookmark can come at a resourceVersion short of the server's:
	// the watch cache's own advances with the resource's events and
	// etcd's progress notifications. Caught up within a few.)
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 6*time.Minute, true, func(context.Context) (bool, error) {
		return h2.Status().Disk.CaughtUp, nil
	})
	if err != nil {
		t.Fatalf("not caught up %v after a restart of a quiet resource (the server sends bookmarks about every minute): %+v, watches from %v",
			time.Since(start).Round(time.Second), h2.Status().Disk, w2.list())
	}
	t.Logf("caught up %v after the restart (watches from %v; the resource's last change at %d)", time.Since(start).Round(time.Second), w2.list(), lastChange)
	if n := w2.listed(); n != 0 {
		t.Errorf("%d lists while catching up; want none", n)
	}
	// The bookmark is journaled within a sync period of being applied.
	time.Sleep(2500 * time.Millisecond)
	f2.Shutdown()

	f3, h3, w3 := run()
	defer f3.Shutdown()
	rvs := w3.list()
	t.Logf("second restart: %s, watches from %v", h3.Status().Disk.Start, rvs)
	var first uint64
	if len(rvs) > 0 {
		first, _ = strconv.ParseUint(rvs[0], 10, 64)
	}
	if first <= lastChange {
		t.Errorf("second restart watched from %v; want from the bookmark's resourceVersion, past the last change %d", rvs, lastChange)
	}
	f3.Shutdown()
	leaks.VerifyNoLeaks(t)
}
