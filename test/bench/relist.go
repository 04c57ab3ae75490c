package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	cgdynamicinformer "k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/dynamicinformer"
)

// RowRelist is the relist scenario's row (RunRelist).
const RowRelist = "9. relist after a 410 (what handlers are given)"

// Implementations of the relist scenario's row.
const (
	// RelistInformerKit is informerkit's default: a relist delivers only
	// what changed.
	RelistInformerKit = "informerkit"
	// RelistInformerKitUnchanged is informerkit with
	// WithUnchangedRelistUpdates (client-go's relist, asked for).
	RelistInformerKitUnchanged = "ik WithUnchangedRelistUpdates"
)

// RelistImpls are the rows of the relist table; client-go is the peer.
func RelistImpls() []Impl {
	return []Impl{{Name: RelistInformerKit}, {Name: RelistInformerKitUnchanged}, {Name: ClientGo, Peer: true}}
}

// RelistConfig says what RunRelist measures.
type RelistConfig struct {
	// N is the number of objects cached. Default 10000.
	N int
	// Runs per implementation; tables show medians. Default 1.
	Runs int
	// Informers is the config the informers use: through a proxy whose
	// connections Stall and Cut control (the writes use the other one).
	Informers *rest.Config
	// Stall black-holes (true) or restores (false) the informers'
	// connections; Cut closes them.
	Stall func(bool)
	Cut   func()
	// Compact compacts the server's history (etcd), so that the watch
	// from before the outage answers 410. Required; the server must run
	// without a watch cache (RestartServerFlags).
	Compact func(ctx context.Context) error
	// LoadWorkers apply the objects in parallel. Default 8.
	LoadWorkers int
	Logf        func(format string, args ...any)
}

// relistChanges is what changes during each outage: 4 objects updated,
// 3 created, 3 deleted.
const relistChanges = 10

// RunRelist measures what a relist after an outage gives handlers, side
// by side with client-go's dynamicinformer: for each implementation in
// turn, an informer over N objects with one handler syncs; its
// connections are black-holed while 4 objects are updated, 3 created and
// 3 deleted; etcd is compacted; the connections are cut and restored, so
// the watch answers 410 Expired and the informer relists. Recorded: the
// handler calls the relist made, and the time from the restored
// connection to the handler's first real change, to all 10, and to the
// end of the relist: a change made through the watch once all 10 arrived
// (a handler's events are in order, so it comes after the whole relist).
// The handler serialises each object it is given to JSON (a stand-in for
// a reconcile's cost).
func RunRelist(ctx context.Context, cfg *rest.Config, c RelistConfig) (*Results, error) {
	if c.N <= 0 {
		c.N = 10000
	}
	if c.Runs <= 0 {
		c.Runs = 1
	}
	if c.LoadWorkers <= 0 {
		c.LoadWorkers = 8
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	res := &Results{Impls: RelistImpls()}
	ns := make([]string, 0, Namespaces)
	for i := range Namespaces {
		ns = append(ns, namespaceName(i))
	}
	if err := createNamespaces(ctx, cfg, ns...); err != nil {
		return nil, err
	}
	r, err := installCRD(ctx, cfg, "relist.bench.informerkit.io", "Widget", "widgets")
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := load(ctx, cfg, r, 0, c.N, c.LoadWorkers); err != nil {
		return nil, err
	}
	c.Logf("loaded %d objects in %v", c.N, time.Since(start).Round(time.Millisecond))
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	seq := 0
	for run := range c.Runs {
		for _, impl := range []string{ClientGo, RelistInformerKit, RelistInformerKitUnchanged} {
			seq++
			o, err := relistOnce(ctx, dyn, c, r, impl, seq)
			if err != nil {
				return res, fmt.Errorf("%s run %d: %w", impl, run+1, err)
			}
			cs := fmt.Sprintf("N=%d, %d changed", c.N, relistChanges)
			res.add(RowRelist, cs, "handler calls", "count", impl, float64(o.calls))
			res.add(RowRelist, cs, "first change", "ms", impl, float64(o.first.Microseconds())/1000)
			res.add(RowRelist, cs, "all changes", "ms", impl, float64(o.all.Microseconds())/1000)
			res.add(RowRelist, cs, "relist done", "ms", impl, float64(o.end.Microseconds())/1000)
			c.Logf("%-30s N=%d: %d handler calls on the relist; first real change %v, all %d %v, relist done %v after the connection came back",
				impl, c.N, o.calls, o.first.Round(time.Millisecond), relistChanges, o.all.Round(time.Millisecond), o.end.Round(time.Millisecond))
		}
	}
	return res, nil
}

type relistOutcome struct {
	calls           int
	first, all, end time.Duration
}

// relistWatcher is the measured handler: it counts calls once armed and
// notes when each awaited change arrives.
type relistWatcher struct {
	mu        sync.Mutex // guards everything below
	armed     bool
	start     time.Time
	calls     int
	pending   map[string]bool // keys whose change has not arrived
	first     time.Duration
	all       time.Duration
	end       time.Duration // the change after the relist arrived
	allSeen   chan struct{}
	marker    string         // key of the change after the relist
	markValue string         // its afterRelist annotation
	kinds     map[string]int // calls by kind
	markSeen  chan struct{}
}

func (w *relistWatcher) event(kind string, obj interface{}, real bool) {
	k, _ := toolscache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	// The handler's work: the object serialised (a stand-in for a
	// reconcile's cost, so that calls cost what they cost a controller).
	if _, err := json.Marshal(obj); err != nil {
		panic(err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.armed {
		return
	}
	w.kinds[kind]++
	if k == w.marker && w.marker != "" && isMarker(obj, w.markValue) {
		w.end = time.Since(w.start)
		close(w.markSeen)
		w.marker = ""
		return
	}
	w.calls++
	if !real || !w.pending[k] {
		return
	}
	delete(w.pending, k)
	d := time.Since(w.start)
	if w.first == 0 {
		w.first = d
	}
	if len(w.pending) == 0 {
		w.all = d
		close(w.allSeen)
	}
}

func (w *relistWatcher) OnAdd(obj interface{}, _ bool) { w.event("add", obj, true) }
func (w *relistWatcher) OnUpdate(old, obj interface{}) {
	o, err1 := meta.Accessor(old)
	n, err2 := meta.Accessor(obj)
	changed := err1 != nil || err2 != nil || o.GetResourceVersion() != n.GetResourceVersion()
	kind := "update (same resourceVersion)"
	if changed {
		kind = "update"
	}
	w.event(kind, obj, changed)
}
func (w *relistWatcher) OnDelete(obj interface{}) { w.event("delete", obj, true) }

// isMarker reports whether obj carries the change made after the relist.
func isMarker(obj interface{}, value string) bool {
	m, err := meta.Accessor(obj)
	return err == nil && m.GetAnnotations()[afterRelist] == value
}

const afterRelist = "bench.informerkit.io/after-relist"

func relistOnce(ctx context.Context, dyn dynamic.Interface, c RelistConfig, r Resource, impl string, seq int) (relistOutcome, error) {
	name := func(kind string, j int) string { return fmt.Sprintf("relist-%d-%s-%d", seq, kind, j) }
	res := dyn.Resource(r.GVR)
	// The objects deleted during the outage exist before the informer starts.
	for j := range 3 {
		if err := apply(ctx, dyn, r, object(r, namespaceName(j), name("del", j), j, nil)); err != nil {
			return relistOutcome{}, err
		}
	}
	w := &relistWatcher{pending: map[string]bool{}, kinds: map[string]int{}, allSeen: make(chan struct{}), markSeen: make(chan struct{})}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var synced func() bool
	var stop func()
	switch impl {
	case ClientGo:
		cdyn, err := dynamic.NewForConfig(c.Informers)
		if err != nil {
			return relistOutcome{}, err
		}
		f := cgdynamicinformer.NewDynamicSharedInformerFactory(cdyn, 0)
		inf := f.ForResource(r.GVR).Informer()
		reg, err := inf.AddEventHandler(w)
		if err != nil {
			return relistOutcome{}, err
		}
		f.Start(ctx.Done())
		synced, stop = reg.HasSynced, func() { cancel(); f.Shutdown() }
	default:
		f, err := dynamicinformer.NewForConfig(c.Informers, dynamicinformer.Options{})
		if err != nil {
			return relistOutcome{}, err
		}
		var opts []dynamicinformer.ResourceOption
		if impl == RelistInformerKitUnchanged {
			opts = append(opts, dynamicinformer.WithUnchangedRelistUpdates())
		}
		h := f.ForResource(r.GVR, opts...)
		reg, err := h.Informer().AddEventHandler(w)
		if err != nil {
			return relistOutcome{}, err
		}
		f.Start(ctx)
		synced, stop = reg.HasSynced, f.Shutdown
	}
	defer stop()
	// The handler's HasSynced: it has been given the whole initial list
	// (the informer's may be true while the handler still works through
	// it).
	if !toolscache.WaitForCacheSync(ctx.Done(), synced) {
		return relistOutcome{}, fmt.Errorf("%w: not synced", ErrSanity)
	}

	// The outage: 4 updated (spread over the list), 3 created, 3 deleted.
	c.Stall(true)
	stalled := true
	defer func() {
		if stalled {
			c.Stall(false)
		}
	}()
	for j := range 4 {
		i := j * c.N / 4
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"bench.informerkit.io/relist":"%d"}}}`, seq)
		if _, err := res.Namespace(namespaceName(i)).Patch(ctx, objectName(i), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return relistOutcome{}, err
		}
		w.pending[namespaceName(i)+"/"+objectName(i)] = true
	}
	for j := range 3 {
		if err := apply(ctx, dyn, r, object(r, namespaceName(j), name("new", j), j, nil)); err != nil {
			return relistOutcome{}, err
		}
		w.pending[namespaceName(j)+"/"+name("new", j)] = true
		if err := res.Namespace(namespaceName(j)).Delete(ctx, name("del", j), metav1.DeleteOptions{}); err != nil {
			return relistOutcome{}, err
		}
		w.pending[namespaceName(j)+"/"+name("del", j)] = true
	}
	if err := c.Compact(ctx); err != nil {
		return relistOutcome{}, fmt.Errorf("compact: %w", err)
	}
	w.mu.Lock()
	w.armed, w.start = true, time.Now()
	w.mu.Unlock()
	c.Cut()
	c.Stall(false)
	stalled = false
	select {
	case <-w.allSeen:
	case <-ctx.Done():
		return relistOutcome{}, ctx.Err()
	}
	// The end of the relist: a change through the watch after it.
	mi := c.N / 8
	w.mu.Lock()
	w.marker, w.markValue = namespaceName(mi)+"/"+objectName(mi), fmt.Sprint(seq)
	w.mu.Unlock()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"%d"}}}`, afterRelist, seq)
	if _, err := res.Namespace(namespaceName(mi)).Patch(ctx, objectName(mi), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return relistOutcome{}, err
	}
	select {
	case <-w.markSeen:
	case <-ctx.Done():
		return relistOutcome{}, ctx.Err()
	}
	// The new objects stay (the next turn caches them too).
	w.mu.Lock()
	o := relistOutcome{calls: w.calls, first: w.first, all: w.all, end: w.end}
	c.Logf("%s: handler calls by kind %v", impl, w.kinds)
	w.mu.Unlock()
	if impl == RelistInformerKit && o.calls != relistChanges {
		return o, fmt.Errorf("%w: %s gave its handler %d calls on the relist, want %d", ErrSanity, impl, o.calls, relistChanges)
	}
	if impl != RelistInformerKit && o.calls < c.N {
		return o, fmt.Errorf("%w: %s gave its handler %d calls on the relist, want at least N=%d (no relist?)", ErrSanity, impl, o.calls, c.N)
	}
	return o, nil
}
