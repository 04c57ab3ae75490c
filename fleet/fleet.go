package fleet

import (
	"context"
	"sort"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"

	"github.com/informerkit/informerkit/dynamicinformer"
)

// Options configures a Fleet. The zero value is the default fleet.
type Options struct {
	// Factory configures every cluster's factory (each cluster has one,
	// built with dynamicinformer.NewForConfig from the cluster's Config).
	// Its Defaults apply to every resource of the fleet. A Factory.Logger
	// left zero is the fleet's Logger; either way it logs with the key
	// "cluster". A CacheDir is one directory per cluster under it (named
	// after the cluster, path-escaped); restarting a fleet from it is not
	// tested yet.
	Factory dynamicinformer.Options
	// Logger is the fleet's logger (key "cluster"). Zero: klog's. The fleet
	// logs joins, leaves and rebuilds at V(1); nothing at V(0) while all is
	// well.
	Logger logr.Logger
}

// Fleet holds shared informers over every cluster a Source names, read as one
// cache: ForResource and ForName give a Resource whose handlers receive every
// cluster's events, each naming its cluster, and whose Lister reads across
// clusters. Each cluster has its own dynamicinformer.Factory; a cluster that is
// unreachable, black-holed or forbidden delays no other cluster's sync, events
// or reads (see the package documentation, "Isolation").
//
// All methods are safe for concurrent use. Create a fleet with New, start it
// with Start and end it with Shutdown.
//
// # Goroutines
//
// Start runs the source on a goroutine of the fleet; each cluster has one
// goroutine of its own that builds, rebuilds and stops its factory, plus the
// factory's goroutines (see dynamicinformer.Factory), a goroutine per name
// being resolved (ForName) and, after a rebuild, one per handler until it has
// caught up. A cluster's goroutines end when it leaves (after its deletes are
// delivered); Shutdown ends all of them and waits for them. Do not call
// Shutdown from a handler or a status callback.
type Fleet struct {
	source Source
	opts   Options
	log    logr.Logger

	mu sync.Mutex // guards every field below
	// members are the clusters of the source's last set, by name.
	members map[string]*member
	// leaving are members that left and have not finished delivering
	// their deletes, by name (a member of the same name waits for them).
	leaving map[string]*member
	// resources are the live ForResource and ForName results, in order.
	resources []*Resource
	started   bool
	shutdown  bool
	// sourced: the source has given its first set of clusters.
	sourced   bool
	ctx       context.Context // the fleet's run (set by Start)
	cancel    context.CancelFunc
	sourceErr error
	// changed is closed and replaced whenever something a Status shows may
	// have changed (waits select on it).
	changed chan struct{}

	wg sync.WaitGroup // every goroutine the fleet starts
}

// New returns a fleet over the clusters of src. It starts nothing: call
// Start.
func New(src Source, opts Options) *Fleet {
	log := opts.Logger
	if log.GetSink() == nil {
		log = klog.Background()
	}
	return &Fleet{source: src, opts: opts, log: log.WithName("fleet"), members: map[string]*member{}, leaving: map[string]*member{}, changed: make(chan struct{})}
}

// Start runs the source and, from its first set of clusters on, every
// cluster's informers. It may be called again (no effect). The fleet runs
// until ctx ends or Shutdown; a cancelled ctx does not wait for the
// goroutines to end (Shutdown does).
func (f *Fleet) Start(ctx context.Context) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.started || f.shutdown {
		return
	}
	f.started = true
	f.ctx, f.cancel = context.WithCancel(ctx)
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		err := f.source.Run(f.ctx, f.update)
		if err != nil && f.ctx.Err() == nil {
			f.log.Error(err, "cluster source stopped")
			f.mu.Lock()
			f.sourceErr = err
			f.notifyLocked()
			f.mu.Unlock()
		}
	}()
}

// Shutdown stops every cluster's informers and the source, and returns when
// every goroutine of the fleet has ended. Handlers are not given deletes (as
// a factory's are not at Shutdown); listers keep the last contents. Later
// calls return at once.
func (f *Fleet) Shutdown() {
	f.mu.Lock()
	if f.shutdown {
		f.mu.Unlock()
		f.wg.Wait()
		return
	}
	f.shutdown = true
	if f.cancel != nil {
		f.cancel()
	}
	for _, m := range f.members {
		m.stop(false)
	}
	f.notifyLocked()
	f.mu.Unlock()
	f.wg.Wait()
}

// update applies a source's set of clusters.
func (f *Fleet) update(clusters []Cluster) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.shutdown {
		return
	}
	f.sourced = true
	want := make(map[string]Cluster, len(clusters))
	for _, c := range clusters {
		want[c.Name] = c
	}
	for name, m := range f.members {
		c, ok := want[name]
		if !ok {
			f.log.V(1).Info("cluster leaves", "cluster", name)
			delete(f.members, name)
			f.leaving[name] = m
			m.stop(true)
			continue
		}
		m.reconfigure(c)
	}
	for name, c := range want {
		if _, ok := f.members[name]; ok {
			continue
		}
		f.log.V(1).Info("cluster joins", "cluster", name)
		m := newMember(f, c)
		f.members[name] = m
		f.wg.Add(1)
		go m.run(f.ctx)
	}
	f.notifyLocked()
}

// notify wakes every wait: something a Status shows may have changed.
func (f *Fleet) notify() {
	f.mu.Lock()
	f.notifyLocked()
	f.mu.Unlock()
}

func (f *Fleet) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// membersSnapshot returns the members sorted by name, and the channel that
// is closed at the next change.
func (f *Fleet) membersSnapshot() ([]*member, <-chan struct{}) {
	ms, _, changed := f.membersState()
	return ms, changed
}

// membersState is membersSnapshot with whether the source has given its
// first set of clusters, read together.
func (f *Fleet) membersState() (ms []*member, sourced bool, changed <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ms = make([]*member, 0, len(f.members))
	for _, m := range f.members {
		ms = append(ms, m)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].name < ms[j].name })
	return ms, f.sourced, f.changed
}

func (f *Fleet) member(name string) *member {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.members[name]
}

func (f *Fleet) resourcesSnapshot() []*Resource {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*Resource(nil), f.resources...)
}

// ForResource returns the fleet's informer of gvr with the given options
// (those of a factory's ForResource, applied in every cluster): each
// cluster's factory holds an informer of gvr, shared with the cluster's
// other informers as dynamicinformer's sharing rules say. It never fails:
// per-cluster problems (not served, forbidden, unreachable) show in the
// Resource's Status for that cluster, and a cluster where gvr is not served
// yet starts it when it is. Clusters that join later get it too. After
// Shutdown the Resource holds nothing and its waits return ErrStopped.
func (f *Fleet) ForResource(gvr schema.GroupVersionResource, opts ...dynamicinformer.ResourceOption) *Resource {
	return f.add(&Resource{gvr: gvr, opts: opts})
}

// ForName is ForResource for a kubectl-style name ("ct",
// "widgets.example.com", "Deployment.v1.apps"), resolved in each cluster on
// its own (through that cluster's discovery; see dynamicinformer's
// ForName): the same name may be a different version, or not served, in
// different clusters. It returns at once; in a cluster where the name does
// not resolve yet, the Resource's Status there is Pending with the
// resolver's error (errors.Is discoveryresolver.ErrNotFound, ...) and the name
// is resolved again when a CustomResourceDefinition of that cluster changes
// and at least every 30 s, so the informer starts there when its CRD
// arrives. A cluster that cannot be reached while resolving is Pending with
// a ContactErr (errors.Is dynamicinformer.ErrNoContact).
func (f *Fleet) ForName(name string, opts ...dynamicinformer.ResourceOption) *Resource {
	return f.add(&Resource{name: name, opts: opts})
}

func (f *Fleet) add(r *Resource) *Resource {
	r.fleet = f
	r.regs = map[*Registration]struct{}{}
	f.mu.Lock()
	if f.shutdown {
		r.released = true
		f.mu.Unlock()
		return r
	}
	f.resources = append(f.resources, r)
	ms := make([]*member, 0, len(f.members))
	for _, m := range f.members {
		ms = append(ms, m)
	}
	f.mu.Unlock()
	for _, m := range ms {
		m.bind(r)
	}
	f.notify()
	return r
}

// remove forgets r (Release).
func (f *Fleet) remove(r *Resource) []*member {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, x := range f.resources {
		if x == r {
			f.resources = append(f.resources[:i:i], f.resources[i+1:]...)
			break
		}
	}
	ms := make([]*member, 0, len(f.members))
	for _, m := range f.members {
		ms = append(ms, m)
	}
	return ms
}

func (f *Fleet) isShutdown() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.shutdown
}
