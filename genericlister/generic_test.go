package genericlister

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/internal/labelindex"
)

// The GenericLister behind dynamicinformer's InformerHandle.Lister
// serves the
// *metav1.PartialObjectMetadata of a metadata-only informer as it is, with
// label selectors answered from the label index.
func TestGenericPartialObjectMetadata(t *testing.T) {
	idx := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, labelindex.LabelIndexers())
	_ = idx.Add(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "web", Labels: map[string]string{"app": "web"}}})
	_ = idx.Add(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "db", Labels: map[string]string{"app": "db"}}})
	lister := NewGeneric(idx, widgets)
	objs, err := lister.List(labels.SelectorFromSet(labels.Set{"app": "db"}))
	if err != nil || len(objs) != 1 {
		t.Fatalf("List(app=db) = %v, %v; want one object", objs, err)
	}
	if p, ok := objs[0].(*metav1.PartialObjectMetadata); !ok || p.Name != "db" {
		t.Fatalf("List(app=db) = %T %v, want the cached *PartialObjectMetadata db", objs[0], objs[0])
	}
	got, err := lister.ByNamespace("prod").Get("web")
	if err != nil || got.(*metav1.PartialObjectMetadata).Name != "web" {
		t.Fatalf("Get(prod/web) = %v, %v", got, err)
	}
}
