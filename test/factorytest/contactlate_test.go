package factorytest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/test/controlplane"
)

// contactBound is how long an informer may take to say that its factory
// cannot reach the server behind a black hole: a request not returned
// within a second asks for a probe, and a probe not answered within 10 s
// loses contact. Slack for a loaded machine.
const contactBound = 30 * time.Second

// TestInformerMadeWithoutContact: an informer created after its factory
// has lost contact with the API server (black-holed: connections accepted,
// nothing answered) says so as the informers already there do — ContactErr
// errors.Is ErrNoContact, within the same bound — instead of listing
// quietly for as long as the outage lasts (its own list never returns, and
// the factory's probes, still unanswered, change nothing). When the server
// is reachable again, every informer syncs and ContactErr clears.
func TestInformerMadeWithoutContact(t *testing.T) {
	snap := controlplane.Parallel(t)
	ctx := ctxT(t, 4*time.Minute)
	px := cp.NewProxy(t) // faults below reach this test's clients only
	sc := scenario(t)
	ns := unique("latecontact")
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	f := newFactory(t, px.Config(), dynamicinformer.Options{DisableCRDTracking: true})
	defer f.Shutdown()
	synced := f.ForResource(configmaps, dynamicinformer.WithNamespaces(ns))
	f.Start(ctx)
	waitStatus(t, ctx, time.Minute, "the configmap informer to sync", synced, func(s dynamicinformer.Status) bool {
		return s.State == dynamicinformer.Synced
	})

	t.Cleanup(func() { px.SetStalled(false) })
	px.SetStalled(true)
	// An informer made as the server goes away: its list does not return,
	// the factory probes and finds no contact.
	stalled := time.Now()
	during := f.ForResource(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, dynamicinformer.WithNamespaces(ns))
	waitStatus(t, ctx, contactBound, "ContactErr on the informer made as the server was black-holed", during, lostContact)
	tookDuring := time.Since(stalled)
	waitStatus(t, ctx, contactBound, "ContactErr (Stale) on the informer synced before", synced, func(s dynamicinformer.Status) bool {
		return lostContact(s) && s.State == dynamicinformer.Stale
	})

	// An informer made once the factory knows it has no contact.
	made := time.Now()
	after := f.ForResource(schema.GroupVersionResource{Version: "v1", Resource: "services"}, dynamicinformer.WithNamespaces(ns))
	waitStatus(t, ctx, contactBound, "ContactErr on the informer made after contact was lost", after, lostContact)
	tookAfter := time.Since(made)
	st := after.Status()
	if st.State == dynamicinformer.Synced || st.State == dynamicinformer.Stale || after.Informer().HasSynced() {
		t.Fatalf("informer made without contact: state %s, HasSynced %v; it never listed", st.State, after.Informer().HasSynced())
	}
	t.Logf("ContactErr %v after the black hole (made then), %v after it was made (made later): %s %q",
		tookDuring.Round(time.Millisecond), tookAfter.Round(time.Millisecond), st.State, st.Reason)

	px.SetStalled(false)
	for _, h := range []*dynamicinformer.InformerHandle{synced, during, after} {
		waitStatus(t, ctx, time.Minute, "Synced without ContactErr once the server is reachable", h, func(s dynamicinformer.Status) bool {
			return s.State == dynamicinformer.Synced && s.ContactErr == nil
		})
	}
	f.Shutdown()
	snap.VerifyNoLeaks(t)
	sc.Injected("the factory's connections black-holed (proxy) after one informer synced; a second informer made at once, a third once the factory knew it had no contact; then the black hole lifted")
	sc.Held("ContactErr (ErrNoContact) on the second %v after the black hole, on the third %v after it was made (%s: %q); all three Synced without ContactErr once the server answered; no goroutine left",
		tookDuring.Round(10*time.Millisecond), tookAfter.Round(10*time.Millisecond), st.State, st.Reason)
}

func lostContact(s dynamicinformer.Status) bool {
	return errors.Is(s.ContactErr, dynamicinformer.ErrNoContact)
}

// waitStatus waits up to bound for h's Status to satisfy ok, and fails
// saying what it awaited and the last status seen.
func waitStatus(t *testing.T, ctx context.Context, bound time.Duration, what string, h *dynamicinformer.InformerHandle, ok func(dynamicinformer.Status) bool) {
	t.Helper()
	var last dynamicinformer.Status
	start := time.Now()
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, bound, true, func(context.Context) (bool, error) {
		last = h.Status()
		return ok(last), nil
	})
	if err != nil {
		t.Fatalf("%v waiting for %s (%s): last seen state %s, reason %q, ContactErr %v, err %v",
			time.Since(start).Round(time.Millisecond), what, fmt.Sprint(h.GVR()), last.State, last.Reason, last.ContactErr, last.Err)
	}
}
