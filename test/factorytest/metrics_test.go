package factorytest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/dynamicinformer/metrics"
	"github.com/informerkit/informerkit/test/controlplane"
)

// metricsRecorder is a metrics.Exporter that keeps counts per informer
// GVR, and the factory's wanted/running informer counts derived from the
// states (as package metrics says an exporter does).
type metricsRecorder struct {
	mu      sync.Mutex // guards everything below
	byGVR   map[schema.GroupVersionResource]*informerCounts
	wanted  int
	running int
}

type informerCounts struct {
	states      []dynamicinformer.State
	events      map[string]int
	objects     int
	requests    map[string]int // "verb reason"
	restarts    int
	latencies   int
	storeRV     float64
	synced      int
	stopped     bool
	afterStop   int
	lastEventAt time.Time
}

func newMetricsRecorder() *metricsRecorder {
	return &metricsRecorder{byGVR: map[schema.GroupVersionResource]*informerCounts{}}
}

func (r *metricsRecorder) NewInformer(id metrics.Identity) metrics.Informer {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := &informerCounts{events: map[string]int{}, requests: map[string]int{}}
	r.byGVR[id.GVR] = c
	r.wanted++
	return &recordedInformer{r: r, c: c}
}

// read runs f on gvr's counts under the lock (c nil: no informer yet).
func (r *metricsRecorder) read(gvr schema.GroupVersionResource, f func(c *informerCounts) bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.byGVR[gvr]
	if c == nil {
		return false
	}
	return f(c)
}

type recordedInformer struct {
	r *metricsRecorder
	c *informerCounts
}

func (ri *recordedInformer) do(f func(c *informerCounts)) {
	ri.r.mu.Lock()
	defer ri.r.mu.Unlock()
	if ri.c.stopped {
		ri.c.afterStop++
		return
	}
	f(ri.c)
}

func isRunning(s dynamicinformer.State) bool {
	return s == dynamicinformer.Syncing || s == dynamicinformer.Synced || s == dynamicinformer.Stale
}

func (ri *recordedInformer) State(s string) {
	ri.do(func(c *informerCounts) {
		was := dynamicinformer.State("")
		if len(c.states) > 0 {
			was = c.states[len(c.states)-1]
		}
		now := dynamicinformer.State(s)
		if isRunning(was) != isRunning(now) {
			if isRunning(now) {
				ri.r.running++
			} else {
				ri.r.running--
			}
		}
		if now == dynamicinformer.Stopped {
			c.stopped = true
			ri.r.wanted--
		}
		c.states = append(c.states, now)
	})
}
func (ri *recordedInformer) Synced() { ri.do(func(c *informerCounts) { c.synced++ }) }
func (ri *recordedInformer) Event(t string, objects int) {
	ri.do(func(c *informerCounts) { c.events[t]++; c.objects = objects; c.lastEventAt = time.Now() })
}
func (ri *recordedInformer) Request(verb, reason string) {
	ri.do(func(c *informerCounts) { c.requests[verb+" "+reason]++ })
}
func (ri *recordedInformer) WatchRestart()    { ri.do(func(c *informerCounts) { c.restarts++ }) }
func (ri *recordedInformer) HandlerPanic()    {}
func (ri *recordedInformer) QueuedItems(int)  {}
func (ri *recordedInformer) OutsideShard(int) {}
func (ri *recordedInformer) ProcessingLatency(time.Duration) {
	ri.do(func(c *informerCounts) { c.latencies++ })
}
func (ri *recordedInformer) StoreResourceVersion(rv float64) {
	ri.do(func(c *informerCounts) { c.storeRV = rv })
}

// TestMetricsFromTheServer: what the library reports through Options.Metrics
// for informers against the real server: a forbidden list by its reason,
// objects and events of a synced CRD informer, a watch restart when the
// connection is cut, client-go's processing and store metrics, the CRD's
// deletion (Removed, a Deleted event per object, no object cached, no
// longer running), and nothing after Stopped.
func TestMetricsFromTheServer(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 3*time.Minute)
	px := cp.NewProxy(t) // faults below reach this test's clients only
	sc := scenario(t)
	sc.Injected("informers with Options.Metrics: one forbidden by RBAC, one on a CRD with 5 objects; connections cut (proxy); the CRD deleted; released")
	gvr, crdName := installCRD(t, ctx)
	ns := unique("metrics")
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	createN(t, ctx, gvr, ns, 5, nil)
	leaks := controlplane.SnapshotGoroutines()
	rec := newMetricsRecorder()
	f := newFactory(t, px.Config(), dynamicinformer.Options{Metrics: rec})
	defer f.Shutdown()
	h := f.ForResource(gvr, dynamicinformer.WithNamespaces(ns))
	deniedRec := newMetricsRecorder()
	denied := newFactory(t, px.UserConfig(unique("metrics-nobody")), dynamicinformer.Options{Metrics: deniedRec, DisableCRDTracking: true})
	defer denied.Shutdown()
	secrets := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	denied.ForResource(secrets, dynamicinformer.WithNamespaces(ns))
	f.Start(ctx)
	denied.Start(ctx)

	eventually(t, ctx, "the forbidden list reported by reason", func() bool {
		return deniedRec.read(secrets, func(c *informerCounts) bool { return c.requests["list Forbidden"] >= 1 })
	})
	eventually(t, ctx, "5 objects delivered", func() bool {
		return rec.read(gvr, func(c *informerCounts) bool { return c.objects == 5 && c.events["ADDED"] == 5 })
	})
	rec.read(gvr, func(c *informerCounts) bool {
		// The first sync streams (a watch-list request), or lists.
		if c.synced < 1 || c.latencies == 0 || c.storeRV <= 0 || c.requests["list "]+c.requests["watch "] < 1 {
			t.Errorf("synced %d, processing latencies %d, store resourceVersion %v, requests %v; want a sync, client-go metrics, a request answered",
				c.synced, c.latencies, c.storeRV, c.requests)
		}
		return true
	})
	// The refused list is counted when it is answered; the state follows
	// once the reflector's error reaches the informer.
	eventually(t, ctx, "the forbidden informer's last state Failed", func() bool {
		return deniedRec.read(secrets, func(c *informerCounts) bool {
			return len(c.states) > 0 && c.states[len(c.states)-1] == dynamicinformer.Failed
		})
	})

	// The connection is cut: the watch ends and is opened again.
	px.CutAll()
	eventually(t, ctx, "a watch restart", func() bool {
		return rec.read(gvr, func(c *informerCounts) bool { return c.restarts >= 1 })
	})

	// The CRD goes: a delete per object, Removed, nothing cached, not
	// running.
	if err := cp.DeleteCRD(ctx, crdName); err != nil {
		t.Fatal(err)
	}
	eventuallySeen(t, ctx, "Removed with every object deleted", func() bool {
		return rec.read(gvr, func(c *informerCounts) bool {
			return c.states[len(c.states)-1] == dynamicinformer.Removed && c.events["DELETED"] == 5 && c.objects == 0
		})
	}, func() string {
		var out string
		rec.read(gvr, func(c *informerCounts) bool {
			out = fmt.Sprintf("states %v, events %v, %d objects, %d watch restarts", c.states, c.events, c.objects, c.restarts)
			return true
		})
		return fmt.Sprintf("%s; status %+v", out, h.Status())
	})
	rec.mu.Lock()
	wanted, running := rec.wanted, rec.running
	rec.mu.Unlock()
	if wanted != 1 || running != 0 {
		t.Errorf("after the CRD's deletion wanted/running = %d/%d, want 1/0", wanted, running)
	}
	h.Release()
	eventually(t, ctx, "Stopped", func() bool {
		return rec.read(gvr, func(c *informerCounts) bool { return c.stopped })
	})
	f.Shutdown()
	denied.Shutdown()
	rec.mu.Lock()
	wanted, running = rec.wanted, rec.running
	afterStop := rec.byGVR[gvr].afterStop
	restarts := rec.byGVR[gvr].restarts
	rec.mu.Unlock()
	if wanted != 0 || running != 0 || afterStop != 0 {
		t.Errorf("after shutdown wanted/running %d/%d, %d calls after Stopped; want 0/0, none", wanted, running, afterStop)
	}
	leaks.VerifyNoLeaks(t)
	sc.Held("forbidden list reported as reason Forbidden (state Failed); 5 adds and 5 objects; %d watch restart(s) after the cut; the CRD's deletion: Removed, 5 deletes, 0 objects, wanted/running 1/0; nothing after Stopped; no goroutine leak", restarts)
}
