package factorytest

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/eventhandler"
	"github.com/informerkit/informerkit/test/controlplane"
)

// sleepy is a recorder that sleeps before recording each event.
type sleepy struct {
	*recorder
	d time.Duration
}

func (s sleepy) OnAdd(o any, b bool) { time.Sleep(s.d); s.recorder.OnAdd(o, b) }
func (s sleepy) OnUpdate(a, b any)   { time.Sleep(s.d); s.recorder.OnUpdate(a, b) }
func (s sleepy) OnDelete(o any)      { time.Sleep(s.d); s.recorder.OnDelete(o) }

// blocked is a recorder whose every event waits until gate is closed.
type blocked struct {
	*recorder
	gate chan struct{}
}

func (b blocked) OnAdd(o any, x bool) { <-b.gate; b.recorder.OnAdd(o, x) }
func (b blocked) OnUpdate(o, n any)   { <-b.gate; b.recorder.OnUpdate(o, n) }
func (b blocked) OnDelete(o any)      { <-b.gate; b.recorder.OnDelete(o) }

// panicky panics on every event.
type panicky struct{ n atomic.Int64 }

func (p *panicky) OnAdd(any, bool)   { p.n.Add(1); panic("panicky handler: add") }
func (p *panicky) OnUpdate(any, any) { p.n.Add(1); panic("panicky handler: update") }
func (p *panicky) OnDelete(any)      { p.n.Add(1); panic("panicky handler: delete") }
func (r *recorder) events() int      { _, a, u, d := r.snapshot(); return a + u + d }

// TestSlowAndPanickingHandlers: on one informer, a fast handler, a handler
// that sleeps 50 ms per event, a handler stuck until the fast one has
// converged, and a handler that panics on every event. The fast one
// converges while the stuck one has completed nothing (so it waited for
// no one); every panic is recovered and counted in Status; the others
// converge later.
func TestSlowAndPanickingHandlers(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 5*time.Minute)
	sc := scenario(t)
	ns := unique("handlers")
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	leaks := controlplane.SnapshotGoroutines()
	f := newFactory(t, cp.Config())
	defer f.Shutdown()
	h := f.ForResource(configmaps, dynamicinformer.WithNamespaces(ns))
	fast, slow := newRecorder(), sleepy{newRecorder(), 50 * time.Millisecond}
	stuck := blocked{newRecorder(), make(chan struct{})}
	boom := &panicky{}
	for _, hd := range []interface {
		OnAdd(any, bool)
		OnUpdate(any, any)
		OnDelete(any)
	}{fast, slow, stuck, boom} {
		if _, err := h.Informer().AddEventHandler(hd); err != nil {
			t.Fatal(err)
		}
	}
	f.Start(ctx)
	eventually(t, ctx, "synced", h.Informer().HasSynced)
	w := &writer{kube: kubernetes.NewForConfigOrDie(cp.DirectConfig()), ns: ns, rnd: rand.New(rand.NewSource(7))}
	start := time.Now()
	w.run(ctx, t, 300)
	wrote := time.Now()
	n := converged(t, ctx, h, fast, ns)
	fastLag := time.Since(wrote)
	if done := stuck.events(); done != 0 {
		t.Fatalf("stuck handler completed %d events", done)
	}
	events := fast.events()
	eventually(t, ctx, "every panic counted", func() bool { return h.Status().HandlerPanics == int64(events) })
	st := h.Status()
	var pe *eventhandler.PanicError
	if !errors.As(st.LastHandlerPanic, &pe) || st.State != dynamicinformer.Synced {
		t.Fatalf("status %+v", st)
	}
	slowAtFast := slow.events()
	converged(t, ctx, h, slow.recorder, ns)
	slowLag := time.Since(wrote)
	close(stuck.gate)
	converged(t, ctx, h, stuck.recorder, ns)
	t.Logf("%d writes in %v; %d events per handler; fast handler converged %v after the last write (slow one had done %d events then), slow (50 ms/event) %v; %d panics recovered",
		w.n, wrote.Sub(start).Round(time.Millisecond), events, fastLag.Round(time.Millisecond), slowAtFast, slowLag.Round(time.Millisecond), st.HandlerPanics)
	f.Shutdown()
	leaks.VerifyNoLeaks(t)
	sc.Injected("one informer, 4 handlers: fast, 50 ms/event, blocked until the fast one converged, panics on every event; %d random writes", w.n)
	sc.Held("fast handler converged (%d objects, %d events) %v after the last write while the blocked one had completed 0 and the slow one %d; %d panics recovered and counted in Status (state stayed Synced); all handlers converged; no goroutine leak",
		n, events, fastLag.Round(time.Millisecond), slowAtFast, st.HandlerPanics)
}

// TestCoalescingUnderBurst: a slow level-triggered consumer behind
// Coalescing under a burst of updates to few keys holds at most one
// pending entry per key and ends with the server's state; the same
// consumer without it processes every event.
func TestCoalescingUnderBurst(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 5*time.Minute)
	sc := scenario(t)
	ns := unique("coalesce")
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	const keys, rounds = 20, 25
	direct := kubernetes.NewForConfigOrDie(cp.DirectConfig())
	for i := 0; i < keys; i++ {
		if _, err := direct.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	leaks := controlplane.SnapshotGoroutines()
	f := newFactory(t, cp.Config())
	defer f.Shutdown()
	h := f.ForResource(configmaps, dynamicinformer.WithNamespaces(ns))
	coalescedRec, plainRec := newRecorder(), newRecorder()
	cctx, stopCoalescing := context.WithCancel(ctx)
	defer stopCoalescing()
	var panics atomic.Int64
	co := eventhandler.Coalescing(cctx, eventhandler.RecoverPanics(sleepy{coalescedRec, 20 * time.Millisecond},
		func(*eventhandler.PanicError) { panics.Add(1) }))
	if _, err := h.Informer().AddEventHandler(co); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Informer().AddEventHandler(sleepy{plainRec, 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	f.Start(ctx)
	converged(t, ctx, h, coalescedRec, ns)
	// The burst: each key updated `rounds` times by `keys` writers at once.
	start := time.Now()
	var wg sync.WaitGroup
	var writeErrs atomic.Int64
	maxSeen := 0
	var mu sync.Mutex
	for k := 0; k < keys; k++ {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			for r := 1; r <= rounds; r++ {
				patch := fmt.Sprintf(`{"data":{"round":"%d"}}`, r)
				if _, err := direct.CoreV1().ConfigMaps(ns).Patch(ctx, fmt.Sprintf("cm-%d", k), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
					writeErrs.Add(1)
				}
				mu.Lock()
				if p := co.Stats().Pending; p > maxSeen {
					maxSeen = p
				}
				mu.Unlock()
			}
		}(k)
	}
	wg.Wait()
	burst := time.Since(start)
	converged(t, ctx, h, coalescedRec, ns)
	coalescedLag := time.Since(start) - burst
	st := co.Stats()
	if st.MaxPending > keys {
		t.Fatalf("coalescing handler held %d pending entries for %d keys", st.MaxPending, keys)
	}
	converged(t, ctx, h, plainRec, ns)
	plainLag := time.Since(start) - burst
	_, _, plainUpdates, _ := plainRec.snapshot()
	_, _, coalescedUpdates, _ := coalescedRec.snapshot()
	if plainUpdates < keys*rounds-int(writeErrs.Load()) {
		t.Fatalf("plain handler saw %d updates for %d writes", plainUpdates, keys*rounds)
	}
	t.Logf("burst of %d updates to %d keys in %v (%d write errors): coalescing handler received %d, delivered %d (%d updates), coalesced %d, max pending %d (sampled %d), converged %v after the burst; plain handler processed %d updates, converged %v after the burst",
		keys*rounds, keys, burst.Round(time.Millisecond), writeErrs.Load(), st.Received, st.Delivered, coalescedUpdates, st.Coalesced, st.MaxPending, maxSeen,
		coalescedLag.Round(time.Millisecond), plainUpdates, plainLag.Round(time.Millisecond))
	stopCoalescing()
	co.Wait()
	f.Shutdown()
	leaks.VerifyNoLeaks(t)
	if panics.Load() != 0 {
		t.Fatalf("%d panics", panics.Load())
	}
	sc.Injected("burst of %d updates to %d configmaps (%d concurrent writers, %v); consumers sleep 20 ms per event, one behind Coalescing, one plain", keys*rounds, keys, keys, burst.Round(time.Millisecond))
	sc.Held("Coalescing: max %d pending entries (≤ %d keys), %d events received, %d delivered, converged %v after the burst; plain: %d events processed, converged %v after; both equal the server; no goroutine leak",
		st.MaxPending, keys, st.Received, st.Delivered, coalescedLag.Round(time.Millisecond), plainUpdates, plainLag.Round(time.Millisecond))
}
