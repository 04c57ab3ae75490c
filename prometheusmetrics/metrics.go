package prometheusmetrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/dynamicinformer/metrics"
)

// States are the informer states informerkit_informer_state has a series
// for (a Stopped informer leaves the gauges).
var States = []dynamicinformer.State{
	dynamicinformer.Pending, dynamicinformer.Syncing, dynamicinformer.Synced,
	dynamicinformer.Stale, dynamicinformer.Removed, dynamicinformer.Failed,
}

// eventTypes are the values of the type label of the events counter.
var eventTypes = [3]string{"ADDED", "UPDATED", "DELETED"}

// ProcessingBuckets are the buckets of
// informerkit_informer_processing_duration_seconds: 100µs to about 1.6 s.
var ProcessingBuckets = prometheus.ExponentialBuckets(0.0001, 4, 8)

var gvrLabels = []string{"group", "version", "resource"}

func withLabels(extra ...string) []string {
	return append(append([]string(nil), gvrLabels...), extra...)
}

// Metrics is a metrics.Exporter that keeps Prometheus collectors,
// and a prometheus.Collector of them (see the package documentation). It
// is safe for concurrent use. Create it with New.
type Metrics struct {
	state         *prometheus.GaugeVec
	objects       *prometheus.GaugeVec
	events        *prometheus.CounterVec
	requests      *prometheus.CounterVec
	requestErrors *prometheus.CounterVec
	watchRestarts *prometheus.CounterVec
	lastSync      *prometheus.GaugeVec
	handlerPanics *prometheus.CounterVec
	outsideShard  *prometheus.CounterVec
	queued        *prometheus.GaugeVec
	processing    *prometheus.HistogramVec
	storeRV       *prometheus.GaugeVec
	diskStarts    *prometheus.CounterVec
	diskRestored  *prometheus.CounterVec
	diskAge       *prometheus.GaugeVec
	diskWritten   *prometheus.CounterVec
	wanted        prometheus.Gauge
	running       prometheus.Gauge

	mu   sync.Mutex // guards refs, and orders creating and deleting a resource's gauge series
	refs map[schema.GroupVersionResource]int
}

var (
	_ metrics.Exporter     = (*Metrics)(nil)
	_ metrics.Informer     = (*informer)(nil)
	_ metrics.DiskInformer = (*informer)(nil)
	_ prometheus.Collector = (*Metrics)(nil)
)

// New returns a Metrics with no series yet.
func New() *Metrics {
	return &Metrics{
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "informerkit_informer_state",
			Help: "Informers of the resource in the state.",
		}, withLabels("state")),
		objects: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "informerkit_objects_cached",
			Help: "Objects in the caches of the resource's informers, as delivered to their handlers.",
		}, gvrLabels),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "informerkit_informer_events_total",
			Help: "Events the resource's informers delivered to their handlers, by type (ADDED, UPDATED, DELETED).",
		}, withLabels("type")),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "informerkit_list_watch_requests_total",
			Help: "List and watch requests the resource's informers sent (answered or failed).",
		}, withLabels("verb")),
		requestErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "informerkit_list_watch_errors_total",
			Help: "List and watch requests that failed, by reason (the server's status reason, ConnectionError, Timeout, Unknown).",
		}, withLabels("verb", "reason")),
		watchRestarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "informerkit_watch_restarts_total",
			Help: "Watches of the resource that ended while their informer ran.",
		}, gvrLabels),
		lastSync: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "informerkit_last_sync_timestamp_seconds",
			Help: "When an informer of the resource last held a complete list from the server (Unix time).",
		}, gvrLabels),
		handlerPanics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "informerkit_handler_panics_total",
			Help: "Panics recovered from handlers of the resource's informers.",
		}, gvrLabels),
		outsideShard: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "informerkit_objects_outside_shard_total",
			Help: "Objects the server sent to sharded informers of the resource outside their shard, dropped before the cache (the server ignores the shard selector).",
		}, gvrLabels),
		queued: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "informerkit_informer_queued_items",
			Help: "Items queued in the FIFOs of the resource's informers (client-go).",
		}, gvrLabels),
		processing: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "informerkit_informer_processing_duration_seconds",
			Help:    "Time to process one item popped from an informer's FIFO: update the cache, hand it to the handlers' buffers (client-go).",
			Buckets: ProcessingBuckets,
		}, gvrLabels),
		storeRV: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "informerkit_store_resource_version",
			Help: "The resourceVersion of the last informer cache of the resource that changed, as a number (client-go).",
		}, gvrLabels),
		diskStarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "informerkit_disk_starts_total",
			Help: "Starts of the resource's informers kept on disk (Options.CacheDir), by how they started (Resumed, Diffed, Cold, Removed) and why a stored state was not used (reason; \"\" when it was).",
		}, withLabels("start", "reason")),
		diskRestored: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "informerkit_disk_restored_objects_total",
			Help: "Objects the resource's informers restored from disk at start.",
		}, gvrLabels),
		diskAge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "informerkit_disk_restored_age_seconds",
			Help: "How old the stored state was when an informer of the resource last started from it.",
		}, gvrLabels),
		diskWritten: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "informerkit_disk_written_bytes_total",
			Help: "Bytes the resource's informers wrote to their disk cache (journals and snapshots).",
		}, gvrLabels),
		wanted: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "informerkit_informers_wanted",
			Help: "Informers the factory holds.",
		}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "informerkit_informers_running",
			Help: "Informers of the factory that are Syncing, Synced or Stale.",
		}),
		refs: map[schema.GroupVersionResource]int{},
	}
}

func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.state, m.objects, m.events, m.requests, m.requestErrors, m.watchRestarts,
		m.lastSync, m.handlerPanics, m.outsideShard, m.queued, m.processing, m.storeRV,
		m.diskStarts, m.diskRestored, m.diskAge, m.diskWritten, m.wanted, m.running}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}

// NewInformer implements metrics.Exporter.
func (m *Metrics) NewInformer(id metrics.Identity) metrics.Informer {
	gvr := id.GVR
	lv := []string{gvr.Group, gvr.Version, gvr.Resource}
	m.mu.Lock()
	if m.refs[gvr] == 0 {
		// Every state and the object count have a series, at 0, from the
		// start: a query for "Synced == 1" finds a 0, not nothing.
		for _, s := range States {
			m.state.WithLabelValues(append(lv, string(s))...)
		}
		m.objects.WithLabelValues(lv...)
	}
	m.refs[gvr]++
	m.mu.Unlock()
	m.wanted.Inc()
	in := &informer{
		m: m, gvr: gvr, labels: lv,
		objectsGauge:  m.objects.WithLabelValues(lv...),
		queuedGauge:   m.queued.WithLabelValues(lv...),
		lastSync:      m.lastSync.WithLabelValues(lv...),
		storeRV:       m.storeRV.WithLabelValues(lv...),
		watchRestarts: m.watchRestarts.WithLabelValues(lv...),
		handlerPanics: m.handlerPanics.WithLabelValues(lv...),
		outsideShard:  m.outsideShard.WithLabelValues(lv...),
		processing:    m.processing.WithLabelValues(lv...),
	}
	for i, t := range eventTypes {
		in.events[i] = m.events.WithLabelValues(append(lv, t)...)
	}
	return in
}

// release: an informer of gvr stopped. The resource's gauge series go
// with its last informer.
func (m *Metrics) release(gvr schema.GroupVersionResource) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.refs[gvr]--
	if m.refs[gvr] > 0 {
		return
	}
	delete(m.refs, gvr)
	match := prometheus.Labels{"group": gvr.Group, "version": gvr.Version, "resource": gvr.Resource}
	for _, g := range []*prometheus.GaugeVec{m.state, m.objects, m.lastSync, m.queued, m.storeRV, m.diskAge} {
		g.DeletePartialMatch(match)
	}
}

// informer is one informer's metrics.Informer: its series
// resolved once, and what it added to the resource's shared gauges (so it
// can take it back when it stops).
type informer struct {
	m      *Metrics
	gvr    schema.GroupVersionResource
	labels []string

	objectsGauge  prometheus.Gauge
	queuedGauge   prometheus.Gauge
	lastSync      prometheus.Gauge
	storeRV       prometheus.Gauge
	watchRestarts prometheus.Counter
	handlerPanics prometheus.Counter
	outsideShard  prometheus.Counter
	processing    prometheus.Observer
	events        [3]prometheus.Counter // by eventTypes

	mu      sync.Mutex // guards state, objects, queued, stopped (what this informer added to shared gauges)
	state   string     // "": none counted
	objects int
	queued  int
	stopped bool
}

func (in *informer) stateGauge(s string) prometheus.Gauge {
	return in.m.state.WithLabelValues(in.labels[0], in.labels[1], in.labels[2], s)
}

func isRunning(s string) bool {
	return s == string(dynamicinformer.Syncing) || s == string(dynamicinformer.Synced) || s == string(dynamicinformer.Stale)
}

// State implements metrics.Informer. The informers_wanted and
// informers_running gauges follow from it: wanted from NewInformer to
// Stopped, running while Syncing, Synced or Stale (a Stale informer runs:
// it serves its complete cache and retries the server; the outage shows
// in informerkit_informer_state{state="Stale"}).
func (in *informer) State(s string) {
	in.mu.Lock()
	if in.stopped || s == in.state {
		in.mu.Unlock()
		return
	}
	if in.state != "" {
		in.stateGauge(in.state).Dec()
	}
	if isRunning(in.state) != isRunning(s) {
		if isRunning(s) {
			in.m.running.Inc()
		} else {
			in.m.running.Dec()
		}
	}
	in.state = ""
	if s != string(dynamicinformer.Stopped) {
		in.stateGauge(s).Inc()
		in.state = s
		in.mu.Unlock()
		return
	}
	// Stopped, the last call: take back what the informer added to the
	// resource's gauges.
	in.stopped = true
	in.objectsGauge.Add(-float64(in.objects))
	in.queuedGauge.Add(-float64(in.queued))
	in.mu.Unlock()
	in.m.wanted.Dec()
	in.m.release(in.gvr)
}

func (in *informer) Synced() { in.lastSync.SetToCurrentTime() }

func (in *informer) Event(t string, objects int) {
	for i, et := range eventTypes {
		if t == et {
			in.events[i].Inc()
		}
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.stopped {
		return
	}
	in.objectsGauge.Add(float64(objects - in.objects))
	in.objects = objects
}

func (in *informer) Request(verb, reason string) {
	in.m.requests.WithLabelValues(in.labels[0], in.labels[1], in.labels[2], verb).Inc()
	if reason != "" {
		in.m.requestErrors.WithLabelValues(in.labels[0], in.labels[1], in.labels[2], verb, reason).Inc()
	}
}

func (in *informer) WatchRestart() { in.watchRestarts.Inc() }
func (in *informer) HandlerPanic() { in.handlerPanics.Inc() }

// OutsideShard implements metrics.Informer.
func (in *informer) OutsideShard(n int) { in.outsideShard.Add(float64(n)) }

func (in *informer) QueuedItems(n int) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.stopped {
		return
	}
	in.queuedGauge.Add(float64(n - in.queued))
	in.queued = n
}

func (in *informer) ProcessingLatency(d time.Duration) { in.processing.Observe(d.Seconds()) }

func (in *informer) StoreResourceVersion(rv float64) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if !in.stopped {
		in.storeRV.Set(rv)
	}
}

// DiskStart implements metrics.DiskInformer.
func (in *informer) DiskStart(start, reason string, restored int, age time.Duration) {
	in.m.diskStarts.WithLabelValues(in.labels[0], in.labels[1], in.labels[2], start, reason).Inc()
	if restored > 0 {
		in.m.diskRestored.WithLabelValues(in.labels...).Add(float64(restored))
		in.mu.Lock()
		defer in.mu.Unlock()
		if !in.stopped {
			in.m.diskAge.WithLabelValues(in.labels...).Set(age.Seconds())
		}
	}
}

// DiskWritten implements metrics.DiskInformer.
func (in *informer) DiskWritten(n int64) {
	in.m.diskWritten.WithLabelValues(in.labels...).Add(float64(n))
}
