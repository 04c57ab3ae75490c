package fleet

import (
	"context"
	"sort"
	"sync"

	"k8s.io/client-go/rest"
)

// Cluster is one member of a fleet: a name unique in its source and the
// client configuration that reaches it.
//
// The fleet compares Config by pointer: a source hands the same
// *rest.Config again for a cluster whose configuration has not changed, and a
// new one when it has (credentials rotated, server moved). A new pointer
// makes the fleet rebuild that cluster's clients (see Fleet). The fleet never
// modifies a Config; it copies it before use.
type Cluster struct {
	Name   string
	Config *rest.Config
	// Err, when set, says why the source cannot give a Config for a
	// cluster it knows (errors.Is ErrClusterConfig: a kubeconfig that does
	// not parse, a Secret without its key). The cluster is a member that
	// holds nothing, its status says why, until the source gives a Config.
	Err error
}

// Source tells a fleet which clusters it has, as that changes.
//
// Run calls update with the complete set of clusters (not a change): once
// with the initial set as soon as it is known, then again each time the set
// or a cluster's Config changes. Calls to update are sequential, never
// concurrent; update does not block for long (the fleet applies the set in
// the background) and may be called from any goroutine. A cluster absent from
// a set has left the fleet. Run returns when ctx ends (with nil) or when the
// source cannot go on (with an error; the fleet keeps the last set and reports
// the error in Fleet.Status). A Source is run by one fleet at a time.
type Source interface {
	Run(ctx context.Context, update func([]Cluster)) error
}

// StaticSource is a Source whose clusters the program sets (for programs
// with a fixed list, and for tests): Set, Delete and Replace change the set
// and every running fleet on it sees the change. Its zero value is an empty
// source ready to use; it is safe for concurrent use.
type StaticSource struct {
	mu       sync.Mutex // guards clusters, watchers
	clusters map[string]*rest.Config
	watchers map[int]func([]Cluster)
	nextID   int
}

// NewStaticSource returns a source holding clusters (name → config).
func NewStaticSource(clusters map[string]*rest.Config) *StaticSource {
	s := &StaticSource{}
	for name, cfg := range clusters {
		s.setLocked(name, cfg)
	}
	return s
}

func (s *StaticSource) setLocked(name string, cfg *rest.Config) {
	if s.clusters == nil {
		s.clusters = map[string]*rest.Config{}
	}
	s.clusters[name] = cfg
}

// Set adds the cluster name, or replaces its config (a fleet rebuilds the
// cluster's clients when cfg is a different pointer from the one it holds).
func (s *StaticSource) Set(name string, cfg *rest.Config) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setLocked(name, cfg)
	s.publishLocked()
}

// Delete removes the cluster name (no-op if absent).
func (s *StaticSource) Delete(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.clusters[name]; !ok {
		return
	}
	delete(s.clusters, name)
	s.publishLocked()
}

// Replace sets the whole set of clusters at once.
func (s *StaticSource) Replace(clusters map[string]*rest.Config) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clusters = nil
	for name, cfg := range clusters {
		s.setLocked(name, cfg)
	}
	s.publishLocked()
}

// Clusters returns the current set, sorted by name.
func (s *StaticSource) Clusters() []Cluster {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snapshotLocked()
}

func (s *StaticSource) snapshotLocked() []Cluster {
	out := make([]Cluster, 0, len(s.clusters))
	for name, cfg := range s.clusters {
		out = append(out, Cluster{Name: name, Config: cfg})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// publishLocked calls every running watcher with the set; s.mu is held, so
// the calls of concurrent changes are sequential and in order.
func (s *StaticSource) publishLocked() {
	set := s.snapshotLocked()
	for _, w := range s.watchers {
		w(set)
	}
}

// Run reports the set now and after every change until ctx ends. Update is
// called with the source's lock held (in the goroutine that changed the
// set), so it must not call back into the source.
func (s *StaticSource) Run(ctx context.Context, update func([]Cluster)) error {
	s.mu.Lock()
	if s.watchers == nil {
		s.watchers = map[int]func([]Cluster){}
	}
	id := s.nextID
	s.nextID++
	s.watchers[id] = update
	update(s.snapshotLocked())
	s.mu.Unlock()
	<-ctx.Done()
	s.mu.Lock()
	delete(s.watchers, id)
	s.mu.Unlock()
	return nil
}
