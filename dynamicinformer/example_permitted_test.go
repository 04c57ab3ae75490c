package dynamicinformer_test

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/informerkit/informerkit/dynamicinformer"
)

// WithPermittedNamespaces lets RBAC choose the namespaces. Here the
// (fake) server's user may not list namespaces, so the candidates are
// checked: it may list and watch crontabs in team-a and team-b (their
// SelfSubjectRulesReviews say so) but not in shared. The informer holds
// the two namespaces' objects, is ready, and names what it cannot see.
func ExampleWithPermittedNamespaces() {
	gvr := schema.GroupVersionResource{Group: "stable.example.com", Version: "v1", Resource: "crontabs"}
	var objects []runtime.Object
	for _, ns := range []string{"team-a", "team-b", "shared"} {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("stable.example.com/v1")
		u.SetKind("CronTab")
		u.SetNamespace(ns)
		u.SetName("nightly")
		objects = append(objects, u)
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{gvr: "CronTabList", {Version: "v1", Resource: "namespaces"}: "NamespaceList"}, objects...)
	// The fake server's RBAC: no namespace list, no access in all
	// namespaces, list and watch of crontabs in team-a and team-b.
	client.PrependReactor("list", "namespaces", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "", fmt.Errorf("no"))
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
		if ns == "team-a" || ns == "team-b" {
			rules = append(rules, map[string]interface{}{
				"verbs": []interface{}{"list", "watch"}, "apiGroups": []interface{}{"stable.example.com"}, "resources": []interface{}{"crontabs"},
			})
		}
		_ = unstructured.SetNestedField(review.Object, map[string]interface{}{"incomplete": false, "resourceRules": rules}, "status")
		return true, review, nil
	})

	factory := dynamicinformer.NewSharedInformerFactory(client, dynamicinformer.Options{DisableCRDTracking: true})
	defer factory.Shutdown()
	crontabs := factory.ForResource(gvr, dynamicinformer.WithPermittedNamespaces("team-a", "team-b", "shared"))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	factory.Start(ctx)
	for !crontabs.Status().Ready() && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	st := crontabs.Status()
	fmt.Println(st.State, "ready:", st.Ready(), "objects:", st.Objects)
	fmt.Println("permitted:", st.Permitted)
	fmt.Println("not permitted: shared:", st.NotPermitted["shared"])
	// Output:
	// Synced ready: true objects: 2
	// permitted: [team-a team-b]
	// not permitted: shared: access check (SelfSubjectRulesReview): may not list, watch crontabs.stable.example.com in namespace shared
}
