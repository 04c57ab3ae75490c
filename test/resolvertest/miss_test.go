package resolvertest

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"

	"github.com/informerkit/informerkit/discoveryresolver"
	"github.com/informerkit/informerkit/test/controlplane"
)

// TestMissRightAfterRoundFindsNewCRD: a CRD that became Established (and
// visible in aggregated discovery) after the resolver's latest round, less
// than the minimum refresh interval ago, is resolved by a miss: the miss
// waits for the next allowed round instead of answering ErrNotFound from
// the older snapshot, and that one round is all it costs.
func TestMissRightAfterRoundFindsNewCRD(t *testing.T) {
	const interval = 5 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, counter := newResolver(t, discoveryresolver.WithMinRefreshInterval(interval))
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	lastRound := time.Now()
	perRound := counter.Count("discovery", "")
	counter.Reset()

	crd := controlplane.NewCRD("fresh."+testGroup, "FreshThing", "freshthings", controlplane.ShortNames("fth"))
	if err := cp.InstallCRD(ctx, crd); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cp.DeleteCRD(context.Background(), crd.Name) }()
	// Wait, with a client of its own, until the aggregated discovery
	// document the resolver reads lists the CRD.
	other, err := discovery.NewDiscoveryClientForConfig(cp.Config())
	if err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		_, lists, _ := other.ServerGroupsAndResources()
		for _, l := range lists {
			if l.GroupVersion == "fresh."+testGroup+"/v1" {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatal("aggregated discovery never listed the CRD")
	}
	sinceRound := time.Since(lastRound)
	t.Logf("the CRD was in aggregated discovery %v after the resolver's latest round (interval %v)", sinceRound.Round(time.Millisecond), interval)
	if got := counter.Count("discovery", ""); got != 0 {
		t.Fatalf("the resolver sent %d discovery requests before the miss, want 0", got)
	}

	start := time.Now()
	got, err := r.Resolve(ctx, "fth")
	if err != nil || got.GVR != gvr("fresh."+testGroup, "v1", "freshthings") {
		t.Fatalf("Resolve(fth) %v after the latest round = %v, %v; want the new CRD", sinceRound, got.GVR, err)
	}
	t.Logf("Resolve(fth) waited %v for the next allowed round", time.Since(start).Round(time.Millisecond))
	if got := counter.Count("discovery", ""); got != perRound {
		t.Fatalf("the miss sent %d discovery requests (%v); want one round (%d)", got, counter.Keys(), perRound)
	}
}
