package factorytest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/informerkit/informerkit/discoveryresolver"
	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/subscription"
	"github.com/informerkit/informerkit/test/controlplane"
)

// TestBadInput: every bad call is a typed error or a documented
// behaviour, never a panic or a hang (each case runs under its own
// deadline on its own goroutine). Pure-logic cases live in unit tests and
// are not repeated here: dynamicinformer TestInvalidSelectorIsAStatusNotAPanic
// (ForResource with a bad selector, MetadataOnly without a client, ForName
// without a resolver, Release twice), TestReferenceCountingAndLifecycle
// (Start twice, Shutdown twice, ForResource after Shutdown),
// TestHandlersAreIsolated (nil handler); discoveryresolver TestResolveErrors
// and TestAmbiguous, FuzzResolve; cache FuzzParseFieldPath. Objects that
// fail to decode are covered separately.
func TestBadInput(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 5*time.Minute)
	sc := scenario(t)
	// Two CRDs sharing a plural in different groups make the bare plural
	// ambiguous.
	plural := unique("ambigs")
	for _, g := range []string{"a", "b"} {
		crd := controlplane.NewCRD(unique(g)+".bad.example.com", "Ambig"+strings.TrimPrefix(plural, "ambigs"), plural)
		if err := cp.InstallCRD(ctx, crd); err != nil {
			t.Fatal(err)
		}
	}
	cfg, counter := controlplane.CountRequests(cp.Config())
	leaks := controlplane.SnapshotGoroutines()
	f := newFactory(t, cfg)
	defer f.Shutdown()
	f.Start(ctx)
	cm := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	forName := func(ref string, want error, opts ...dynamicinformer.ResourceOption) func(context.Context) error {
		return func(ctx context.Context) error {
			h, err := f.ForName(ctx, ref, opts...)
			if !errors.Is(err, want) {
				return fmt.Errorf("ForName(%q) = %v, want %v", ref, err, want)
			}
			if h != nil {
				return fmt.Errorf("ForName(%q) returned a handle with an error", ref)
			}
			return nil
		}
	}
	// statusBecomes waits for a ForResource handle's status to carry want.
	statusBecomes := func(gvr schema.GroupVersionResource, state dynamicinformer.State, want error, opts ...dynamicinformer.ResourceOption) func(context.Context) error {
		return func(ctx context.Context) error {
			h := f.ForResource(gvr, opts...)
			defer h.Release()
			for {
				st := h.Status()
				if st.State == state && errors.Is(st.Err, want) {
					return nil
				}
				select {
				case <-ctx.Done():
					return fmt.Errorf("status %s %v, want %s %v", st.State, st.Err, state, want)
				case <-time.After(20 * time.Millisecond):
				}
			}
		}
	}
	cases := []struct {
		name  string
		check func(context.Context) error
	}{
		{"unknown name", forName("nosuchresourceanywhere", discoveryresolver.ErrNotFound)},
		{"unknown group", forName("configmaps.nosuch.example.com", discoveryresolver.ErrNotFound)},
		{"malformed: empty", forName("", discoveryresolver.ErrNotFound)},
		{"malformed: dots", forName("a..b", discoveryresolver.ErrNotFound)},
		{"malformed: trailing dot", forName("Deployment.v1.", discoveryresolver.ErrNotFound)},
		{"malformed: spaces", forName(" config maps ", discoveryresolver.ErrNotFound)},
		{"malformed: slash only", forName("/", discoveryresolver.ErrSubresource)},
		{"ambiguous plural", func(ctx context.Context) error {
			_, err := f.ForName(ctx, plural)
			var ae *discoveryresolver.AmbiguousError
			if !errors.As(err, &ae) || len(ae.Candidates) != 2 {
				return fmt.Errorf("ForName(%q) = %v, want *AmbiguousError with 2 candidates", plural, err)
			}
			return nil
		}},
		{"subresource", forName("pods/status", discoveryresolver.ErrSubresource)},
		{"non-watchable", forName("bindings", discoveryresolver.ErrNotWatchable)},
		{"invalid label selector (ForName)", forName("cm", dynamicinformer.ErrInvalid, dynamicinformer.WithLabelSelector("a in ("))},
		{"invalid field selector (ForName)", forName("cm", dynamicinformer.ErrInvalid, dynamicinformer.WithFieldSelector("metadata.name"))},
		{"invalid label selector (ForResource): Failed at once", statusBecomes(cm, dynamicinformer.Failed, dynamicinformer.ErrInvalid, dynamicinformer.WithLabelSelector("=x"))},
		{"field the server cannot select on: Failed from the server's 400", statusBecomes(cm, dynamicinformer.Failed, dynamicinformer.ErrInvalid, dynamicinformer.WithFieldSelector("data.foo=bar"))},
		{"namespace on a cluster-scoped resource (ForName)", forName("namespaces", dynamicinformer.ErrInvalid, dynamicinformer.WithNamespaces("default"))},
		// ForResource: discovery says the resource is cluster-scoped, so the
		// namespace is a configuration error, not "not served".
		{"namespace on a cluster-scoped resource (ForResource): Failed", statusBecomes(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, dynamicinformer.Failed, dynamicinformer.ErrInvalid, dynamicinformer.WithNamespaces("default"))},
		{"nil handler", func(context.Context) error {
			h := f.ForResource(cm, dynamicinformer.WithNamespaces("default"))
			defer h.Release()
			if _, err := h.Informer().AddEventHandler(nil); !errors.Is(err, dynamicinformer.ErrInvalid) {
				return fmt.Errorf("AddEventHandler(nil) = %v", err)
			}
			if _, err := subscription.New(ctx, f, discoveryresolver.Filter{Groups: []string{"nosuch.example.com"}}, nil); !errors.Is(err, dynamicinformer.ErrInvalid) {
				return fmt.Errorf("subscription.New(nil handler) = %v", err)
			}
			return nil
		}},
		{"Start twice, Release twice: one list+watch, the other handle keeps it", func(ctx context.Context) error {
			ns := unique("twice")
			if err := cp.CreateNamespace(ctx, ns); err != nil {
				return err
			}
			h1 := f.ForResource(cm, dynamicinformer.WithNamespaces(ns))
			h2 := f.ForResource(cm, dynamicinformer.WithNamespaces(ns))
			f.Start(ctx)
			f.Start(ctx)
			for !h1.Informer().HasSynced() {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				time.Sleep(20 * time.Millisecond)
			}
			h1.Release()
			h1.Release()
			if h2.Informer().IsStopped() {
				return errors.New("second Release of one handle stopped the informer another handle holds")
			}
			// One initial list: a list request, or a watch-list stream.
			path := "/namespaces/" + ns + "/configmaps"
			if l, w := counter.Count("list", path), counter.Count("watch", path); l > 1 || w > 1 || l+w == 0 {
				return fmt.Errorf("%d lists and %d watches after Start twice, want one of each at most", l, w)
			}
			h2.Release() // returns at once; the informer stops shortly after
			if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
				return h2.Informer().IsStopped(), nil
			}); err != nil {
				return errors.New("informer still running 10 s after its last Release")
			}
			return nil
		}},
		{"WaitForCacheSync with an informer that never syncs returns at its deadline", func(ctx context.Context) error {
			h := f.ForResource(schema.GroupVersionResource{Group: "never.example.com", Version: "v1", Resource: "things"})
			defer h.Release()
			wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			if synced := f.WaitForCacheSync(wctx); synced[schema.GroupVersionResource{Group: "never.example.com", Version: "v1", Resource: "things"}] {
				return errors.New("an informer of an unserved resource reported synced")
			}
			return nil
		}},
	}
	// After Shutdown (run last, in order).
	cases = append(cases, []struct {
		name  string
		check func(context.Context) error
	}{
		{"Shutdown twice", func(context.Context) error { f.Shutdown(); f.Shutdown(); return nil }},
		{"ForResource after Shutdown: Stopped, ErrStopped", func(context.Context) error {
			h := f.ForResource(cm)
			if st := h.Status(); st.State != dynamicinformer.Stopped || !errors.Is(st.Err, dynamicinformer.ErrStopped) {
				return fmt.Errorf("status %+v", st)
			}
			h.Release()
			h.Release()
			return nil
		}},
		{"ForName after Shutdown", forName("cm", dynamicinformer.ErrStopped)},
		{"Start after Shutdown: no-op", func(ctx context.Context) error { f.Start(ctx); return nil }},
	}...)
	failed := 0
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				defer func() {
					if r := recover(); r != nil {
						done <- fmt.Errorf("panic: %v", r)
					}
				}()
				done <- tc.check(cctx)
			}()
			select {
			case err := <-done:
				if err != nil {
					failed++
					t.Fatal(err)
				}
			case <-time.After(40 * time.Second):
				failed++
				t.Fatal("hung")
			}
		})
	}
	leaks.VerifyNoLeaks(t)
	sc.Injected("%d bad inputs: unknown/malformed/ambiguous names, subresource, non-watchable, invalid label and field selectors (client- and server-side), namespace on a cluster-scoped resource, nil handlers, Start/Release/Shutdown twice, calls after Shutdown", len(cases))
	sc.Held("%d of %d answered with the typed error or documented behaviour, none panicked or hung; no goroutine leak", len(cases)-failed, len(cases))
}
