package dynamicinformer

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informerkit/informerkit/dynamicinformer/internal/lifecycle"
	"github.com/informerkit/informerkit/dynamicinformer/internal/presence"
)

// The public states and reasons are the state machine's.
func TestStatesAreTheMachines(t *testing.T) {
	public := []State{Pending, Restored, Syncing, Synced, Stale, Removed, Failed, Stopped}
	if len(public) != len(lifecycle.States) {
		t.Fatalf("%d public states, the machine has %d", len(public), len(lifecycle.States))
	}
	for i, s := range public {
		if string(s) != string(lifecycle.States[i]) {
			t.Errorf("state %q, the machine's %q", s, lifecycle.States[i])
		}
	}
}

// A status is published when it changes, not when presence says the same
// again: CRD updates that do not change what it serves re-evaluate the
// informer, and each used to publish the same Pending status anew.
func TestSameVerdictPublishedOnce(t *testing.T) {
	noLeaks := newGoroutinesCheck()
	c := lcClient()
	f := NewSharedInformerFactory(c, Options{})
	const unserved = "no established CustomResourceDefinition serves"
	var mu sync.Mutex
	var seen []Status
	f.OnStatusChange(func(s Status) {
		mu.Lock()
		seen = append(seen, s)
		mu.Unlock()
	})
	last := func() Status {
		mu.Lock()
		defer mu.Unlock()
		if len(seen) == 0 {
			return Status{}
		}
		return seen[len(seen)-1]
	}
	h := f.ForResource(widgets)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Start(ctx)
	watchingCRDs(t, c)
	crd := widgetsCRD()
	if _, err := c.Resource(presence.CRDResource).Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "Pending for the unserved version", 10*time.Second, func() bool {
		st := last()
		return st.State == Pending && strings.Contains(st.Reason, unserved) && errors.Is(st.Err, ErrNotServed)
	})
	for i := range 3 {
		crd.SetLabels(map[string]string{"touch": strconv.Itoa(i)})
		if _, err := c.Resource(presence.CRDResource).Update(ctx, crd, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Resource(presence.CRDResource).Update(ctx, widgetsCRD("v1"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "Synced", 10*time.Second, func() bool { return last().State == Synced })
	mu.Lock()
	n := 0
	for _, s := range seen {
		if s.State == Pending && strings.Contains(s.Reason, unserved) {
			n++
		}
	}
	mu.Unlock()
	if n != 1 {
		t.Errorf("Pending %q published %d times, want once", unserved, n)
	}
	if st := h.Status(); st.State != Synced || st.Err != nil {
		t.Errorf("status %s %v", st.State, st.Err)
	}
	f.Shutdown()
	noLeaks(t)
}
