package presence

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
)

// When discovery fails as a whole (no snapshot at all), presence relies on
// CRDs and 404 answers, as its log says: a resource is assumed served, not
// declared "not in discovery" (which would keep its informer Pending until
// discovery works).
func TestDiscoveryFailedAssumesServed(t *testing.T) {
	d := discoveryOf(resourceList(group+"/v1", apiResource("widgets", true)))
	var failing atomic.Bool
	failing.Store(true)
	d.PrependReactor("get", "group", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failing.Load() {
			return true, nil, errors.New("discovery unavailable")
		}
		return false, nil, nil
	})
	p := New(Config{Resolver: resolverOf(d), RecheckMin: 20 * time.Millisecond})
	widgets := newMember(gvr("v1", "widgets"))
	gizmos := newMember(gvr("v1", "gizmos"))
	p.Register(widgets)
	p.Register(gizmos)
	run(t, p)
	widgets.waitVerdict(t, "widgets assumed served", assumedServed)
	gizmos.waitVerdict(t, "gizmos assumed served", assumedServed)
	// Discovery works again (a 404's re-check refreshes it): its answer
	// counts.
	failing.Store(false)
	p.NotFound(gizmos.GVR())
	gizmos.waitVerdict(t, "gizmos not in discovery", knownNotServed)
	widgets.waitVerdict(t, "widgets in discovery", knownServed)
}
