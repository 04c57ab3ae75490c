package labelindex

import (
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	toolscache "k8s.io/client-go/tools/cache"
)

// LabelIndex is the name of the inverted label index that LabelIndexers
// adds to an indexer. For every label of every object it holds two index
// values: the label key alone (for "key exists" selectors) and
// LabelIndexValue(key, value) (for "key=value" and "key in (...)").
// genericlister uses this index automatically when the indexer has it.
const LabelIndex = "informerkit.io/labels"

// LabelIndexValue returns the LabelIndex value under which objects with the
// label key=value are indexed: key + "=" + value. Label keys cannot contain
// "=", so a value with "=" never collides with a bare key.
//
//	objs, err := indexer.ByIndex(cache.LabelIndex, cache.LabelIndexValue("app", "web"))
func LabelIndexValue(key, value string) string {
	return key + "=" + value
}

// LabelIndexFunc is the client-go IndexFunc of LabelIndex. For an object
// with labels {app: web, tier: db} it returns
// ["app", "app=web", "tier", "tier=db"] (in no particular order). It reads
// labels from *unstructured.Unstructured without copying them and accepts
// *metav1.PartialObjectMetadata and any object meta.Accessor understands;
// it returns no values (and no error) for an object without labels or
// without object metadata, so a strange object never makes the indexer
// panic.
//
// It is safe for concurrent use and does not modify obj. It builds a new
// "key=value" string per label on every call; the function LabelIndexers
// installs returns the same values but reuses the strings it built before
// (see LabelIndexers), which is what an informer should use.
func LabelIndexFunc(obj interface{}) ([]string, error) {
	return labelIndexValues(obj, nil), nil
}

// labelIndexValues computes LabelIndexFunc's values, taking the
// "key=value" strings from pairs when it is not nil.
func labelIndexValues(obj interface{}, pairs *pairTable) []string {
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		md, _ := o.Object["metadata"].(map[string]interface{})
		m, _ := md["labels"].(map[string]interface{})
		if len(m) == 0 {
			return nil
		}
		// One pass, validating as it goes (as Unstructured.GetLabels does,
		// a label map holding a non-string value counts as no labels).
		out := make([]string, 0, 2*len(m))
		pairs.lock()
		defer pairs.unlock()
		for k, v := range m {
			s, ok := v.(string)
			if !ok && v != nil {
				return nil
			}
			out = append(out, k, pairs.pair(k, s))
		}
		return out
	case *metav1.PartialObjectMetadata:
		return labelValues(o.Labels, pairs)
	}
	if c, ok := obj.(metav1.ObjectMetaAccessor); ok { // *cache.Compact
		return labelValues(c.GetObjectMeta().GetLabels(), pairs)
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil
	}
	return labelValues(m.GetLabels(), pairs)
}

func labelValues(l map[string]string, pairs *pairTable) []string {
	if len(l) == 0 {
		return nil
	}
	out := make([]string, 0, 2*len(l))
	pairs.lock()
	defer pairs.unlock()
	for k, v := range l {
		out = append(out, k, pairs.pair(k, v))
	}
	return out
}

func labelPair(k, v string) string {
	var b strings.Builder
	b.Grow(len(k) + 1 + len(v))
	b.WriteString(k)
	b.WriteByte('=')
	b.WriteString(v)
	return b.String()
}

// defaultMaxPairs bounds a pairTable (see pairTable.max).
const defaultMaxPairs = 1 << 16

// pairTable remembers the "key=value" strings one label index has built,
// so that indexing an object whose labels were seen before allocates no
// strings. An informer's indexer calls the index function twice per
// update (old and new object), and most updates leave labels alone, so
// nearly every call finds all its pairs here. The returned strings are
// the ones the index keeps as map keys, so sharing them costs nothing
// extra there.
//
// A nil *pairTable builds every string afresh.
type pairTable struct {
	// mu guards pairs: the indexer calls the index function under its
	// write lock, but Index and other readers call it under the read lock,
	// concurrently.
	mu    sync.Mutex
	pairs map[labelKV]string
	// max bounds len(pairs): a table that reaches it is emptied and starts
	// over, so labels with unbounded cardinality (a unique label per
	// object, churn) cost at most max entries and never more work than
	// building the strings afresh.
	max int
}

type labelKV struct{ k, v string }

func newPairTable(max int) *pairTable {
	return &pairTable{pairs: map[labelKV]string{}, max: max}
}

func (t *pairTable) lock() {
	if t != nil {
		t.mu.Lock()
	}
}

func (t *pairTable) unlock() {
	if t != nil {
		t.mu.Unlock()
	}
}

// pair returns LabelIndexValue(k, v), from the table when it is there.
// t.mu must be held.
func (t *pairTable) pair(k, v string) string {
	if t == nil {
		return labelPair(k, v)
	}
	if s, ok := t.pairs[labelKV{k, v}]; ok {
		return s
	}
	if len(t.pairs) >= t.max {
		clear(t.pairs)
	}
	s := labelPair(k, v)
	// Key the entry by substrings of s, so the entry keeps only s alive,
	// not the object's own label strings.
	t.pairs[labelKV{s[:len(k)], s[len(k)+1:]}] = s
	return s
}

// LabelIndexers returns {LabelIndex: f}, ready for toolscache.NewIndexer,
// NewSharedIndexInformer or SharedIndexInformer.AddIndexers, where f
// returns the same values as LabelIndexFunc but reuses the "key=value"
// strings it built for earlier objects (a table of at most 65536 strings
// per call of LabelIndexers, emptied when full). An informer's indexer
// calls its index functions for the old and the new object of every
// update; with f, an update that leaves labels alone allocates no label
// strings (docs/PERFORMANCE.md, "Write throughput with the label index").
// The returned map and function are new on each call; f is safe for
// concurrent use.
func LabelIndexers() toolscache.Indexers {
	return labelIndexers(defaultMaxPairs)
}

func labelIndexers(maxPairs int) toolscache.Indexers {
	t := newPairTable(maxPairs)
	return toolscache.Indexers{LabelIndex: func(obj interface{}) ([]string, error) {
		return labelIndexValues(obj, t), nil
	}}
}
