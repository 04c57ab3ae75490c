package dynamicinformer_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/informerkit/informerkit/dynamicinformer"
)

// With WithAccessCheck an informer asks the server before its first list
// whether it may list and watch. Here the (fake) server allows list but
// not watch in team-a: the informer is Failed with ErrForbidden naming the
// missing verb, and sends no list while it waits for a grant.
func ExampleWithAccessCheck() {
	gvr := schema.GroupVersionResource{Group: "stable.example.com", Version: "v1", Resource: "crontabs"}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{gvr: "CronTabList"})
	// The fake server's RBAC: SelfSubjectAccessReviews allow list only.
	client.PrependReactor("create", "selfsubjectaccessreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		review := a.(clienttesting.CreateAction).GetObject().(*unstructured.Unstructured).DeepCopy()
		verb, _, _ := unstructured.NestedString(review.Object, "spec", "resourceAttributes", "verb")
		_ = unstructured.SetNestedField(review.Object, verb == "list", "status", "allowed")
		return true, review, nil
	})

	factory := dynamicinformer.NewSharedInformerFactory(client, dynamicinformer.Options{Defaults: []dynamicinformer.ResourceOption{dynamicinformer.WithAccessCheck(true)}, DisableCRDTracking: true})
	defer factory.Shutdown()
	crontabs := factory.ForResource(gvr, dynamicinformer.WithNamespaces("team-a"))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	factory.Start(ctx)
	for crontabs.Status().State != dynamicinformer.Failed && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	st := crontabs.Status()
	fmt.Println(st.State, errors.Is(st.Err, dynamicinformer.ErrForbidden))
	fmt.Println(st.Reason)
	lists := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "list" {
			lists++
		}
	}
	fmt.Println("lists sent:", lists)
	// Output:
	// Failed true
	// forbidden: access check (SelfSubjectAccessReview): may not watch crontabs.stable.example.com in namespace team-a
	// lists sent: 0
}
