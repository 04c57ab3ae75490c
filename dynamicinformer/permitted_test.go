package dynamicinformer_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/internal/leakcheck"
)

var crontabs = schema.GroupVersionResource{Group: "stable.example.com", Version: "v1", Resource: "crontabs"}

// rbacFake serves a crontab per namespace of namespaces; its user may
// list and watch crontabs in allowed only (rules reviews, and 403 to
// lists elsewhere), nowhere cluster-wide, and may not list namespaces.
func rbacFake(allowed []string, namespaces ...string) *dynamicfake.FakeDynamicClient {
	return rbacFakeFunc(func(ns string) bool { return slices.Contains(allowed, ns) }, namespaces...)
}

// rbacFakeFunc is rbacFake with the user's namespaces decided by allowed
// at each request (it must be safe for concurrent use).
func rbacFakeFunc(allowed func(ns string) bool, namespaces ...string) *dynamicfake.FakeDynamicClient {
	var objects []runtime.Object
	for _, ns := range namespaces {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("stable.example.com/v1")
		u.SetKind("CronTab")
		u.SetNamespace(ns)
		u.SetName("nightly")
		objects = append(objects, u)
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{crontabs: "CronTabList", {Version: "v1", Resource: "namespaces"}: "NamespaceList"}, objects...)
	forbidden := func(r string) error {
		return apierrors.NewForbidden(schema.GroupResource{Resource: r}, "", errors.New("no"))
	}
	client.PrependReactor("list", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetResource().Resource == "namespaces" {
			return true, nil, forbidden("namespaces")
		}
		if !allowed(a.GetNamespace()) {
			return true, nil, forbidden(a.GetResource().Resource)
		}
		return false, nil, nil
	})
	client.PrependReactor("create", "selfsubjectaccessreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		review := a.(clienttesting.CreateAction).GetObject().(*unstructured.Unstructured).DeepCopy()
		_ = unstructured.SetNestedField(review.Object, false, "status", "allowed")
		return true, review, nil
	})
	client.PrependReactor("create", "selfsubjectrulesreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		review := a.(clienttesting.CreateAction).GetObject().(*unstructured.Unstructured).DeepCopy()
		ns, _, _ := unstructured.NestedString(review.Object, "spec", "namespace")
		var rules []interface{}
		if allowed(ns) {
			rules = append(rules, map[string]interface{}{
				"verbs": []interface{}{"list", "watch"}, "apiGroups": []interface{}{"stable.example.com"}, "resources": []interface{}{"crontabs"},
			})
		}
		_ = unstructured.SetNestedField(review.Object, map[string]interface{}{"incomplete": false, "resourceRules": rules}, "status")
		return true, review, nil
	})
	return client
}

func listsOf(client *dynamicfake.FakeDynamicClient, ns string) int {
	n := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "list" && a.GetResource() == crontabs && a.GetNamespace() == ns {
			n++
		}
	}
	return n
}

// Issue 32, item 5: with the access check on and off, an informer over
// {a, b} for a user allowed in a only is Synced with a's object, names b
// in Denied, is not Ready and says when it checks again; with the check
// on, b is never listed.
func TestSeveralNamespacesDenied(t *testing.T) {
	for _, check := range []bool{true, false} {
		check := check
		t.Run(map[bool]string{true: "check", false: "no check"}[check], func(t *testing.T) {
			t.Cleanup(func() { leakcheck.Snapshot("informerkit/dynamicinformer")(t) })
			client := rbacFake([]string{"a"}, "a", "b")
			f := dynamicinformer.NewSharedInformerFactory(client, dynamicinformer.Options{DisableCRDTracking: true, AccessRecheckPeriod: time.Minute})
			defer f.Shutdown()
			h := f.ForResource(crontabs, dynamicinformer.WithNamespaces("a", "b"), dynamicinformer.WithAccessCheck(check))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			f.Start(ctx)
			for (h.Status().State != dynamicinformer.Synced || len(h.Status().Denied) == 0) && ctx.Err() == nil {
				time.Sleep(10 * time.Millisecond)
			}
			st := h.Status()
			if st.State != dynamicinformer.Synced || st.Objects != 1 || st.Ready() || len(st.Denied) != 1 || !strings.Contains(st.Denied["b"], map[bool]string{true: "may not list, watch", false: "forbidden"}[check]) {
				t.Fatalf("status %s, %d objects, Ready %v, Denied %v; want Synced with a's object, b denied, not ready", st.State, st.Objects, st.Ready(), st.Denied)
			}
			if !errors.Is(st.Err, dynamicinformer.ErrForbidden) {
				t.Fatalf("Err %v, want ErrForbidden", st.Err)
			}
			// The next multiple of the period, however soon: it may just
			// have passed (the check under way) when read.
			if until := time.Until(st.NextAccessCheck); st.NextAccessCheck.IsZero() || until < -5*time.Second || until > time.Minute {
				t.Fatalf("NextAccessCheck in %v, want within the period", until)
			}
			if n := listsOf(client, "b"); check && n != 0 {
				t.Fatalf("%d lists of b with the access check, want 0", n)
			}
			f.Shutdown()
		})
	}
}

// WithPermittedNamespaces is part of the informer's identity: equal
// requests share, and it differs from WithNamespaces of the same names.
func TestPermittedNamespacesSpec(t *testing.T) {
	client := rbacFake([]string{"a"}, "a", "b")
	f := dynamicinformer.NewSharedInformerFactory(client, dynamicinformer.Options{DisableCRDTracking: true})
	defer f.Shutdown()
	p1 := f.ForResource(crontabs, dynamicinformer.WithPermittedNamespaces("b", "a"))
	p2 := f.ForResource(crontabs, dynamicinformer.WithPermittedNamespaces("a", "b", "a"))
	other := f.ForResource(crontabs, dynamicinformer.WithPermittedNamespaces("a"))
	plain := f.ForResource(crontabs, dynamicinformer.WithNamespaces("a", "b"))
	last := f.ForResource(crontabs, dynamicinformer.WithPermittedNamespaces("a", "b"), dynamicinformer.WithNamespaces("a", "b"))
	same := func(a, b *dynamicinformer.InformerHandle) bool {
		return a.Informer().GetIndexer() == b.Informer().GetIndexer()
	}
	if !same(p1, p2) || same(p1, other) || same(p1, plain) || !same(last, plain) {
		t.Fatal("WithPermittedNamespaces is not part of the informer's spec as documented")
	}
}

// A change of the permitted set takes effect inside the open stream, not
// through the reflector's relist: five grants and revocations in a row,
// each followed within a few re-check periods. Before, each change
// relisted after the reflector's back-off, which doubles from 0.8 s
// (jittered up to twice) and resets only after 2 minutes: the third
// change waited at least 3.2 s, the fifth at least 12.8 s.
func TestPermittedChangesSkipBackoff(t *testing.T) {
	t.Cleanup(func() { leakcheck.Snapshot("informerkit/dynamicinformer")(t) })
	var allowB atomic.Bool
	client := rbacFakeFunc(func(ns string) bool { return ns == "a" || (ns == "b" && allowB.Load()) }, "a", "b")
	const period = 100 * time.Millisecond
	f := dynamicinformer.NewSharedInformerFactory(client, dynamicinformer.Options{DisableCRDTracking: true, AccessRecheckPeriod: period})
	defer f.Shutdown()
	h := f.ForResource(crontabs, dynamicinformer.WithPermittedNamespaces("a", "b"))
	var adds, deletes atomic.Int64
	if _, err := h.Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { adds.Add(1) },
		DeleteFunc: func(any) { deletes.Add(1) },
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f.Start(ctx)
	holds := func(want ...string) bool {
		st := h.Status()
		keys := h.Informer().GetStore().ListKeys()
		slices.Sort(keys)
		var wantKeys []string
		for _, ns := range want {
			wantKeys = append(wantKeys, ns+"/nightly")
		}
		return st.State == dynamicinformer.Synced && slices.Equal(st.Permitted, want) && slices.Equal(keys, wantKeys)
	}
	for !holds("a") && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	var took []time.Duration
	for i := 0; i < 5; i++ {
		grant := i%2 == 0
		allowB.Store(grant)
		want := []string{"a"}
		if grant {
			want = []string{"a", "b"}
		}
		start := time.Now()
		for !holds(want...) && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
		took = append(took, time.Since(start).Round(time.Millisecond))
	}
	if ctx.Err() != nil {
		t.Fatalf("changes took %v, then timed out", took)
	}
	// A check at each multiple of the period: a change is seen within one
	// period; the rest is slack for a loaded machine, well under the
	// back-off's 3.2 s.
	for i, d := range took {
		if d > 2*time.Second {
			t.Fatalf("change %d took effect after %v (all: %v), want within 2 s (period %v)", i+1, d, took, period)
		}
	}
	// The handler is told after the store changed: wait for it (the
	// counts were read at once before, and missed the last add about one
	// run in ten).
	for deadline := time.Now().Add(5 * time.Second); (adds.Load() != 1+3 || deletes.Load() != 2) && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if a, d := adds.Load(), deletes.Load(); a != 1+3 || d != 2 {
		t.Fatalf("%d adds, %d deletes; want 4 adds (a, then b three times) and 2 deletes", a, d)
	}
	t.Logf("changes took effect after %v", took)
	f.Shutdown()
}
