package labelindex

import (
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	toolscache "k8s.io/client-go/tools/cache"
)

// labelKeyIndexPrefix starts the name of every per-key label index.
const labelKeyIndexPrefix = "informerkit.io/label:"

// LabelKeyIndexName returns the name of the per-key label index of key:
// "informerkit.io/label:" + key. That index maps each value of the label
// to the objects carrying key=value; objects without the label are not in
// it.
//
//	objs, err := indexer.ByIndex(cache.LabelKeyIndexName("app"), "web")
//
// A per-key index holds one value per object, which is what makes it cheap
// to maintain: client-go's indexer skips an index entirely on an update
// whose single value did not change, so an update that leaves the label
// alone costs two calls of the index function and nothing else. The
// inverted LabelIndex holds two values per label of every object and
// client-go re-indexes all of them on every update (docs/PERFORMANCE.md,
// "Write throughput with the label index").
func LabelKeyIndexName(key string) string { return labelKeyIndexPrefix + key }

// LabelKeyIndexFunc returns the IndexFunc of LabelKeyIndexName(key): for an
// object carrying the label it returns that one value, otherwise none. It
// reads labels in place and accepts every object ObjectLabels accepts,
// returning no values and no error for anything else. It is safe for
// concurrent use and does not modify obj.
//
// For *unstructured.Unstructured it reads only the key's own entry (it is
// called twice per update of every object, so it does the least work it
// can): a null value reads as "", a non-string value as no label. Where
// ObjectLabels treats a label map holding a non-string value under another
// key as no labels at all, this index still lists the object under key; a
// lister checks every candidate against the selector, so such an object
// (which the API server never stores) is never returned for it.
func LabelKeyIndexFunc(key string) toolscache.IndexFunc {
	vals := &valueSlices{}
	return func(obj interface{}) ([]string, error) {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			md, _ := u.Object["metadata"].(map[string]interface{})
			l, _ := md["labels"].(map[string]interface{})
			switch v := l[key].(type) {
			case string:
				return vals.get(v), nil
			case nil:
				if _, present := l[key]; present {
					return vals.get(""), nil
				}
			}
			return nil, nil
		}
		l, ok := ObjectLabels(obj)
		if !ok {
			return nil, nil
		}
		v, ok := l.Lookup(key)
		if !ok {
			return nil, nil
		}
		return vals.get(v), nil
	}
}

// maxValueSlices bounds a valueSlices table.
const maxValueSlices = 4096

// valueSlices hands out one shared single-element slice per label value, so
// that the index function, called twice per update of every object,
// allocates nothing for values seen before. Sharing is safe because
// client-go's indexer only reads the slices an index function returns
// (client-go v0.37 tools/cache thread_safe_store.go: updateSingleIndex,
// getKeysFromIndex). At most maxValueSlices values are kept; further ones
// get a fresh slice per call, so a label with unbounded cardinality (a
// unique value per object) costs a bounded table and nothing more than
// before.
type valueSlices struct {
	m sync.Map // string -> []string
	n atomic.Int32
}

func (t *valueSlices) get(v string) []string {
	if s, ok := t.m.Load(v); ok {
		return s.([]string)
	}
	s := []string{v}
	if t.n.Load() < maxValueSlices {
		if _, loaded := t.m.LoadOrStore(v, s); !loaded {
			t.n.Add(1)
		}
	}
	return s
}

// LabelKeyIndexers returns one per-key label index for each key, ready for
// toolscache.NewIndexer, NewSharedIndexInformer or AddIndexers. The
// returned map is new on each call.
//
// genericlister answers "key=value", "key in (...)" and "key" requirements
// from these indexes when they exist (preferring them over LabelIndex).
// Choose this over LabelIndexers when writes matter and the selected keys
// are known: each key costs two cheap calls per update, against re-indexing
// every label of the object.
func LabelKeyIndexers(keys ...string) toolscache.Indexers {
	out := make(toolscache.Indexers, len(keys))
	for _, k := range keys {
		out[LabelKeyIndexName(k)] = LabelKeyIndexFunc(k)
	}
	return out
}

// AutoLabelKeyIndex names a marker index that allows per-key label indexes
// to be added to the indexer on demand (EnsureLabelKeyIndex). With it,
// genericlister adds LabelKeyIndexName(k) the first time a selector
// requirement on label k needs an index and none answers it, up to
// MaxAutoLabelKeys keys per indexer; later lists of the same key are
// answered from that index. Adding an index takes the indexer's write lock
// once and indexes every object (about as long as one scan); selectors on
// keys beyond the limit scan, as they would without any index.
//
// The marker's index function returns no values, so it costs next to
// nothing to maintain. informerkit's factory installs it by default
// (dynamicinformer.LabelIndex).
const AutoLabelKeyIndex = "informerkit.io/label-keys:auto"

// MaxAutoLabelKeys bounds how many per-key label indexes EnsureLabelKeyIndex
// adds to one indexer. Indexes added explicitly (LabelKeyIndexers) do not
// count.
const MaxAutoLabelKeys = 16

// AutoLabelKeyIndexers returns {AutoLabelKeyIndex: f}: the marker that lets
// EnsureLabelKeyIndex add per-key label indexes on demand. Each call
// returns a new marker with its own count of added keys; install one per
// indexer.
func AutoLabelKeyIndexers() toolscache.Indexers {
	st := &autoLabelKeys{}
	return toolscache.Indexers{AutoLabelKeyIndex: func(obj interface{}) ([]string, error) {
		if p, ok := obj.(*autoLabelKeysProbe); ok {
			p.st = st
		}
		return nil, nil
	}}
}

// autoLabelKeys is the state of one AutoLabelKeyIndex marker. It is reached
// through the indexer (Index with a probe, under the indexer's read lock),
// because client-go's GetIndexers returns the indexer's own map unlocked.
type autoLabelKeys struct {
	mu    sync.Mutex
	added int
}

type autoLabelKeysProbe struct{ st *autoLabelKeys }

// EnsureLabelKeyIndex reports whether indexer has the per-key label index
// of key, adding it first when the indexer carries the AutoLabelKeyIndex
// marker and fewer than MaxAutoLabelKeys keys were added that way. It is
// safe for concurrent use (concurrent calls for one key add the index
// once). Adding indexes every object under the indexer's write lock.
func EnsureLabelKeyIndex(indexer toolscache.Indexer, key string) bool {
	name := LabelKeyIndexName(key)
	if HasIndex(indexer, name) {
		return true
	}
	probe := &autoLabelKeysProbe{}
	if _, err := indexer.Index(AutoLabelKeyIndex, probe); err != nil || probe.st == nil {
		return false
	}
	st := probe.st
	st.mu.Lock()
	defer st.mu.Unlock()
	if HasIndex(indexer, name) {
		return true
	}
	if st.added >= MaxAutoLabelKeys {
		return false
	}
	if err := indexer.AddIndexers(LabelKeyIndexers(key)); err != nil {
		// Someone else added it under the same name in the meantime.
		return HasIndex(indexer, name)
	}
	st.added++
	return true
}

// HasIndex reports whether indexer has an index named name. Use it rather
// than reading GetIndexers(): client-go's indexer returns its own map from
// GetIndexers without a lock, so reading that map races with AddIndexers
// (which informerkit's factory and EnsureLabelKeyIndex call on shared,
// running informers). HasIndex asks under the indexer's read lock.
func HasIndex(indexer toolscache.Indexer, name string) bool {
	// No index value contains NUL (label values, label keys, namespaces and
	// formatted field values cannot), so the lookup finds an empty set and
	// errs only when the index is missing.
	_, err := indexer.IndexKeys(name, "\x00")
	return err == nil
}
