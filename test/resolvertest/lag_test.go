package resolvertest

import (
	"context"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"

	"github.com/informerkit/informerkit/discoveryresolver"
	"github.com/informerkit/informerkit/test/controlplane"
)

// TestDiscoveryLagForNewCRDInExistingGroupVersion measures how long the
// aggregated discovery document (what client-go's discovery client reads)
// takes to show a CRD added to a group-version that already exists, against
// the per-group-version endpoint, which apiextensions-apiserver serves
// itself.
func TestDiscoveryLagForNewCRDInExistingGroupVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for discovery")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	group := "lag." + testGroup
	if err := cp.InstallCRD(ctx, controlplane.NewCRD(group, "First", "firsts")); err != nil {
		t.Fatal(err)
	}
	disc := discovery.NewDiscoveryClientForConfigOrDie(cp.Config())
	r := discoveryresolver.New(disc)
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	second := controlplane.NewCRD(group, "Second", "seconds")
	if _, err := cp.APIExtensions().ApiextensionsV1().CustomResourceDefinitions().Create(ctx, second, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var perGV, aggregated time.Duration
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		if perGV == 0 {
			if l, err := disc.ServerResourcesForGroupVersion(group + "/v1"); err == nil && slices.ContainsFunc(l.APIResources, func(a metav1.APIResource) bool { return a.Name == "seconds" }) {
				perGV = time.Since(start)
			}
		}
		if aggregated == 0 {
			_ = r.Refresh(ctx)
			if _, ok := r.Lookup(controlplane.GVR(second)); ok {
				aggregated = time.Since(start)
			}
		}
		return perGV > 0 && aggregated > 0, nil
	})
	t.Logf("new CRD in an existing group-version: per-group-version endpoint after %v, resolver (aggregated discovery) after %v (err %v)",
		perGV.Round(time.Millisecond), aggregated.Round(time.Millisecond), err)
	if err != nil {
		t.Fatal(err)
	}
}
