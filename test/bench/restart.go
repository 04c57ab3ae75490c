package bench

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/internal/diskcost"
	"github.com/informerkit/informerkit/test/controlplane"
)

// Rows of the restart scenario (RunRestart).
const (
	RowRestart = "7. restart from disk (start → Synced)"
	RowPersist = "8. persistence cost while running"
)

// Implementations of the restart scenario's rows.
const (
	// RestartCold is informerkit with Options.CacheDir on an empty
	// directory: a cold start that writes everything it lists.
	RestartCold = "ik CacheDir, cold (empty dir)"
	// RestartResumed is a new factory on the directory RestartCold left,
	// after some changes on the server: it restores and resumes the watch.
	RestartResumed = "ik CacheDir, restart resumed"
	// RestartDiffed is a new factory on the directory after more changes
	// and an etcd compaction: the watch answers 410 and it lists once,
	// against the restored store.
	RestartDiffed = "ik CacheDir, restart diffed (410)"
	// PersistOff and PersistOn are informerkit without and with
	// Options.CacheDir in the persistence-cost row.
	PersistOff = "informerkit"
	PersistOn  = "ik CacheDir"
)

// RestartServerFlags are the API server flags RunRestart's server runs
// with: no watch cache. The watch cache keeps recent events whatever etcd
// has compacted, so with it a restart seconds later always resumes and
// RestartConfig.Compact could not force the 410 of a restart past the
// server's window. Every row of the scenario is measured on the same
// server.
var RestartServerFlags = []string{"--watch-cache=false"}

// RestartConfig says what RunRestart measures; zero fields take the
// defaults of RestartConfig.Defaults.
type RestartConfig struct {
	// Sizes are the object counts N, ascending. Default 10000, 50000.
	Sizes []int
	// Runs per size; tables show medians. Default 3.
	Runs int
	// Changes is how many objects are created, updated and deleted (each)
	// while the process is down. Default 10.
	Changes int
	// PersistEvents updates at PersistRate per second make the
	// persistence-cost measurement (at Sizes[0]). Defaults 2000 and 200;
	// PersistEvents < 0 skips it.
	PersistEvents int
	PersistRate   float64
	// Compact compacts the server's history (etcd), so that a watch from
	// an older resourceVersion answers 410. Nil skips the diffed restart.
	Compact func(ctx context.Context) error
	// Writer, if set, sends the persistence measurement's writes
	// (PersistWrite's) from another process. Nil: from this one.
	Writer func(ctx context.Context, tag string, m, n int, rate float64) error
	// Together, if set, measures the persistence cost's two sides at the
	// same time, each in a process of its own (MeasurePersistSide there),
	// watching the same updates: it starts them, calls write once both
	// are in their window, and returns their samples in sides' order.
	// Nil: one side after the other, in this process.
	Together func(ctx context.Context, sides []PersistSide, write func() error) ([]PersistSample, error)
	// SkipRestart measures only the persistence cost.
	SkipRestart bool
	// PersistCompact measures the persistence cost with compact caches
	// (Projection{Compact: true}) on both sides: their objects are kept
	// in the stored form already, so persistence encodes nothing. The
	// rows are named PersistOn and PersistOff with " Compact" added.
	PersistCompact bool
	// PersistCPUProfile, if set, is a prefix: each persistence phase's
	// window (the writes and the settle after them) is CPU-profiled to
	// PREFIX-on-rN.prof and PREFIX-off-rN.prof.
	PersistCPUProfile string
	// LoadWorkers: parallel writers for the load. Default 16.
	LoadWorkers int
	// Logf receives progress lines; nil discards them.
	Logf func(format string, args ...any)
}

// Defaults returns c with every zero field set to its default.
func (c RestartConfig) Defaults() RestartConfig {
	if len(c.Sizes) == 0 {
		c.Sizes = []int{10000, 50000}
	}
	if c.Runs == 0 {
		c.Runs = 3
	}
	if c.Changes == 0 {
		c.Changes = 10
	}
	if c.PersistEvents == 0 {
		c.PersistEvents = 2000
	}
	if c.PersistRate == 0 {
		c.PersistRate = 200
	}
	if c.LoadWorkers == 0 {
		c.LoadWorkers = 16
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	return c
}

// RestartImpls are the rows of RunRestart's tables, client-go's cold
// start the peer.
func RestartImpls() []Impl {
	return []Impl{{Name: RestartCold}, {Name: RestartResumed}, {Name: RestartDiffed}, {Name: ClientGo, Peer: true}}
}

// PersistImpls are the rows of the persistence-cost table: informerkit
// without CacheDir is the peer. compact: RestartConfig.PersistCompact's.
func PersistImpls(compact bool) []Impl {
	on, off := persistNames(compact)
	return []Impl{{Name: on}, {Name: off, Peer: true}}
}

// persistNames are the persistence rows' names, with and without
// CacheDir (RestartConfig.PersistCompact's add " Compact").
func persistNames(compact bool) (on, off string) {
	if compact {
		return PersistOn + " Compact", PersistOff + " Compact"
	}
	return PersistOn, PersistOff
}

// RunRestart loads N objects of the suite's resource (as Run does) and,
// per run, measures side by side: client-go's cold start, informerkit's
// cold start with an empty CacheDir, a restart on that directory that
// resumes (after Changes creates and updates on the server), and one that
// diffs (after Changes deletes and updates and c.Compact). Each row has
// the time from building the factory to Synced and to the handler having
// seen every change made while down ("caught up"), the response bytes
// received from the API server (as the client reads them: after gzip),
// the LIST requests sent for the resource, and the events handlers got
// that were not initial-list adds (what changed while down; sanity-checked
// exactly). Then, at Sizes[0], the persistence cost: client CPU and bytes
// written per event with and without CacheDir. Two tables of Results;
// the restart's and the persistence's Results are returned in that order.
func RunRestart(ctx context.Context, cfg *rest.Config, c RestartConfig) (restart, persist *Results, err error) {
	c = c.Defaults()
	restart = &Results{Impls: RestartImpls()}
	persist = &Results{Impls: PersistImpls(c.PersistCompact)}
	ns := make([]string, 0, Namespaces)
	for i := 0; i < Namespaces; i++ {
		ns = append(ns, namespaceName(i))
	}
	if err := createNamespaces(ctx, cfg, ns...); err != nil {
		return nil, nil, err
	}
	r, err := installCRD(ctx, cfg, "bench.informerkit.io", "Widget", "widgets")
	if err != nil {
		return nil, nil, err
	}
	root, err := os.MkdirTemp("", "ikbench-restart-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(root)
	loaded := 0
	for _, n := range c.Sizes {
		start := time.Now()
		if err := load(ctx, cfg, r, loaded, n, c.LoadWorkers); err != nil {
			return restart, persist, err
		}
		loaded = n
		c.Logf("loaded %d objects in %v", n, time.Since(start).Round(time.Millisecond))
		// Warm-up: the first list of freshly written objects pays for the
		// server's cold caches.
		if c.SkipRestart {
			break
		}
		if _, err := coldClientGo(ctx, cfg, r, n); err != nil {
			return restart, persist, fmt.Errorf("warm-up: %w", err)
		}
		for run := 0; run < c.Runs && !c.SkipRestart; run++ {
			dir := filepath.Join(root, fmt.Sprintf("N%d-run%d", n, run))
			if err := restartRun(ctx, cfg, c, restart, r, n, run, dir); err != nil {
				return restart, persist, fmt.Errorf("N=%d run %d: %w", n, run+1, err)
			}
			c.Logf("restart N=%d run %d done", n, run+1)
		}
	}
	if c.PersistEvents < 0 {
		return restart, persist, nil
	}
	for run := 0; run < c.Runs; run++ {
		if err := measurePersist(ctx, cfg, c, persist, r, c.Sizes[0], run, filepath.Join(root, fmt.Sprintf("persist-%d", run))); err != nil {
			return restart, persist, fmt.Errorf("persistence cost run %d: %w", run+1, err)
		}
	}
	return restart, persist, nil
}

// restartOutcome is one measured start.
type restartOutcome struct {
	sync           time.Duration // to Synced
	caughtUp       time.Duration // to the handler having seen every change made while down
	bytes          int64
	lists          int
	restored       int
	added, updated int64 // not initial-list adds; updates
	deleted        int64
}

func (o restartOutcome) record(res *Results, cs, impl string) {
	res.add(RowRestart, cs, "sync", "ms", impl, float64(o.sync.Microseconds())/1000)
	res.add(RowRestart, cs, "caught up", "ms", impl, float64(o.caughtUp.Microseconds())/1000)
	res.add(RowRestart, cs, "received", "KiB", impl, float64(o.bytes)/1024)
	res.add(RowRestart, cs, "lists", "count", impl, float64(o.lists))
	res.add(RowRestart, cs, "handler events", "count", impl, float64(o.added+o.updated+o.deleted))
}

// restartRun is one run at size n: client-go cold, ik cold, resumed,
// diffed, in an order that rotates with run.
func restartRun(ctx context.Context, cfg *rest.Config, c RestartConfig, res *Results, r Resource, n, run int, dir string) error {
	cs := fmt.Sprintf("N=%d", n)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	k := c.Changes
	cg := func() error {
		o, err := coldClientGo(ctx, cfg, r, n)
		if err != nil {
			return err
		}
		o.record(res, cs, ClientGo)
		c.Logf("%-34s N=%-6d sync %-10v caught up %-10v received %d KiB, %d lists", ClientGo, n, o.sync.Round(time.Millisecond), o.caughtUp.Round(time.Millisecond), o.bytes>>10, o.lists)
		return nil
	}
	// client-go goes first on even runs, last on odd ones.
	if run%2 == 0 {
		if err := cg(); err != nil {
			return err
		}
	}
	o, err := ikCacheStart(ctx, cfg, r, dir, n, 0, 0, 0)
	if err != nil {
		return fmt.Errorf("%s: %w", RestartCold, err)
	}
	if o.restored != 0 || o.lists != 1 {
		return fmt.Errorf("%w: %s restored %d objects and sent %d lists; want 0 and 1", ErrSanity, RestartCold, o.restored, o.lists)
	}
	o.record(res, cs, RestartCold)
	c.Logf("%-34s N=%-6d sync %-10v caught up %-10v received %d KiB, %d lists", RestartCold, n, o.sync.Round(time.Millisecond), o.caughtUp.Round(time.Millisecond), o.bytes>>10, o.lists)

	// While down: k new objects, k updated.
	for i := 0; i < k; i++ {
		if err := apply(ctx, dyn, r, object(r, namespaceName(0), restartName(i), i, nil)); err != nil {
			return err
		}
	}
	if err := touch(ctx, dyn, r, 0, k, fmt.Sprintf("resume-%d", run)); err != nil {
		return err
	}
	o, err = ikCacheStart(ctx, cfg, r, dir, n+k, int64(k), int64(k), 0)
	if err != nil {
		return fmt.Errorf("%s: %w", RestartResumed, err)
	}
	if o.restored != n || o.lists != 0 {
		return fmt.Errorf("%w: %s restored %d objects and sent %d lists; want %d and 0", ErrSanity, RestartResumed, o.restored, o.lists, n)
	}
	o.record(res, cs, RestartResumed)
	c.Logf("%-34s N=%-6d sync %-10v caught up %-10v received %d KiB, %d lists, %d restored; +%d ~%d -%d", RestartResumed, n, o.sync.Round(time.Millisecond), o.caughtUp.Round(time.Millisecond), o.bytes>>10, o.lists, o.restored, o.added, o.updated, o.deleted)

	if c.Compact != nil {
		// While down: the k new objects deleted, k others updated, then
		// the history compacted.
		for i := 0; i < k; i++ {
			if err := dyn.Resource(r.GVR).Namespace(namespaceName(0)).Delete(ctx, restartName(i), metav1.DeleteOptions{}); err != nil {
				return err
			}
		}
		if err := touch(ctx, dyn, r, k, 2*k, fmt.Sprintf("diff-%d", run)); err != nil {
			return err
		}
		if err := c.Compact(ctx); err != nil {
			return fmt.Errorf("compact: %w", err)
		}
		o, err = ikCacheStart(ctx, cfg, r, dir, n, 0, int64(k), int64(k))
		if err != nil {
			return fmt.Errorf("%s: %w", RestartDiffed, err)
		}
		if o.restored != n+k || o.lists != 1 {
			return fmt.Errorf("%w: %s restored %d objects and sent %d lists; want %d and 1", ErrSanity, RestartDiffed, o.restored, o.lists, n+k)
		}
		o.record(res, cs, RestartDiffed)
		c.Logf("%-34s N=%-6d sync %-10v caught up %-10v received %d KiB, %d lists, %d restored; +%d ~%d -%d", RestartDiffed, n, o.sync.Round(time.Millisecond), o.caughtUp.Round(time.Millisecond), o.bytes>>10, o.lists, o.restored, o.added, o.updated, o.deleted)
	} else {
		for i := 0; i < k; i++ {
			if err := dyn.Resource(r.GVR).Namespace(namespaceName(0)).Delete(ctx, restartName(i), metav1.DeleteOptions{}); err != nil {
				return err
			}
		}
	}
	if run%2 == 1 {
		return cg()
	}
	return nil
}

func restartName(i int) string { return fmt.Sprintf("restart-%04d", i) }

// touch updates objects [from, to) (a merge patch of one annotation).
func touch(ctx context.Context, dyn dynamic.Interface, r Resource, from, to int, value string) error {
	for i := from; i < to; i++ {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"bench.informerkit.io/touched":%q}}}`, value)
		if _, err := dyn.Resource(r.GVR).Namespace(namespaceName(i)).Patch(ctx, objectName(i), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("patch %s: %w", objectName(i), err)
		}
	}
	return nil
}

// transportCount counts, for one resource, the response bytes read and
// the lists sent (a LIST, or a watch-list stream).
type transportCount struct {
	resource string
	bytes    atomic.Int64
	lists    atomic.Int64
}

func (t *transportCount) config(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if strings.HasSuffix(req.URL.Path, "/"+t.resource) && req.Method == http.MethodGet {
				q := req.URL.Query()
				if q.Get("watch") != "true" || q.Get("sendInitialEvents") == "true" {
					t.lists.Add(1)
				}
			}
			resp, err := rt.RoundTrip(req)
			if err == nil && resp.Body != nil {
				resp.Body = &countingBody{ReadCloser: resp.Body, n: &t.bytes}
			}
			return resp, err
		})
	})
	return cfg
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// coldClientGo times client-go's dynamicinformer from factory to
// HasSynced, counting what it receives.
func coldClientGo(ctx context.Context, cfg *rest.Config, r Resource, n int) (restartOutcome, error) {
	tc := &transportCount{resource: r.GVR.Resource}
	start := time.Now()
	inst, err := newClientGo(tc.config(cfg))
	if err != nil {
		return restartOutcome{}, err
	}
	defer inst.Stop()
	if err := inst.Watch(r); err != nil {
		return restartOutcome{}, err
	}
	inst.Start(ctx)
	for !inst.Synced() {
		if err := waitTick(ctx, start); err != nil {
			return restartOutcome{}, err
		}
	}
	o := restartOutcome{sync: time.Since(start), bytes: tc.bytes.Load(), lists: int(tc.lists.Load())}
	o.caughtUp = o.sync
	if got := inst.Len(r); got != n {
		return o, fmt.Errorf("%w: client-go holds %d objects, want %d", ErrSanity, got, n)
	}
	return o, nil
}

func waitTick(ctx context.Context, start time.Time) error {
	if ctx.Err() != nil || time.Since(start) > 10*time.Minute {
		return fmt.Errorf("%w: not synced after %v", ErrSanity, time.Since(start))
	}
	time.Sleep(time.Millisecond)
	return nil
}

// eventCounter counts what a handler sees apart from initial-list adds.
type eventCounter struct{ added, updated, deleted atomic.Int64 }

func (e *eventCounter) handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(_ interface{}, initial bool) {
			if !initial {
				e.added.Add(1)
			}
		},
		UpdateFunc: func(_, _ interface{}) { e.updated.Add(1) },
		DeleteFunc: func(interface{}) { e.deleted.Add(1) },
	}
}

// ikCacheStart times an informerkit factory with CacheDir dir from
// NewForConfig to Synced, and to its handler having seen the changes
// made while it was down (after a resume the 410 of a watch past the
// server's window may come after Synced: the relist follows). It checks
// that the handler saw exactly those changes (adds, updates, deletes; checked
// again a moment later), checks it holds n objects, and shuts it down.
func ikCacheStart(ctx context.Context, cfg *rest.Config, r Resource, dir string, n int, adds, updates, deletes int64) (restartOutcome, error) {
	tc := &transportCount{resource: r.GVR.Resource}
	start := time.Now()
	f, err := dynamicinformer.NewForConfig(tc.config(cfg), dynamicinformer.Options{CacheDir: dir})
	if err != nil {
		return restartOutcome{}, err
	}
	defer f.Shutdown()
	h := f.ForResource(r.GVR)
	ev := &eventCounter{}
	if _, err := h.Informer().AddEventHandler(ev.handler()); err != nil {
		return restartOutcome{}, err
	}
	f.Start(ctx)
	for h.Status().State != dynamicinformer.Synced {
		if err := waitTick(ctx, start); err != nil {
			return restartOutcome{}, fmt.Errorf("%w (status %+v)", err, h.Status())
		}
	}
	o := restartOutcome{sync: time.Since(start)}
	st := h.Status()
	o.restored = st.Restored
	if st.CacheErr != nil {
		return o, fmt.Errorf("%w: CacheErr %v", ErrSanity, st.CacheErr)
	}
	seen := func() bool {
		return ev.added.Load() >= adds && ev.updated.Load() >= updates && ev.deleted.Load() >= deletes &&
			len(h.Informer().GetStore().ListKeys()) == n
	}
	deadline := time.Now().Add(2 * time.Minute)
	for !seen() {
		if time.Now().After(deadline) {
			return o, fmt.Errorf("%w: handler saw +%d ~%d -%d with %d cached; want +%d ~%d -%d with %d", ErrSanity,
				ev.added.Load(), ev.updated.Load(), ev.deleted.Load(), len(h.Informer().GetStore().ListKeys()), adds, updates, deletes, n)
		}
		time.Sleep(time.Millisecond)
	}
	o.caughtUp = time.Since(start)
	time.Sleep(200 * time.Millisecond) // anything more would be a spurious event
	// After a resume the server may still answer 410 inside the watch
	// stream, after Synced: lists and bytes are counted once caught up.
	o.bytes, o.lists = tc.bytes.Load(), int(tc.lists.Load())
	o.added, o.updated, o.deleted = ev.added.Load(), ev.updated.Load(), ev.deleted.Load()
	if o.added != adds || o.updated != updates || o.deleted != deletes {
		return o, fmt.Errorf("%w: handler saw +%d ~%d -%d; want exactly +%d ~%d -%d (only what changed while down)", ErrSanity,
			o.added, o.updated, o.deleted, adds, updates, deletes)
	}
	return o, nil
}

// PersistWrite sends m merge patches, at rate per second, to the
// suite's objects [0, m mod n) of the resource RunRestart loads, each
// setting an annotation to tag-i: the writes of the persistence-cost
// measurement. ikbench runs it in a child process (RestartConfig.Writer),
// so that the measuring process's CPU is the informer's alone.
func PersistWrite(ctx context.Context, cfg *rest.Config, tag string, m, n int, rate float64) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	gvr := controlplane.GVR(controlplane.NewCRD("bench.informerkit.io", "Widget", "widgets"))
	interval := time.Duration(float64(time.Second) / rate)
	next := time.Now()
	for i := 0; i < m; i++ {
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
		next = next.Add(interval)
		j := i % n
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"bench.informerkit.io/persist":"%s-%d"}}}`, tag, i)
		if _, err := dyn.Resource(gvr).Namespace(namespaceName(j)).Patch(ctx, objectName(j), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// quiesce waits until the cache directory dir has not changed for a
// second (the first list's journal flushed and folded; the journal
// flushes every second), at most a minute; without a directory there is
// nothing to wait for. It watches the directory, not the process's
// writes: a process that also runs an API server and etcd (the short
// test) or other tests never stops writing.
func quiesce(dir string) {
	if dir == "" {
		return
	}
	last := dirState(dir)
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		time.Sleep(time.Second)
		cur := dirState(dir)
		if cur == last {
			return
		}
		last = cur
	}
}

// dirState is the total size of dir's files and the newest modification
// time among them.
func dirState(dir string) (st struct {
	size  int64
	mtime int64 // UnixNano
}) {
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			st.size += fi.Size()
			st.mtime = max(st.mtime, fi.ModTime().UnixNano())
		}
		return nil
	})
	return st
}

// PersistSide is one informer of the persistence-cost measurement: with
// CacheDir (Name "on") or without ("off").
type PersistSide struct {
	Name     string
	CacheDir string // "" for the side without persistence
	Compact  bool   // RestartConfig.PersistCompact
	Resource Resource
	// Tag is the writes' tag (PersistWrite's): the side's handler counts
	// the updates whose annotation starts with Tag + "-".
	Tag string
	// M is how many such updates end the window.
	M int
	// CPUProfile, if set, is the file the window is CPU-profiled to.
	CPUProfile string
}

// PersistSample is what one side measured over its window.
type PersistSample struct {
	CPU   time.Duration // the process's user and system CPU
	Wrote int64         // bytes the process passed to write(2)
	Grown int64         // growth of the cache directory's files
	Disk  time.Duration // persistence's own CPU (package diskcost): journal, syncs, folds
}

// persistSettle is waited after a side's last event: the journal's
// one-second flush falls inside the window.
const persistSettle = 1500 * time.Millisecond

// MeasurePersistSide builds side's factory in this process, waits until
// it is synced and its first list's journal flushed, then starts the
// window and calls begin, which returns once the writes are sent or will
// be (another process may send them). The window ends 1.5 s after
// the handler has seen side.M of the tagged updates. The CPU and write(2)
// figures are this process's: run one side per process to read a side's
// cost alone. It turns package diskcost on and off, which is
// process-wide: two calls must not overlap in one process.
func MeasurePersistSide(ctx context.Context, cfg *rest.Config, side PersistSide, begin func() error) (PersistSample, error) {
	var defaults []dynamicinformer.ResourceOption
	if side.Compact {
		defaults = append(defaults, dynamicinformer.WithProjection(dynamicinformer.Projection{Compact: true}))
	}
	f, err := dynamicinformer.NewForConfig(cfg, dynamicinformer.Options{CacheDir: side.CacheDir, Defaults: defaults})
	if err != nil {
		return PersistSample{}, err
	}
	defer f.Shutdown()
	h := f.ForResource(side.Resource.GVR)
	prefix := side.Tag + "-"
	var got atomic.Int64
	if _, err := h.Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{UpdateFunc: func(_, obj interface{}) {
		if a, err := meta.Accessor(obj); err == nil && strings.HasPrefix(a.GetAnnotations()["bench.informerkit.io/persist"], prefix) {
			got.Add(1)
		}
	}}); err != nil {
		return PersistSample{}, err
	}
	f.Start(ctx)
	if !f.WaitForCacheSync(ctx)[side.Resource.GVR] {
		return PersistSample{}, fmt.Errorf("%w: %s not synced: %+v", ErrSanity, side.Name, h.Status())
	}
	quiesce(side.CacheDir) // the first list's journal flushed and folded before the window
	size0 := dirSize(side.CacheDir)
	if side.CPUProfile != "" {
		stop, err := startCPUProfile(side.CPUProfile)
		if err != nil {
			return PersistSample{}, err
		}
		defer stop()
	}
	diskcost.Enable(side.CacheDir != "")
	defer diskcost.Enable(false)
	diskcost.Reset()
	w0, u0 := processIO(), processUsage()
	if err := begin(); err != nil {
		return PersistSample{}, err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for got.Load() < int64(side.M) {
		if time.Now().After(deadline) {
			return PersistSample{}, fmt.Errorf("%w: %s handler saw %d of %d updates", ErrSanity, side.Name, got.Load(), side.M)
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(persistSettle)
	s := PersistSample{CPU: processUsage().since(u0).cpu(), Wrote: processIO() - w0}
	_, disk := diskcost.Read()
	s.Disk = time.Duration(disk)
	if st := h.Status(); st.CacheErr != nil {
		return PersistSample{}, fmt.Errorf("%w: %s CacheErr %v", ErrSanity, side.Name, st.CacheErr)
	}
	s.Grown = dirSize(side.CacheDir) - size0
	return s, nil
}

// measurePersist: client CPU and bytes written (write(2), /proc/self/io)
// per event with and without CacheDir, at n objects, over c.PersistEvents
// updates at c.PersistRate.
//
// With c.Together the two sides watch the same updates at the same time,
// each in its own process, so that what the host does to one it does to
// the other: the ratio of one run is read from one window. Otherwise they
// run one after the other in this process, in an order that alternates
// with run; with c.Writer the writes come from another process and the
// CPU is the informer's alone, without it a phase without any informer
// measures the writer's CPU, which is subtracted from the others
// (noisier).
func measurePersist(ctx context.Context, cfg *rest.Config, c RestartConfig, res *Results, r Resource, n, run int, dir string) error {
	m := c.PersistEvents
	cs := fmt.Sprintf("%d events, N=%d", m, n)
	writer := func(tag string) error {
		if c.Writer != nil {
			return c.Writer(ctx, tag, m, n, c.PersistRate)
		}
		return PersistWrite(ctx, cfg, tag, m, n, c.PersistRate)
	}
	tag := func(phase string) string { return fmt.Sprintf("r%d%s", run, phase) }
	side := func(name, cacheDir, t string) PersistSide {
		s := PersistSide{Name: name, CacheDir: cacheDir, Compact: c.PersistCompact, Resource: r, Tag: t, M: m}
		if c.PersistCPUProfile != "" {
			s.CPUProfile = fmt.Sprintf("%s-%s-r%d.prof", c.PersistCPUProfile, name, run)
		}
		return s
	}
	out := map[string]PersistSample{}
	if c.Together != nil {
		t := tag("b")
		sides := []PersistSide{side("on", dir, t), side("off", "", t)}
		if run%2 == 1 {
			sides[0], sides[1] = sides[1], sides[0]
		}
		samples, err := c.Together(ctx, sides, func() error { return writer(t) })
		if err != nil {
			return err
		}
		for i, s := range sides {
			out[s.Name] = samples[i]
		}
		c.Logf("persistence together, %d events: client CPU on %v, off %v (%.3f×); persistence's own %v; %d B write(2) on, %d off, directory %+d B",
			m, out["on"].CPU.Round(time.Millisecond), out["off"].CPU.Round(time.Millisecond), float64(out["on"].CPU)/float64(out["off"].CPU),
			out["on"].Disk.Round(time.Millisecond), out["on"].Wrote, out["off"].Wrote, out["on"].Grown)
	} else {
		var writerCPU time.Duration
		var writerIO int64
		if c.Writer == nil {
			w0, u0 := processIO(), processUsage()
			if err := writer(tag("w")); err != nil {
				return err
			}
			time.Sleep(persistSettle)
			writerCPU, writerIO = processUsage().since(u0).cpu(), processIO()-w0
		}
		order := []PersistSide{side("off", "", tag("off")), side("on", dir, tag("on"))}
		if run%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, s := range order {
			got, err := MeasurePersistSide(ctx, cfg, s, func() error { return writer(s.Tag) })
			if err != nil {
				return err
			}
			c.Logf("persistence %-12s %d events: client CPU %v (writer alone %v; persistence's own %v: journal, syncs, folds), %d B write(2) (writer alone %d), directory %+d B",
				s.Name, m, got.CPU.Round(time.Millisecond), writerCPU.Round(time.Millisecond), got.Disk.Round(time.Millisecond), got.Wrote, writerIO, got.Grown)
			got.CPU -= writerCPU
			got.Wrote -= writerIO
			out[s.Name] = got
		}
	}
	on, off := persistNames(c.PersistCompact)
	for name, impl := range map[string]string{"off": off, "on": on} {
		s := out[name]
		res.add(RowPersist, cs, "client CPU", "µs/event", impl, float64(s.CPU.Microseconds())/float64(m))
		res.add(RowPersist, cs, "disk CPU", "µs/event", impl, float64(s.Disk.Microseconds())/float64(m))
		res.add(RowPersist, cs, "written", "B/event", impl, float64(s.Wrote)/float64(m))
		// What reached the cache directory (files' growth; 0 without
		// one): unlike write(2), which counts every write of the
		// process, an in-process API server's included.
		res.add(RowPersist, cs, "stored", "B/event", impl, float64(s.Grown)/float64(m))
	}
	return nil
}

// dirSize is the total size of the files in dir (0 for "").
func dirSize(dir string) int64 {
	if dir == "" {
		return 0
	}
	var total int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			total += fi.Size()
		}
		return nil
	})
	return total
}

// processIO is the bytes this process passed to write(2) so far
// (/proc/self/io wchar; 0 where unreadable).
func processIO() int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "wchar: "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}
