package dynamicinformer_test

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"

	"github.com/informerkit/informerkit/dynamicinformer"
)

// adapter adapts informerkit's *dynamicinformer.Factory to the stop-channel
// methods client-go's tests call; everything else is informerkit's.
type adapter struct{ f *dynamicinformer.Factory }

func (a adapter) ForResource(gvr schema.GroupVersionResource) informers.GenericInformer {
	return a.f.ForResource(gvr)
}

func (a adapter) Start(stop <-chan struct{}) { a.f.Start(stopContext(stop)) }

func (a adapter) WaitForCacheSync(stop <-chan struct{}) map[schema.GroupVersionResource]bool {
	return a.f.WaitForCacheSync(stopContext(stop))
}

func stopContext(stop <-chan struct{}) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-stop
		cancel()
	}()
	return ctx
}

// newDynamicSharedInformerFactory is informerkit's factory with default
// options in place of client-go's NewDynamicSharedInformerFactory.
func newDynamicSharedInformerFactory(client dynamic.Interface, resync time.Duration) adapter {
	return adapter{dynamicinformer.NewSharedInformerFactory(client, dynamicinformer.Options{Defaults: []dynamicinformer.ResourceOption{dynamicinformer.WithResyncPeriod(resync)}})}
}

// newFilteredDynamicSharedInformerFactory is informerkit's factory with
// the namespace and tweak as factory-wide defaults, in place of client-go's
// NewFilteredDynamicSharedInformerFactory.
func newFilteredDynamicSharedInformerFactory(client dynamic.Interface, resync time.Duration, ns string, tweak func(*metav1.ListOptions)) adapter {
	return adapter{dynamicinformer.NewSharedInformerFactory(client, dynamicinformer.Options{Defaults: []dynamicinformer.ResourceOption{dynamicinformer.WithResyncPeriod(resync), dynamicinformer.WithNamespaces(ns), dynamicinformer.WithTweakListOptions("factory", tweak)}})}
}
