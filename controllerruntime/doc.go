// Package controllerruntime gives controller-runtime users informerkit
// with one line:
//
//	mgr, err := manager.New(cfg, manager.Options{NewCache: controllerruntime.NewCache})
//
// NewCache is a cache.NewCacheFunc whose cache.Cache is backed by one
// informerkit dynamicinformer factory (NewForConfig): every informer of
// the manager — For, Owns, Watches, the client's cached reads — is an
// informerkit informer, with its lifecycle, status and label indexes.
// Nothing else in the program changes: controllers, the client, the
// reconcilers and the cache.Options fields they set work as with
// controller-runtime's cache. The module is separate so that informerkit
// itself does not depend on controller-runtime.
//
// # Objects
//
// *unstructured.Unstructured (and UnstructuredList) come straight from
// informerkit's informers; *metav1.PartialObjectMetadata (and its List)
// from a MetadataOnly informer (the metadata client). Typed objects — the
// scheme's built-ins and a user's own CRD types registered in
// Options.Scheme — go through informerkit's informers too: a transform
// converts each Unstructured to the scheme's type
// (runtime.DefaultUnstructuredConverter) before the store, so the cache
// holds typed objects and reads and handlers see them. Each kind has one
// informer per object class (unstructured, metadata, typed), as in
// controller-runtime. Kinds resolve to resources through informerkit's
// discovery resolver (which follows CRDs), then Options.Mapper.
//
// # What changes (on by default)
//
//   - A kind that is not served yet (a CRD not installed) does not fail:
//     GetInformer returns its informer at once, Get and List answer a
//     *NotServedError (errors.Is ErrResourceNotServed and
//     dynamicinformer.ErrNotServed; also a NotFound for apierrors.IsNotFound
//     and client.IgnoreNotFound, as the API server answers for a resource
//     it does not serve), and the informer syncs by itself when the CRD is
//     established; its handlers then get an add per object. A controller
//     For such a kind starts, and reconciles once the CRD is installed.
//     While the kind is not served its Informer's HasSynced (and its
//     handler registrations', and WaitForCacheSync for it) are true: it
//     holds nothing and is complete for what is served, so one missing CRD
//     does not hold the manager's other controllers or time them out.
//     A kind that no source knows yet (neither discovery nor the Mapper)
//     gets its resource when one serving that group, version and kind
//     appears, whatever its plural ("mice" for Mouse) and scope: the
//     cache follows discovery, which follows CRDs, and moves the handlers
//     and indexes added meanwhile onto the informer of that resource.
//     Until then it sends no request, and its Status is Pending with
//     ErrNotServed and an empty GVR (it is not among Factory().Statuses).
//   - A CRD deleted while the manager runs: the informer's handlers get a
//     delete per cached object, the informer sends no request (no relisting
//     against 404) and syncs again by itself if the CRD comes back. A
//     reconcile that runs meanwhile reads NotFound (see above), so a
//     reconciler that ignores NotFound ends without an error to retry.
//   - A forbidden resource: every informer checks access before its first
//     list (dynamicinformer.WithAccessCheck), so GetInformer (and Get,
//     List) fail with an error that errors.Is dynamicinformer.ErrForbidden
//     and names the user, the verbs and the namespaces, instead of
//     "timed out waiting for cache to be synced"; no list or watch is sent
//     for the resource until access is granted (checked again with
//     backoff), so there is no loop of 403 answers.
//   - Label-selector Lists use informerkit's per-key label indexes.
//   - Cache.Factory gives the factory: Statuses, OnStatusChange; metrics
//     through NewCacheFunc's dynamicinformer.Options.
//
// # Options
//
// Every cache.Options field is honoured as controller-runtime v0.25
// documents it, with its defaulting order (a namespace's Config, then
// the ByObject's settings, then DefaultNamespaces[namespace], then the
// Default* options): Scheme, SyncPeriod (a resync, default 10 h),
// ReaderFailOnMissingInformer, the Default* selectors, transform and
// UnsafeDisableDeepCopy, ByObject's Label, Field, Transform,
// UnsafeDisableDeepCopy and SyncPeriod, and NewInformer (each informer is
// then the one it returns, over a ListerWatcher of the kind's resource,
// namespace and selectors, run by the cache: informerkit's informer
// features — Status, presence, access checks, label indexes — are not
// theirs).
//
// DefaultNamespaces and ByObject[...].Namespaces may give each namespace
// a Config of its own (label and field selectors, transform,
// UnsafeDisableDeepCopy, SyncPeriod), and NamespaceAll ("") a Config for
// every namespace not named beside it (its field selector gains
// metadata.namespace!=<name> for each named one). Such a namespaced kind
// is held as controller-runtime's multi-namespace cache holds it, by one
// informer per namespace config — the named namespaces whose defaulted
// Configs are equal (a transform set by the same option) share one
// informer over those namespaces — and read the same way: Get and List
// in a namespace read the informer that holds it (else NamespaceAll's;
// with neither, a *NamespaceNotCachedError, not a NotFound); a List over all
// namespaces is each informer's objects one after the other;
// GetInformer returns an Informer that adds handlers and indexers to
// each. Cluster-scoped kinds have one informer with the Default* (or
// ByObject) settings.
//
// Mapper is a fallback for kinds the discovery resolver does not know (its
// mapping is used as is, also for a CRD not installed yet);
// HTTPClient is not used (the factory builds its clients from the
// rest.Config, to see every request). An *UnsupportedOptionError
// (errors.Is ErrUnsupported) from NewCache names what is refused:
// DefaultWatchErrorHandler (errors are in the informers' Status) and
// EnableWatchBookmarks=false (at any level).
//
// A kind is taken as not served only from discovery's answer (or the
// Mapper's): when the caller's ctx ends, or discovery does not answer,
// before the kind's resource is known, nothing is recorded and the call
// answers as controller-runtime's cache does — ErrCacheNotStarted for a
// read before Start, else a *LookupError, a Timeout (apierrors.IsTimeout)
// that wraps the cause.
//
// Reads follow controller-runtime's cache reader: Get and List before
// Start are *cache.ErrCacheNotStarted; they wait for a syncing informer
// (bounded by ctx), and see its state (served, not served, failed) as the
// factory reports its status changes (OnStatusChange), so a read costs
// the same however many objects are cached; List's field selectors need exact matches on fields
// registered with IndexField; Limit returns the first objects; Continue
// is an error and every List's continue token is "continue-not-supported";
// results are deep copies with their GVK set unless UnsafeDisableDeepCopy.
package controllerruntime
