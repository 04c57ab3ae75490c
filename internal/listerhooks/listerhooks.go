// Package listerhooks gives dynamicinformer genericlister's adapter to
// client-go's GenericLister (what InformerHandle.Lister returns) without
// making it a public name of genericlister, whose public lister is
// genericlister.New. genericlister sets it at init; an importer of this
// package imports genericlister too.
package listerhooks

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
)

// NewGeneric returns a toolscache.GenericLister over indexer that works
// whatever runtime.Object type the indexer holds (*unstructured.Unstructured,
// the decoded form of a *cache.Compact, *metav1.PartialObjectMetadata,
// typed objects, each returned as it is), with label selectors answered
// from genericlister's label indexes. Set by genericlister's init.
var NewGeneric func(indexer toolscache.Indexer, resource schema.GroupResource) toolscache.GenericLister
