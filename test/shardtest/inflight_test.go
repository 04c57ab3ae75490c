package shardtest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/shard"
	"github.com/informerkit/informerkit/test/controlplane"
)

// watchHold holds the next plain watch request for one resource (once
// armed) until released: the moment a reflector's watch is on its way to
// the server after a connection cut.
type watchHold struct {
	mu      sync.Mutex // guards armed, entered, release
	armed   bool
	entered chan struct{}
	release chan struct{}
}

func (h *watchHold) arm() (entered, release chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.armed, h.entered, h.release = true, make(chan struct{}), make(chan struct{})
	return h.entered, h.release
}

func (h *watchHold) wrap(cfg *rest.Config, resource string) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			q := req.URL.Query()
			if req.Method == http.MethodGet && q.Get("watch") == "true" && q.Get("sendInitialEvents") == "" &&
				strings.HasSuffix(req.URL.Path, "/"+resource) {
				h.mu.Lock()
				armed, entered, release := h.armed, h.entered, h.release
				h.armed = false
				h.mu.Unlock()
				if armed {
					close(entered)
					<-release
				}
			}
			return rt.RoundTrip(req)
		})
	})
	return cfg
}

// A shard change that arrives while the informer's watch request is on
// its way to the server (after a connection cut, the reflector watching
// again from its resourceVersion) must still reach the cache: the watch
// that opens was asked with the old shard, so the informer lists the new
// one. Before the fix the switch found no open stream to end, the watch
// of the old half stayed open, and the other half's objects never came
// (the cache held 50 of 100 objects after 15 s) — the soak's shard group
// member missing an object for 90 s after an rbac fault's cut.
func TestShardChangeWhileWatchRequestInFlight(t *testing.T) {
	controlplane.Parallel(t) // on a control plane of its own
	cp := startControlPlane(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	gvr, all := installParts(ctx, t, cp, "inflight", 100)
	half, _ := shard.Static(0, 2)
	whole, _ := shard.Static(0, 1)
	src := NewManualSource(half)
	before := controlplane.SnapshotGoroutines()
	hold := &watchHold{}
	f, err := dynamicinformer.NewForConfig(hold.wrap(cp.Config(), gvr.Resource), dynamicinformer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := f.ForResource(gvr, dynamicinformer.WithShardSource(src))
	f.Start(ctx)
	waitCache := func(s shard.Shard, within time.Duration) error {
		want := map[types.UID]bool{}
		for uid := range all {
			if s.ContainsValue(string(uid)) {
				want[uid] = true
			}
		}
		deadline := time.Now().Add(within)
		for {
			held := map[types.UID]int{}
			for _, o := range h.Informer().GetStore().List() {
				held[o.(interface{ GetUID() types.UID }).GetUID()]++
			}
			if equalSets(held, want) {
				return nil
			}
			if time.Now().After(deadline) {
				st := h.Status()
				return fmt.Errorf("shard %.2f: cache holds %d objects, want %d, after %v; status %s %q", s.Size(), len(held), len(want), within, st.State, st.Reason)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if err := waitCache(half, time.Minute); err != nil {
		t.Fatal(err)
	}
	// Let the stream run past client-go's "very short watch" bound (1 s),
	// so that after the cut the reflector watches again instead of
	// listing.
	time.Sleep(1500 * time.Millisecond)
	entered, release := hold.arm()
	cp.Proxy().CutAll()
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the reflector did not watch again within 30 s of the cut")
	}
	src.Set(whole)
	for h.Status().Shard != whole.Selector() {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // Status changes just before the switch
	close(release)
	if err := waitCache(whole, 15*time.Second); err != nil {
		t.Fatal(err)
	}
	f.Shutdown()
	before.VerifyNoLeaks(t)
}

// slowBody delays every read of a response body after the first until
// released (or closed): a watch-list stream whose initial events are
// still coming.
type slowBody struct {
	io.ReadCloser
	reads   int
	release <-chan struct{}
	closed  chan struct{}
	once    sync.Once
}

func (b *slowBody) Read(p []byte) (int, error) {
	b.reads++
	if b.reads > 1 {
		select {
		case <-b.release:
		case <-b.closed:
			return 0, io.ErrClosedPipe
		}
	}
	return b.ReadCloser.Read(p)
}

func (b *slowBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return b.ReadCloser.Close()
}

// A shard change while the informer relists by streaming (watch-list,
// after a connection cut ended its watch with an error) must not be made
// inside that stream: client-go's reflector waits for the bookmark that
// ends the initial events, which a switched stream never sends. Before
// the fix the informer switched inside the stream and its cache froze:
// 1000 objects, half the space; after the change to the whole space the
// cache held the half for good (the soak's shard member with 2 missing
// and 7 stale objects for 90 s after a refuse fault).
func TestShardChangeDuringWatchListRelist(t *testing.T) {
	controlplane.Parallel(t) // on a control plane of its own
	cp := startControlPlane(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	gvr, all := installParts(ctx, t, cp, "relist", 1000)
	half, _ := shard.Static(0, 2)
	whole, _ := shard.Static(0, 1)
	src := NewManualSource(half)
	before := controlplane.SnapshotGoroutines()

	var mu sync.Mutex // guards armed, entered, release
	armed, entered, release := false, make(chan struct{}), make(chan struct{})
	cfg := rest.CopyConfig(cp.Config())
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			q := req.URL.Query()
			resp, err := rt.RoundTrip(req)
			if err != nil || q.Get("watch") != "true" || q.Get("sendInitialEvents") != "true" || !strings.HasSuffix(req.URL.Path, "/"+gvr.Resource) {
				return resp, err
			}
			mu.Lock()
			hold := armed
			armed = false
			mu.Unlock()
			if hold {
				close(entered)
				resp.Body = &slowBody{ReadCloser: resp.Body, release: release, closed: make(chan struct{})}
			}
			return resp, err
		})
	})
	f, err := dynamicinformer.NewForConfig(cfg, dynamicinformer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := f.ForResource(gvr, dynamicinformer.WithShardSource(src))
	f.Start(ctx)
	if err := waitShard(h, all, half, time.Minute); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	armed = true
	mu.Unlock()
	cp.Proxy().CutAll()
	select {
	case <-entered:
	case <-time.After(time.Minute):
		t.Fatal("the informer did not relist by streaming within a minute of the cut")
	}
	time.Sleep(200 * time.Millisecond) // the first initial events are read
	src.Set(whole)
	for h.Status().Shard != whole.Selector() {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	close(release)
	if err := waitShard(h, all, whole, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	f.Shutdown()
	before.VerifyNoLeaks(t)
}

// waitShard waits until h's cache holds exactly the objects of all in s.
func waitShard(h *dynamicinformer.InformerHandle, all map[types.UID]bool, s shard.Shard, within time.Duration) error {
	want := map[types.UID]bool{}
	for uid := range all {
		if s.ContainsValue(string(uid)) {
			want[uid] = true
		}
	}
	deadline := time.Now().Add(within)
	for {
		held := map[types.UID]int{}
		for _, o := range h.Informer().GetStore().List() {
			held[o.(interface{ GetUID() types.UID }).GetUID()]++
		}
		if equalSets(held, want) {
			return nil
		}
		if time.Now().After(deadline) {
			st := h.Status()
			return fmt.Errorf("shard %.2f: cache holds %d objects, want %d, after %v; status %s %q", s.Size(), len(held), len(want), within, st.State, st.Reason)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
