package controllerruntime_test

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/informerkit/informerkit/controllerruntime"
)

// A manager whose cache is informerkit's: the one line is NewCache. The
// controller may start before the CronTab CRD is installed; it reconciles
// once the CRD is established.
func Example() {
	run := func(ctx context.Context, cfg *rest.Config) error {
		mgr, err := manager.New(cfg, manager.Options{NewCache: controllerruntime.NewCache})
		if err != nil {
			return err
		}
		crontab := &unstructured.Unstructured{}
		crontab.SetGroupVersionKind(schema.GroupVersionKind{Group: "stable.example.com", Version: "v1", Kind: "CronTab"})
		err = builder.ControllerManagedBy(mgr).For(crontab).Complete(reconcile.Func(
			func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
				fmt.Println("reconcile", req)
				return reconcile.Result{}, nil
			}))
		if err != nil {
			return err
		}
		return mgr.Start(ctx)
	}
	_ = run
}
