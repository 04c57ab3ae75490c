package metadatainformer

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/metadata"

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

// newMetadataSharedInformerFactory is informerkit's factory with default
// options and a MetadataOnly projection, in place of client-go's
// metadatainformer.NewSharedInformerFactory.
func newMetadataSharedInformerFactory(client metadata.Interface, resync time.Duration) adapter {
	return adapter{dynamicinformer.NewSharedInformerFactory(nil, dynamicinformer.Options{Defaults: []dynamicinformer.ResourceOption{dynamicinformer.WithResyncPeriod(resync), dynamicinformer.WithProjection(dynamicinformer.Projection{MetadataOnly: true})}, MetadataClient: client})}
}

// newFilteredMetadataSharedInformerFactory is informerkit's factory with
// a MetadataOnly projection and the namespace and tweak as factory-wide defaults, in
// place of client-go's metadatainformer.NewFilteredSharedInformerFactory.
func newFilteredMetadataSharedInformerFactory(client metadata.Interface, resync time.Duration, ns string, tweak func(*metav1.ListOptions)) adapter {
	return adapter{dynamicinformer.NewSharedInformerFactory(nil, dynamicinformer.Options{Defaults: []dynamicinformer.ResourceOption{dynamicinformer.WithResyncPeriod(resync), dynamicinformer.WithProjection(dynamicinformer.Projection{MetadataOnly: true}), dynamicinformer.WithNamespaces(ns), dynamicinformer.WithTweakListOptions("factory", tweak)}, MetadataClient: client})}
}
