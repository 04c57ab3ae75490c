// Package cache holds indexers, transforms and test helpers for informer
// caches of unstructured objects (*unstructured.Unstructured, and
// *metav1.PartialObjectMetadata from metadata-only informers). Import it
// under another name than client-go's tools/cache, for example ikcache.
//
// # Indexes
//
// Label indexes turn client-go's linear scan for a label selector into work
// proportional to the matches; genericlister uses them automatically. The
// way to index labels is per key: every dynamicinformer informer (always)
// installs the marker of AutoLabelKeyIndexers, with which listers add the
// index of a key the first time a selector needs it; WithLabelIndexKeys (LabelKeyIndexers) builds some up front.
// One value per object per key, so nearly free on writes: client-go skips
// an index whose single value did not change.
//
// Use HasIndex, not GetIndexers, to ask whether a running informer's
// indexer has an index: client-go returns its own map from GetIndexers
// without a lock, and indexes may be added while it runs.
//
// FieldIndexers builds indexes from field paths ("spec.nodeName",
// "status.phase", "metadata.ownerReferences[*].uid") so that callers write
// no IndexFunc; genericlister's ByField queries them. All index functions
// read objects in place and never modify them.
//
//	indexers, err := ikcache.FieldIndexers("spec.nodeName", "metadata.ownerReferences[*].uid")
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
// # Compact mode
//
// A Compactor's Transform keeps each object as a *Compact: a pre-parsed binary
// encoding of the whole object plus the metadata keys and indexes read,
// about a quarter of the decoded object's heap (docs/PERFORMANCE.md).
// genericlister and DecodingHandler read Compact objects as
// *unstructured.Unstructured through their Compactor, which keeps decoded
// forms of what is read — per informer, sized by the reads: a Get keeps
// its object, a List only objects read before (so a one-off List of many
// objects does not displace the hot ones), and objects not read for a
// while are dropped. Reads of kept objects cost a pointer load; others
// decode the encoding (no JSON parsing; several times faster than
// decoding JSON).
//
//	c := ikcache.NewCompactor(ikcache.CompactorOptions{})
//	informer.SetTransform(ikcache.Chain(ikcache.StripManagedFields, c.Transform))
//
// informerkit's factory offers it as a projection
// (dynamicinformer.Projection's Compact), and there, with no transform of
// the caller's before the Compactor, objects never
// become maps: the decoder writes the compact encoding straight from the
// JSON in one pass (about a tenth of the allocations of decoding and then
// compacting) and hands the Compactor an envelope to finish (see
// Compactor).
//
// A Compact also reads without being decoded: the getters of its
// GetObjectMeta answer as the decoded object's would, and NestedField
// reads one field from the encoding (large maps and lists
// in it carry their length, so a read skips them). genericlister's
// ListCompact and GetCompact return such views, so listing a compact
// cache costs what listing a normal one does, and field indexes over
// Compacts index without decoding.
//
// # Sharing and mutation
//
// Objects in an informer cache are shared by every lister, every event
// handler and the informer itself; nothing may modify them. Readers that
// need to change an object deep-copy it first. A Compact is immutable (its
// setters panic); Decode returns a copy to change. The decoded objects of compact mode follow the same rule:
// a Compactor hands the same decoded object to every reader.
// MutationDetector catches violations in tests.
package cache
