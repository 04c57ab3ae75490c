package dynamicinformer

import "time"

// Metrics receives what a factory's informers do, for an exporter. The
// module github.com/informerkit/informerkit/prometheusmetrics implements
// it with Prometheus collectors; this package depends on no metrics
// library. Set it with Options.Metrics. Without it nothing is observed and
// nothing is paid: no handler is added to the informers and client-go's
// informer metrics stay off.
//
// Every method may be called from several goroutines at once (reflectors,
// watch streams, handlers, sync monitors, the factory's callers):
// implementations must be safe for concurrent use, must not block, and
// must not call back into the factory, its handles or its subscriptions.
type Metrics interface {
	// NewInformer is called when the factory creates an informer, before
	// it starts, and returns where that informer's observations go. st
	// identifies it (GVR, Namespaces, LabelSelector, FieldSelector,
	// MetadataOnly; State is Pending). An informer obtained by ForName
	// without a version that follows another version gets a new
	// InformerMetrics, with the new GVR, after its old one is Stopped.
	// Several informers may carry equal identities (a released informer
	// and the one created after it; informers that differ only in tweak
	// or transform funcs, or sharing key): an exporter that aggregates by
	// GVR adds their values up. It must not return nil.
	NewInformer(st Status) InformerMetrics
	// Informers reports, after every change, how many informers the
	// factory holds (created and not yet Stopped: wanted) and how many of
	// those are Syncing or Synced (running: listing or watching a served
	// resource; the others are Pending, Removed or Failed). Calls are
	// made in order, one at a time.
	Informers(wanted, running int)
}

// EventType says what happened to an object: the type of an event
// InformerMetrics.Event counts, and of a subscription.Event.
type EventType string

const (
	Added   EventType = "ADDED"
	Updated EventType = "UPDATED"
	Deleted EventType = "DELETED"
)

// InformerMetrics receives one informer's observations, from the
// informer's creation until Stopped. Calls of one method are made in
// order; calls of different methods may be concurrent.
type InformerMetrics interface {
	// State: the informer's state is now s. The first call, at creation,
	// says Pending; the last says Stopped.
	State(s State)
	// Synced: at t the cache held a complete list from the server: the
	// state became Synced, or a list of an informer already Synced
	// succeeded (a relist).
	Synced(t time.Time)
	// Event: an event of type t was delivered to the informer's handlers
	// (an object added, updated or deleted on the server, or deleted
	// because its resource stopped being served; handler resyncs are not
	// counted), and the cache now holds objects objects. Called from one
	// goroutine.
	Event(t EventType, objects int)
	// Request: a list or watch request of the informer was answered (verb
	// "list" or "watch"; each page of a paginated list counts). reason is
	// "" on success, else why it failed: the server's metav1.StatusReason
	// ("Forbidden", "NotFound", "Expired", "TooManyRequests",
	// "StorageReadError", "InternalError", ...), "ConnectionError" when
	// the server could not be reached, "Timeout" when a watch request got
	// no answer within the liveness bound (Options.WatchIdleTimeout), or
	// "Unknown". Requests cancelled because the informer stopped are not
	// reported.
	Request(verb, reason string)
	// WatchRestart: a watch the informer had open ended while it runs
	// (closed by the server or at its timeout, an error, the liveness
	// bound, the resource's removal or a version switch); the informer
	// watches or lists again.
	WatchRestart()
	// HandlerPanic: a handler added through InformerHandle.Informer()
	// panicked; the panic was recovered.
	HandlerPanic()
	// QueuedItems, ProcessingLatency and StoreResourceVersion come from
	// client-go's informer metrics (toolscache.InformerMetricsProvider):
	// the number of items queued in the informer's FIFO, the time taken
	// to process one popped item (update the cache, hand the notification
	// to every handler's buffer), and the cache's resourceVersion as a
	// number.
	QueuedItems(n int)
	ProcessingLatency(d time.Duration)
	StoreResourceVersion(rv float64)
	// OutsideShard: the server sent n objects (list items or watch
	// events) outside a sharded informer's shard (WithShard,
	// WithShardSource), and they were dropped before the cache. It is
	// called only while the server ignores the shard selector (its
	// ShardedListAndWatch feature gate is off); see Status.OutsideShard.
	OutsideShard(n int)
	// Stopped: the informer stopped (released, or its factory shut down)
	// or moved to another version. No further call follows; an exporter
	// drops what the informer added to its gauges.
	Stopped()
}
