// Package fleet holds informers over many Kubernetes clusters and reads them
// as one cache: one handler registration receives every cluster's events,
// each naming its cluster, and one lister reads across clusters, with the
// cluster as a dimension of every read.
//
// It is built on package dynamicinformer: each cluster has its own Factory
// (NewForConfig on the cluster's rest.Config) with the fleet's
// Options.Factory, and a fleet resource is that factory's ForResource or
// ForName in every cluster, with the same ResourceOptions and the same
// sharing rules. Nothing here lists or watches by itself.
//
//	src := fleet.NewStaticSource(map[string]*rest.Config{"east": east, "west": west})
//	f := fleet.New(src, fleet.Options{})
//	f.Start(ctx)
//	defer f.Shutdown()
//	deploys := f.ForResource(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"})
//	deploys.AddEventHandler(fleet.HandlerFuncs{AddFunc: func(cluster string, obj any, _ bool) { ... }})
//	if _, err := deploys.WaitForSync(ctx, fleet.ReachableClusters); err != nil { ... }
//	items, err := deploys.Lister().Namespace("prod").List(labels.SelectorFromSet(labels.Set{"app": "web"}))
//
// # Sources
//
// A Source says which clusters the fleet has, as that changes while it
// runs: StaticSource (set by the program), KubeconfigSource (the contexts
// of a kubeconfig file, named or all, optionally read again) and
// SecretSource (kubeconfig Secrets in a hub cluster selected by label, read
// through informerkit's own informer). A cluster that appears joins: its
// objects arrive as adds. A cluster that disappears leaves: handlers get a
// delete for each of its objects, its listers stop reading it, and its
// goroutines end. A cluster whose Config changes (a Secret rotated) has its
// clients rebuilt; handlers get only the difference between the old cache
// and the new one, and reads are served from the old cache until the new
// one has synced.
//
// # States and what "synced" means
//
// Each cluster's informer has its own dynamicinformer.Status (Pending,
// Syncing, Synced, Stale, Failed, Removed, ...); Resource.Status lists them
// by cluster (ClusterResourceStatus) and Fleet.Status lists the clusters
// (reachability, generation, errors). A cluster HasSynced a resource when
// the fleet's cache holds a complete list of that cluster's objects: its
// informer has been Synced (or Stale) at least once since the cluster joined
// or its clients were rebuilt. The fleet has synced a resource
// (ResourceStatus.Synced, WaitForSync with AllClusters) when every cluster
// of the source's current set HasSynced it: a cluster where the resource
// is not served, that is forbidden or that cannot be reached keeps the
// fleet unsynced, and a cluster that joins makes it unsynced until it has
// listed. WaitForSync with ReachableClusters waits only for the clusters
// that can sync now: it returns once every cluster HasSynced or has said
// why it will not (not served, forbidden or failed, no contact), and its
// status tells which is which.
//
// # Isolation
//
// Every cluster has its own factory, clients, goroutines and caches; no
// lock is held across clusters while a cluster is contacted. A cluster
// that is unreachable, black-holed (connections that never answer),
// forbidden, or where the resource is not served delays no other cluster's
// sync, events or reads. Its objects stay readable from its cache (its
// status says Stale, with a ContactErr that errors.Is
// dynamicinformer.ErrNoContact, or Failed with ErrForbidden, ...), and the
// wait for reachable clusters does not wait for it once its informer knows
// (a refused connection at once; a black hole within about 10 s, the
// factory's contact probe).
//
// # Names
//
// ForName resolves the name in each cluster on its own: a CRD served in
// 3 of 5 clusters is Synced in those 3 and Pending (errors.Is
// discoveryresolver.ErrNotFound) in the other 2, where the name is resolved
// again when their CRDs change, so the informer starts there when its CRD
// arrives.
//
// # Concurrency and ownership
//
// A Fleet, its Resources, Listers and Registrations are safe for concurrent
// use. Handlers are called sequentially per cluster and concurrently across
// clusters (see Handler). Objects handed to handlers and returned by
// listers are shared with the cache: never modify them.
package fleet
