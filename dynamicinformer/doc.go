// Package dynamicinformer is a GVR-keyed shared informer factory over the
// client-go dynamic client: one list+watch per resource however many
// consumers share it, per-resource options, reference-counted release, and
// informers that follow CustomResourceDefinitions installed and removed
// while the program runs.
//
// # Sharing
//
// ForResource and ForName return handles. Calls with the same GVR and the
// same distinguishing options (namespaces, label and field selectors,
// tweak and transform functions, MetadataOnly, SharingKey) share one
// client-go SharedIndexInformer. Indexers and resync periods do not
// distinguish informers: new indexers are added to the shared one. When the
// last handle of an informer is released the informer stops and its cache
// is dropped.
//
// # Lifecycle of the resource
//
// Each informer's list and watch go through a gate that knows whether the
// resource is served (from a watch on CustomResourceDefinitions, from
// discovery, and from 404 answers). While a resource has never been served
// the informer is Pending and sends nothing; once it is served the informer
// lists and syncs. When it stops being served (CRD deleted, version no
// longer served) the informer's handlers receive a delete for each cached
// object (carrying its last cached state), the cache empties, the state is
// Removed and no request is sent until the resource is served again; then
// the same informer, with the same handlers, relists and delivers an add per
// object. Both transitions happen inside watch streams, so client-go's
// relist backoff never delays them. This is the fix for client-go informers
// that relist a deleted CRD against 404 forever (kubernetes#79610). An
// informer obtained by ForName without a version follows its resource's
// preferred served version: it moves when a higher version is served
// beside its own, and instead of going Removed when its version stops
// being served.
//
// # Status
//
// Every informer has a Status (Pending, Syncing, Synced, Removed, Failed,
// Stopped) with a typed error: errors.Is(st.Err, ErrForbidden),
// ErrNotServed, ErrInvalidSelector, ... Errors come from the reflector's
// watch-error handler and from the gate, never from parsing logs. The
// factory lists all statuses and notifies changes (OnStatusChange).
//
// # Liveness
//
// client-go's reflector cannot tell a quiet resource from a server that
// stopped serving it: when the API server's watch cache stops (an object
// it cannot read from storage), open watches go silent and new ones are
// answered 429, which the reflector retries forever without relisting or
// reporting. Each informer therefore bounds the server's silence
// (WithWatchIdleTimeout, default 3 minutes, three bookmark intervals):
// past it, the watch ends and the informer relists with a consistent,
// paginated probe list, whose error (ErrStoreRead for that case) sets the
// state Failed until a list succeeds again.
//
// # Several namespaces
//
// InNamespaces with more than one namespace lists and watches each
// namespace and merges them into one informer. Because a merged watch
// cannot resume from one resourceVersion, every watch restart relists
// (each namespace in pages of 500, as client-go's reflector lists).
//
// # Handlers
//
// client-go gives each handler its own goroutine and an unbounded buffer:
// a slow handler never delays another, but its buffer grows with every
// event it has not consumed, and a panicking handler crashes the process.
// InformerHandle.AddEventHandler recovers handler panics and counts them
// in Status (HandlerPanics, LastHandlerPanic); RecoverPanics does the same
// for any handler (those added to Informer() directly are not covered
// otherwise). Coalescing wraps a level-triggered handler so that memory is
// bounded by the number of distinct objects, not events: one pending
// entry per key with the latest state, deletes kept as deletes.
//
// # Concurrency and ownership
//
// Factories and handles are safe for concurrent use. Objects in caches,
// listers and handler arguments are shared: never mutate them.
package dynamicinformer
