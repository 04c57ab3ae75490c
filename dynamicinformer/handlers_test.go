package dynamicinformer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/eventhandler"
	"github.com/informerkit/informerkit/internal/leakcheck"
)

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
	f := NewSharedInformerFactory(client, Options{DisableCRDTracking: true})
	h := f.ForResource(widgets)
	if _, err := h.Informer().AddEventHandler(nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("nil handler: %v", err)
	}
	fast, slow, panicky := &handlerProbe{}, &handlerProbe{gate: make(chan struct{})}, &handlerProbe{panics: true}
	for _, p := range []*handlerProbe{fast, slow} {
		if _, err := h.Informer().AddEventHandler(p); err != nil {
			t.Fatal(err)
		}
	}
	reg, err := h.Informer().AddEventHandler(panicky)
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
	var pe *eventhandler.PanicError
	if !errors.As(st.LastHandlerPanic, &pe) || pe.Event != "add" || pe.Key == "" {
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

// newGoroutinesCheck fails a test that leaves goroutines of this
// package running (see leakcheck.Snapshot).
func newGoroutinesCheck() func(t testing.TB) {
	return leakcheck.Snapshot("informerkit/dynamicinformer")
}
