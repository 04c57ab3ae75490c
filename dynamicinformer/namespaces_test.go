package dynamicinformer

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/informerkit/informerkit/internal/leakcheck"
)

// A namespace watch the server refuses is tried again after its back-off
// (and not before), the refusal logged once however often it repeats, and
// once the watch opens the names come from its cache. Before, a refused
// watch was never tried again: a user granted the watch later listed the
// namespaces at every check for the rest of the run.
func TestNamespaceWatchRefusedIsRetried(t *testing.T) {
	t.Cleanup(func() { leakcheck.Snapshot("informerkit/dynamicinformer")(t) })
	saved := namespaceWatchRetry
	namespaceWatchRetry.min, namespaceWatchRetry.max = 300*time.Millisecond, time.Second
	t.Cleanup(func() { namespaceWatchRetry = saved })
	ns := &unstructured.Unstructured{}
	ns.SetAPIVersion("v1")
	ns.SetKind("Namespace")
	ns.SetName("a")
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(kruntime.NewScheme(),
		map[schema.GroupVersionResource]string{namespacesGVR: "NamespaceList"}, ns)
	var refuse atomic.Bool
	refuse.Store(true)
	var attempts atomic.Int64
	client.PrependWatchReactor("namespaces", func(a clienttesting.Action) (bool, watch.Interface, error) {
		if wa, ok := a.(clienttesting.WatchActionImpl); ok && wa.ListOptions.SendInitialEvents != nil {
			// The fake cannot stream a list: the reflector falls back.
			return true, nil, errors.New("watch-list not supported")
		}
		attempts.Add(1)
		if refuse.Load() {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "", errors.New("may not watch"))
		}
		return false, nil, nil
	})
	var mu sync.Mutex
	var logged []string
	logger := funcr.New(func(_, args string) { mu.Lock(); logged = append(logged, args); mu.Unlock() }, funcr.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	w := newNamespaceWatch(client, func(fn func(context.Context)) bool {
		wg.Add(1)
		go func() { defer wg.Done(); fn(ctx) }()
		return true
	}, logger)
	check := func() {
		t.Helper()
		if names, err := w.names(ctx); err != nil || len(names) != 1 {
			t.Fatalf("names %v, %v", names, err)
		}
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s (%d watch attempts)", what, attempts.Load())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// runs: the informers started.
	runs := func() uint64 { w.mu.Lock(); defer w.mu.Unlock(); return w.run }
	refusedOnce := func(n uint64) func() bool {
		return func() bool {
			w.mu.Lock()
			defer w.mu.Unlock()
			return w.run == n && !w.started && attempts.Load() > 0
		}
	}
	check()
	waitFor("the first watch refused", refusedOnce(1))
	check() // within the back-off: not tried
	time.Sleep(100 * time.Millisecond)
	if n := runs(); n != 1 {
		t.Fatalf("%d namespace informers started within the back-off, want 1", n)
	}
	time.Sleep(namespaceWatchRetry.min)
	check() // after it: tried, refused again
	waitFor("the second watch refused", refusedOnce(2))
	refuse.Store(false)
	time.Sleep(2 * namespaceWatchRetry.min) // the back-off doubled
	check()
	waitFor("the watch open, names from its cache", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.watching
	})
	mu.Lock()
	var refusals, reopened int
	for _, l := range logged {
		refusals += strings.Count(l, "namespace watch was refused")
		reopened += strings.Count(l, "namespace watch is open again")
	}
	mu.Unlock()
	if refusals != 1 || reopened != 1 {
		t.Fatalf("logged %q; want the refusal once and the reopening once", logged)
	}
	cancel()
}
