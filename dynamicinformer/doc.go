// Package dynamicinformer is a GVR-keyed shared informer factory over the
// client-go dynamic client: one list+watch per resource however many
// consumers share it, per-resource options, reference-counted release, and
// informers that follow CustomResourceDefinitions installed and removed
// while the program runs.
//
// The public face is small: a *Factory (NewForConfig,
// NewSharedInformerFactory) hands out *InformerHandle values (ForResource,
// ForName). The factory is configured by one Options value, whose zero
// value is the default factory (every field's zero value is its documented
// default); one informer by ResourceOption values, all named With*. Status
// and its typed errors say what each informer is doing. The layers are
// resolver (package discoveryresolver: names and discovery) → factory →
// informer (a handle) → handlers (added through the handle); package
// subscription builds one handler over every resource a discovery filter
// matches from this public API alone, and Done is what it needs of the
// factory beyond it. The machinery lives under internal/: the gate and its
// list/watch state machine, the liveness layer below it, and presence
// (CRDs, discovery, 404 re-checks).
//
// # One factory, two constructors
//
// NewForConfig builds its clients from a rest.Config; NewSharedInformerFactory
// takes a dynamic.Interface. Both give the same factory — the same options,
// sharing, presence tracking, contact monitoring (Status.ContactErr, from
// the informers' requests and a probe) and errors — with one difference:
// NewSharedInformerFactory's informers decode with the client's codec (see
// Decoding), as there is no rest.Config to build the fast decode path
// from. What a factory was not given is ErrInvalid where it is needed:
// ForName and subscription.New without a resolver (Options.Resolver; NewForConfig
// builds one), an informer of full objects without a dynamic client.
// A MetadataOnly informer uses the metadata client (Options.MetadataClient;
// NewForConfig builds one) or, without one, the dynamic client: then the
// server sends and the client decodes whole objects, and each is reduced
// to its metadata before the cache, so the cache holds what the metadata
// client would have given (the cost is the full objects' bandwidth and
// decoding, not memory).
//
// # Sharing
//
// ForResource and ForName fold their options once into a value: the
// informer's spec (what makes it distinct; the factory's sharing key) and
// its plan (client, decoding, transforms, indexers), resolved once when
// the informer is made. Handles with equal specs share one client-go
// SharedIndexInformer; every other option merges into it by a rule, or
// the handle gets ErrOptionConflict (from ForName; in the Status of a
// ForResource handle, which is Failed while the shared informer and its
// other handles go on). No option is ignored:
//
//	ResourceOption            On a shared informer
//	WithNamespaces            distinct (the set: order and repeats do not matter)
//	WithLabelSelector         distinct
//	WithFieldSelector         distinct
//	WithProjection            distinct (by value; see Projection)
//	WithShard                 distinct (by its selector)
//	WithShardSource           distinct (by source: equal values share)
//	WithSharingKey            distinct
//	WithTransform(key, f)     distinct by key; equal keys run the first handle's f; "" is the handle's own
//	WithTweakListOptions(k,f) distinct by key; equal keys run the first handle's f; "" is the handle's own
//	WithIndexers              merged: union by name; a name present keeps its function
//	WithLabelIndexKeys        merged: as WithIndexers
//	WithRelistPeriod          merged: the shortest asked, applied to a running informer too
//	WithAccessCheck           merged: on if any handle asks before the informer starts
//	WithResyncPeriod          per handle (its AddEventHandler); shorter than the first handle's: ErrOptionConflict
//	WithUnchangedRelistUpdates per handle (its AddEventHandler's handlers)
//
// When the last handle of an informer is released the informer stops and
// its cache is dropped. *InformerHandle has client-go's
// informers.GenericInformer method set.
//
// # Lifecycle of the resource
//
// Each informer's list and watch go through a gate that knows whether the
// resource is served (from a watch on CustomResourceDefinitions, from
// discovery, and from 404 answers). Until a source has answered, the
// informer is Pending with no error ("checking"). While its resource is
// not served it is Pending with ErrNotServed and sends nothing; once it is
// served the informer lists and syncs. When it stops being served (CRD
// deleted, version no longer served) the informer's handlers receive a
// delete for each cached object (carrying its last cached state), the cache
// empties, the state is Removed and no request is sent until the resource
// is served again; then the same informer, with the same handlers, relists
// and delivers an add per object. Both transitions happen inside watch
// streams, not in client-go's relist loop, so its backoff (up to 30 s)
// does not delay them. This is the fix for client-go informers that
// relist a deleted CRD against 404 forever (kubernetes#79610). An informer
// obtained by ForName without a version follows its resource's preferred
// served version: it moves when a higher version is served beside its own,
// and instead of going Removed when its version stops being served.
//
// # Status
//
// Every informer has a Status (Pending, Restored, Syncing, Synced, Stale, Removed,
// Failed, Stopped) with a typed error: errors.Is(st.Err, ErrForbidden),
// ErrNotServed, ErrInvalid, ...
// ContactErr and LastContact say whether the API server can be reached;
// while it cannot, a Synced informer is Stale (its cache is complete but
// no longer kept current).
// Errors come from the reflector's watch-error handler, the liveness
// layer and the gate, never from parsing logs. The factory lists all
// statuses and notifies changes (OnStatusChange). Failures are logged to
// the factory's logger (klog's by default) once per kind of failure, not
// per retry; nothing is logged at V(0) while all is well.
//
// # Contact
//
// A factory follows its contact with the API server (Factory.Contact)
// from its informers' requests and a probe (one SelfSubjectReview
// create, which every server answers to every user): a connection error
// loses contact, any answer regains it. The probe is sent when a request
// has not returned within a second, as a heartbeat when nothing has been
// answered for Options.ContactCheckInterval (5 s: a black-holed or frozen
// server, whose open watches just go quiet, is found within it and
// Options.ContactCheckTimeout), and every 1–2 s while contact is lost.
// Every informer follows the factory at once: ContactErr is set, a Synced
// informer turns Stale, and back to Synced when contact is regained.
// While contact is lost the informers' requests wait for it rather than
// fail, so an outage costs no relist and no growth of client-go's
// reflector back-off; open watches are kept (a stalled connection
// delivers what it held when the network is back), and a watch that ended
// resumes from its last resourceVersion as soon as contact is regained,
// so what changed meanwhile arrives then.
//
// # Liveness
//
// client-go's reflector cannot tell a quiet resource from a server that
// stopped serving it: when the API server's watch cache stops (an object
// it cannot read from storage), open watches go silent and new ones are
// answered 429, which the reflector retries forever without relisting or
// reporting. Each informer therefore bounds the server's silence
// (Options.WatchIdleTimeout, default 3 minutes, three bookmark intervals):
// when nothing has come for it — no event or bookmark on the open watch,
// no answer to a watch request (client-go retries 429 answers inside one
// request for minutes) — the watch ends and the informer relists with a
// consistent probe list, paginated like client-go's (pages of 500), which
// the server answers from storage when its watch cache cannot initialize.
// Its error (ErrStoreRead for that case) sets the state Failed until a
// list succeeds; until then every retry is such a list, at the
// reflector's backoff (800 ms doubling to 30 s). Every request goes through
// that bound, including the relist that refills a cache when its resource
// returns. A healthy resource costs one list per bound only if its watch
// gets no bookmark for that long (kube-apiserver sends one about every
// minute once the resource's revision has moved past the watch's).
// Informers over several namespaces do not use the bound (their merged
// watch asks for no bookmarks); each of their watch restarts relists in
// pages, which meets the same server error once the server closes the
// broken cache's watches.
//
// # Several namespaces
//
// WithNamespaces with more than one namespace lists and watches each
// namespace and merges them into one informer. Because a merged watch
// cannot resume from one resourceVersion, every watch restart relists
// (each namespace in pages of 500, as client-go's reflector lists). A
// namespace the caller may not list (its 403, or with WithAccessCheck the
// missing verbs, found before any list is sent) does not keep the others
// from syncing and delivering: Status.Denied names it with why,
// Status.Err says ErrForbidden, Status.Ready is false (the state stays
// Synced), and it is tried again every Options.AccessRecheckPeriod (30 s;
// Status.NextAccessCheck), coming in as adds once allowed. A retry is a
// list of one object (or, with the access check, a review) while the
// merged watch goes on: the allowed namespaces are not relisted for it.
//
// # Permitted namespaces
//
// WithPermittedNamespaces lets RBAC decide the namespaces: the informer
// holds the resource's objects in exactly the namespaces where its user
// may list and watch it, and follows grants, revocations, and namespaces
// created or deleted while it runs. The namespaces are the server's or,
// for a user who may not list them, the candidates given. A user who may
// also watch namespaces gets one namespace watch per factory: a namespace
// created (checked at once and again over the next 16 s, as its
// RoleBindings arrive) or deleted (marked for deletion) is followed
// within seconds, with a rules review for the new namespace only; without
// the watch, the namespaces are listed at each check. Permission comes
// from the factory's shared reviews: first whether the user may list and
// watch in all namespaces (a user who may gets one cluster-wide list and
// watch), else one SelfSubjectRulesReview per namespace, which answers
// for every resource of that namespace (each question is asked as in the
// access check below: a rules review, and SelfSubjectAccessReviews only
// where the rules are incomplete). Every
// Options.AccessRecheckPeriod (30 s; at least 100 ms per namespace
// checked, so at most 10 rules reviews a second), at the same instants
// for all informers so they share the reviews, the answer is asked again.
// The API server authorizes a watch when it opens, so a revoked binding
// does not end a running watch; when a watch ends, or the server refuses
// one (a 403 as it opens or as an event), the informer relists at once
// and the relist asks again — without failing, and a namespace refused
// again waits for the next period (no 403 loop). A changed answer ends the
// merged watch and the informer relists: the new namespaces' objects
// arrive as adds, the lost ones' leave as deletes. Nothing changed costs
// reviews only, no list or watch. Status.Permitted and NotPermitted say
// what is held and what not (with the missing verbs); with no permitted
// namespace the informer is Synced and empty.
//
// # Handlers
//
// client-go gives each handler its own goroutine and an unbounded buffer:
// a slow handler never delays another, but its buffer grows with every
// event it has not consumed, and a panicking handler crashes the process.
// There is one way to add a handler to an informer: through its handle's
// Informer() (AddEventHandler and its variants). Such handlers'
// panics are recovered and counted in Status (HandlerPanics,
// LastHandlerPanic), and Release removes them, while other handles keep
// the informer running. Package subscription, built on this package's
// public API, is a different thing: one handler for every resource a
// discovery filter matches, added to each member's handle the same way. Package eventhandler has Coalescing, which
// bounds a slow level-triggered handler's memory by the number of distinct
// objects, not events, and RecoverPanics for code informerkit does not
// run (a Coalescing delegate).
//
// # Sharding
//
// Several replicas can each cache a part of a resource. WithShard(s) makes
// an informer hold shard s (package shard: replica i of n is
// shard.Static(i, n), ranges of the FNV-1a hash of metadata.uid): every
// list page and watch carries it as the API server's shard selector
// (ShardedListAndWatch, alpha in Kubernetes 1.36), and every list item and
// watch event is checked against it before the cache, so a server without
// the feature gate costs bandwidth, not correctness (Status.OutsideShard
// counts what it sent in vain). WithShardSource(src) follows a shard that
// changes: package shard/membership gives each replica its part of a
// group agreed on Leases, and the informer relists when its part changes
// (handlers get deletes for objects that left, adds for objects that
// entered).
//
// # Start-up
//
// At most Options.MaxConcurrentInitialLists informers (default 50) send
// their first list at the same time; the others wait, Pending, for a slot,
// so that starting informers for 200 CRDs does not send 200 lists at once.
// A first list holds its slot until it returns, a first sync that streams
// (watch-list) until its initial events are in or the stream ends; a
// first list that fails gives its slot back before the retry's backoff;
// an informer over several namespaces takes one slot for all of them.
// Relists (and the refill of a resource that returns) are not bounded. An
// informer waiting for a slot is Pending with Status.Reason "waiting for
// an initial-list slot".
//
// # Restart from disk
//
// With Options.CacheDir, each informer keeps what its cache holds on disk
// while it runs (each list and change as its reflector takes it, before
// the informer's transforms, journaled; made durable every second; folded
// into a snapshot when the journal outgrows it and when the informer
// stops). An informer of the same spec started later on
// the same cluster restores it before its first request. What handlers
// see in each case:
//
//   - Resumed (the server still has the history from the stored
//     resourceVersion): an add per restored object, isInInitialList true,
//     while the informer is Restored; then the events since, as ordinary
//     adds, updates and deletes. No list is sent. Synced once the watch
//     from the stored resourceVersion was accepted; Status.Disk.CaughtUp
//     once the cache has reached the server's resourceVersion of the
//     start (for a quiet resource, at its first bookmark: about a
//     minute).
//   - Diffed (the server answers 410 Expired, or the state was stored
//     while a list was under way — a crash or a stop in the middle of
//     it — so no resourceVersion describes it, or the informer is over
//     several namespaces, whose stored state holds one resourceVersion,
//     not one per namespace — one list per namespace —, or what it
//     watches is decided as it
//     starts: WithPermittedNamespaces, WithShardSource): the same
//     initial adds, then the informer lists (Syncing) and client-go's
//     Replace delivers
//     an add per new object, an update per object whose resourceVersion
//     changed and a delete per object gone. An object unchanged is not
//     delivered again (see Relists tell only what changed).
//   - Cold (nothing stored, or the stored state was unusable): as without
//     CacheDir.
//   - Removed (the resource's CRD was deleted while the process was
//     down): the same initial adds, then a delete per restored object;
//     the informer is Removed and follows the CRD if it is installed
//     again. A CRD deleted and created again while down (a new UID) is
//     the same: the stored objects are restored and deleted, then the new
//     instance's objects arrive as adds — never the old objects as
//     current ones, nor an update from an old object to a new one.
//
// A stored state is used only if it matches exactly: the informer's
// spec, the cluster (the kube-system namespace's UID), the resource's CRD
// (its UID) and the file format version. The spec is stored as a
// versioned encoding of its fields that leaves out fields at their zero
// value, so an upgrade that adds an option keeps the caches of informers
// that do not use it (a cache stored before that encoding is taken over
// once). Anything else, or a damaged
// file, is logged, removed, and the informer lists; a journal cut short
// by a crash is applied up to its last whole record. Transforms run again
// on restored objects, so a keyed WithTransform transform must be
// idempotent. A stored cache is written by one informer of a factory at
// a time: one released and acquired again waits for its predecessor to
// close the files; two running informers that differ only by their
// shard source would share one, and the second is not kept
// (Status.CacheErr). Status.Disk says how the informer started (DiskResumed,
// DiskDiffed, DiskCold with the reason, DiskRemoved), how many objects
// were restored, how old the stored state was and how many bytes were
// written; Status.CacheErr says why the disk is not used. An exporter
// whose Informer implements metrics.DiskInformer is told the same
// (package prometheusmetrics exports it). docs/DESIGN.md ("Restart from
// disk") has the design, docs/design/disk-cache.md the format.
//
// # Access check (RBAC pre-flight)
//
// With WithAccessCheck (per informer, or for all in Options.Defaults), an
// informer asks the server before its first list whether its user may
// list and watch its resource in each of its namespaces. The factory's
// informers share the reviews: one SelfSubjectRulesReview per namespace
// answers for every resource in it, and all namespaces are answered alike
// by the rules review of the cluster scope (cluster-wide bindings);
// SelfSubjectAccessReviews are asked only where the rules are incomplete
// or the review fails, for all namespaces first one per verb for every
// resource at once (an admin's answer for all informers), then per
// resource; NewForConfig's
// factory makes them with a request budget of their own (see
// docs/DESIGN.md). Missing verbs make it Failed with an error that errors.Is
// ErrForbidden and names the user, the verbs and the namespaces (`access
// check (SelfSubjectRulesReview): user "alice" may not watch
// widgets.example.com in namespace a`); it sends no list or watch, and asks again 1 s later,
// doubling to every 30 s, until access is granted, then syncs by itself.
// An informer over several namespaces is held only while none is allowed;
// then it lists the allowed ones and names the others in Status.Denied
// (see Several namespaces).
// Without the check the first list's 403 says the same, in the server's
// words, and the reflector retries the list at its back-off. A review
// that cannot be made does not hold the informer: it is logged once and
// the informer lists as without the check.
//
// # Resync is not a relist
//
// WithResyncPeriod is client-go's resync: it replays the informer's cache
// to handlers (an update per cached object, old and new the same). It
// sends nothing to the server and cannot repair a cache that missed an
// event. WithRelistPeriod (off by default) is a real relist: about every
// period (jittered) the watch ends and the informer sends a consistent
// LIST and replaces its cache with the answer, so handlers see an add,
// update or delete for every object the cache had wrong. The state stays
// Synced. Each relist pauses the watch for the reflector's back-off
// (800 ms, doubling to 30 s while relists come less than 2 min apart), so
// the option is meant for periods of minutes.
//
// # Relists tell only what changed
//
// When the informer lists again — its watch could not resume after an
// outage (410 Expired), WithRelistPeriod, a restored cache diffed
// against the server — client-go's Replace finds every cached object
// again, and client-go's SharedIndexInformer gives its handlers an update
// for each, old and new at the same resourceVersion: N updates that
// change nothing for a cache of N. Handlers added through a handle are
// given only what changed: an add per new object, an update per object
// whose resourceVersion changed, a delete per object gone. The rule is
// the one client-go uses to call an update a sync (same resourceVersion),
// applied to the handler: an update whose old and new are different
// objects at the same resourceVersion and apiVersion is not delivered (a
// following informer's move to a new version is). A resync is not
// affected (it hands the cached object as old and new: handlers with a
// resync period get every object each period), nor are adds and deletes.
// The informer's metrics count what is delivered this way.
// WithUnchangedRelistUpdates gives a handle's handlers client-go's relist
// back, for a handler that relies on an update per object after each
// relist.
//
// # Decoding
//
// Informers of a factory from NewForConfig decode list bodies and watch
// events on their own path — each object once, in one pass, straight into
// *unstructured.Unstructured with interned keys, without building what
// the projection drops (managed fields, the last-applied annotation) and,
// for a compact projection with no WithTransform transform, straight into
// the compact encoding — with client-go's results and errors (objects,
// Status objects of error events, bookmarks, resourceVersions; anything
// unusual is handed to client-go's codec), over client-go's REST client
// (transport, auth, rate limiting, retries). Within one object, identical
// sets of metadata.managedFields[*].fieldsV1 are one map: objects are
// reflect.DeepEqual to client-go's and DeepCopy separates them. The path
// follows from the Projection value alone. Options.APIMachineryDecoding
// turns it off; factories from NewSharedInformerFactory always decode
// with their client's codec, MetadataOnly informers with the metadata
// client's. See docs/DESIGN.md ("Decode path") and docs/PERFORMANCE.md.
//
// # Metrics
//
// Options.Metrics sends what each informer does to a metrics.Exporter
// (package github.com/informerkit/informerkit/dynamicinformer/metrics):
// its state changes, the events it delivers by type with the number of
// objects cached, its list and watch requests and their failures by
// reason, watch restarts, its complete lists, recovered handler panics,
// client-go's own informer metrics (FIFO depth, processing latency, the
// cache's resourceVersion: enabled under a client-go informer name per
// informer instance, so that an informer released and created again does
// not collide with the old one). The module
// github.com/informerkit/informerkit/prometheusmetrics exports them with
// Prometheus collectors; this package depends on no metrics library.
// Without Metrics nothing is added to the informers.
//
// # Read-your-writes
//
// A controller that writes an object and then reads its cache can wait
// for its own write: InformerHandle.WaitForObject with the object the
// write returned, WaitForResourceVersion with a resourceVersion, or
// WaitForDeletion with the object it deleted, returns once the cache has
// caught up (the lister sees the write), or
// with a typed error: ErrNotServed, the Failed informer's Status.Err
// (errors.Is(err, ErrForbidden), ...), ErrStopped, ErrInvalid (a
// resourceVersion that cannot be compared), or the context's.
//
// # Goroutines and blocking
//
// The factory owns every goroutine it starts (see Factory) and Shutdown
// joins them all; Done is closed when Shutdown begins, for what runs
// goroutines of its own on top of the factory (package subscription).
// Handlers run on client-go's per-handler goroutines; status callbacks on
// one notifier goroutine. From a handler or a callback you may call any
// method of the factory or a handle — including Release, which does not
// wait for the informer — except Factory.Shutdown, which waits for them.
//
// # Concurrency and ownership
//
// Factories and handles are safe for concurrent use.
// Objects in caches, listers and handler arguments are shared: never
// mutate them (DeepCopy first).
// Parts of one object may be shared too: on the default decode path (see
// Decoding), identical managed-fields sets within an object are one map.
package dynamicinformer
