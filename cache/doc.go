// Package cache holds indexers, transforms and test helpers for informer
// caches of unstructured objects (*unstructured.Unstructured, and
// *metav1.PartialObjectMetadata from metadata-only informers). Import it
// under another name than client-go's tools/cache, for example ikcache.
//
// # Indexes
//
// LabelIndexers adds an inverted label index (LabelIndex): every object is
// indexed under each of its label keys and each key=value pair, and the
// indexer keeps it current on add, update and delete. genericlister uses it
// automatically for label selectors, which turns client-go's linear scan
// into work proportional to the matches.
//
// FieldIndexers builds indexes from field paths ("spec.nodeName",
// "status.phase", "metadata.ownerReferences[*].uid") so that callers write
// no IndexFunc; genericlister's ByField queries them. OwnerUIDIndexers is
// the owner index ready to use. All index functions read objects in place
// and never modify them.
//
//	indexers, err := ikcache.MergeIndexers(ikcache.LabelIndexers(), ikcache.OwnerUIDIndexers())
//	informer.AddIndexers(indexers)
//
// # Transforms
//
// StripManagedFields, DropLastAppliedConfiguration and Project make each
// object smaller before it enters the cache; Chain composes them; give the
// result to SharedIndexInformer.SetTransform. They are idempotent, never
// write to an object that needs no change, and copy before changing the
// object of a DeletedFinalStateUnknown tombstone (which may be shared with
// the cache and with event handlers), so they are safe with everything
// client-go hands a transform. docs/PERFORMANCE.md records what each saves.
//
// # Sharing and mutation
//
// Objects in an informer cache are shared by every lister, every event
// handler and the informer itself; nothing may modify them. Readers that
// need to change an object deep-copy it first (genericlister's ListCopy and
// GetCopy do). MutationDetector catches violations in tests.
package cache
