package genericlister

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	toolscache "k8s.io/client-go/tools/cache"

	ikcache "github.com/informerkit/informerkit/cache"
)

// smallCandidateSet is the size below which the planner stops fetching
// further index sets: checking this many objects directly is cheaper than
// copying another set's keys to intersect with.
const smallCandidateSet = 64

// namespaceSetThreshold is the candidate count above which a namespaced
// list also fetches the namespace index set to intersect with.
const namespaceSetThreshold = 1024

// selectObjects calls appendFn for every object in indexer that is in
// namespace (all namespaces when "") and matches selector, in no particular
// order. It narrows with cache.LabelIndex and toolscache.NamespaceIndex
// when the indexer has them (see Lister.List for the rules) and otherwise
// scans. Every object passed to appendFn has been checked against the whole
// selector and the namespace, so an index only ever makes the answer
// faster, never different.
func selectObjects(indexer toolscache.Indexer, namespace string, selector labels.Selector, appendFn func(interface{})) error {
	if selector == nil {
		selector = labels.Everything()
	}
	if labels.MatchesNothing(selector) {
		return nil
	}
	indexers := indexer.GetIndexers()
	_, hasLabel := indexers[ikcache.LabelIndex]
	_, hasNS := indexers[toolscache.NamespaceIndex]

	matches := func(obj interface{}) bool {
		if namespace != "" && objectNamespace(obj) != namespace {
			return false
		}
		if selector.Empty() {
			return true
		}
		l, ok := ikcache.ObjectLabels(obj)
		return ok && selector.Matches(l)
	}

	if !selector.Empty() && hasLabel {
		if reqs, ok := selector.Requirements(); ok {
			if done, err := selectByLabelIndex(indexer, namespace, hasNS, reqs, matches, appendFn); done || err != nil {
				return err
			}
		}
	}

	// No usable label requirement: namespace index, or a full scan.
	var items []interface{}
	if namespace != "" && hasNS {
		var err error
		if items, err = indexer.ByIndex(toolscache.NamespaceIndex, namespace); err != nil {
			return err
		}
	} else {
		items = indexer.List()
	}
	for _, obj := range items {
		if matches(obj) {
			appendFn(obj)
		}
	}
	return nil
}

// selectByLabelIndex answers from the label index when at least one
// requirement can use it (=, ==, in, exists) and reports whether it did.
//
// Plan: one candidate set per indexable requirement — the union of the
// index sets of its values (disjoint, since an object has one value per
// key) — plus the namespace's set. Sets are fetched cheapest-looking first
// (equality and in before namespace before exists), stopping once the
// smallest so far is small; the namespace's set is fetched only when the
// label sets are large, and exists sets only when nothing else narrows.
// The objects of the smallest set are then
// checked against the full selector, which is the intersection with the
// other sets and the check of the non-indexable requirements (!=, notin,
// !key, gt, lt) at once.
func selectByLabelIndex(indexer toolscache.Indexer, namespace string, hasNS bool, reqs labels.Requirements, matches func(interface{}) bool, appendFn func(interface{})) (bool, error) {
	var equal, exists [][]string // index values of each indexable requirement
	for i := range reqs {
		r := &reqs[i]
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			vals := r.ValuesUnsorted()
			iv := make([]string, 0, len(vals))
			for j, v := range vals {
				if containsString(vals[:j], v) {
					continue // "in (a,a)": each set once, so no duplicates
				}
				iv = append(iv, ikcache.LabelIndexValue(r.Key(), v))
			}
			equal = append(equal, iv)
		case selection.Exists:
			exists = append(exists, []string{r.Key()})
		}
	}
	if len(equal) == 0 && len(exists) == 0 {
		return false, nil
	}

	// Common case: one indexable requirement (an equality or in, or an
	// exists without a namespace to narrow with): fetch its objects
	// directly, under one lock per value, and check the rest on them.
	if len(equal)+len(exists) == 1 && (len(equal) == 1 || namespace == "" || !hasNS) {
		var vals []string
		if len(equal) == 1 {
			vals = equal[0]
		} else {
			vals = exists[0]
		}
		for _, v := range vals {
			objs, err := indexer.ByIndex(ikcache.LabelIndex, v)
			if err != nil {
				return false, err
			}
			for _, obj := range objs {
				if matches(obj) {
					appendFn(obj)
				}
			}
		}
		return true, nil
	}

	var best []string
	found := false
	consider := func(indexName string, vals []string) error {
		var keys []string
		for _, v := range vals {
			k, err := indexer.IndexKeys(indexName, v)
			if err != nil {
				return err
			}
			if keys == nil {
				keys = k
			} else {
				keys = append(keys, k...)
			}
		}
		if !found || len(keys) < len(best) {
			best, found = keys, true
		}
		return nil
	}
	small := func() bool { return found && len(best) <= smallCandidateSet }
	for _, vals := range equal {
		if small() {
			break
		}
		if err := consider(ikcache.LabelIndex, vals); err != nil {
			return false, err
		}
	}
	// The namespace's set is fetched only when the label sets are large:
	// below that, checking each candidate's namespace costs less than
	// copying the namespace's keys.
	if namespace != "" && hasNS && (!found || len(best) > namespaceSetThreshold) {
		if err := consider(toolscache.NamespaceIndex, []string{namespace}); err != nil {
			return false, err
		}
	}
	for _, vals := range exists {
		// A "key exists" set is usually broad (every object carrying a
		// common label): once an equality set or the namespace's set is in
		// hand, checking the key on its objects beats copying the set.
		if found {
			break
		}
		if err := consider(ikcache.LabelIndex, vals); err != nil {
			return false, err
		}
	}
	for _, key := range best {
		obj, ok, err := indexer.GetByKey(key)
		if err != nil {
			return false, err
		}
		if ok && matches(obj) {
			appendFn(obj)
		}
	}
	return true, nil
}

// objectNamespace reads an object's namespace without allocating.
func objectNamespace(obj interface{}) string {
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		md, _ := o.Object["metadata"].(map[string]interface{})
		ns, _ := md["namespace"].(string)
		return ns
	case *metav1.PartialObjectMetadata:
		return o.Namespace
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return ""
	}
	return m.GetNamespace()
}

func containsString(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}
