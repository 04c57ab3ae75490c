package genericlister

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/internal/labelindex"
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
// order. It narrows with the label indexes (per-key, see
// labelindex.LabelKeyIndexName, or the inverted labelindex.LabelIndex) and
// toolscache.NamespaceIndex when the indexer has them, adding per-key
// indexes on demand where the indexer allows it (the cache.AutoLabelKeyIndexers marker),
// and otherwise scans. Every object passed to appendFn has been checked
// against the whole selector and the namespace, so an index only ever
// makes the answer faster, never different.
//
// expect, if not nil, is called before appendFn with the number of objects
// that will follow when that is known in advance (a list without a
// selector), so that the caller can size its result once.
func selectObjects(indexer toolscache.Indexer, namespace string, selector labels.Selector, expect func(int), appendFn func(interface{})) error {
	if selector == nil {
		selector = labels.Everything()
	}
	if labels.MatchesNothing(selector) {
		return nil
	}
	hasNS := namespace != "" && labelindex.HasIndex(indexer, toolscache.NamespaceIndex)

	matches := func(obj interface{}) bool {
		if namespace != "" && objectNamespace(obj) != namespace {
			return false
		}
		if selector.Empty() {
			return true
		}
		l, ok := labelindex.ObjectLabels(obj)
		return ok && selector.Matches(l)
	}

	if !selector.Empty() {
		if reqs, ok := selector.Requirements(); ok {
			if done, err := selectByLabelIndex(indexer, namespace, hasNS, reqs, matches, appendFn); done || err != nil {
				return err
			}
		}
	}

	// No usable label requirement: namespace index, or a full scan.
	if hasNS {
		items, err := indexer.ByIndex(toolscache.NamespaceIndex, namespace)
		if err != nil {
			return err
		}
		// The namespace index holds exactly the namespace's objects, so
		// only the selector is checked — and with none, objects are not
		// read at all (reading each one's metadata costs a cache miss per
		// object, which doubled the time of a namespace list).
		if selector.Empty() && expect != nil {
			expect(len(items))
		}
		for _, obj := range items {
			if selector.Empty() {
				appendFn(obj)
			} else if l, ok := labelindex.ObjectLabels(obj); ok && selector.Matches(l) {
				appendFn(obj)
			}
		}
		return nil
	}
	items := indexer.List()
	if selector.Empty() && namespace == "" && expect != nil {
		expect(len(items))
	}
	for _, obj := range items {
		if matches(obj) {
			appendFn(obj)
		}
	}
	return nil
}

// indexQuery is one indexable requirement translated to an index: the
// objects it allows are the union of the index's sets of vals (disjoint
// sets, since an object has one value per label key).
type indexQuery struct {
	index string
	vals  []string
}

// labelIndexes finds, per label key, the index that answers requirements on
// it: the key's own index (labelindex.LabelKeyIndexName), else the inverted
// labelindex.LabelIndex, else a per-key index added on demand
// (labelindex.EnsureLabelKeyIndex).
type labelIndexes struct {
	indexer toolscache.Indexer
	full    *bool // whether the indexer has labelindex.LabelIndex; asked once, when needed
}

// forKey returns the index name for key and whether it is a per-key index,
// or "" when no index can answer.
func (li *labelIndexes) forKey(key string) (name string, perKey bool) {
	keyIndex := labelindex.LabelKeyIndexName(key)
	if labelindex.HasIndex(li.indexer, keyIndex) {
		return keyIndex, true
	}
	if li.full == nil {
		has := labelindex.HasIndex(li.indexer, labelindex.LabelIndex)
		li.full = &has
	}
	if *li.full {
		return labelindex.LabelIndex, false
	}
	if labelindex.EnsureLabelKeyIndex(li.indexer, key) {
		return keyIndex, true
	}
	return "", false
}

// selectByLabelIndex answers from the label indexes when at least one
// requirement can use one (=, ==, in, exists) and reports whether it did.
//
// Plan: one candidate set per indexable requirement — the union of the
// index sets of its values — plus the namespace's set. Sets are fetched
// cheapest-looking first (equality and in before namespace before exists),
// stopping once the smallest so far is small; the namespace's set is
// fetched only when the label sets are large, and exists sets only when
// nothing else narrows. The objects of the smallest set are then checked
// against the full selector, which is the intersection with the other sets
// and the check of the non-indexable requirements (!=, notin, !key, gt, lt)
// at once.
func selectByLabelIndex(indexer toolscache.Indexer, namespace string, hasNS bool, reqs labels.Requirements, matches func(interface{}) bool, appendFn func(interface{})) (bool, error) {
	li := &labelIndexes{indexer: indexer}
	var equal, exists []indexQuery
	for i := range reqs {
		r := &reqs[i]
		op := r.Operator()
		if op != selection.Equals && op != selection.DoubleEquals && op != selection.In && op != selection.Exists {
			continue
		}
		index, perKey := li.forKey(r.Key())
		if index == "" {
			continue
		}
		if op == selection.Exists {
			q := indexQuery{index: index, vals: []string{r.Key()}}
			if perKey {
				// Every value of the key's own index is one set of
				// objects carrying the key.
				q.vals = indexer.ListIndexFuncValues(index)
			}
			exists = append(exists, q)
			continue
		}
		vals := r.ValuesUnsorted()
		iv := make([]string, 0, len(vals))
		for j, v := range vals {
			if containsString(vals[:j], v) {
				continue // "in (a,a)": each set once, so no duplicates
			}
			if perKey {
				iv = append(iv, v)
			} else {
				iv = append(iv, labelindex.LabelIndexValue(r.Key(), v))
			}
		}
		equal = append(equal, indexQuery{index: index, vals: iv})
	}
	if len(equal) == 0 && len(exists) == 0 {
		return false, nil
	}

	// Common case: one indexable requirement (an equality or in, or an
	// exists without a namespace to narrow with): fetch its objects
	// directly, under one lock per value, and check the rest on them.
	if len(equal)+len(exists) == 1 && (len(equal) == 1 || !hasNS) {
		var q indexQuery
		if len(equal) == 1 {
			q = equal[0]
		} else {
			q = exists[0]
		}
		for _, v := range q.vals {
			objs, err := indexer.ByIndex(q.index, v)
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
	consider := func(q indexQuery) error {
		var keys []string
		for _, v := range q.vals {
			k, err := indexer.IndexKeys(q.index, v)
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
	for _, q := range equal {
		if small() {
			break
		}
		if err := consider(q); err != nil {
			return false, err
		}
	}
	// The namespace's set is fetched only when the label sets are large:
	// below that, checking each candidate's namespace costs less than
	// copying the namespace's keys.
	if hasNS && (!found || len(best) > namespaceSetThreshold) {
		if err := consider(indexQuery{index: toolscache.NamespaceIndex, vals: []string{namespace}}); err != nil {
			return false, err
		}
	}
	for _, q := range exists {
		// A "key exists" set is usually broad (every object carrying a
		// common label): once an equality set or the namespace's set is in
		// hand, checking the key on its objects beats copying the set.
		if found {
			break
		}
		if err := consider(q); err != nil {
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
