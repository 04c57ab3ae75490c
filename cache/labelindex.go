package cache

import (
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/internal/labelindex"
)

// Label indexes. dynamicinformer's on-demand label index (always on) and
// WithLabelIndexKeys are the way to index labels; genericlister's List
// answers label selectors from these indexes when the indexer has them
// (an index only makes the answer faster, never different). The names
// below are for code that builds its own indexer; the indexes' names are
// genericlister's business.

// LabelKeyIndexers returns one per-key label index for each key, ready for
// toolscache.NewIndexer or SharedIndexInformer.AddIndexers. The returned
// map is new on each call.
func LabelKeyIndexers(keys ...string) toolscache.Indexers {
	return labelindex.LabelKeyIndexers(keys...)
}

// AutoLabelKeyIndexers returns a marker index that lets genericlister add
// the per-key label index of a key the first time a selector needs it, up
// to 16 keys per indexer. Each call returns a new marker (with its own key
// budget); it indexes nothing itself.
func AutoLabelKeyIndexers() toolscache.Indexers { return labelindex.AutoLabelKeyIndexers() }

// HasIndex reports whether indexer has an index named name. Use it rather
// than GetIndexers on a running informer: client-go returns its indexer
// map without a lock, so reading that map races with AddIndexers.
func HasIndex(indexer toolscache.Indexer, name string) bool {
	return labelindex.HasIndex(indexer, name)
}
