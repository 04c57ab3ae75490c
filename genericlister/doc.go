// Package genericlister reads a shared informer's cache of
// *unstructured.Unstructured objects: Get, List and namespace-scoped views,
// queries by field and by index. NewTyped and NewGeneric read a cache of
// any other type as it is stored; dynamicinformer's InformerHandle.Lister
// is NewGeneric's reader, client-go's cache.GenericLister.
//
// Lists use informerkit's per-key label indexes (cache.LabelKeyIndexers)
// and client-go's namespace index whenever the indexer has them: a selector such as
// "app=web" or "app in (a,b),tier" is answered from index sets, in time
// proportional to the matching objects rather than to the cache size. When
// the indexer carries the marker of cache.AutoLabelKeyIndexers
// (informerkit's factory default), the first List that needs an index for a label key adds it.
// Without any index every query still works, by scanning. The answer never
// depends on which indexes exist.
//
//	informer.AddIndexers(cache.LabelKeyIndexers("app"))
//	lister := genericlister.New(informer.GetIndexer(), gvr.GroupResource())
//	web, err := lister.Namespace("prod").List(labels.SelectorFromSet(labels.Set{"app": "web"}))
//
// Contract shared by every reader here:
//
//   - Shared results: objects returned by List, Get, ByField and ByIndex are
//     the cache's own objects, shared with other readers and with event
//     handlers. Never modify them; DeepCopy one to get an object you own.
//   - No order: lists come in no particular order.
//   - Concurrency: listers are safe for concurrent use and read while the
//     informer writes.
//   - Object types: the indexer may hold *unstructured.Unstructured,
//     *cache.Compact (compact mode), *metav1.PartialObjectMetadata
//     (metadata-only informers) or typed objects. Compact objects are
//     returned decoded, by Lister and InformerHandle.Lister alike, through their
//     cache.Compactor, which keeps the decoded objects that are read and
//     shares them like cached objects (same rule: never modify them).
//     ListCompact and GetCompact return the Compacts themselves, without
//     decoding: Compact.GetObjectMeta and Compact.NestedField read them, so
//     listing a compact cache costs what listing a normal one does.
//     Other objects are returned as they are stored, as client-go's
//     listers return them: by NewTyped (a lister of one type, such as
//     Typed[*metav1.PartialObjectMetadata] for a metadata-only informer,
//     which answers as client-go's metadatalister does) and by NewGeneric
//     (client-go's GenericLister, what InformerHandle.Lister returns).
//     Lister, whose results are *unstructured.Unstructured, converts them
//     only when made with ConvertToUnstructured (a fresh Unstructured on
//     each read); without it they are an error wrapping ErrWrongType.
package genericlister
