package dynamicinformer

import "github.com/informerkit/informerkit/dynamicinformer/metrics"

// WithMetrics sends what the factory's informers do to m (see package
// metrics). Default: none, at no cost.
func WithMetrics(m metrics.Exporter) Option { return func(c *factoryConfig) { c.metrics = m } }
