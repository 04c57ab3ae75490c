package metrics

import (
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Exporter receives what a factory's informers do. Set it with
// dynamicinformer.Options.Metrics. It must be safe for concurrent use, must
// not block, and must not call back into the factory, its handles or its
// subscriptions.
type Exporter interface {
	// NewInformer is called when the factory creates an informer, before
	// it starts, and when an informer moves to another version (after its
	// old Informer's last call), and returns where that informer's
	// observations go. It must not return nil.
	NewInformer(id Identity) Informer
}

// Identity says which informer an Informer observes. Several informers
// may carry equal identities (see the package documentation).
type Identity struct {
	GVR           schema.GroupVersionResource
	Namespaces    []string // nil: all namespaces
	LabelSelector string
	FieldSelector string
	MetadataOnly  bool
}

// Informer receives one informer's observations, from its creation until
// State("Stopped"), its last call. Calls of one method are made in order;
// calls of different methods may be concurrent.
type Informer interface {
	// State: the informer's state is now s, one of dynamicinformer's
	// State values ("Pending", "Syncing", "Synced", "Stale", "Removed",
	// "Failed")
	// or "Stopped" (released, its factory shut down, or moved to another
	// version). The first call says the state at creation; each call
	// differs from the one before. State("Synced") returns before the
	// informer's HasSynced turns true, so a caller whose WaitForCacheSync
	// returned reads the state its exporter was told.
	State(s string)
	// Synced: the cache now holds a complete list from the server (the
	// state became "Synced" or "Stale" other than from each other, or a
	// relist of a synced informer succeeded).
	Synced()
	// Event: an event of type t ("ADDED", "UPDATED" or "DELETED") was
	// delivered to the informer's handlers (handler resyncs are not
	// counted, nor a relist's updates of unchanged objects, which
	// handlers are not given by default: see
	// dynamicinformer.WithUnchangedRelistUpdates), and the cache now
	// holds objects objects. Called from one goroutine.
	Event(t string, objects int)
	// Request: a list or watch request was answered (verb "list" or
	// "watch"; each page of a list counts). reason is "" on success, else
	// the server's metav1.StatusReason ("Forbidden", "Expired", ...),
	// "ConnectionError", "Timeout" (no answer within the watch liveness
	// bound) or "Unknown". Requests cancelled because the informer stopped
	// are not reported.
	Request(verb, reason string)
	// WatchRestart: a watch the informer had open ended while it runs;
	// it watches or lists again.
	WatchRestart()
	// HandlerPanic: a handler of the informer panicked; the panic was
	// recovered.
	HandlerPanic()
	// QueuedItems: client-go's FIFO of the informer holds n items.
	QueuedItems(n int)
	// ProcessingLatency: client-go took d to process one item popped from
	// the FIFO (update the cache, hand it to every handler's buffer).
	ProcessingLatency(d time.Duration)
	// StoreResourceVersion: the cache's resourceVersion, as a number
	// (client-go's; bookmarks advance it too).
	StoreResourceVersion(rv float64)
	// OutsideShard: the server sent n objects outside a sharded
	// informer's shard, dropped before the cache (the server ignores the
	// shard selector).
	OutsideShard(n int)
}

// DiskInformer is an Informer that also receives what an informer's
// disk cache (dynamicinformer.Options.CacheDir) does. Implementing it is
// optional: an Informer without these methods is not told.
type DiskInformer interface {
	Informer
	// DiskStart: how the informer started, once per start of an
	// informer kept on disk: start is "Resumed" (the watch resumed from
	// the stored resourceVersion, no list), "Diffed" (the server could
	// not resume: a list, diffed against the restored objects), "Cold"
	// (nothing usable on disk; reason says why: "none stored", "another
	// cluster", "another CustomResourceDefinition", "another informer
	// spec", "another format version", "corrupt", "newer than the
	// server", ...) or "Removed" (the resource's
	// CustomResourceDefinition was deleted, or deleted and created again,
	// while the process was down: handlers got a delete per restored
	// object). restored counts the objects restored from disk, age is
	// how old the stored state was (0 when none was used).
	DiskStart(start, reason string, restored int, age time.Duration)
	// DiskWritten: n more bytes were written to the disk cache
	// (journals and snapshots; reported about once a second).
	DiskWritten(n int64)
}
