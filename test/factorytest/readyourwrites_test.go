package factorytest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/test/controlplane"
)

// TestReadYourWrites: a controller writes (create, update, delete) with
// its own client and waits for its informer's cache to catch up
// (WaitForObject, WaitForResourceVersion); the lister then sees the
// write. While the informer's connection is stalled the wait ends with
// the context, not with a stale yes; once the connection is back it
// succeeds. When the CRD is deleted, a wait ends with ErrNotServed.
func TestReadYourWrites(t *testing.T) {
	leaks := controlplane.Parallel(t)
	ctx := ctxT(t, 4*time.Minute)
	px := cp.NewProxy(t) // faults below reach this test's clients only
	sc := scenario(t)
	sc.Injected("writes through a direct client, each followed by a wait on the informer's cache; the informer's connection stalled (proxy) during one write; the CRD deleted during a wait")
	gvr, crdName := installCRD(t, ctx)
	ns := unique("ryw")
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	f := newFactory(t, px.Config())
	defer f.Shutdown()
	h := f.ForResource(gvr, dynamicinformer.WithNamespaces(ns))
	all := f.ForResource(gvr) // all namespaces: a write in ns is the resource's too
	f.Start(ctx)
	for g, ok := range f.WaitForCacheSync(ctx) {
		if !ok {
			t.Fatalf("%s did not sync", g)
		}
	}
	// Writes go straight to the API server; the informers watch through
	// the proxy.
	writer := dynamic.NewForConfigOrDie(cp.DirectConfig()).Resource(gvr).Namespace(ns)
	lister := h.Lister().ByNamespace(ns)

	const n = 20
	var waits []time.Duration
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("w-%d", i)
		created, err := writer.Create(ctx, obj(gvr.GroupVersion().String(), "Widget", ns, name, nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := h.WaitForObject(ctx, created); err != nil {
			t.Fatalf("create %s: WaitForObject: %v", name, err)
		}
		waits = append(waits, time.Since(start))
		got, err := lister.Get(name)
		if err != nil {
			t.Fatalf("create %s: the lister lacks it after the wait: %v", name, err)
		}
		if rv := got.(metav1.Object).GetResourceVersion(); rv != created.GetResourceVersion() {
			t.Fatalf("create %s: cached at %s, written at %s", name, rv, created.GetResourceVersion())
		}

		created.Object["spec"] = map[string]interface{}{"value": "updated"}
		updated, err := writer.Update(ctx, created, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		start = time.Now()
		if err := all.WaitForResourceVersion(ctx, updated.GetResourceVersion()); err != nil {
			t.Fatalf("update %s: WaitForResourceVersion: %v", name, err)
		}
		waits = append(waits, time.Since(start))
		got, err = all.Lister().ByNamespace(ns).Get(name)
		if err != nil || got.(*unstructured.Unstructured).Object["spec"].(map[string]interface{})["value"] != "updated" {
			t.Fatalf("update %s: the lister has %v (%v) after the wait, want the update", name, got, err)
		}

		// A delete's answer carries no resourceVersion (a Status):
		// WaitForDeletion takes the object as last read. (A list's
		// resourceVersion would not do: it is the whole server's revision,
		// which other tests' writes move past this resource's last event;
		// the cache reaches it only at the next bookmark, about a minute
		// later.)
		if err := writer.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		start = time.Now()
		if err := h.WaitForDeletion(ctx, updated); err != nil {
			t.Fatalf("delete %s: WaitForDeletion: %v", name, err)
		}
		waits = append(waits, time.Since(start))
		if _, err := lister.Get(name); !apierrors.IsNotFound(err) {
			t.Fatalf("delete %s: the lister still has it after the wait (%v)", name, err)
		}
	}
	sort.Slice(waits, func(i, j int) bool { return waits[i] < waits[j] })
	t.Logf("%d waits: median %s, max %s", len(waits), waits[len(waits)/2], waits[len(waits)-1])

	// The informer's connection stalls: a write is not in the cache, and
	// the wait says so when its context ends.
	px.SetStalled(true)
	stalled, err := writer.Create(ctx, obj(gvr.GroupVersion().String(), "Widget", ns, "during-stall", nil), metav1.CreateOptions{})
	if err != nil {
		px.SetStalled(false)
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, time.Second)
	err = h.WaitForObject(short, stalled)
	cancel()
	_, getErr := lister.Get("during-stall")
	px.SetStalled(false)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait during the stall: %v, want context.DeadlineExceeded", err)
	}
	if !apierrors.IsNotFound(getErr) {
		t.Fatalf("during the stall the lister has the write already (%v): the stall did not hold the watch", getErr)
	}
	start := time.Now()
	if err := h.WaitForObject(ctx, stalled); err != nil {
		t.Fatalf("wait after the stall: %v", err)
	}
	afterStall := time.Since(start)
	if _, err := lister.Get("during-stall"); err != nil {
		t.Fatalf("after the stall the lister lacks the write: %v", err)
	}
	t.Logf("caught up %s after the stall ended", afterStall.Round(time.Millisecond))

	// The CRD goes while a wait for a version the informer never reaches
	// runs: the wait ends with ErrNotServed.
	waitErr := make(chan error, 1)
	go func() {
		waitErr <- h.WaitForResourceVersion(ctx, "999999999999")
	}()
	if err := cp.DeleteCRD(ctx, crdName); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waitErr:
		if !errors.Is(err, dynamicinformer.ErrNotServed) || !errors.Is(err, dynamicinformer.ErrNotServed) {
			t.Fatalf("wait across the CRD's deletion: %v, want ErrNotServed (and ErrNotServed)", err)
		}
	case <-ctx.Done():
		t.Fatal("the wait did not end when the CRD was deleted")
	}
	h.Release()
	if err := h.WaitForResourceVersion(ctx, "1"); !errors.Is(err, dynamicinformer.ErrStopped) {
		t.Fatalf("released handle: %v, want ErrStopped", err)
	}
	f.Shutdown()
	leaks.VerifyNoLeaks(t)
	sc.Held("%d writes each visible in the lister once the wait returned (median wait %s, max %s); during the stall the wait ended with its context and the lister lacked the write; %s after the stall it caught up; the CRD's deletion ended a wait with ErrNotServed; no goroutine leak",
		3*n, waits[len(waits)/2].Round(time.Millisecond), waits[len(waits)-1].Round(time.Millisecond), afterStall.Round(time.Millisecond))
}
