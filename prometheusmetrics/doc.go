// Package prometheusmetrics exports what informerkit's informers do as
// Prometheus metrics, built on client_golang collectors. It lives in its
// own module so that the library (github.com/informerkit/informerkit)
// depends on no metrics library.
//
// New returns a *Metrics that is both a metrics.Exporter (package
// github.com/informerkit/informerkit/dynamicinformer/metrics; give it to
// the factory as dynamicinformer.Options.Metrics) and a
// prometheus.Collector (register it with any registry: a plain
// prometheus.NewRegistry, prometheus.DefaultRegisterer, or
// controller-runtime's metrics.Registry):
//
//	m := prometheusmetrics.New()
//	registry.MustRegister(m)
//	factory, err := dynamicinformer.NewForConfig(cfg, dynamicinformer.Options{Metrics: m})
//
// One *Metrics serves one factory. For several factories in one process,
// give each its own and register each through
// prometheus.WrapRegistererWith with a label that tells them apart.
//
// # Metrics
//
// Every per-informer metric is labelled group, version, resource; the
// informers of one resource (different namespaces or selectors) add up.
//
//	informerkit_informer_state{state}                       gauge      informers of the resource in each state (Pending, Syncing, Synced, Stale, Removed, Failed)
//	informerkit_objects_cached                              gauge      objects in the informers' caches (as delivered to handlers)
//	informerkit_informer_events_total{type}                 counter    events delivered to handlers: ADDED, UPDATED, DELETED (a relist's updates of unchanged objects are not delivered, nor counted)
//	informerkit_list_watch_requests_total{verb}             counter    list and watch requests answered or failed (verb list, watch)
//	informerkit_list_watch_errors_total{verb,reason}        counter    failed requests by reason (Forbidden, NotFound, Expired, TooManyRequests, ConnectionError, Timeout, ...)
//	informerkit_watch_restarts_total                        counter    watches that ended while the informer ran
//	informerkit_last_sync_timestamp_seconds                 gauge      when an informer of the resource last held a complete list (Unix time)
//	informerkit_handler_panics_total                        counter    handler panics recovered
//	informerkit_objects_outside_shard_total                 counter    objects sharded informers dropped: the server ignores the shard selector
//	informerkit_informer_queued_items                       gauge      items queued in the informers' FIFOs (client-go)
//	informerkit_informer_processing_duration_seconds        histogram  time to process one queued item (client-go)
//	informerkit_store_resource_version                      gauge      the cache's resourceVersion, as a number (client-go)
//	informerkit_disk_starts_total{start,reason}             counter    starts of informers kept on disk (Options.CacheDir): Resumed, Diffed, Cold, Removed; reason: why a stored state was not used
//	informerkit_disk_restored_objects_total                 counter    objects restored from disk at start
//	informerkit_disk_restored_age_seconds                   gauge      age of the stored state at the last start from it
//	informerkit_disk_written_bytes_total                    counter    bytes written to the disk cache (rate(): bytes per second)
//	informerkit_informers_wanted                            gauge      informers the factory holds
//	informerkit_informers_running                           gauge      of those, informers Syncing, Synced or Stale
//
// Gauges of a resource disappear when its last informer stops; counters
// and the histogram stay (a resource seen once keeps its series).
package prometheusmetrics
