package dynamicinformer_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/internal/leakcheck"
)

var crontabs = schema.GroupVersionResource{Group: "stable.example.com", Version: "v1", Resource: "crontabs"}

// rbacFake serves a crontab per namespace of namespaces; its user may
// list and watch crontabs in allowed only (rules reviews, and 403 to
// lists elsewhere), nowhere cluster-wide, and may not list namespaces.
func rbacFake(allowed []string, namespaces ...string) *dynamicfake.FakeDynamicClient {
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
		if !slices.Contains(allowed, a.GetNamespace()) {
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
		if slices.Contains(allowed, ns) {
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
			if until := time.Until(st.NextAccessCheck); until <= 0 || until > 2*time.Minute {
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
