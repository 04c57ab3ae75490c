package shardtest

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	cp := startControlPlane(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	crd := controlplane.NewCRD("inflight.shardtest.example.com", "Part", "parts")
	if err := cp.InstallCRD(ctx, crd); err != nil {
		t.Fatal(err)
	}
	gvr := controlplane.GVR(crd)
	if err := cp.CreateNamespace(ctx, "parts"); err != nil {
		t.Fatal(err)
	}
	dyn := cp.Dynamic()
	if err := parallel(100, 16, func(i int) error {
		_, err := dyn.Resource(gvr).Namespace("parts").Create(ctx, part(gvr, fmt.Sprintf("p%05d", i)), metav1.CreateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	all := serverUIDs(ctx, t, dyn, gvr)
	half, _ := shard.Static(0, 2)
	whole, _ := shard.Static(0, 1)
	src := &manualSource{now: half, changed: make(chan struct{})}
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
	src.set(whole)
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
