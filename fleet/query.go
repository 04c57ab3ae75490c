package fleet

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	ikcache "github.com/informerkit/informerkit/cache"
	"github.com/informerkit/informerkit/query"
)

// ClusterField is the field path that names an object's cluster in a
// fleet's queries: "where=cluster=east", "orderBy=cluster,-metadata.name".
// It shadows a top-level field "cluster" of the objects.
const ClusterField = "cluster"

// Query answers q (package query) over every cluster's cache as one, with
// the cluster as a field (ClusterField) in predicates and in the order,
// and ties broken by cluster, then key. Clusters are read as List reads
// them (never waiting, never sending a request). Each page is read by
// query.ScanParts: the paging guarantee of package query holds per
// cluster, with one walk version per cluster in the continue token (the
// page's ResourceVersion is ""); a cluster that joins during a walk is
// read without that bound. Items are shared with the cache (compact
// objects decoded, metadata-only ones converted to a fresh Unstructured).
func (l *Lister) Query(q query.Query) (*query.Page[Item], error) {
	readers := l.readers()
	parts := make([]query.Part, len(readers))
	for i, cr := range readers {
		parts[i] = query.Part{Name: cr.cluster, Candidates: query.FromIndexer(cr.indexer)}
	}
	page, err := query.ScanParts(ClusterField, parts, q)
	if err != nil {
		return nil, err
	}
	out := &query.Page[Item]{Items: make([]Item, 0, len(page.Items)), Continue: page.Continue, Total: page.Total}
	for _, it := range page.Items {
		u, err := asUnstructured(it.Object)
		if err != nil {
			return nil, &ClusterError{Cluster: it.Part, Err: err}
		}
		out.Items = append(out.Items, Item{Cluster: it.Part, Object: u})
	}
	return out, nil
}

// asUnstructured returns a cached object as an Unstructured: as stored,
// decoded (compact mode) or converted (metadata-only).
func asUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		return o, nil
	case *ikcache.Compact:
		return o.SharedInList()
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("fleet: converting %T: %w", obj, err)
	}
	return &unstructured.Unstructured{Object: m}, nil
}
