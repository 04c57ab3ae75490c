package shardtest

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/shard"
	"github.com/informerkit/informerkit/test/controlplane"
)

// An informer following a source on the real server (gate on, first sync
// streamed with watch-list) switches six times between quarters and
// halves of the space; its cache is exactly its shard each time. Each
// switch happens inside the open stream: one LIST and no wait for the
// reflector's backoff, so switches do not get slower one after the other.
// (Through the reflector's relist the six took 1.0, 3.2, 6.3, 11.8, 22.3
// and 50.6 s: its backoff doubles from 0.8 s while relists follow each
// other.)
func TestShardSourceOnServer(t *testing.T) {
	controlplane.Parallel(t) // on a control plane of its own
	cp := startControlPlane(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	gvr, all := installParts(ctx, t, cp, "source", 300)
	q0, _ := shard.Static(0, 4)
	half, _ := shard.Static(0, 2)
	q3, _ := shard.Static(3, 4)
	q1, _ := shard.Static(1, 4)
	half1, _ := shard.Static(1, 2)
	q2, _ := shard.Static(2, 4)
	src := NewManualSource(q0)
	before := controlplane.SnapshotGoroutines()
	cfg, lists := logLists(cp.Config(), gvr.Resource)
	f, err := dynamicinformer.NewForConfig(cfg, dynamicinformer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := f.ForResource(gvr, dynamicinformer.WithShardSource(src))
	f.Start(ctx)
	var times []time.Duration
	for i, s := range []shard.Shard{q0, half, q3, q1, half1, q2, q0} {
		listsBefore := lists.len()
		if i > 0 {
			src.Set(s)
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
		took := time.Since(start).Round(time.Millisecond)
		t.Logf("shard %.2f: cache exact (%d objects) %v after the switch", s.Size(), len(want), took)
		if i == 0 {
			continue
		}
		times = append(times, took)
		// The switch's LIST has been sent (the cache holds its objects);
		// give a relist it might have caused a moment to show.
		time.Sleep(200 * time.Millisecond)
		if qs := lists.since(listsBefore); len(qs) != 1 {
			t.Errorf("switch %d: LISTs %q; want one", i, qs)
		}
		// A generous bound the reflector's backoff exceeds from the third
		// consecutive switch on (0.8 + 1.6 s of waiting, then the list).
		if took > 2*time.Second {
			t.Errorf("switch %d took %v: more than 2 s, as a relist waiting for the reflector's backoff would", i, took)
		}
	}
	t.Logf("switch times: %v", times)
	f.Shutdown()
	before.VerifyNoLeaks(t)
}
