package dynamicinformer

import (
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/dynamicinformer/internal/listwatch"
	"github.com/informerkit/informerkit/dynamicinformer/metrics"
)

// metricsDeps is what an entry needs to report metrics (nil: the factory
// has none).
type metricsDeps struct {
	newInformer func(metrics.Identity) metrics.Informer
}

func newMetricsDeps(m metrics.Exporter) *metricsDeps {
	if m == nil {
		return nil
	}
	return &metricsDeps{newInformer: m.NewInformer}
}

// The event types metrics.Informer.Event is given.
const (
	eventAdded   = "ADDED"
	eventUpdated = "UPDATED"
	eventDeleted = "DELETED"
)

// stateStopped is the last state a metrics.Informer is given.
const stateStopped = string(Stopped)

// entryMetrics is one entry's side of its metrics: where its observations
// go now (sink; nil once it stopped), the client-go informer name that
// enables client-go's metrics for it, and the last state reported.
type entryMetrics struct {
	deps *metricsDeps
	sink atomic.Pointer[metricsSink]
	name *toolscache.InformerName // released when the informer stops

	reported State // guarded by the entry's pubMu
}

type metricsSink struct{ m metrics.Informer }

// informerNames numbers the client-go informer names of entries: a name
// (and a GVR under it) can be registered once per process, and a
// recreated informer must not collide with the one it replaces.
var informerNames atomic.Uint64

// newMetrics sets up the entry's metrics before its informer is built
// (nil without metrics): client-go's informer metrics in opts, the
// liveness layer's request hooks.
func (e *entry) newMetrics(opts *toolscache.SharedIndexInformerOptions) *entryMetrics {
	if e.deps.metrics == nil {
		return nil
	}
	em := &entryMetrics{deps: e.deps.metrics}
	if err := em.clientGoOptions(e.currentGVR(), opts); err != nil {
		e.logger.V(2).Info("client-go's informer metrics are off for this informer", "err", err.Error())
	}
	e.server.Hooks.Request = em.request
	e.server.Hooks.WatchEnded = em.watchRestart
	return em
}

// startMetrics begins reporting once the informer is built: the informer
// exists (Pending) and a handler counts what it delivers.
func (e *entry) startMetrics() error {
	em := e.metrics
	if em == nil {
		return nil
	}
	e.pubMu.Lock()
	em.start(e.identity())
	e.pubMu.Unlock()
	noResync := time.Duration(0)
	// Counted as handlers get them by default: a relist's updates of
	// unchanged objects are not (WithUnchangedRelistUpdates).
	if _, err := e.informer.AddEventHandlerWithOptions(skipUnchanged{&metricsHandler{em: em}}, toolscache.HandlerOptions{ResyncPeriod: &noResync}); err != nil {
		em.end()
		return err
	}
	return nil
}

// identity is the informer as metrics.Exporter.NewInformer sees it.
func (e *entry) identity() metrics.Identity {
	return metrics.Identity{
		GVR:           e.currentGVR(),
		Namespaces:    append([]string(nil), e.cfg.namespaces...),
		LabelSelector: e.cfg.labelSelector,
		FieldSelector: e.cfg.fieldSelector,
		MetadataOnly:  e.cfg.metadataOnly,
	}
}

// start begins reporting: the informer exists (Pending). The entry's
// pubMu must be held.
func (em *entryMetrics) start(id metrics.Identity) {
	em.sink.Store(&metricsSink{m: em.deps.newInformer(id)})
	em.reported = Pending
	em.current().State(string(Pending))
}

// current is where observations go now; a no-op after the informer
// stopped.
func (em *entryMetrics) current() metrics.Informer {
	if s := em.sink.Load(); s != nil {
		return s.m
	}
	return stoppedMetrics{}
}

// clientGoOptions enables client-go's informer metrics for the informer,
// under a name of its own.
func (em *entryMetrics) clientGoOptions(gvr schema.GroupVersionResource, opts *toolscache.SharedIndexInformerOptions) error {
	name, err := toolscache.NewInformerName("informerkit-" + strconv.FormatUint(informerNames.Add(1), 10))
	if err != nil {
		return err
	}
	em.name = name
	opts.Identifier = name.WithResource(gvr)
	opts.InformerMetricsProvider = clientGoProvider{em}
	return nil
}

// state reports a status change; the entry's pubMu must be held (so
// states are reported in order).
func (em *entryMetrics) state(s State) {
	if em == nil || s == em.reported {
		return
	}
	prev := em.reported
	em.reported = s
	if s == Stopped {
		em.end()
		return
	}
	m := em.current()
	m.State(string(s))
	// A complete list arrived: Synced or Stale reached from elsewhere.
	// Between the two only contact changed; the watch resumes.
	if s == Synced && prev != Stale || s == Stale && prev != Synced {
		m.Synced()
	}
}

// end stops reporting: the last call, State("Stopped"), and client-go's
// name for the informer released.
func (em *entryMetrics) end() {
	if em == nil {
		return
	}
	s := em.sink.Swap(nil)
	if s == nil {
		return
	}
	s.m.State(stateStopped)
	em.name.Release()
}

// relisted: a list succeeded while the informer was Synced. The entry's
// pubMu must be held.
func (em *entryMetrics) relisted() {
	if em == nil || em.reported != Synced {
		return
	}
	em.current().Synced()
}

// move: the informer follows another version; id identifies it anew. The
// entry's pubMu must be held.
func (em *entryMetrics) move(id metrics.Identity) {
	if em == nil {
		return
	}
	old := em.sink.Load()
	if old == nil {
		return
	}
	old.m.State(stateStopped)
	m := em.deps.newInformer(id)
	em.sink.Store(&metricsSink{m: m})
	m.State(string(em.reported))
}

func (em *entryMetrics) request(verb string, err error) {
	em.current().Request(verb, requestReason(err))
}

func (em *entryMetrics) watchRestart() { em.current().WatchRestart() }

func (em *entryMetrics) outsideShard(n int) {
	if em == nil {
		return
	}
	em.current().OutsideShard(n)
}

func (em *entryMetrics) handlerPanic() {
	if em != nil {
		em.current().HandlerPanic()
	}
}

// requestReason is the reason metrics.Informer.Request is given for err.
func requestReason(err error) string {
	if err == nil {
		return ""
	}
	if errors.Is(err, listwatch.ErrWatchNotAnswered) {
		return "Timeout"
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		if r := string(apierrors.ReasonForError(err)); r != "" {
			return r
		}
		return "Unknown"
	}
	if listwatch.IsConnectionError(err) {
		return "ConnectionError"
	}
	return "Unknown"
}

// handler counts what the informer delivers to its handlers and how many
// objects its cache holds. client-go calls it from one goroutine.
type metricsHandler struct {
	em      *entryMetrics
	objects int
}

func (h *metricsHandler) OnAdd(interface{}, bool) {
	h.objects++
	h.em.current().Event(eventAdded, h.objects)
}

func (h *metricsHandler) OnUpdate(interface{}, interface{}) {
	h.em.current().Event(eventUpdated, h.objects)
}

func (h *metricsHandler) OnDelete(interface{}) {
	h.objects--
	h.em.current().Event(eventDeleted, h.objects)
}

// clientGoProvider is the toolscache.InformerMetricsProvider of one
// informer: its metrics go to the informer's current metrics.Informer, and
// stop when client-go's name for it is released.
type clientGoProvider struct{ em *entryMetrics }

func (p clientGoProvider) NewQueuedItemMetric(id toolscache.InformerNameAndResource) toolscache.GaugeMetric {
	return clientGoMetric{id, func(v float64) { p.em.current().QueuedItems(int(v)) }}
}

func (p clientGoProvider) NewProcessingLatencyMetric(id toolscache.InformerNameAndResource) toolscache.HistogramMetric {
	return clientGoMetric{id, func(v float64) {
		p.em.current().ProcessingLatency(time.Duration(v * float64(time.Second)))
	}}
}

func (p clientGoProvider) NewStoreResourceVersionMetric(id toolscache.InformerNameAndResource) toolscache.GaugeMetric {
	return clientGoMetric{id, func(v float64) { p.em.current().StoreResourceVersion(v) }}
}

// clientGoMetric is a client-go gauge or histogram that reports while its
// informer's name is reserved.
type clientGoMetric struct {
	id      toolscache.InformerNameAndResource
	observe func(float64)
}

func (m clientGoMetric) Set(v float64) {
	if m.id.Reserved() {
		m.observe(v)
	}
}

func (m clientGoMetric) Observe(v float64) { m.Set(v) }

// stoppedMetrics receives what comes after an informer stopped.
type stoppedMetrics struct{}

func (stoppedMetrics) State(string)                    {}
func (stoppedMetrics) Synced()                         {}
func (stoppedMetrics) Event(string, int)               {}
func (stoppedMetrics) Request(string, string)          {}
func (stoppedMetrics) WatchRestart()                   {}
func (stoppedMetrics) HandlerPanic()                   {}
func (stoppedMetrics) QueuedItems(int)                 {}
func (stoppedMetrics) ProcessingLatency(time.Duration) {}
func (stoppedMetrics) StoreResourceVersion(float64)    {}
func (stoppedMetrics) OutsideShard(int)                {}

// diskStart reports how an informer kept on disk started (to an exporter
// whose Informer implements metrics.DiskInformer).
func (em *entryMetrics) diskStart(start DiskStart, reason string, restored int, age time.Duration) {
	if em == nil {
		return
	}
	if d, ok := em.current().(metrics.DiskInformer); ok {
		d.DiskStart(string(start), reason, restored, age)
	}
}

// diskWritten reports n more bytes written to the disk cache.
func (em *entryMetrics) diskWritten(n int64) {
	if em == nil || n <= 0 {
		return
	}
	if d, ok := em.current().(metrics.DiskInformer); ok {
		d.DiskWritten(n)
	}
}
