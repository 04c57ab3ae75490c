package controller_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/informerkit/informerkit/controller"
	"github.com/informerkit/informerkit/dynamicinformer"
)

// A controller that reports the objects missing a label. A fake client
// keeps the example self-contained; with a cluster, use
// dynamicinformer.NewForConfig, factory.ForName and c.Subscribe.
func Example() {
	gvr := schema.GroupVersionResource{Group: "stable.example.com", Version: "v1", Resource: "crontabs"}
	ct := func(name string, labels map[string]any) runtime.Object {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "stable.example.com/v1", "kind": "CronTab",
			"metadata": map[string]any{"name": name, "namespace": "team-a", "labels": labels},
		}}
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{gvr: "CronTabList"},
		ct("nightly", map[string]any{"owner": "ops"}), ct("hourly", nil))
	factory := dynamicinformer.NewSharedInformerFactory(client, dynamicinformer.Options{DisableCRDTracking: true})
	defer factory.Shutdown()
	crontabs := factory.ForResource(gvr)
	defer crontabs.Release()

	var mu sync.Mutex
	var report []string
	done := make(chan struct{}, 2)
	c, err := controller.New(factory, controller.ReconcilerFunc(func(ctx context.Context, req controller.Request) error {
		defer func() { done <- struct{}{} }()
		if req.Gone() {
			return nil
		}
		u := req.Object.(*unstructured.Unstructured)
		mu.Lock()
		defer mu.Unlock()
		if _, ok := u.GetLabels()["owner"]; ok {
			report = append(report, req.Key.String()+": ok")
		} else {
			report = append(report, req.Key.String()+": missing label owner")
		}
		return nil
	}), controller.Options{Workers: 2})
	if err != nil {
		panic(err)
	}
	if err := c.Watch(crontabs); err != nil {
		panic(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	factory.Start(ctx)
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error)
	go func() { ran <- c.Run(runCtx) }()
	<-done
	<-done
	stop()
	fmt.Println("run:", <-ran)
	sort.Strings(report)
	for _, line := range report {
		fmt.Println(line)
	}
	// Output:
	// run: <nil>
	// crontabs.v1.stable.example.com team-a/hourly: missing label owner
	// crontabs.v1.stable.example.com team-a/nightly: ok
}
