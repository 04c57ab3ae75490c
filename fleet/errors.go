package fleet

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Errors a caller can test with errors.Is. The fleet's errors that concern
// one cluster are *ClusterError values wrapping one of them (or an error of
// package dynamicinformer or discoveryresolver).
var (
	// ErrClusterConfig: the source could not give a usable client
	// configuration for a cluster (a kubeconfig that does not parse, a
	// context that does not exist, a Secret without the kubeconfig key) or
	// the clients could not be built from it. The cluster is a member of the
	// fleet that holds nothing until its source gives a usable
	// configuration.
	ErrClusterConfig = errors.New("cluster configuration unusable")
	// ErrUnknownCluster: the cluster named is not a member of the fleet.
	ErrUnknownCluster = errors.New("cluster not in the fleet")
	// ErrStopped: the fleet was shut down, or the resource or handler
	// registration was released.
	ErrStopped = errors.New("fleet stopped")
	// ErrNotSynced: a wait for the fleet's sync ended (its context ended)
	// before every cluster it waited for had synced; the *SyncError says
	// which clusters and why.
	ErrNotSynced = errors.New("fleet not synced")
)

// ClusterError is an error that concerns one cluster of the fleet.
type ClusterError struct {
	Cluster string
	Err     error
}

// Error names the cluster, then the cause.
func (e *ClusterError) Error() string { return fmt.Sprintf("cluster %q: %v", e.Cluster, e.Err) }

// Unwrap returns the cause.
func (e *ClusterError) Unwrap() error { return e.Err }

// SyncError is what a wait for the fleet's sync returns when it ended
// before the clusters it waited for had synced: errors.Is(err,
// ErrNotSynced), and errors.Is the context's error (context.DeadlineExceeded
// or context.Canceled).
type SyncError struct {
	// NotSynced names each cluster that held the wait, with what its
	// informer said (its Status.Err or Reason; "syncing" when nothing is
	// wrong yet).
	NotSynced map[string]string
	// Cause is the context's error.
	Cause error
}

// Error lists the clusters not synced, sorted by name.
func (e *SyncError) Error() string {
	names := make([]string, 0, len(e.NotSynced))
	for n := range e.NotSynced {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s (%s)", n, e.NotSynced[n])
	}
	return fmt.Sprintf("%v: %d cluster(s) not synced: %s: %v", ErrNotSynced, len(names), strings.Join(parts, ", "), e.Cause)
}

// Unwrap returns ErrNotSynced and the context's error.
func (e *SyncError) Unwrap() []error { return []error{ErrNotSynced, e.Cause} }
