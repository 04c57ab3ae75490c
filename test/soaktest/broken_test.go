package soaktest

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/test/controlplane"
)

// brokenSeed is the seed the self-test runs with.
const brokenSeed = 29

// TestCheckCatchesBrokenInformers: the soak's check, run as the soak runs
// it (seed 29, writers, a quiet point), reports two deliberately broken
// informers and nothing else: a client-go informer whose ListerWatcher
// drops the first Deleted watch event (its cache keeps a deleted object:
// "cache vs server", one extra key), and a handler on an informerkit
// informer that loses its first delete ("handler replay vs cache", one
// extra key). The honest informers beside them pass. The run goes on
// after a divergence: its second iteration is recorded too (both broken
// informers stay wrong), and the report lists both.
func TestCheckCatchesBrokenInformers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	leaks := controlplane.SnapshotGoroutines()
	var dropped atomic.Value // the key of the dropped Deleted event
	var stopBroken context.CancelFunc
	var brokenDone chan struct{}
	cfg := config{
		prefix: "broken", seed: brokenSeed, rate: 100, iterations: 2,
		window: func(*rand.Rand) time.Duration { return 3 * time.Second },
		quiet:  10 * time.Second, minimal: true, logf: t.Logf,
		extra: func(ctx context.Context, h *harness) []*subject {
			// A plain client-go informer over configmaps in the first
			// namespace, its watch losing the first Deleted event.
			res := h.dyn.Resource(h.configmaps.gvr).Namespace(h.namespaces[0])
			var once atomic.Bool
			lw := &toolscache.ListWatch{
				ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
					return res.List(ctx, o)
				},
				WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
					w, err := res.Watch(ctx, o)
					if err != nil {
						return nil, err
					}
					return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
						if e.Type == watch.Deleted && once.CompareAndSwap(false, true) {
							k, _ := objectKey(e.Object)
							dropped.Store(k)
							return e, false
						}
						return e, true
					}), nil
				},
			}
			inf := toolscache.NewSharedIndexInformer(lw, &unstructured.Unstructured{}, 0, toolscache.Indexers{})
			cg := &subject{name: "client-go-drops-a-delete", scope: scope{res: h.configmaps, namespaces: h.namespaces[:1]},
				store: func() []any { return inf.GetStore().List() }, rec: newRecorder()}
			if _, err := inf.AddEventHandler(cg.rec); err != nil {
				t.Fatal(err)
			}
			bctx, c := context.WithCancel(ctx)
			stopBroken, brokenDone = c, make(chan struct{})
			go func() { defer close(brokenDone); inf.RunWithContext(bctx) }()

			// A second handler on the default informer that loses its
			// first delete.
			def := h.subjects[0]
			lossy := &subject{name: "handler-drops-a-delete", scope: def.scope, store: def.store, status: def.status, rec: newRecorder()}
			lossy.rec.dropDeletes = 1
			if _, err := def.handle.Informer().AddEventHandler(lossy.rec); err != nil {
				t.Fatal(err)
			}
			return []*subject{cg, lossy}
		},
	}
	h := newHarness(t, ctx, cfg)
	defer func() {
		h.shutdown()
		if stopBroken != nil {
			stopBroken()
			<-brokenDone
		}
	}()
	// A delete each broken informer sees for sure, besides the writers'.
	victims := []*resource{h.configmaps, h.widgets}
	for _, r := range victims {
		if _, err := h.wdyn.Resource(r.gvr).Namespace(h.namespaces[0]).Create(ctx, h.object(r, h.namespaces[0], "victim", 1, true), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, divs, _ := h.check(ctx, 30*time.Second); len(divs) > 0 {
		t.Fatalf("not converged before the deletes:\n%s", formatDivs(divs))
	}
	for _, r := range victims {
		if err := h.wdyn.Resource(r.gvr).Namespace(h.namespaces[0]).Delete(ctx, "victim", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	recs := h.run(ctx)
	if len(recs) != 2 {
		t.Fatalf("%d iterations recorded as diverged, want both", len(recs))
	}
	divs := recs[0].divs
	t.Logf("seed %d: the check reported:\n%s", cfg.seed, recs[0])
	rep := h.report(time.Minute)
	if !strings.Contains(rep, "divergences: 2") || !strings.Contains(rep, "1. iteration 0") || !strings.Contains(rep, "2. iteration 1") ||
		strings.Count(rep, "client-go-drops-a-delete") != 2 {
		t.Errorf("the report does not list both diverged iterations:\n%s", rep)
	}
	byName := map[string][]divergence{}
	for _, d := range divs {
		byName[d.subject] = append(byName[d.subject], d)
	}
	if len(byName) != 2 {
		t.Errorf("divergences of %d informers, want exactly the 2 broken ones", len(byName))
	}
	key, _ := dropped.Load().(string)
	cg := byName["client-go-drops-a-delete"]
	if len(cg) != 1 || cg[0].what != "cache vs server" || len(cg[0].extra) != 1 || len(cg[0].missing)+len(cg[0].stale) != 0 ||
		key == "" || !strings.HasPrefix(cg[0].extra[0], key+"@") {
		t.Errorf("the client-go informer that dropped the delete of %q: got %v, want one extra key in its cache", key, cg)
	}
	lossy := byName["handler-drops-a-delete"]
	if len(lossy) != 1 || lossy[0].what != "handler replay vs cache" || len(lossy[0].extra) != 1 || len(lossy[0].missing)+len(lossy[0].stale) != 0 {
		t.Errorf("the handler that dropped a delete: got %v, want one extra key in its replay", lossy)
	}
	second := map[string]bool{}
	for _, d := range recs[1].divs {
		second[d.subject] = true
	}
	if len(second) != 2 || !second["client-go-drops-a-delete"] || !second["handler-drops-a-delete"] {
		t.Errorf("second iteration: divergences of %v, want the 2 broken informers again", second)
	}
	h.shutdown()
	stopBroken()
	<-brokenDone
	stopBroken = nil
	leaks.VerifyNoLeaks(t)
}
