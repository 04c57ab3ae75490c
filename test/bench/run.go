package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"runtime"
	goruntime "runtime"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/informerkit/informerkit/test/controlplane"
)

// Config says what Run measures. The zero value of a field means its
// default (see Defaults); Runs, Sizes, Consumers and Impls may be set to
// scale the suite down.
type Config struct {
	// Sizes are the object counts N of the initial-sync, memory and query
	// scenarios, ascending. Default 10000, 50000.
	Sizes []int
	// Runs is how many times every implementation is measured per
	// scenario; tables show medians. Default 3.
	Runs int
	// LatencyWrites is the number of writes (alternating creates and
	// updates) per latency measurement, at WriteRate per second. Latency
	// and sharing are measured at Sizes[0]. Defaults 400 and 50.
	LatencyWrites int
	WriteRate     float64
	// Handlers are the handler counts of the latency scenario. Default 1, 10.
	Handlers []int
	// Consumers are the consumer counts K of the sharing scenario.
	// Default 1, 10, 100.
	Consumers []int
	// ManyCRDs CRDs with ManyObjects objects each make the many-resources
	// scenario. Defaults 100 and 100; ManyCRDs < 0 skips it.
	ManyCRDs, ManyObjects int
	// ManyLimits adds to the many-resources scenario (and only to it) one
	// informerkit factory per value, with MaxConcurrentInitialLists set to
	// it (LimitedImpl; negative: no bound), so the factory's peak memory
	// with and without the bound is measured in the same run.
	ManyLimits []int
	// ManyListModes are the list modes the many-resources scenario is run
	// in. Default WatchList only.
	ManyListModes []ListMode
	// ManyOnly runs only the many-resources scenario (no object is loaded
	// into the Sizes scenarios' resource).
	ManyOnly bool
	// LoadWorkers is the number of parallel writers that create objects.
	// Default 16.
	LoadWorkers int
	// Impls are the implementations compared. Default DefaultImpls().
	Impls []Impl
	// NoWarmup skips the warm-up: by default, after loading each size,
	// one sync of the first implementation is run and discarded, because
	// the first informer to list freshly written objects pays for the
	// server's cold caches (1.3–1.7× of later syncs at N=50k) and would
	// bias whichever implementation rotate puts first.
	NoWarmup bool
	// MeasureCache, if set, takes the initial-sync, memory and query
	// measurements of one implementation at one size instead of this
	// process (ikbench -isolate runs each in a fresh process with
	// MeasureCacheOnce, so that no implementation's sync pays for, or
	// profits from, the heap another one left). It returns the samples.
	MeasureCache func(ctx context.Context, im Impl, r Resource, n int) ([]Sample, error)
	// SyncCPUProfile, if set, is a path prefix: each initial sync that
	// measureCache times writes a CPU profile of just that sync to
	// <prefix>-<implementation>-N<n>-<pid>.prof.
	SyncCPUProfile string
	// LatencyOnly runs only the event-latency scenario (RowLatency), at
	// every size (Run otherwise measures latency at the first size
	// only), for every implementation that is not SyncOnly, with each
	// count of Handlers, Runs times.
	LatencyOnly bool
	// LatencySettleGC makes the latency scenario collect garbage once
	// the handlers have seen the initial list, before the first write.
	LatencySettleGC bool
	// Peak adds the peak-memory scenario (RowPeak, peak.go) at every size:
	// PeakImpls(Impls) in each ListMode, Runs times. PeakOnly runs only
	// it (and the warm-up).
	Peak, PeakOnly bool
	// MeasurePeak, if set, takes the peak scenario's measurements instead
	// of this process (ikbench -isolate: MeasurePeakOnce in a fresh one).
	MeasurePeak func(ctx context.Context, im Impl, r Resource, n int, pc PeakCase) ([]Sample, error)
	// PeakMemLimit, if positive, adds to the peak scenario the same
	// syncs, Runs times, each under a Go memory limit of PeakMemLimit ×
	// its settled heap (PeakCase.MemLimitFactor): does the sync complete,
	// at what peak, in how long.
	PeakMemLimit float64
	// PeakMemLimitRuns is how many times the syncs under the memory
	// limit are measured (0: Runs).
	PeakMemLimitRuns int
	// Logf receives progress lines. Nil discards them.
	Logf func(format string, args ...any)
	// Progress, if set, is called with the results so far after every
	// implementation's turn (so a long run that dies leaves its numbers).
	Progress func(*Results)
}

// Defaults returns c with every zero field set to its default.
func (c Config) Defaults() Config {
	if len(c.Sizes) == 0 {
		c.Sizes = []int{10000, 50000}
	}
	if c.Runs == 0 {
		c.Runs = 3
	}
	if c.LatencyWrites == 0 {
		c.LatencyWrites = 400
	}
	if c.WriteRate == 0 {
		c.WriteRate = 50
	}
	if len(c.Handlers) == 0 {
		c.Handlers = []int{1, 10}
	}
	if len(c.Consumers) == 0 {
		c.Consumers = []int{1, 10, 100}
	}
	if c.ManyCRDs == 0 {
		c.ManyCRDs = 100
	}
	if c.ManyObjects == 0 {
		c.ManyObjects = 100
	}
	if len(c.ManyListModes) == 0 {
		c.ManyListModes = []ListMode{WatchList}
	}
	if c.LoadWorkers == 0 {
		c.LoadWorkers = 16
	}
	if len(c.Impls) == 0 {
		c.Impls = DefaultImpls()
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	if c.Progress == nil {
		c.Progress = func(*Results) {}
	}
	return c
}

// Scenario names (Sample.Row).
const (
	RowSync    = "1. initial sync (Start → HasSynced)"
	RowMemory  = "2. heap per object after sync + GC"
	RowLatency = "3. event latency (write → handler)"
	RowQuery   = "4. lister queries"
	RowSharing = "5. sharing: K consumers of one GVR"
	RowMany    = "6. many resources"
)

// ErrSanity reports that an implementation did not do what the scenario
// requires (wrong object count, missing events); errors.Is-testable.
var ErrSanity = errors.New("benchmark sanity check failed")

// Run loads the server behind cfg and measures every implementation. It
// creates namespaces bench-0..9 and bench-latency and CRDs in the groups
// bench.informerkit.io and many.bench.informerkit.io; run it on a
// throwaway server.
func Run(ctx context.Context, cfg *rest.Config, c Config) (*Results, error) {
	c = c.Defaults()
	res := &Results{Impls: c.Impls}
	ns := []string{latencyNamespace}
	for i := 0; i < Namespaces; i++ {
		ns = append(ns, namespaceName(i))
	}
	if err := createNamespaces(ctx, cfg, ns...); err != nil {
		return nil, err
	}
	r, err := installCRD(ctx, cfg, "bench.informerkit.io", "Widget", "widgets")
	if err != nil {
		return nil, err
	}
	loaded := 0
	sizes := c.Sizes
	if c.ManyOnly {
		sizes = nil
	}
	for si, n := range sizes {
		start := time.Now()
		if err := load(ctx, cfg, r, loaded, n, c.LoadWorkers); err != nil {
			return nil, err
		}
		loaded = n
		c.Logf("loaded %d objects in %v", n, time.Since(start).Round(time.Millisecond))
		if !c.NoWarmup {
			if err := c.warmUp(ctx, cfg, r, n); err != nil {
				return nil, fmt.Errorf("warm-up: %w", err)
			}
		}
		latency := func(im Impl) error {
			for _, h := range c.Handlers {
				if err := measureLatency(ctx, cfg, c, res, im, r, n, h); err != nil {
					return fmt.Errorf("%s latency with %d handlers: %w", im.Name, h, err)
				}
			}
			return nil
		}
		for run := 0; run < c.Runs && c.LatencyOnly; run++ {
			for _, im := range rotate(c.Impls, run) {
				if im.SyncOnly {
					continue
				}
				if err := latency(im); err != nil {
					return res, fmt.Errorf("N=%d: %w", n, err)
				}
				c.Progress(res)
			}
			c.Logf("N=%d latency run %d done", n, run+1)
		}
		for run := 0; run < c.Runs && !c.PeakOnly && !c.LatencyOnly; run++ {
			for _, im := range rotate(c.Impls, run) {
				if c.MeasureCache != nil {
					samples, err := c.MeasureCache(ctx, im, r, n)
					if err != nil {
						return res, fmt.Errorf("%s N=%d: %w", im.Name, n, err)
					}
					res.Samples = append(res.Samples, samples...)
				} else if err := measureCache(ctx, cfg, c, res, im, r, n); err != nil {
					return res, fmt.Errorf("%s N=%d: %w", im.Name, n, err)
				}
				if si != 0 || im.SyncOnly {
					c.Progress(res)
					continue
				}
				if err := latency(im); err != nil {
					return res, err
				}
				for _, k := range c.Consumers {
					if err := measureSharing(ctx, cfg, c, res, im, r, n, k); err != nil {
						return res, fmt.Errorf("%s sharing K=%d: %w", im.Name, k, err)
					}
				}
				c.Progress(res)
			}
			c.Logf("N=%d run %d done", n, run+1)
		}
		if c.Peak || c.PeakOnly {
			if err := measurePeaks(ctx, cfg, c, res, r, n); err != nil {
				return res, err
			}
		}
	}
	if c.ManyCRDs < 0 || c.PeakOnly || c.LatencyOnly {
		return res, nil
	}
	start := time.Now()
	many, err := installMany(ctx, cfg, c)
	if err != nil {
		return res, err
	}
	c.Logf("installed %d CRDs × %d objects in %v", c.ManyCRDs, c.ManyObjects, time.Since(start).Round(time.Millisecond))
	impls := c.Impls
	for _, l := range c.ManyLimits {
		im := LimitedImpl(l)
		impls = append(impls, im)
		res.Impls = append(res.Impls, im)
	}
	for run := 0; run < c.Runs; run++ {
		for _, mode := range c.ManyListModes {
			for _, im := range rotate(impls, run) {
				if im.SyncOnly || im.WidgetOnly {
					continue
				}
				if err := measureMany(ctx, cfg, c, res, im, many, mode); err != nil {
					return res, fmt.Errorf("%s many resources (%s): %w", im.Name, mode, err)
				}
				c.Progress(res)
			}
		}
		c.Logf("many resources run %d done", run+1)
	}
	return res, nil
}

// MeasureCacheOnce takes the measurements Run takes of im's cache at
// size n of r (already loaded on the server behind cfg) and returns
// their samples: what a child process of ikbench -isolate does.
func MeasureCacheOnce(ctx context.Context, cfg *rest.Config, c Config, im Impl, r Resource, n int) ([]Sample, error) {
	c = c.Defaults()
	res := &Results{}
	err := measureCache(ctx, cfg, c, res, im, r, n)
	return res.Samples, err
}

// warmUp takes one measurement of the first implementation and discards
// it, the way the measurements are taken: in this process, or with
// MeasureCache (ikbench -isolate: in a child process). The first process to
// grow a heap after the load paid about 3× the system CPU per page fault
// of later ones on the VM of docs/PERFORMANCE.md; whichever implementation
// ran first would pay it.
func (c Config) warmUp(ctx context.Context, cfg *rest.Config, r Resource, n int) error {
	im := c.Impls[0]
	if c.MeasureCache != nil {
		start := time.Now()
		if _, err := c.MeasureCache(ctx, im, r, n); err != nil {
			return err
		}
		c.Logf("warm-up measurement (%s, in a child process, discarded) in %v", im.Name, time.Since(start).Round(time.Millisecond))
		return nil
	}
	d, err := syncOnce(ctx, cfg, im, r, n)
	if err != nil {
		return err
	}
	c.Logf("warm-up sync (%s, discarded) in %v", im.Name, d.Round(time.Millisecond))
	return nil
}

// syncOnce syncs one informer of im over r and discards it.
func syncOnce(ctx context.Context, cfg *rest.Config, im Impl, r Resource, n int) (time.Duration, error) {
	inst, err := im.New(cfg)
	if err != nil {
		return 0, err
	}
	defer inst.Stop()
	if err := inst.Watch(r); err != nil {
		return 0, err
	}
	d, err := startSynced(ctx, inst)
	if err == nil && inst.Len(r) != n {
		err = fmt.Errorf("%w: cache holds %d objects, want %d", ErrSanity, inst.Len(r), n)
	}
	return d, err
}

// rotate changes which implementation goes first from run to run, so none
// always runs on the warmest (or coldest) server.
func rotate(impls []Impl, run int) []Impl {
	k := run % len(impls)
	return append(append([]Impl{}, impls[k:]...), impls[:k]...)
}

// heap returns the live heap after two collections.
func heap() uint64 {
	goruntime.GC()
	goruntime.GC()
	var m goruntime.MemStats
	goruntime.ReadMemStats(&m)
	return m.HeapAlloc
}

func delta(after, before uint64) float64 { return float64(int64(after) - int64(before)) }

// startSynced starts inst and returns the time until Synced.
func startSynced(ctx context.Context, inst Instance) (time.Duration, error) {
	start := time.Now()
	inst.Start(ctx)
	deadline := start.Add(10 * time.Minute)
	for !inst.Synced() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return 0, fmt.Errorf("%w: not synced after %v", ErrSanity, time.Since(start))
		}
		time.Sleep(time.Millisecond)
	}
	return time.Since(start), nil
}

// measureCache: initial sync, heap per object, lister queries at N.
func measureCache(ctx context.Context, cfg *rest.Config, c Config, res *Results, im Impl, r Resource, n int) error {
	cs := fmt.Sprintf("N=%d", n)
	base := heap()
	inst, err := im.New(cfg)
	if err != nil {
		return err
	}
	defer inst.Stop()
	if err := inst.Watch(r); err != nil {
		return err
	}
	stopProfile, err := startSyncProfile(c.SyncCPUProfile, im.Name, n)
	if err != nil {
		return err
	}
	u0 := processUsage()
	d, err := startSynced(ctx, inst)
	u := processUsage().since(u0)
	stopProfile()
	if err != nil {
		return err
	}
	cpu := u.cpu()
	if got := inst.Len(r); got != n {
		return fmt.Errorf("%w: cache holds %d objects, want %d", ErrSanity, got, n)
	}
	res.add(RowSync, cs, "sync", "ms", im.Name, float64(d.Microseconds())/1000)
	res.add(RowSync, cs, "client CPU", "µs/object", im.Name, float64(cpu.Microseconds())/float64(n))
	if im.SyncOnly {
		c.Logf("%-28s N=%-6d sync %-12v client CPU %v/object (%s)", im.Name, n, d.Round(time.Millisecond), (cpu / time.Duration(n)).Round(100*time.Nanosecond), u.perObject(n))
		return nil
	}
	res.add(RowMemory, cs, "heap", "B/object", im.Name, delta(heap(), base)/float64(n))

	// The first read of an object and a repeated one are measured apart: a
	// cache that decodes on read (compact mode) pays on the first. The
	// objects read are all in namespace 0 (every tenth index), so the
	// namespace List below still reads namespace 3 for the first time.
	step := 10 * max(1, n/getObjects/10)
	var reads []int
	for i := 0; i < n && len(reads) < getObjects; i += step {
		reads = append(reads, i)
	}
	wantNS := 0
	wantSel := 0
	for i := 0; i < n; i++ {
		if namespaceName(i) == namespaceName(3) {
			wantNS++
		}
		if i%100 == 7 {
			wantSel++
		}
	}
	// A cache that can be read without decoding (ViewReader) is read that
	// way first, so that the decoded reads below still find nothing kept.
	view, hasView := inst.(ViewReader)
	var getView, nsView opTiming
	if hasView {
		k := 0
		getView = timeOp(func() error {
			i := reads[k%len(reads)]
			k++
			return view.GetView(r, namespaceName(i), objectName(i))
		}, len(reads), 0)
		nsView = timeOp(func() error {
			got, err := view.ListNamespaceView(r, namespaceName(3))
			if err == nil && got != wantNS {
				err = fmt.Errorf("%w: namespace ListCompact returned %d objects, want %d", ErrSanity, got, wantNS)
			}
			return err
		}, 1, 0)
		if getView.err != nil {
			return getView.err
		}
		if nsView.err != nil {
			return nsView.err
		}
	}
	k := 0
	getFirst := timeOp(func() error {
		i := reads[k]
		k++
		return inst.Get(r, namespaceName(i), objectName(i))
	}, len(reads), 0)
	if getFirst.err != nil {
		return getFirst.err
	}
	rnd := rand.New(rand.NewSource(1))
	get := timeOp(func() error {
		i := reads[rnd.Intn(len(reads))]
		return inst.Get(r, namespaceName(i), objectName(i))
	}, 2000, 200*time.Millisecond)
	if get.err != nil {
		return get.err
	}
	listNS := func() error {
		got, err := inst.ListNamespace(r, namespaceName(3))
		if err == nil && got != wantNS {
			err = fmt.Errorf("%w: namespace List returned %d objects, want %d", ErrSanity, got, wantNS)
		}
		return err
	}
	nsFirst := timeOp(listNS, 1, 0)
	if nsFirst.err != nil {
		return nsFirst.err
	}
	nsList := timeOp(listNS, 3, 300*time.Millisecond)
	if nsList.err != nil {
		return nsList.err
	}
	sel := labels.SelectorFromSet(labels.Set{"app": "app-7"})
	selList := timeOp(func() error {
		got, err := inst.ListSelector(r, sel)
		if err == nil && got != wantSel {
			err = fmt.Errorf("%w: selector List returned %d objects, want %d", ErrSanity, got, wantSel)
		}
		return err
	}, 3, 300*time.Millisecond)
	if selList.err != nil {
		return selList.err
	}
	res.add(RowQuery, cs, "Get, first read", "µs", im.Name, getFirst.perOp.Seconds()*1e6)
	res.add(RowQuery, cs, "Get, repeated", "µs", im.Name, get.perOp.Seconds()*1e6)
	res.add(RowQuery, cs, "namespace List (10%), first", "µs", im.Name, nsFirst.perOp.Seconds()*1e6)
	res.add(RowQuery, cs, "namespace List (10%), repeated", "µs", im.Name, nsList.perOp.Seconds()*1e6)
	res.add(RowQuery, cs, "List "+AppSelector+" (1%)", "µs", im.Name, selList.perOp.Seconds()*1e6)
	// The reads without decoding: a cache that holds decoded objects
	// never decodes, so its first reads are its figures there too.
	if !hasView {
		getView, nsView = getFirst, nsFirst
	}
	res.add(RowQuery, cs, "Get, first read, no decode", "µs", im.Name, getView.perOp.Seconds()*1e6)
	res.add(RowQuery, cs, "namespace List (10%), first, no decode", "µs", im.Name, nsView.perOp.Seconds()*1e6)
	c.Logf("%-28s N=%-6d sync %-12v CPU %v/obj (%s) heap %6.0f B/obj  get first %v repeated %v nsList first %v repeated %v selList %v", im.Name, n, d.Round(time.Millisecond),
		(cpu / time.Duration(n)).Round(100*time.Nanosecond), u.perObject(n), delta(heap(), base)/float64(n), getFirst.perOp, get.perOp, nsFirst.perOp, nsList.perOp, selList.perOp)
	return nil
}

// getObjects is how many distinct objects the Get rows read.
const getObjects = 1000

type opTiming struct {
	perOp time.Duration
	err   error
}

// timeOp runs op at least minIters times and for at least minDur.
func timeOp(op func() error, minIters int, minDur time.Duration) opTiming {
	start := time.Now()
	iters := 0
	for iters < minIters || time.Since(start) < minDur {
		if err := op(); err != nil {
			return opTiming{err: err}
		}
		iters++
	}
	return opTiming{perOp: time.Since(start) / time.Duration(iters)}
}

// measureLatency writes at a steady rate while handlers record how long
// after the write call started they saw the object.
func measureLatency(ctx context.Context, cfg *rest.Config, c Config, res *Results, im Impl, r Resource, n, handlers int) error {
	inst, err := im.New(cfg)
	if err != nil {
		return err
	}
	writes := c.LatencyWrites
	sent := make([]atomic.Int64, writes) // UnixNano before each write's call
	type record struct {
		seen  []bool
		lat   []time.Duration
		got   atomic.Int64
		calls atomic.Int64 // every add or update, the initial list's included
	}
	recs := make([]*record, handlers)
	for h := range recs {
		rec := &record{seen: make([]bool, writes)}
		recs[h] = rec
		err := inst.AddHandler(r, func(obj interface{}) {
			rec.calls.Add(1)
			seq, ok := seqOf(obj)
			if !ok || seq < 0 || seq >= writes || rec.seen[seq] {
				return
			}
			t := sent[seq].Load()
			if t == 0 {
				return
			}
			rec.seen[seq] = true
			rec.lat = append(rec.lat, time.Duration(time.Now().UnixNano()-t))
			rec.got.Add(1)
		})
		if err != nil {
			inst.Stop()
			return err
		}
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			inst.Stop()
		}
	}
	defer stop()
	if _, err := startSynced(ctx, inst); err != nil {
		return err
	}
	// Steady state: every handler has been through the initial list (a
	// handler that decodes, like compact mode's, may lag the cache by a
	// second at N=10k; that is start-up cost, not event latency).
	deadline := time.Now().Add(5 * time.Minute)
	for _, rec := range recs {
		for rec.calls.Load() < int64(n) {
			if time.Now().After(deadline) {
				return fmt.Errorf("%w: a handler saw %d initial adds, want %d", ErrSanity, rec.calls.Load(), n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if c.LatencySettleGC {
		// The initial list's garbage (a decoding handler's above all) is
		// collected before the first write, not during the writes.
		runtime.GC()
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	interval := time.Duration(float64(time.Second) / c.WriteRate)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for i := 0; i < writes; i++ {
		<-tick.C
		name := fmt.Sprintf("lat-%06d", i/2)
		obj := object(r, latencyNamespace, name, i, map[string]string{seqAnnotation: fmt.Sprint(i)})
		sent[i].Store(time.Now().UnixNano())
		if err := apply(ctx, dyn, r, obj); err != nil {
			return fmt.Errorf("write %d: %w", i, err)
		}
	}
	deadline = time.Now().Add(time.Minute)
	for {
		done := true
		for _, rec := range recs {
			if rec.got.Load() < int64(writes) {
				done = false
			}
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: handlers did not see all %d writes", ErrSanity, writes)
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	var all []time.Duration
	for _, rec := range recs {
		all = append(all, rec.lat...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	cs := fmt.Sprintf("%d handler(s), N=%d", handlers, n)
	p50, p99 := all[len(all)*50/100], all[len(all)*99/100]
	res.add(RowLatency, cs, "p50", "ms", im.Name, p50.Seconds()*1000)
	res.add(RowLatency, cs, "p99", "ms", im.Name, p99.Seconds()*1000)
	c.Logf("%-28s latency %2d handlers p50 %v p99 %v", im.Name, handlers, p50, p99)
	return cleanLatency(ctx, dyn, r)
}

// cleanLatency deletes the latency objects and waits until they are gone,
// so the next implementation syncs exactly N objects.
func cleanLatency(ctx context.Context, dyn dynamic.Interface, r Resource) error {
	rc := dyn.Resource(r.GVR).Namespace(latencyNamespace)
	if err := rc.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		l, err := rc.List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(l.Items) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("latency objects not deleted")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// measureSharing registers K consumers with a handler each and counts the
// list and watch requests the implementation sends for the resource.
func measureSharing(ctx context.Context, cfg *rest.Config, c Config, res *Results, im Impl, r Resource, n, k int) error {
	counted, counter := controlplane.CountRequests(cfg)
	base := heap()
	inst, err := im.New(counted)
	if err != nil {
		return err
	}
	defer inst.Stop()
	adds := make([]atomic.Int64, k)
	for i := 0; i < k; i++ {
		if err := inst.AddHandler(r, func(interface{}) { adds[i].Add(1) }); err != nil {
			return err
		}
	}
	if _, err := startSynced(ctx, inst); err != nil {
		return err
	}
	deadline := time.Now().Add(5 * time.Minute)
	for i := range adds {
		for adds[i].Load() < int64(n) {
			if time.Now().After(deadline) {
				return fmt.Errorf("%w: consumer %d saw %d adds, want %d", ErrSanity, i, adds[i].Load(), n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// Requests on the resource's collection (the CRD's own path, which
	// informerkit reads to learn whether the resource is served, does not
	// end in it).
	collection := "/" + r.GVR.GroupVersion().String() + "/" + r.GVR.Resource
	var watches, lists int
	for req, count := range counter.Snapshot() {
		if !strings.HasSuffix(req.Path, collection) {
			continue
		}
		switch req.Verb {
		case "watch":
			watches += count
		case "list":
			lists += count
		}
	}
	cs := fmt.Sprintf("K=%d, N=%d", k, n)
	res.add(RowSharing, cs, "watches", "count", im.Name, float64(watches))
	res.add(RowSharing, cs, "lists", "count", im.Name, float64(lists))
	mib := delta(heap(), base) / (1 << 20)
	res.add(RowSharing, cs, "heap", "MiB", im.Name, mib)
	c.Logf("%-28s sharing K=%-3d watches %d lists %d heap %.1f MiB", im.Name, k, watches, lists, mib)
	return nil
}

func installMany(ctx context.Context, cfg *rest.Config, c Config) ([]Resource, error) {
	rs := make([]Resource, c.ManyCRDs)
	errs := make([]error, c.ManyCRDs)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			rs[i], errs[i] = installCRD(ctx, cfg, "many.bench.informerkit.io", fmt.Sprintf("Thing%03d", i), fmt.Sprintf("things%03d", i))
			if errs[i] == nil {
				errs[i] = load(ctx, cfg, rs[i], 0, c.ManyObjects, 4)
			}
		}()
	}
	wg.Wait()
	return rs, errors.Join(errs...)
}

// measureMany watches every resource of many at once, in mode: the time
// until all are synced, the heap and goroutines each informer leaves, and
// the start-up's high-water marks — the Go heap above the heap before it
// (runtime/metrics every millisecond) and the process's RSS (VmHWM, reset
// just before) — which the factory's bound on concurrent first lists
// (LimitedImpl) is there to keep down.
func measureMany(ctx context.Context, cfg *rest.Config, c Config, res *Results, im Impl, many []Resource, mode ListMode) error {
	SetListMode(mode)
	defer SetListMode(WatchList)
	base := heap()
	inst, err := im.New(cfg)
	if err != nil {
		return err
	}
	defer inst.Stop()
	for _, r := range many {
		if err := inst.Watch(r); err != nil {
			return err
		}
	}
	debug.FreeOSMemory()
	resetHWM := resetPeakRSS()
	g0 := goruntime.NumGoroutine()
	sampler := startHeapSampler(time.Millisecond)
	d, err := startSynced(ctx, inst)
	peak := sampler.stop()
	hwm := procStatus("VmHWM")
	if err != nil {
		return err
	}
	for _, r := range many {
		if got := inst.Len(r); got != c.ManyObjects {
			return fmt.Errorf("%w: %s holds %d objects, want %d", ErrSanity, r.GVR.Resource, got, c.ManyObjects)
		}
	}
	time.Sleep(200 * time.Millisecond) // let start-up goroutines end
	m := float64(len(many))
	cs := fmt.Sprintf("%d CRDs × %d objects", len(many), c.ManyObjects)
	if mode != WatchList {
		cs += ", " + string(mode)
	}
	settled := heap()
	mib := func(b float64) float64 { return b / (1 << 20) }
	res.add(RowMany, cs, "all synced", "ms", im.Name, float64(d.Microseconds())/1000)
	res.add(RowMany, cs, "heap per informer", "KiB", im.Name, delta(settled, base)/m/1024)
	res.add(RowMany, cs, "goroutines per informer", "count", im.Name, float64(goruntime.NumGoroutine()-g0)/m)
	res.add(RowMany, cs, "peak heap", "MiB", im.Name, mib(delta(peak, base)))
	res.add(RowMany, cs, "settled heap", "MiB", im.Name, mib(delta(settled, base)))
	if resetHWM {
		res.add(RowMany, cs, "peak RSS", "MiB", im.Name, mib(float64(hwm)))
	}
	c.Logf("%-28s many %-9s synced in %v, %.0f KiB and %.1f goroutines per informer, peak heap %.1f MiB (settled %.1f), peak RSS %.1f MiB",
		im.Name, mode, d.Round(time.Millisecond), delta(settled, base)/m/1024, float64(goruntime.NumGoroutine()-g0)/m,
		mib(delta(peak, base)), mib(delta(settled, base)), mib(float64(hwm)))
	return nil
}
