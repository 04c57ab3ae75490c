package factorytest

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/informerkit/informerkit/discoveryresolver"
	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/subscription"
	"github.com/informerkit/informerkit/test/controlplane"
)

type eventLog struct {
	mu     sync.Mutex
	events []subscription.Event
}

func (l *eventLog) add(e subscription.Event) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

func (l *eventLog) count(t subscription.EventType, gvr schema.GroupVersionResource) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.events {
		if e.Type == t && e.GVR == gvr {
			n++
		}
	}
	return n
}

// TestSubscriptionFollowsCRDs: a subscription on a group sees a CRD
// installed after it started (objects arrive with their GVR), and stops
// seeing it after deletion (a Deleted per object, resource dropped).
func TestSubscriptionFollowsCRDs(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 4*time.Minute)
	group := unique("sub") + ".factory.example.com"
	first := controlplane.NewCRD(group, "Gadget", "gadgets", controlplane.Categories("subtest"))
	if err := cp.InstallCRD(ctx, first); err != nil {
		t.Fatal(err)
	}
	ns := unique("subns")
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	gadgets := controlplane.GVR(first)
	createGadgets := func(gvr schema.GroupVersionResource, kind string, n int) {
		for i := 0; i < n; i++ {
			o := obj(gvr.GroupVersion().String(), kind, ns, fmt.Sprintf("%s-%d", gvr.Resource, i), nil)
			if _, err := cp.Dynamic().Resource(gvr).Namespace(ns).Create(ctx, o, metaCreate); err != nil {
				t.Fatal(err)
			}
		}
	}
	createGadgets(gadgets, "Gadget", 3)

	f := newFactory(t, cp.Config(), dynamicinformer.Options{RediscoveryInterval: 2 * time.Second})
	defer f.Shutdown()
	f.Start(ctx)
	log := &eventLog{}
	// The handler panics on one object: the factory recovers it, counts it
	// in the informer's Status, and the subscription goes on.
	handler := func(e subscription.Event) {
		if m, ok := e.Object.(metav1.Object); ok && e.Type == subscription.Added && m.GetName() == "doohickeys-1" {
			panic("handler bug")
		}
		log.add(e)
	}
	sub, err := subscription.New(ctx, f, discoveryresolver.Filter{Groups: []string{group}}, handler)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stop()
	eventually(t, ctx, "existing objects replayed to the subscriber", func() bool { return log.count(subscription.Added, gadgets) == 3 })

	second := controlplane.NewCRD(group, "Doohickey", "doohickeys")
	if err := cp.InstallCRD(ctx, second); err != nil {
		t.Fatal(err)
	}
	dooh := controlplane.GVR(second)
	installed := time.Now()
	joined := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) {
		return slices.Contains(sub.Resources(), dooh), nil
	})
	t.Logf("the new CRD joined the subscription %v after it was served (err %v)", time.Since(installed).Round(time.Millisecond), joined)
	if joined != nil {
		// Diagnostics for the flake: what discovery says, and where the
		// subscription's goroutine is.
		matched, err := f.Resolver().Match(ctx, discoveryresolver.Filter{Groups: []string{group}})
		t.Logf("resolver matches %v (err %v); subscription has %v", matched, err, sub.Resources())
		for _, g := range strings.Split(string(stacks()), "\n\n") {
			if strings.Contains(g, "informerkit/dynamicinformer") || strings.Contains(g, "informerkit/subscription") || strings.Contains(g, "discoveryresolver") {
				t.Log(g)
			}
		}
		t.Fatal("timed out waiting for the new CRD to join the subscription")
	}
	createGadgets(dooh, "Doohickey", 2)
	eventually(t, ctx, "objects of the new CRD, with their GVR (one skipped by the panic)", func() bool {
		return log.count(subscription.Added, dooh) == 1 && handlerPanics(f, dooh) == 1
	})

	if err := cp.DeleteCRD(ctx, first.Name); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "deleted CRD leaves the subscription", func() bool { return !slices.Contains(sub.Resources(), gadgets) })
	eventually(t, ctx, "a Deleted per object of the deleted CRD", func() bool { return log.count(subscription.Deleted, gadgets) == 3 })
	before := log.count(subscription.Added, gadgets) + log.count(subscription.Updated, gadgets)
	createGadgets(dooh, "Doohickey", 0)
	time.Sleep(2 * time.Second)
	if after := log.count(subscription.Added, gadgets) + log.count(subscription.Updated, gadgets); after != before {
		t.Fatalf("events for a deleted CRD after removal: %d -> %d", before, after)
	}
	if !slices.Contains(sub.Resources(), dooh) {
		t.Fatal("the remaining CRD left the subscription")
	}
}

var metaCreate = metav1.CreateOptions{}

// handlerPanics counts the handler panics the factory recovered on gvr's
// informers (Status.HandlerPanics).
func handlerPanics(f *dynamicinformer.Factory, gvr schema.GroupVersionResource) int64 {
	var n int64
	for _, st := range f.Statuses() {
		if st.GVR == gvr {
			n += st.HandlerPanics
		}
	}
	return n
}

func stacks() []byte {
	buf := make([]byte, 16<<20)
	return buf[:runtime.Stack(buf, true)]
}
