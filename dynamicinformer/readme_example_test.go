package dynamicinformer_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/discoveryresolver"
	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/subscription"
)

// readmeExample is the README's "Use it" example; TestREADMEExample checks
// that the README shows exactly the code between the markers, so the
// README's example compiles as written.
func readmeExample(ctx context.Context, restConfig *rest.Config) error {
	// README BEGIN
	factory, err := dynamicinformer.NewForConfig(restConfig, dynamicinformer.Options{
		Defaults: []dynamicinformer.ResourceOption{
			dynamicinformer.WithProjection(dynamicinformer.Projection{StripManagedFields: true}),
		},
	})
	if err != nil {
		return err
	}
	defer factory.Shutdown()

	// A name as a kubectl user would type it, resolved through discovery. No
	// version given: the informer follows the CRD's preferred version (it
	// moves when v2 is served beside v1, or when v1 stops being served).
	ct, err := factory.ForName(ctx, "crontabs.stable.example.com",
		dynamicinformer.WithNamespaces("team-a"),
		dynamicinformer.WithLabelSelector("tier=batch"))
	if errors.Is(err, discoveryresolver.ErrNotFound) {
		return fmt.Errorf("is the CronTab CRD installed? %w", err)
	} else if err != nil {
		return err // *discoveryresolver.AmbiguousError, ErrInvalid, ...
	}
	defer ct.Release()

	// Handlers added through the handle have their panics recovered and
	// counted in Status.
	_, err = ct.Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			u := obj.(*unstructured.Unstructured) // shared with the cache: do not mutate
			fmt.Println("added", u.GetNamespace(), u.GetName())
		},
	})
	if err != nil {
		return err
	}
	factory.Start(ctx)
	factory.WaitForCacheSync(ctx)

	objs, err := ct.Lister().ByNamespace("team-a").List(labels.Everything())
	if err != nil {
		return err
	}
	fmt.Println(len(objs), "crontabs in team-a")

	// A resource that may not exist yet: Pending until its CRD is installed,
	// Removed (a delete per object) if it is deleted, back when it returns.
	widgets := factory.ForResource(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"})
	defer widgets.Release()
	for _, st := range factory.Statuses() {
		fmt.Println(st.GVR, st.State, st.Err) // errors.Is(st.Err, dynamicinformer.ErrForbidden), ...
	}

	// Everything in a group, following CRDs as they come and go:
	sub, err := subscription.New(ctx, factory, discoveryresolver.Filter{Groups: []string{"stable.example.com"}},
		func(e subscription.Event) { fmt.Println(e.Type, e.GVR, e.Object.(metav1.Object).GetName()) })
	if err != nil {
		return err
	}
	defer sub.Stop()
	<-ctx.Done()
	return nil
	// README END
}

// TestREADMEExample: the README's "Use it" block is readmeExample's body.
func TestREADMEExample(t *testing.T) {
	_ = readmeExample // compiled: the example builds against the API
	src, err := os.ReadFile("readme_example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	code := string(src)
	code = code[strings.Index(code, "// README BEGIN\n")+len("// README BEGIN\n") : strings.Index(code, "\t// README END")]
	var want strings.Builder
	for _, line := range strings.SplitAfter(code, "\n") {
		want.WriteString(strings.TrimPrefix(line, "\t"))
	}
	doc := string(readme)
	i := strings.Index(doc, "## Use it")
	if i < 0 {
		t.Fatal("README has no \"## Use it\" section")
	}
	block := doc[i:]
	block = block[strings.Index(block, "```go\n")+len("```go\n"):]
	block = block[:strings.Index(block, "```")]
	if block != want.String() {
		t.Fatalf("README's example differs from readmeExample's body; README should show:\n%s", want.String())
	}
}
