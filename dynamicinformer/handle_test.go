package dynamicinformer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/eventhandler"
	"github.com/informerkit/informerkit/internal/leakcheck"
)

// names records the object names a handler saw.
type names struct {
	mu   sync.Mutex
	seen map[string]bool
}

func newNames() *names { return &names{seen: map[string]bool{}} }

func (n *names) on(o any) {
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	n.mu.Lock()
	n.seen[o.(metav1.Object).GetName()] = true
	n.mu.Unlock()
}

func (n *names) has(name string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.seen[name]
}

func (n *names) OnAdd(o any, _ bool) { n.on(o) }
func (n *names) OnUpdate(_, o any)   { n.on(o) }
func (n *names) OnDelete(o any)      { n.on(o) }

// TestReleaseRemovesHandlers: handlers added through a handle — with
// AddEventHandler or with Informer().AddEventHandler — receive nothing
// after Release while another handle keeps the shared informer running;
// the released handle refuses new handlers (ErrStopped) and its reads
// keep working. Nothing is left running after Shutdown.
func TestReleaseRemovesHandlers(t *testing.T) {
	noLeaks := newGoroutinesCheck()
	noClientGoLeaks := leakcheck.Snapshot("k8s.io/client-go/tools/cache.")
	client := fakeClient(widget("a", "before", nil))
	f := NewSharedInformerFactory(client, Options{DisableCRDTracking: true})
	released, kept := f.ForResource(widgets), f.ForResource(widgets)
	if released.e != kept.e {
		t.Fatal("the two handles do not share one informer")
	}
	viaHandle, viaInformer, other := newNames(), newNames(), newNames()
	if _, err := released.Informer().AddEventHandler(viaHandle); err != nil {
		t.Fatal(err)
	}
	regInf, err := released.Informer().AddEventHandler(viaInformer)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kept.Informer().AddEventHandler(other); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f.Start(ctx)
	waitFor(t, func() bool {
		return viaHandle.has("before") && viaInformer.has("before") && other.has("before") && regInf.HasSynced()
	})

	released.Release()
	released.Release() // a no-op
	if _, err := client.Resource(widgets).Namespace("a").Create(ctx, widget("a", "after", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return other.has("after") })
	// client-go delivers each handler's events on its own goroutine: give
	// a handler that was wrongly kept the time to get the event too.
	time.Sleep(200 * time.Millisecond)
	if viaHandle.has("after") || viaInformer.has("after") {
		t.Fatalf("a released handle's handlers received an event: via the handle %v, via Informer() %v", viaHandle.has("after"), viaInformer.has("after"))
	}
	if st := kept.Status(); st.State != Synced {
		t.Fatalf("the kept handle's informer is %s after the other handle's Release", st.State)
	}

	for name, add := range map[string]func() error{
		"AddEventHandler": func() error { _, err := released.Informer().AddEventHandler(newNames()); return err },
		"AddEventHandlerWithOptions": func() error {
			_, err := released.Informer().AddEventHandlerWithOptions(newNames(), toolscache.HandlerOptions{})
			return err
		},
		"Informer().AddEventHandler": func() error { _, err := released.Informer().AddEventHandler(newNames()); return err },
		"Informer().AddEventHandlerWithResync": func() error {
			_, err := released.Informer().AddEventHandlerWithResyncPeriod(newNames(), time.Minute)
			return err
		},
		"Informer().AddEventHandlerWithOptions": func() error {
			_, err := released.Informer().AddEventHandlerWithOptions(newNames(), toolscache.HandlerOptions{})
			return err
		},
	} {
		if err := add(); !errors.Is(err, ErrStopped) {
			t.Errorf("%s on a released handle: %v, want ErrStopped", name, err)
		}
	}
	if err := released.Informer().RemoveEventHandler(regInf); err != nil {
		t.Errorf("removing an already removed handler: %v", err)
	}
	// Reads on the released handle see the shared cache.
	if st := released.Status(); st.Objects != 2 || st.State != Synced {
		t.Errorf("released handle's Status: %s with %d objects, want Synced with 2", st.State, st.Objects)
	}
	if objs, err := released.Lister().List(labels.Everything()); err != nil || len(objs) != 2 {
		t.Errorf("released handle's Lister: %d objects, %v", len(objs), err)
	}

	kept.Release()
	f.Shutdown()
	noLeaks(t)
	noClientGoLeaks(t)
}

// TestInformerHandlersRecoverPanics: a handler added with
// Informer().AddEventHandler is the handle's: its panics are recovered and
// counted in Status, the next event is delivered, and its registration
// syncs despite a panic on the initial list.
func TestInformerHandlersRecoverPanics(t *testing.T) {
	noLeaks := newGoroutinesCheck()
	client := fakeClient(widget("a", "w0", nil), widget("a", "w1", nil))
	f := NewSharedInformerFactory(client, Options{DisableCRDTracking: true})
	h := f.ForResource(widgets)
	got := newNames()
	reg, err := h.Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(o any) {
		got.on(o)
		panic(fmt.Sprintf("handler panic on %s", o.(metav1.Object).GetName()))
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f.Start(ctx)
	waitFor(t, reg.HasSynced)
	if _, err := client.Resource(widgets).Namespace("a").Create(ctx, widget("a", "w2", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return got.has("w2") && h.Status().HandlerPanics == 3 })
	var pe *eventhandler.PanicError
	if st := h.Status(); !errors.As(st.LastHandlerPanic, &pe) || pe.Event != "add" {
		t.Fatalf("LastHandlerPanic %v", st.LastHandlerPanic)
	}
	f.Shutdown()
	noLeaks(t)
}

// TestHandleInformerDoesNotRun: the factory runs the informer. Run and
// RunWithContext on a handle's Informer() start nothing and return when
// their stop channel or context ends, or when the informer stops; the
// settings the factory owns are refused.
func TestHandleInformerDoesNotRun(t *testing.T) {
	noLeaks := newGoroutinesCheck()
	client := fakeClient(widget("a", "w0", nil))
	f := NewSharedInformerFactory(client, Options{DisableCRDTracking: true})
	h := f.ForResource(widgets)
	inf := h.Informer()
	if inf != h.Informer() {
		t.Fatal("Informer() returns a different value on each call")
	}
	stop := make(chan struct{})
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		inf.Run(stop)
	}()
	time.Sleep(50 * time.Millisecond)
	if n := countActions(client, "list", widgets, ""); n != 0 {
		t.Fatalf("Run on the handle's informer sent %d lists before the factory started", n)
	}
	close(stop)
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its stop channel was closed")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f.Start(ctx)
	waitFor(t, func() bool { return h.Status().State == Synced })
	runCtx, stopRun := context.WithCancel(ctx)
	ran = make(chan struct{})
	go func() {
		defer close(ran)
		inf.RunWithContext(runCtx)
	}()
	time.Sleep(50 * time.Millisecond)
	stopRun()
	<-ran
	if inf.IsStopped() || h.Status().State != Synced {
		t.Fatalf("ending the handle informer's Run stopped the informer: %s", h.Status().State)
	}
	if err := inf.SetTransform(func(o any) (any, error) { return o, nil }); !errors.Is(err, ErrOptionConflict) {
		t.Errorf("SetTransform: %v, want ErrOptionConflict", err)
	}
	if err := inf.SetWatchErrorHandlerWithContext(nil); !errors.Is(err, ErrOptionConflict) {
		t.Errorf("SetWatchErrorHandlerWithContext: %v, want ErrOptionConflict", err)
	}

	// Once the informer stops (its last handle released), Run returns.
	ran = make(chan struct{})
	go func() {
		defer close(ran)
		inf.RunWithContext(ctx)
	}()
	h.Release()
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return when the informer stopped")
	}
	f.Shutdown()
	noLeaks(t)
}
