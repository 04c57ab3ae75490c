// Package labelindex holds the label indexes of informerkit's caches and
// the helpers genericlister's query planner uses to read them: the per-key
// indexes (LabelKeyIndexers, LabelKeyIndexName), the AutoLabelKeyIndex
// marker that lets EnsureLabelKeyIndex add per-key indexes on demand, the
// inverted index over every label (LabelIndexers), ObjectLabels and
// HasIndex. The public way to index labels is dynamicinformer's
// WithLabelIndexKeys and its always-on index (cache re-exports the few names
// those options name).
package labelindex
