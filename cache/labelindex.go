package cache

import (
	"strings"

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
// It is safe for concurrent use and does not modify obj.
func LabelIndexFunc(obj interface{}) ([]string, error) {
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		md, _ := o.Object["metadata"].(map[string]interface{})
		m, _ := md["labels"].(map[string]interface{})
		if len(m) == 0 {
			return nil, nil
		}
		// One pass, validating as it goes (as Unstructured.GetLabels does,
		// a label map holding a non-string value counts as no labels).
		out := make([]string, 0, 2*len(m))
		for k, v := range m {
			s, ok := v.(string)
			if !ok && v != nil {
				return nil, nil
			}
			out = append(out, k, labelPair(k, s))
		}
		return out, nil
	case *metav1.PartialObjectMetadata:
		return labelValues(o.Labels), nil
	}
	if c, ok := obj.(interface{ GetLabels() map[string]string }); ok {
		return labelValues(c.GetLabels()), nil
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil
	}
	return labelValues(m.GetLabels()), nil
}

func labelValues(l map[string]string) []string {
	if len(l) == 0 {
		return nil
	}
	out := make([]string, 0, 2*len(l))
	for k, v := range l {
		out = append(out, k, labelPair(k, v))
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

// LabelIndexers returns {LabelIndex: LabelIndexFunc}, ready for
// toolscache.NewIndexer, NewSharedIndexInformer or
// SharedIndexInformer.AddIndexers. The returned map is new on each call.
func LabelIndexers() toolscache.Indexers {
	return toolscache.Indexers{LabelIndex: LabelIndexFunc}
}
