// Package metrics is the interface between informerkit's informer factory
// and a metrics exporter. The factory (dynamicinformer.Options.Metrics) calls
// an Exporter once per informer it creates and reports that informer's
// life to the Informer it returns; the module
// github.com/informerkit/informerkit/prometheusmetrics implements it with
// Prometheus collectors. This package depends on no metrics library and
// not on dynamicinformer. Without an Exporter nothing is observed and
// nothing is paid: no handler is added to the informers and client-go's
// informer metrics stay off.
//
// # What an exporter derives
//
// The interface carries only what an exporter cannot compute itself.
//
//   - The number of informers the factory holds is the number of
//     NewInformer calls whose Informer has not yet been told
//     State("Stopped"); of those, the running ones are those whose last
//     state is "Syncing", "Synced" or "Stale" (a Stale informer runs: it
//     serves its complete cache and retries the server).
//   - When an informer last held a complete list is the time of its last
//     Synced call. Synced is separate from State because a relist of a
//     synced informer does not change its state.
//   - An informer that moves to another version (an informer obtained by
//     name without a version) ends its Informer with State("Stopped") and
//     gets a new one, with the new GVR, that starts at its current state:
//     the counts above stay right.
//
// # Identities
//
// Several informers may carry equal identities: a released informer and
// the one created after it, informers that differ only in tweak or
// transform funcs or sharing key. An exporter that aggregates by GVR adds
// their values up and takes back an informer's share of its gauges at
// State("Stopped").
//
// # Concurrency
//
// Every method may be called from several goroutines at once
// (reflectors, watch streams, handlers, the factory's callers); calls of
// one method of one Informer are made in order. Implementations must not
// block and must not call back into the factory.
package metrics
