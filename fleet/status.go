package fleet

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/informerkit/informerkit/dynamicinformer"
)

// ClusterResourceStatus is a resource's informer in one cluster.
type ClusterResourceStatus struct {
	Cluster string
	// Status is the cluster's informer status (see dynamicinformer.Status):
	// Synced, Stale (complete cache, no contact: ContactErr says why),
	// Pending (not served there: Err wraps dynamicinformer.ErrNotServed, or
	// for ForName the resolver's error, errors.Is
	// discoveryresolver.ErrNotFound), Failed (errors.Is
	// dynamicinformer.ErrForbidden, ...; ErrClusterConfig when the cluster
	// has no clients), ...
	dynamicinformer.Status
	// ContactErr (in Status) is the informer's own (an informer made while
	// its cluster's factory has no contact says so from its start) or,
	// when resolving its name found no contact, the resolution's: the
	// cluster cannot be reached.
	//
	// HasSynced: the fleet's cache holds a complete list of the cluster's
	// objects of the resource (its informer has been Synced or Stale at
	// least once since the cluster joined or its clients were rebuilt, or
	// it is Rebuilding).
	HasSynced bool
	// Rebuilding: the cluster's clients are being rebuilt (its Config
	// changed) and the new informer has not synced yet; reads and
	// Objects are the previous clients' complete cache meanwhile.
	Rebuilding bool
}

// ResourceStatus is a resource in every cluster of the fleet.
type ResourceStatus struct {
	// Resource names it (its GVR, or the name given to ForName).
	Resource string
	// Clusters has one entry per cluster of the fleet, sorted by name.
	Clusters []ClusterResourceStatus
}

// Synced reports whether the fleet has synced the resource: every cluster
// of the fleet now HasSynced (see WaitMode AllClusters). A fleet without
// clusters has synced.
func (s ResourceStatus) Synced() bool { return len(s.waitingFor(AllClusters)) == 0 }

// Cluster returns the entry of the named cluster.
func (s ResourceStatus) Cluster(name string) (ClusterResourceStatus, bool) {
	for _, c := range s.Clusters {
		if c.Cluster == name {
			return c, true
		}
	}
	return ClusterResourceStatus{}, false
}

// WaitMode says which clusters a wait for sync waits for.
type WaitMode int

const (
	// AllClusters waits until every cluster of the fleet HasSynced: the
	// fleet-wide Synced. A cluster that is unreachable, forbidden, or where
	// the resource is not served keeps it waiting.
	AllClusters WaitMode = iota
	// ReachableClusters waits until every cluster HasSynced or has given a
	// definite answer that it will not sync now: the resource is not served
	// there (Pending or Removed with dynamicinformer.ErrNotServed, or a
	// name not found), its informer is Failed (forbidden, invalid, no
	// clients: Err says why), or it cannot be reached (ContactErr set:
	// dynamicinformer's contact monitor says so within about 10 s of a
	// request that is not answered, at once for a refused connection). A
	// cluster that is still checking or listing with contact keeps it
	// waiting.
	ReachableClusters
)

// waitingFor names the clusters that hold a wait in mode, with why.
func (s ResourceStatus) waitingFor(mode WaitMode) map[string]string {
	out := map[string]string{}
	for _, c := range s.Clusters {
		if c.HasSynced || (mode == ReachableClusters && c.excused()) {
			continue
		}
		why := c.Reason
		if c.Err != nil {
			why = c.Err.Error()
		}
		if c.ContactErr != nil {
			why = c.ContactErr.Error()
		}
		if why == "" {
			why = string(c.State)
		}
		out[c.Cluster] = why
	}
	return out
}

// excused: the cluster will not sync now, and said why.
func (c ClusterResourceStatus) excused() bool {
	switch {
	case c.ContactErr != nil:
		return true
	case c.State == dynamicinformer.Failed, c.State == dynamicinformer.Removed:
		return true
	case c.State == dynamicinformer.Pending && c.Err != nil:
		// Not served, a name that does not resolve: the cluster answered.
		return true
	}
	return false
}

func sortClusterStatuses(cs []ClusterResourceStatus) {
	sort.Slice(cs, func(i, j int) bool { return cs[i].Cluster < cs[j].Cluster })
}

// placeholderStatus is r's status in a cluster that has no informer of it
// yet (joining, or without clients).
func (m *member) placeholderStatus(r *Resource) ClusterResourceStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	cs := ClusterResourceStatus{Cluster: m.name}
	cs.GVR = r.gvr
	if m.err != nil {
		cs.State, cs.Err, cs.Reason = dynamicinformer.Failed, m.err, "no clients for the cluster"
		return cs
	}
	cs.State, cs.Reason = dynamicinformer.Pending, "cluster joining"
	return cs
}

// ClusterStatus is one cluster of the fleet.
type ClusterStatus struct {
	Name string
	// Generation counts the clients built for the cluster: 1 after it
	// joined, one more for each change of its Config (credentials
	// rotated).
	Generation int
	// Since is when the current generation began.
	Since time.Time
	// Err says why the cluster has no clients (errors.Is
	// ErrClusterConfig), nil when it has.
	Err error
	// ContactErr is set while the cluster's API server cannot be reached
	// (errors.Is dynamicinformer.ErrNoContact): the first ContactErr of its
	// informers.
	ContactErr error
	// LastContact is the latest answer any of its informers had.
	LastContact time.Time
	// Informers counts the cluster's informers of the fleet's resources;
	// Synced those that HasSynced.
	Informers, Synced int
}

// Reachable reports whether the cluster has clients and its API server
// answers (as far as its informers know).
func (c ClusterStatus) Reachable() bool { return c.Err == nil && c.ContactErr == nil }

// FleetStatus is a snapshot of the fleet.
type FleetStatus struct {
	// Clusters are the clusters of the source's last set, sorted by name.
	Clusters []ClusterStatus
	// SourceErr is why the source stopped (the fleet keeps its last set);
	// nil while it runs.
	SourceErr error
	// Resources are the fleet's resources, in the order they were added.
	Resources []ResourceStatus
}

// Synced reports whether every resource of the fleet has synced in every
// cluster (the fleet-wide Synced of every resource).
func (s FleetStatus) Synced() bool {
	for _, r := range s.Resources {
		if !r.Synced() {
			return false
		}
	}
	return true
}

// Status is a snapshot of the fleet: its clusters and its resources.
func (f *Fleet) Status() FleetStatus {
	f.mu.Lock()
	srcErr := f.sourceErr
	f.mu.Unlock()
	st := FleetStatus{SourceErr: srcErr}
	for _, r := range f.resourcesSnapshot() {
		st.Resources = append(st.Resources, r.Status())
	}
	ms, _ := f.membersSnapshot()
	for _, m := range ms {
		m.mu.Lock()
		cs := ClusterStatus{Name: m.name, Generation: m.gen, Since: m.since, Err: m.err}
		m.mu.Unlock()
		for _, rs := range st.Resources {
			c, ok := rs.Cluster(m.name)
			if !ok {
				continue
			}
			cs.Informers++
			if c.HasSynced {
				cs.Synced++
			}
			if cs.ContactErr == nil && c.ContactErr != nil {
				cs.ContactErr = c.ContactErr
			}
			if c.LastContact.After(cs.LastContact) {
				cs.LastContact = c.LastContact
			}
		}
		st.Clusters = append(st.Clusters, cs)
	}
	return st
}

// WaitForSync waits until every resource of the fleet has synced in the
// clusters mode names (see Resource.WaitForSync); on ctx's end it returns a
// *SyncError naming the resource and cluster of each informer that held it
// ("cluster/resource").
func (f *Fleet) WaitForSync(ctx context.Context, mode WaitMode) error {
	var waiting map[string]string
	for _, r := range f.resourcesSnapshot() {
		_, err := r.WaitForSync(ctx, mode)
		var se *SyncError
		if errors.As(err, &se) {
			if waiting == nil {
				waiting = map[string]string{}
			}
			for c, why := range se.NotSynced {
				waiting[c+"/"+r.String()] = why
			}
			continue
		}
		if err != nil {
			return err
		}
	}
	if waiting != nil {
		return &SyncError{NotSynced: waiting, Cause: ctx.Err()}
	}
	return nil
}
