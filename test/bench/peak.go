package bench

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/client-go/rest"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/test/controlplane"
)

// RowPeak is the peak-memory scenario's row: the initial sync's high-water
// marks in the informer's process beside what the cache settles to.
const RowPeak = "7. peak memory of the initial sync"

// ListMode is how an initial sync lists: client-go's WatchListClient
// feature gate on (a watch-list stream) or off (a plain LIST, then a
// watch).
type ListMode string

const (
	WatchList ListMode = "WatchList"
	PlainList ListMode = "LIST"
)

// ListModes are the modes the peak scenario measures.
var ListModes = []ListMode{WatchList, PlainList}

// PeakCase is one measurement of the peak scenario: the list mode, and
// optionally a Go memory limit (debug.SetMemoryLimit, as GOMEMLIMIT) for
// the sync.
type PeakCase struct {
	Mode ListMode
	// MemLimitFactor, if positive, sets the memory limit for the sync to
	// MemLimitFactor × (the heap before the sync + SettledHeap): the
	// factor times the process's heap once the cache has settled.
	MemLimitFactor float64 `json:",omitempty"`
	// SettledHeap is the implementation's settled heap above the pre-sync
	// heap in this mode (bytes; the median of the runs without a limit).
	SettledHeap uint64 `json:",omitempty"`
}

// caseName is the table's case for c at n.
func (c PeakCase) caseName(n int) string {
	if c.MemLimitFactor > 0 {
		return fmt.Sprintf("N=%d, %s, GOMEMLIMIT %.3g× settled", n, c.Mode, c.MemLimitFactor)
	}
	return fmt.Sprintf("N=%d, %s", n, c.Mode)
}

// InformerKitNamespaces is informerkit's factory over the suite's
// Namespaces namespaces (WithNamespaces: one list and watch per
// namespace), caching the same N objects as the others.
const InformerKitNamespaces = "ik WithNamespaces×10"

// NamespacesImpl is the implementation named InformerKitNamespaces.
func NamespacesImpl() Impl {
	ns := make([]string, Namespaces)
	for i := range ns {
		ns[i] = namespaceName(i)
	}
	return Impl{Name: InformerKitNamespaces, New: func(cfg *rest.Config) (Instance, error) {
		f, err := dynamicinformer.NewForConfig(cfg, dynamicinformer.Options{Defaults: []dynamicinformer.ResourceOption{dynamicinformer.WithNamespaces(ns...)}})
		if err != nil {
			return nil, err
		}
		return &ikInstance{factory: f, handles: map[schema.GroupVersionResource][]*dynamicinformer.InformerHandle{}}, nil
	}}
}

// LimitedImpl is informerkit's factory with default resource options and
// Options.MaxConcurrentInitialLists set to limit (negative: no bound; the
// default factory, InformerKit, bounds it at 50). The many-resources
// scenario measures it (Config.ManyLimits).
func LimitedImpl(limit int) Impl {
	name := fmt.Sprintf("ik MaxConcurrentInitialLists=%d", limit)
	if limit < 0 {
		name = "ik MaxConcurrentInitialLists off"
	}
	return Impl{Name: name, New: func(cfg *rest.Config) (Instance, error) {
		f, err := dynamicinformer.NewForConfig(cfg, dynamicinformer.Options{MaxConcurrentInitialLists: limit})
		if err != nil {
			return nil, err
		}
		return &ikInstance{factory: f, handles: map[schema.GroupVersionResource][]*dynamicinformer.InformerHandle{}}, nil
	}}
}

// peakNames are the implementations of DefaultImpls the peak scenario
// measures (with NamespacesImpl after informerkit's).
var peakNames = map[string]bool{InformerKit: true, InformerKitStripped: true, InformerKitCompact: true, InformerKitMetadata: true,
	ClientGo: true, ControllerRuntime: true}

// PeakImpls are the implementations among impls the peak scenario
// measures, NamespacesImpl added after InformerKit if it is among them.
func PeakImpls(impls []Impl) []Impl {
	var out []Impl
	for _, im := range impls {
		if !peakNames[im.Name] {
			continue
		}
		out = append(out, im)
		if im.Name == InformerKit {
			out = append(out, NamespacesImpl())
		}
	}
	return out
}

// ImplByName finds an implementation of DefaultImpls, NamespacesImpl or
// PerNamespaceImpls.
func ImplByName(name string) (Impl, bool) {
	for _, im := range append(append(DefaultImpls(), NamespacesImpl()), PerNamespaceImpls()...) {
		if im.Name == name {
			return im, true
		}
	}
	return Impl{}, false
}

// SetListMode sets client-go's WatchListClient feature gate for every
// informer built afterwards in this process (a reflector reads the gate
// when it is made).
func SetListMode(m ListMode) {
	gates.once.Do(func() {
		gates.base = clientfeatures.FeatureGates()
		clientfeatures.ReplaceFeatureGates(&gates)
	})
	gates.watchListOff.Store(m == PlainList)
}

var gates listModeGates

// listModeGates are client-go's feature gates with WatchListClient
// switchable.
type listModeGates struct {
	once         sync.Once
	base         clientfeatures.Gates
	watchListOff atomic.Bool
}

func (g *listModeGates) Enabled(f clientfeatures.Feature) bool {
	if f == clientfeatures.WatchListClient && g.watchListOff.Load() {
		return false
	}
	return g.base.Enabled(f)
}

// measurePeaks runs the peak scenario at n: every peak implementation in
// every list mode, c.Runs times (rotated), in this process or with
// c.MeasurePeak.
func measurePeaks(ctx context.Context, cfg *rest.Config, c Config, res *Results, r Resource, n int) error {
	impls := PeakImpls(c.Impls)
	// The tables list res.Impls: the implementation only this scenario
	// measures goes after informerkit's.
	// (Once: measurePeaks runs at every size.)
	listed := slices.ContainsFunc(res.Impls, func(im Impl) bool { return im.Name == InformerKitNamespaces })
	for i, im := range res.Impls {
		if im.Name == InformerKit && !listed {
			res.Impls = append(res.Impls[:i+1:i+1], append([]Impl{NamespacesImpl()}, res.Impls[i+1:]...)...)
			break
		}
	}
	measure := func(im Impl, pc PeakCase) error {
		var samples []Sample
		var err error
		if c.MeasurePeak != nil {
			samples, err = c.MeasurePeak(ctx, im, r, n, pc)
		} else {
			samples, err = MeasurePeakOnce(ctx, cfg, c, im, r, n, pc)
		}
		if err != nil {
			return fmt.Errorf("%s %s peak: %w", im.Name, pc.caseName(n), err)
		}
		res.Samples = append(res.Samples, samples...)
		c.Progress(res)
		return nil
	}
	for run := 0; run < c.Runs; run++ {
		for _, mode := range ListModes {
			for _, im := range rotate(impls, run) {
				if err := measure(im, PeakCase{Mode: mode}); err != nil {
					return err
				}
			}
		}
		c.Logf("N=%d peak run %d done", n, run+1)
	}
	if c.PeakMemLimit <= 0 {
		return nil
	}
	// The same syncs under a memory limit set from each one's settled
	// heap (the medians just measured).
	limitRuns := c.PeakMemLimitRuns
	if limitRuns <= 0 {
		limitRuns = c.Runs
	}
	for run := 0; run < limitRuns; run++ {
		for _, mode := range ListModes {
			for _, im := range rotate(impls, run) {
				settled, ok := res.Median(RowPeak, PeakCase{Mode: mode}.caseName(n), "settled heap", im.Name)
				if !ok {
					return fmt.Errorf("%s N=%d %s: no settled heap to set a memory limit from", im.Name, n, mode)
				}
				pc := PeakCase{Mode: mode, MemLimitFactor: c.PeakMemLimit, SettledHeap: uint64(max(0, settled) * (1 << 20))}
				if err := measure(im, pc); err != nil {
					return err
				}
			}
		}
		c.Logf("N=%d peak run %d under GOMEMLIMIT done", n, run+1)
	}
	return nil
}

// MeasurePeakOnce syncs one informer of im over r (n objects) in mode
// and returns its peak-memory samples: the highest Go heap (bytes in heap
// objects, live or not yet swept, read from runtime/metrics every
// millisecond) above the heap before the sync, the process's highest RSS
// during the sync (VmHWM, reset just before it), and, once synced and
// after two collections, the heap above the baseline and the RSS after
// the runtime returned its free pages (debug.FreeOSMemory). Run it in a
// fresh process (ikbench -isolate) for figures no earlier measurement
// shaped. It counts the sync's list requests (a LIST sync without one is
// an ErrSanity; a WatchList sync may list where the implementation cannot
// stream, as informerkit's WithNamespaces informers). With
// pc.MemLimitFactor the sync runs under that memory limit (taken away
// after it), and the limit is recorded beside the figures.
func MeasurePeakOnce(ctx context.Context, cfg *rest.Config, c Config, im Impl, r Resource, n int, pc PeakCase) ([]Sample, error) {
	c = c.Defaults()
	mode := pc.Mode
	SetListMode(mode)
	defer SetListMode(WatchList)
	counted, counter := controlplane.CountRequests(cfg)
	inst, err := im.New(counted)
	if err != nil {
		return nil, err
	}
	defer inst.Stop()
	if err := inst.Watch(r); err != nil {
		return nil, err
	}
	base := heap()
	var limit int64
	if pc.MemLimitFactor > 0 {
		limit = int64(pc.MemLimitFactor * float64(base+pc.SettledHeap))
	}
	debug.FreeOSMemory()
	resetHWM := resetPeakRSS()
	rssBase := procStatus("VmRSS")
	prevLimit := int64(-1)
	if limit > 0 {
		prevLimit = debug.SetMemoryLimit(limit)
	}
	sampler := startHeapSampler(time.Millisecond)
	d, err := startSynced(ctx, inst)
	peak := sampler.stop()
	hwm := procStatus("VmHWM")
	if prevLimit >= 0 {
		debug.SetMemoryLimit(prevLimit) // the settled figures are taken without it
	}
	if err != nil {
		return nil, err
	}
	if got := inst.Len(r); got != n {
		return nil, fmt.Errorf("%w: cache holds %d objects, want %d", ErrSanity, got, n)
	}
	lists := 0
	for req, count := range counter.Snapshot() {
		if req.Verb == "list" && strings.HasSuffix(req.Path, "/"+r.GVR.Resource) {
			lists += count
		}
	}
	// A WatchList sync may still list: informers that cannot stream (one
	// per namespace with WithNamespaces) do; the count is recorded.
	if mode == PlainList && lists == 0 {
		return nil, fmt.Errorf("%w: %s sync sent no list request", ErrSanity, mode)
	}
	settled := heap()
	debug.FreeOSMemory()
	rss := procStatus("VmRSS")
	cs := pc.caseName(n)
	res := &Results{}
	mib := func(b uint64) float64 { return float64(b) / (1 << 20) }
	res.add(RowPeak, cs, "peak heap", "MiB", im.Name, delta(peak, base)/(1<<20))
	res.add(RowPeak, cs, "settled heap", "MiB", im.Name, delta(settled, base)/(1<<20))
	res.add(RowPeak, cs, "peak/settled heap", "×", im.Name, delta(peak, base)/max(1, delta(settled, base)))
	if resetHWM {
		res.add(RowPeak, cs, "peak RSS", "MiB", im.Name, mib(hwm))
	}
	res.add(RowPeak, cs, "settled RSS", "MiB", im.Name, mib(rss))
	res.add(RowPeak, cs, "sync", "ms", im.Name, float64(d.Microseconds())/1000)
	res.add(RowPeak, cs, "list requests", "count", im.Name, float64(lists))
	if limit > 0 {
		res.add(RowPeak, cs, "memory limit", "MiB", im.Name, mib(uint64(limit)))
	}
	c.Logf("%-28s %-40s limit %6.1f MiB peak heap %6.1f MiB settled %6.1f MiB (×%.2f) RSS before %6.1f peak %6.1f (reset %v) settled %6.1f MiB sync %v",
		im.Name, cs, mib(uint64(max(0, limit))), delta(peak, base)/(1<<20), delta(settled, base)/(1<<20), delta(peak, base)/max(1, delta(settled, base)),
		mib(rssBase), mib(hwm), resetHWM, mib(rss), d.Round(time.Millisecond))
	return res.Samples, nil
}

// heapSampler records the highest /memory/classes/heap/objects:bytes.
type heapSampler struct {
	done chan struct{}
	wg   sync.WaitGroup
	max  atomic.Uint64
}

const heapObjects = "/memory/classes/heap/objects:bytes"

func readHeapObjects(s []metrics.Sample) uint64 {
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func startHeapSampler(every time.Duration) *heapSampler {
	h := &heapSampler{done: make(chan struct{})}
	s := []metrics.Sample{{Name: heapObjects}}
	h.max.Store(readHeapObjects(s))
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if v := readHeapObjects(s); v > h.max.Load() {
				h.max.Store(v)
			}
			select {
			case <-h.done:
				return
			case <-t.C:
			}
		}
	}()
	return h
}

// stop ends the sampling and returns the highest heap seen (read once
// more at the end).
func (h *heapSampler) stop() uint64 {
	close(h.done)
	h.wg.Wait()
	if v := readHeapObjects([]metrics.Sample{{Name: heapObjects}}); v > h.max.Load() {
		h.max.Store(v)
	}
	return h.max.Load()
}

// resetPeakRSS resets the process's VmHWM to its current RSS (Linux:
// writing 5 to /proc/self/clear_refs); false if it cannot.
func resetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// procStatus reads a "kB" field of /proc/self/status in bytes; 0 if
// absent (not Linux).
func procStatus(field string) uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
