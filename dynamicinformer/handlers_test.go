package dynamicinformer

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	toolscache "k8s.io/client-go/tools/cache"
)

// callLog records delegate calls as strings: "add ns/name@rv",
// "update ns/name@oldrv->newrv", "delete ns/name@rv" (a tombstone shows
// as "delete! ...").
type callLog struct {
	mu      sync.Mutex
	calls   []string
	block   chan struct{} // when non-nil, the first call waits for it
	entered chan struct{}
}

func rv(o any) string {
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		return "!" + d.Obj.(metav1.Object).GetNamespace() + "/" + d.Obj.(metav1.Object).GetName() + "@" + d.Obj.(metav1.Object).GetResourceVersion()
	}
	m := o.(metav1.Object)
	return m.GetNamespace() + "/" + m.GetName() + "@" + m.GetResourceVersion()
}

func (l *callLog) record(s string) {
	l.mu.Lock()
	block := l.block
	l.block = nil
	l.mu.Unlock()
	if block != nil {
		close(l.entered)
		<-block
		return // the blocker's own call is not recorded
	}
	l.mu.Lock()
	l.calls = append(l.calls, s)
	l.mu.Unlock()
}

func (l *callLog) OnAdd(o any, _ bool)      { l.record("add " + rv(o)) }
func (l *callLog) OnUpdate(old, newObj any) { l.record("update " + rv(old) + "->" + rv(newObj)) }
func (l *callLog) OnDelete(o any)           { l.record("delete " + rv(o)) }

func (l *callLog) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.calls...)
}

func cm(name, version string) *unstructured.Unstructured {
	u := widget("ns", name, nil)
	u.SetResourceVersion(version)
	return u
}

// blockedCoalescer returns a coalescer whose delegate is blocked inside
// the delivery of a "blocker" object, so that events sent next pend.
func blockedCoalescer(t *testing.T, ctx context.Context) (*CoalescingHandler, *callLog, func()) {
	t.Helper()
	l := &callLog{block: make(chan struct{}), entered: make(chan struct{})}
	release := l.block
	c := Coalescing(ctx, l)
	c.OnAdd(cm("blocker", "0"), false)
	select {
	case <-l.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("delegate never called")
	}
	return c, l, func() { close(release) }
}

func waitDelivered(t *testing.T, c *CoalescingHandler, want int64) {
	t.Helper()
	waitFor(t, func() bool { return c.Stats().Delivered >= want && c.Stats().Pending == 0 })
}

func TestCoalescingMerges(t *testing.T) {
	add := func(c *CoalescingHandler, v string) { c.OnAdd(cm("x", v), false) }
	upd := func(old, v string) func(*CoalescingHandler) {
		return func(c *CoalescingHandler) { c.OnUpdate(cm("x", old), cm("x", v)) }
	}
	del := func(v string) func(*CoalescingHandler) {
		return func(c *CoalescingHandler) { c.OnDelete(cm("x", v)) }
	}
	tomb := func(v string) func(*CoalescingHandler) {
		return func(c *CoalescingHandler) {
			c.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "ns/x", Obj: cm("x", v)})
		}
	}
	a := func(v string) func(*CoalescingHandler) { return func(c *CoalescingHandler) { add(c, v) } }
	for _, tc := range []struct {
		name   string
		events []func(*CoalescingHandler)
		want   []string
	}{
		{"add then updates: one add of the latest", []func(*CoalescingHandler){a("1"), upd("1", "2"), upd("2", "3")}, []string{"add ns/x@3"}},
		{"updates: one update from the last seen to the latest", []func(*CoalescingHandler){upd("1", "2"), upd("2", "3")}, []string{"update ns/x@1->ns/x@3"}},
		{"update then delete: a delete with the final state", []func(*CoalescingHandler){upd("1", "2"), del("3")}, []string{"delete ns/x@3"}},
		{"tombstone passes through", []func(*CoalescingHandler){upd("1", "2"), tomb("2")}, []string{"delete !ns/x@2"}},
		{"add then delete: nothing", []func(*CoalescingHandler){a("1"), del("1")}, nil},
		{"add, delete, add: one add", []func(*CoalescingHandler){a("1"), del("1"), a("2")}, []string{"add ns/x@2"}},
		{"delete then add: delete kept before the add", []func(*CoalescingHandler){del("1"), a("2")}, []string{"delete ns/x@1", "add ns/x@2"}},
		{"update, delete, add, update", []func(*CoalescingHandler){upd("1", "2"), del("2"), a("3"), upd("3", "4")}, []string{"delete ns/x@2", "add ns/x@4"}},
		{"delete, add, delete: one delete of the last final state", []func(*CoalescingHandler){del("1"), a("2"), del("2")}, []string{"delete ns/x@2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			noLeaks := newGoroutinesCheck()
			ctx, cancel := context.WithCancel(context.Background())
			c, l, release := blockedCoalescer(t, ctx)
			for _, e := range tc.events {
				e(c)
			}
			if p := c.Stats().Pending; p != 1 && tc.want != nil {
				t.Fatalf("pending %d, want 1", p)
			}
			release()
			// One marker object after x: when it is delivered, x was too.
			c.OnAdd(cm("zz-marker", "1"), false)
			waitFor(t, func() bool {
				s := l.snapshot()
				return len(s) > 0 && s[len(s)-1] == "add ns/zz-marker@1"
			})
			got := l.snapshot()
			got = got[:len(got)-1]
			if len(got) == 0 {
				got = nil
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("delivered %q, want %q", got, tc.want)
			}
			cancel()
			c.Wait()
			noLeaks(t)
		})
	}
}

// TestCoalescingBoundedByKeys: 10,000 updates to 100 keys while the
// delegate is stuck hold at most 100 pending entries; once it runs, each
// key's last delivered state is the latest.
func TestCoalescingBoundedByKeys(t *testing.T) {
	noLeaks := newGoroutinesCheck()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, l, release := blockedCoalescer(t, ctx)
	const keys, rounds = 100, 100
	for r := 1; r <= rounds; r++ {
		for k := 0; k < keys; k++ {
			name := fmt.Sprintf("k%03d", k)
			c.OnUpdate(cm(name, fmt.Sprint(r-1)), cm(name, fmt.Sprint(r)))
		}
	}
	st := c.Stats()
	if st.Pending != keys || st.MaxPending > keys+1 {
		t.Fatalf("stats %+v: want %d pending", st, keys)
	}
	if st.Coalesced != keys*(rounds-1) {
		t.Fatalf("coalesced %d, want %d", st.Coalesced, keys*(rounds-1))
	}
	release()
	waitDelivered(t, c, keys)
	calls := l.snapshot()
	if len(calls) != keys {
		t.Fatalf("%d deliveries, want %d", len(calls), keys)
	}
	for k, call := range calls {
		want := fmt.Sprintf("update ns/k%03d@0->ns/k%03d@%d", k, k, rounds)
		if call != want {
			t.Fatalf("delivery %d: %q, want %q", k, call, want)
		}
	}
	cancel()
	c.Wait()
	noLeaks(t)
}

func TestCoalescingStopsWithContext(t *testing.T) {
	noLeaks := newGoroutinesCheck()
	ctx, cancel := context.WithCancel(context.Background())
	c, _, release := blockedCoalescer(t, ctx)
	c.OnAdd(cm("a", "1"), false)
	cancel()
	waitFor(t, func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.stopped })
	release()
	c.Wait()
	c.OnAdd(cm("b", "1"), false)
	st := c.Stats()
	if st.Dropped != 2 || st.Pending != 0 {
		t.Fatalf("after stop: %+v, want 2 dropped (one pending, one late)", st)
	}
	noLeaks(t)
}

// handlerProbe is a handler that counts events and optionally blocks or
// panics.
type handlerProbe struct {
	events  atomic.Int64
	gate    chan struct{} // when non-nil, every event waits for it
	panics  bool
	latency sync.Map // name -> time first seen
}

func (p *handlerProbe) on(o any) {
	if p.gate != nil {
		<-p.gate
	}
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	p.latency.LoadOrStore(o.(metav1.Object).GetName(), time.Now())
	p.events.Add(1)
	if p.panics {
		panic("probe panic on " + o.(metav1.Object).GetName())
	}
}

func (p *handlerProbe) OnAdd(o any, _ bool) { p.on(o) }
func (p *handlerProbe) OnUpdate(_, o any)   { p.on(o) }
func (p *handlerProbe) OnDelete(o any)      { p.on(o) }

// TestHandlersAreIsolated: on one informer, a handler stuck in its first
// event and a handler that panics on every event do not hold back a fast
// handler; panics are counted in Status, not fatal, and a panic on the
// initial list does not keep the handler's registration from syncing.
func TestHandlersAreIsolated(t *testing.T) {
	noLeaks := newGoroutinesCheck()
	const initial, created = 5, 50
	var objs []any
	for i := 0; i < initial; i++ {
		objs = append(objs, widget("a", fmt.Sprintf("init-%d", i), nil))
	}
	client := fakeClient()
	for _, o := range objs {
		if _, err := client.Resource(widgets).Namespace("a").Create(context.Background(), o.(*unstructured.Unstructured), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	f := NewSharedInformerFactory(client, 0, WithoutCRDTracking())
	h := f.ForResource(widgets).(*InformerHandle)
	if _, err := h.AddEventHandler(nil); !errors.Is(err, ErrNilHandler) {
		t.Fatalf("nil handler: %v", err)
	}
	fast, slow, panicky := &handlerProbe{}, &handlerProbe{gate: make(chan struct{})}, &handlerProbe{panics: true}
	for _, p := range []*handlerProbe{fast, slow} {
		if _, err := h.AddEventHandler(p); err != nil {
			t.Fatal(err)
		}
	}
	reg, err := h.AddEventHandler(panicky)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f.Start(ctx)
	waitFor(t, func() bool { return h.Status().State == Synced })
	waitFor(t, reg.HasSynced) // the panics on the initial list were recovered
	createdAt := map[string]time.Time{}
	for i := 0; i < created; i++ {
		name := fmt.Sprintf("new-%d", i)
		createdAt[name] = time.Now()
		if _, err := client.Resource(widgets).Namespace("a").Create(ctx, widget("a", name, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, func() bool { return fast.events.Load() == initial+created })
	// The slow handler is still stuck in its first event: the fast one got
	// everything without waiting for it.
	if n := slow.events.Load(); n != 0 {
		t.Fatalf("slow handler completed %d events while blocked", n)
	}
	waitFor(t, func() bool { return h.Status().HandlerPanics == initial+created })
	st := h.Status()
	var pe *HandlerPanicError
	if !errors.Is(st.LastHandlerPanic, ErrHandlerPanic) || !errors.As(st.LastHandlerPanic, &pe) || pe.Event != "add" || pe.Key == "" {
		t.Fatalf("last panic %v", st.LastHandlerPanic)
	}
	if st.State != Synced {
		t.Fatalf("state %s after handler panics, want Synced", st.State)
	}
	var worst time.Duration
	for name, at := range createdAt {
		v, _ := fast.latency.Load(name)
		if d := v.(time.Time).Sub(at); d > worst {
			worst = d
		}
	}
	t.Logf("fast handler: %d events, worst create-to-handler delay %v while the slow handler was blocked; %d panics recovered",
		fast.events.Load(), worst, st.HandlerPanics)
	close(slow.gate)
	waitFor(t, func() bool { return slow.events.Load() == initial+created })
	f.Shutdown()
	noLeaks(t)
}

// newGoroutinesCheck snapshots the goroutines alive now; the returned
// function fails the test if goroutines started since, running code of
// this package, are still alive after a bounded wait. (Goroutines other
// tests left behind do not count.)
func newGoroutinesCheck() func(t *testing.T) {
	stacks := func() map[string]string {
		buf := make([]byte, 4<<20)
		n := runtime.Stack(buf, true)
		out := map[string]string{}
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			id, _, _ := strings.Cut(g, " [")
			out[id] = g
		}
		return out
	}
	before := stacks()
	return func(t *testing.T) {
		t.Helper()
		var left []string
		for i := 0; i < 200; i++ {
			left = left[:0]
			for id, g := range stacks() {
				if _, ok := before[id]; ok || strings.Contains(g, "newGoroutinesCheck") || strings.Contains(g, "testing.tRunner") {
					continue
				}
				if strings.Contains(g, "informerkit/dynamicinformer.") {
					left = append(left, g)
				}
			}
			if len(left) == 0 {
				return
			}
			time.Sleep(25 * time.Millisecond)
		}
		t.Fatalf("%d goroutines leaked:\n%s", len(left), strings.Join(left, "\n\n"))
	}
}
