package shardtest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/shard"
	"github.com/informerkit/informerkit/test/controlplane"
)

// manualSource is a shard.Source the test moves by hand.
type manualSource struct {
	mu      sync.Mutex // guards now, changed
	now     shard.Shard
	changed chan struct{}
}

func (s *manualSource) Current() (shard.Shard, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now, s.changed
}

func (s *manualSource) set(n shard.Shard) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = n
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *manualSource) Register(string) shard.Consumer { return nopConsumer{} }

type nopConsumer struct{}

func (nopConsumer) Holds(shard.Shard, bool) {}
func (nopConsumer) Close()                  {}

// An informer following a source on the real server (gate on, first sync
// streamed with watch-list) moves from a quarter of the space to half of
// it and then to another quarter; its cache is exactly its shard each time.
func TestShardSourceOnServer(t *testing.T) {
	cp := startControlPlane(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	crd := controlplane.NewCRD("source.shardtest.example.com", "Part", "parts")
	if err := cp.InstallCRD(ctx, crd); err != nil {
		t.Fatal(err)
	}
	gvr := controlplane.GVR(crd)
	if err := cp.CreateNamespace(ctx, "parts"); err != nil {
		t.Fatal(err)
	}
	dyn := cp.Dynamic()
	if err := parallel(300, 16, func(i int) error {
		_, err := dyn.Resource(gvr).Namespace("parts").Create(ctx, part(gvr, fmt.Sprintf("p%05d", i)), metav1.CreateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	all := serverUIDs(ctx, t, dyn, gvr)
	q0, _ := shard.Static(0, 4)
	half, _ := shard.Static(0, 2)
	q3, _ := shard.Static(3, 4)
	src := &manualSource{now: q0, changed: make(chan struct{})}
	before := controlplane.SnapshotGoroutines()
	f, err := dynamicinformer.NewForConfig(cp.Config(), 0)
	if err != nil {
		t.Fatal(err)
	}
	h := f.ForResource(gvr, dynamicinformer.WithShardSource(src))
	f.Start(ctx)
	for _, s := range []shard.Shard{q0, half, q3} {
		if !s.Equal(q0) {
			src.set(s)
		}
		want := map[types.UID]bool{}
		for uid := range all {
			if s.ContainsValue(string(uid)) {
				want[uid] = true
			}
		}
		start := time.Now()
		for {
			held := map[types.UID]int{}
			for _, o := range h.Informer().GetStore().List() {
				held[o.(interface{ GetUID() types.UID }).GetUID()]++
			}
			if equalSets(held, want) {
				break
			}
			if time.Since(start) > time.Minute {
				st := h.Status()
				t.Fatalf("shard %.2f: cache holds %d objects, want %d; status %s %q shard-selector-equal %v", s.Size(), len(held), len(want), st.State, st.Reason, st.Shard == s.Selector())
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Logf("shard %.2f: cache exact (%d objects) %v after the switch", s.Size(), len(want), time.Since(start).Round(time.Millisecond))
	}
	f.Shutdown()
	before.VerifyNoLeaks(t)
}
