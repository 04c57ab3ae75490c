package genericlister

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/informerkit/informerkit/query"
)

// Query answers q (package query: namespaces, label selector, predicates
// on any field, order, limit, continue token) over the lister's cache. The
// namespaces and the label selector narrow the candidates through the
// label and namespace indexes as List does; the candidates are then
// filtered and sorted (query.Scan), so a page costs in proportion to the
// candidates. For pages whose cost does not grow with the cache, query
// the informer through query.Indexes (ordered indexes); the answers and
// continue tokens are the same.
//
// Items follow the Lister rules (shared with the cache, compact objects
// decoded, other types converted only with ConvertToUnstructured); the
// paging guarantee is package query's.
func (l *Lister) Query(q query.Query) (*query.Page[*unstructured.Unstructured], error) {
	return runQuery(l, q)
}

// Query answers q within the lister's namespace: q's namespaces, when it
// names any, are intersected with it.
func (l *NamespaceLister) Query(q query.Query) (*query.Page[*unstructured.Unstructured], error) {
	in := len(q.Namespaces) == 0
	for _, ns := range q.Namespaces {
		in = in || ns == l.namespace
	}
	if !in {
		// No namespace of q is ours: an empty answer, still checked.
		if err := q.Validate(); err != nil {
			return nil, err
		}
		return &query.Page[*unstructured.Unstructured]{}, nil
	}
	q.Namespaces = []string{l.namespace}
	return runQuery(&Lister{indexer: l.indexer, resource: l.resource, convert: l.convert}, q)
}

func runQuery(l *Lister, q query.Query) (*query.Page[*unstructured.Unstructured], error) {
	page, err := query.Scan(func(namespace string, selector labels.Selector, fn func(obj interface{})) error {
		return selectObjects(l.indexer, namespace, selector, nil, fn)
	}, q)
	if err != nil {
		return nil, err
	}
	out := &query.Page[*unstructured.Unstructured]{
		Items:           make([]*unstructured.Unstructured, 0, len(page.Items)),
		Continue:        page.Continue,
		ResourceVersion: page.ResourceVersion,
		Total:           page.Total,
	}
	for _, obj := range page.Items {
		u, err := toUnstructured(obj, true, l.convert)
		if err != nil {
			return nil, err
		}
		out.Items = append(out.Items, u)
	}
	return out, nil
}
