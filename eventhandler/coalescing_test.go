package eventhandler

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/internal/leakcheck"
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
	u := &unstructured.Unstructured{Object: map[string]interface{}{}}
	u.SetNamespace("ns")
	u.SetName(name)
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
			noLeaks := leakcheck.Snapshot("informerkit/eventhandler.")
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
	noLeaks := leakcheck.Snapshot("informerkit/eventhandler.")
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
	noLeaks := leakcheck.Snapshot("informerkit/eventhandler.")
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

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
