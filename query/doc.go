// Package query asks a cache questions: which objects (namespaces, a label
// selector, predicates on any field), in which order, a page at a time.
//
// A Query is a value. Build it in Go
//
//	q := query.New().InNamespaces("prod").
//		Where("spec.replicas", query.Gt, query.Int(2)).
//		SortBy(query.Desc("metadata.creationTimestamp")).
//		WithLimit(50)
//
// or read it from its string form, for URLs (see Parse):
//
//	q, err := query.Parse("namespace=prod&where=spec.replicas>2&orderBy=-metadata.creationTimestamp&limit=50")
//
// Predicates take a field path (ParsePath: "status.conditions[*].type",
// "metadata.labels['app.kubernetes.io/name']") and one of = != in notin
// < > <= >= exists prefix contains, on strings, numbers, booleans and
// timestamps (see Value and Operator). Results are ordered by the OrderBy
// fields, ties broken by key, so every order is total.
//
// Three readers answer a query, with the same answers and interchangeable
// continue tokens:
//
//   - Indexes, on a shared informer (a factory's InformerHandle.Informer()
//     or any client-go SharedIndexInformer): an ordered index (Index, a
//     B-tree) per order, declared up front or built on first use and
//     maintained by the informer's events. Pages are read by keyset: a
//     page costs the same at any depth.
//   - genericlister's Lister.Query, over any indexer: candidates narrowed
//     by the label and namespace indexes, then filtered and sorted (Scan).
//   - Scan, over any set of candidates.
//
// Fields are read where the objects are: *unstructured.Unstructured in
// place, *cache.Compact (compact caches) from its kept metadata or its
// encoding without decoding the object (Compact.NestedField), and
// *metav1.PartialObjectMetadata (metadata-only caches) from its fields.
//
// Returned objects are the cache's own: never modify them.
//
// # Paging while the cache changes
//
// A walk is the pages of one query, each asked with the previous page's
// Continue token. Page.ResourceVersion is the walk's version R, the same
// on every page: on the first page, the highest resourceVersion among the
// objects the query matched (Scan) or that the index has applied (Index).
// Then:
//
//   - An object that exists, unchanged and matching, for the whole walk is
//     returned exactly once.
//   - No object is returned twice.
//   - An object changed during the walk (updated, deleted, or created
//     after the first page) is returned at most once: as it was, if a page
//     reached it before the change, or not at all. Later pages leave out
//     every object whose resourceVersion is above R, so an update that
//     moves an object in the order, or into the query's matches, never
//     brings it back, and objects created during the walk are not
//     returned after the first page. A deleted object is gone from the
//     pages read after its deletion.
//   - Page.Total, when asked, counts the matching objects of the cache at
//     the time of that page, not of the walk.
//
// This rests on resourceVersions being integers that grow with every
// write, as etcd-backed API servers make them (client-go's watch cache
// compares them the same way), and on a cache applying events in that
// order, as an informer does. An object whose resourceVersion is not an
// integer is treated as unchanged: it is still returned at most once while
// unchanged, but an update may return it again.
//
// A continue token holds no server state: the query's fingerprint, R and
// the last item's sort values and key. Any cache of the same resource (after
// a restart, another replica, Scan or an Index) can continue a walk, as
// long as it has applied R (Indexes answers by Scan until its index has).
// The limit and Count may change between pages; a token used with any
// other change to the query is ErrTokenMismatch. A copy-on-write snapshot (a walk over
// one frozen version) is not offered.
package query
