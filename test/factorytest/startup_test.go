package factorytest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/test/controlplane"
)

// initialLists counts, at the transport, the initial lists in flight for
// the widgets of groups whose name contains marker (discovery requests
// are not counted): a LIST from its request until
// its body is closed, and a watch-list request (sendInitialEvents=true)
// until the bookmark that ends its initial events has been read
// ("k8s.io/initial-events-end" in the stream) or its body is closed.
type initialLists struct {
	marker string

	mu         sync.Mutex // guards now, peak, total
	now, peak  int
	total      int
	watchLists int
}

func (c *initialLists) enter(watchList bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now++
	c.total++
	if watchList {
		c.watchLists++
	}
	c.peak = max(c.peak, c.now)
}

func (c *initialLists) exit() {
	c.mu.Lock()
	c.now--
	c.mu.Unlock()
}

func (c *initialLists) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		q := req.URL.Query()
		watchList := q.Get("watch") == "true" && q.Get("sendInitialEvents") == "true"
		collection := strings.Contains(req.URL.Path, c.marker) && strings.HasSuffix(req.URL.Path, "/widgets")
		if !collection || q.Get("watch") == "true" && !watchList {
			return rt.RoundTrip(req)
		}
		c.enter(watchList)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			c.exit()
			return resp, err
		}
		var once sync.Once
		resp.Body = &initialEventsEnd{ReadCloser: resp.Body, watchList: watchList, done: func() { once.Do(c.exit) }}
		return resp, nil
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// initialEventsEnd calls done when a watch-list stream's initial events
// have ended, or the body is closed or exhausted.
type initialEventsEnd struct {
	io.ReadCloser
	watchList bool
	tail      []byte // the last bytes read, for a marker split across reads
	done      func()
}

var initialEventsMarker = []byte(metav1.InitialEventsAnnotationKey)

func (b *initialEventsEnd) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.watchList && n > 0 {
		buf := append(b.tail, p[:n]...)
		if bytes.Contains(buf, initialEventsMarker) {
			b.done()
		}
		b.tail = append(b.tail[:0], buf[max(0, len(buf)-len(initialEventsMarker)):]...)
	}
	if err != nil {
		b.done()
	}
	return n, err
}

func (b *initialEventsEnd) Close() error {
	b.done()
	return b.ReadCloser.Close()
}

// TestInitialListsBoundedOnServer: informers for 60 CRDs (200 with
// INFORMERKIT_LONG) start at once. With a bound of 15 (the default bound,
// 50, with INFORMERKIT_LONG) at most that many initial lists (or
// watch-list streams before their initial events end) reach the server at
// a time, counted at the transport; without a bound they all go at once.
// Both sync every informer; the times to all synced are logged (1 round,
// 3 with INFORMERKIT_LONG, alternating).
func TestInitialListsBoundedOnServer(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 8*time.Minute)
	sc := scenario(t)
	// By default 60 CRDs, a bound of 15 set in Options, one round; with
	// INFORMERKIT_LONG 200 CRDs, the default bound (50), three rounds.
	crds, limit, bound, rounds := 60, 15, 15, 1
	if controlplane.Long() {
		crds, limit, bound, rounds = 200, 50, 0, 3 // 0: Options.MaxConcurrentInitialLists' default, 50
	}
	sc.Injected("informers for %d CRDs (1 object each) started at once, with the default bound (%d concurrent initial lists) and without, %d rounds each", crds, limit, rounds)
	marker := unique("startup") + ".example.com"
	ns := unique("startup")
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	gvrs := make([]schema.GroupVersionResource, crds)
	names := make([]string, crds)
	installStart := time.Now()
	if err := parallel(crds, 8, func(i int) error {
		crd := controlplane.NewCRD(fmt.Sprintf("g%d.%s", i, marker), "Widget", "widgets")
		gvrs[i], names[i] = controlplane.GVR(crd), crd.Name
		if err := cp.InstallCRD(ctx, crd); err != nil {
			return err
		}
		_, err := cp.Dynamic().Resource(gvrs[i]).Namespace(ns).Create(ctx, obj(gvrs[i].GroupVersion().String(), "Widget", ns, "w", nil), metav1.CreateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The other tests of the package share the server: take the CRDs away.
		if err := parallel(crds, 8, func(i int) error { return cp.DeleteCRD(context.Background(), names[i]) }); err != nil {
			t.Error(err)
		}
	})
	t.Logf("%d CRDs installed in %s", crds, time.Since(installStart).Round(time.Millisecond))

	run := func(opts dynamicinformer.Options) (*initialLists, time.Duration) {
		counter := &initialLists{marker: marker}
		cfg := cp.Config()
		cfg.Wrap(counter.wrap)
		leaks := controlplane.SnapshotGoroutines()
		f := newFactory(t, cfg, opts)
		for _, gvr := range gvrs {
			f.ForResource(gvr, dynamicinformer.WithNamespaces(ns))
		}
		start := time.Now()
		f.Start(ctx)
		for gvr, ok := range f.WaitForCacheSync(ctx) {
			if !ok {
				t.Fatalf("%s did not sync", gvr)
			}
		}
		took := time.Since(start)
		for _, st := range f.Statuses() {
			if st.State != dynamicinformer.Synced || st.Objects != 1 {
				t.Fatalf("%s: %s with %d objects, want Synced with 1", st.GVR, st.State, st.Objects)
			}
		}
		f.Shutdown()
		leaks.VerifyNoLeaks(t)
		return counter, took
	}
	var cappedTimes, freeTimes []time.Duration
	cappedPeak, freePeak := 0, 0
	for r := 0; r < rounds; r++ {
		capped, cappedTook := run(dynamicinformer.Options{MaxConcurrentInitialLists: bound})
		free, freeTook := run(dynamicinformer.Options{MaxConcurrentInitialLists: -1})
		t.Logf("round %d: bound %d: %d initial requests (%d watch-list), peak %d in flight, all synced in %s; no bound: %d requests, peak %d, all synced in %s",
			r+1, limit, capped.total, capped.watchLists, capped.peak, cappedTook.Round(time.Millisecond), free.total, free.peak, freeTook.Round(time.Millisecond))
		if capped.total < crds {
			t.Fatalf("counted %d initial requests for %d informers: the counter missed some", capped.total, crds)
		}
		if capped.peak > limit {
			t.Fatalf("peak %d initial lists in flight with a bound of %d", capped.peak, limit)
		}
		cappedPeak, freePeak = max(cappedPeak, capped.peak), max(freePeak, free.peak)
		cappedTimes, freeTimes = append(cappedTimes, cappedTook), append(freeTimes, freeTook)
	}
	if freePeak <= limit {
		t.Errorf("without a bound the peak was %d (≤ %d): the test did not start enough at once to show the bound", freePeak, limit)
	}
	slices.Sort(cappedTimes)
	slices.Sort(freeTimes)
	sc.Held("bound %d: peak %d initial requests in flight over %d rounds, all synced in median %s; no bound: peak %d, median %s; no goroutine leak",
		limit, cappedPeak, rounds, cappedTimes[rounds/2].Round(time.Millisecond), freePeak, freeTimes[rounds/2].Round(time.Millisecond))
}
