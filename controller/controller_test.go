package controller_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/controller"
	"github.com/informerkit/informerkit/discoveryresolver"
	"github.com/informerkit/informerkit/dynamicinformer"
)

// goroutinesIn counts goroutines running or started by this package.
func goroutinesIn() int {
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	c := 0
	for _, g := range strings.Split(string(buf[:n]), "\n\n") {
		if strings.Contains(g, "informerkit/controller.") && !strings.Contains(g, "testing.tRunner") {
			c++
		}
	}
	return c
}

func noLeaks(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for goroutinesIn() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines of the controller left", goroutinesIn())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func synced(t *testing.T, n int) (*dynamicinformer.Factory, *dynamicinformer.InformerHandle) {
	t.Helper()
	f := dynamicinformer.NewSharedInformerFactory(benchClient(n), dynamicinformer.Options{DisableCRDTracking: true})
	t.Cleanup(f.Shutdown)
	h := f.ForResource(benchGVR)
	t.Cleanup(h.Release)
	f.Start(context.Background())
	return f, h
}

func TestNewAndWatchErrors(t *testing.T) {
	f, h := synced(t, 1)
	noop := controller.ReconcilerFunc(func(context.Context, controller.Request) error { return nil })
	if _, err := controller.New(nil, noop, controller.Options{}); !errors.Is(err, controller.ErrNilArgument) {
		t.Errorf("nil factory: %v", err)
	}
	if _, err := controller.New(f, nil, controller.Options{}); !errors.Is(err, controller.ErrNilArgument) {
		t.Errorf("nil reconciler: %v", err)
	}
	c, err := controller.New(f, noop, controller.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Watch(nil); !errors.Is(err, controller.ErrNilArgument) {
		t.Errorf("Watch of a foreign informer: %v", err)
	}
	if err := c.Watch(h); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()
	time.Sleep(50 * time.Millisecond)
	if err := c.Run(ctx); !errors.Is(err, controller.ErrStarted) {
		t.Errorf("second Run: %v", err)
	}
	if err := c.Watch(h); !errors.Is(err, controller.ErrStarted) {
		t.Errorf("Watch after Run: %v", err)
	}
	if err := c.Subscribe(discoveryresolver.Filter{}); !errors.Is(err, controller.ErrStarted) {
		t.Errorf("Subscribe after Run: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	noLeaks(t)
}

// TestSubscribeWithoutResolver: the factory's error comes back from Run,
// which leaves nothing running.
func TestSubscribeWithoutResolver(t *testing.T) {
	f, _ := synced(t, 1)
	c, _ := controller.New(f, controller.ReconcilerFunc(func(context.Context, controller.Request) error { return nil }), controller.Options{})
	if err := c.Subscribe(discoveryresolver.Filter{Groups: []string{"example.com"}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Run(ctx); !errors.Is(err, dynamicinformer.ErrInvalid) || !strings.Contains(err.Error(), "Options.Resolver") {
		t.Errorf("Run: %v, want ErrInvalid naming Options.Resolver", err)
	}
	noLeaks(t)
}

// TestMaxRetries: a key that always fails is given up after MaxRetries
// failures.
func TestMaxRetries(t *testing.T) {
	f, h := synced(t, 1)
	var calls atomic.Int32
	c, _ := controller.New(f, controller.ReconcilerFunc(func(context.Context, controller.Request) error {
		calls.Add(1)
		return errors.New("always")
	}), controller.Options{MaxRetries: 3})
	if err := c.Watch(h); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for c.Stats().GaveUp == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // the default back-off would have retried several times by now
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); calls.Load() != 3 || st.GaveUp != 1 || st.Failed != 3 || st.Requeued != 2 {
		t.Errorf("calls %d, stats %+v: want 3 calls, 2 requeues, 1 give-up", calls.Load(), st)
	}
	noLeaks(t)
}

// TestReconcilePanicIsAnError: a panic becomes a *ReconcilePanicError
// retried like an error.
func TestReconcilePanicIsAnError(t *testing.T) {
	f, h := synced(t, 1)
	var calls atomic.Int32
	c, _ := controller.New(f, controller.ReconcilerFunc(func(context.Context, controller.Request) error {
		if calls.Add(1) == 1 {
			panic("boom")
		}
		return nil
	}), controller.Options{})
	if err := c.Watch(h); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for c.Stats().Reconciled == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.ReconcilePanics != 1 || st.Requeued != 1 || st.Reconciled != 1 {
		t.Errorf("stats %+v", st)
	}
	noLeaks(t)
}

func TestKeys(t *testing.T) {
	gvr := schema.GroupVersionResource{Group: "stable.example.com", Version: "v1", Resource: "crontabs"}
	u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "a", "namespace": "ns"}}}
	for _, tc := range []struct {
		obj  any
		want controller.Key
		ok   bool
		str  string
	}{
		{u, controller.Key{GVR: gvr, Namespace: "ns", Name: "a"}, true, "crontabs.v1.stable.example.com ns/a"},
		{toolscache.DeletedFinalStateUnknown{Key: "ns/a", Obj: u}, controller.Key{GVR: gvr, Namespace: "ns", Name: "a"}, true, ""},
		{toolscache.DeletedFinalStateUnknown{Key: "b"}, controller.Key{GVR: gvr, Name: "b"}, true, "crontabs.v1.stable.example.com b"},
		{"not an object", controller.Key{}, false, ""},
	} {
		got, ok := controller.KeyOf(gvr, tc.obj)
		if got != tc.want || ok != tc.ok {
			t.Errorf("KeyOf(%T) = %v, %v; want %v, %v", tc.obj, got, ok, tc.want, tc.ok)
		}
		if tc.str != "" && got.String() != tc.str {
			t.Errorf("String() = %q, want %q", got.String(), tc.str)
		}
	}
	core := controller.Key{GVR: schema.GroupVersionResource{Version: "v1", Resource: "pods"}, Namespace: "x", Name: "p"}
	if core.String() != "pods.v1 x/p" || core.ObjectKey() != "x/p" {
		t.Errorf("core key: %q %q", core.String(), core.ObjectKey())
	}
}
