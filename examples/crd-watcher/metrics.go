package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/prometheusmetrics"
	"github.com/informerkit/informerkit/subscription"
)

var eventTypes = []string{string(subscription.Added), string(subscription.Updated), string(subscription.Deleted)}

// counters counts events per GVR and type.
type counters struct {
	mu sync.Mutex // guards m
	m  map[schema.GroupVersionResource]map[string]uint64
}

func newCounters() *counters {
	return &counters{m: map[schema.GroupVersionResource]map[string]uint64{}}
}

func (c *counters) inc(gvr schema.GroupVersionResource, typ string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.m[gvr]
	if m == nil {
		m = map[string]uint64{}
		c.m[gvr] = m
	}
	m[typ]++
}

// snapshot returns a deep copy.
func (c *counters) snapshot() map[schema.GroupVersionResource]map[string]uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[schema.GroupVersionResource]map[string]uint64, len(c.m))
	for gvr, m := range c.m {
		cp := make(map[string]uint64, len(m))
		for k, v := range m {
			cp[k] = v
		}
		out[gvr] = cp
	}
	return out
}

var printedEventsDesc = prometheus.NewDesc("informerkit_events_total",
	"Events the watcher printed, by type.", []string{"group", "version", "resource", "type"}, nil)

// Describe implements prometheus.Collector: the watcher's printed events
// (informerkit_events_total), one series per GVR and type, zeros
// included, also for GVRs whose informer is gone.
func (c *counters) Describe(ch chan<- *prometheus.Desc) { ch <- printedEventsDesc }

// Collect implements prometheus.Collector.
func (c *counters) Collect(ch chan<- prometheus.Metric) {
	for gvr, m := range c.snapshot() {
		for _, t := range eventTypes {
			ch <- prometheus.MustNewConstMetric(printedEventsDesc, prometheus.CounterValue, float64(m[t]),
				gvr.Group, gvr.Version, gvr.Resource, t)
		}
	}
}

var (
	shardFractionDesc = prometheus.NewDesc("informerkit_shard_keyspace_fraction",
		"Part of the keyspace (0 to 1) the informer's shard covers; absent for informers that are not sharded (--shard, --shard-group).",
		[]string{"group", "version", "resource"}, nil)
	shardMembersDesc = prometheus.NewDesc("informerkit_shard_group_members",
		"Live members of the shard group as this replica sees them (--shard-group).", []string{"shard_group"}, nil)
)

// shardCollector exports each sharded informer's part of the keyspace and,
// with --shard-group, the group's size.
type shardCollector struct {
	statuses func() []dynamicinformer.Status
	group    func() *groupView // nil func or nil view: no group
}

// Describe implements prometheus.Collector.
func (c shardCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- shardFractionDesc
	ch <- shardMembersDesc
}

// Collect implements prometheus.Collector.
func (c shardCollector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.statuses() {
		if f, _, _, ok := selectorSummary(st.Shard); ok {
			ch <- prometheus.MustNewConstMetric(shardFractionDesc, prometheus.GaugeValue, f, st.GVR.Group, st.GVR.Version, st.GVR.Resource)
		}
	}
	if c.group != nil {
		if v := c.group(); v != nil {
			ch <- prometheus.MustNewConstMetric(shardMembersDesc, prometheus.GaugeValue, float64(len(v.Members)), v.Group)
		}
	}
}

// registry is what /metrics serves: the library's informer metrics
// (informer states, objects cached, requests, ...: package
// prometheusmetrics), the events the watcher printed, contact with the API
// server, and Go's and the process's own.
func registry(h health) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		h.informers,
		h.counts,
		shardCollector{statuses: h.statuses, group: h.group},
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "informerkit_server_contact",
			Help: "1 while the API server answers the watcher, 0 while it cannot be reached.",
		}, func() float64 {
			if h.contactErr(h.statuses()) != nil {
				return 0
			}
			return 1
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "informerkit_server_last_contact_timestamp_seconds",
			Help: "When the API server last answered the watcher (Unix time).",
		}, func() float64 {
			return float64(h.lastContact(h.statuses()).UnixMilli()) / 1000
		}),
		buildInfoGauge(buildInfo()),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// ready reports whether the watcher is ready: the API server is in
// contact (contactErr nil) and every informer is Ready (Synced with no
// namespace denied), or Removed (its resource is gone: nothing to wait
// for). A Synced informer with denied namespaces is listed with them. Pending, Syncing, Stale (its
// cache is no longer kept current), Failed (it retries and may recover)
// and Stopped are not ready. The second result lists what it waits for;
// Stale informers are not listed while contactErr says why (it is their
// reason).
func ready(sts []dynamicinformer.Status, contactErr error) (bool, []string) {
	var waiting []string
	if contactErr != nil {
		waiting = append(waiting, "no contact with the API server: "+contactErr.Error())
	}
	for _, st := range sts {
		switch {
		case st.State == dynamicinformer.Synced && len(st.Denied) > 0:
			waiting = append(waiting, gvrString(st.GVR)+" "+deniedText(st))
		case st.Ready(), st.State == dynamicinformer.Removed:
		default:
			if st.State == dynamicinformer.Stale && contactErr != nil {
				continue // contactErr says why
			}
			w := gvrString(st.GVR) + " " + string(st.State)
			if d := statusDetail(st); d != "" {
				w += " (" + d + ")"
			}
			waiting = append(waiting, w)
		}
	}
	return len(waiting) == 0, waiting
}

// notPermitted names, per --permitted-namespaces informer with
// namespaces not permitted, which and why: "configmaps.v1 not permitted
// in 2 namespaces: may not list, watch in b, c". They do not make the
// watcher not ready (it holds what the user may see); /readyz says them
// after its verdict.
func notPermitted(sts []dynamicinformer.Status) []string {
	var out []string
	for _, st := range sts {
		if len(st.NotPermitted) > 0 {
			out = append(out, fmt.Sprintf("%s not permitted in %s: %s", gvrString(st.GVR), plural(len(st.NotPermitted), "namespace"), notPermittedText(st.NotPermitted)))
		}
	}
	sort.Strings(out)
	return out
}

// deniedText names an informer's denied namespaces (Status.Denied),
// sorted, with why: "denied in namespace b: ...; c: ...".
func deniedText(st dynamicinformer.Status) string {
	names := make([]string, 0, len(st.Denied))
	for ns := range st.Denied {
		names = append(names, ns)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, ns := range names {
		parts[i] = ns + ": " + st.Denied[ns]
	}
	return "denied in namespace " + strings.Join(parts, "; ")
}

// health is what the metrics server reads from the watcher.
type health struct {
	informers   *prometheusmetrics.Metrics // the factory's (Options.Metrics)
	statuses    func() []dynamicinformer.Status
	counts      *counters
	contactErr  func([]dynamicinformer.Status) error
	lastContact func([]dynamicinformer.Status) time.Time
	group       func() *groupView // the shard group as last seen (nil: none)
}

// metricsServer serves /metrics, /healthz and /readyz.
type metricsServer struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

// startMetrics listens on addr and serves there.
func startMetrics(addr string, h health) (*metricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return serveMetrics(ln, h), nil
}

// serveMetrics serves on ln, which the run opened before it contacted the
// API server (a bad or busy --metrics-addr is a usage error, found first).
// Close closes ln.
func serveMetrics(ln net.Listener, h health) *metricsServer {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(registry(h), promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		sts := h.statuses()
		ok, waiting := ready(sts, h.contactErr(sts))
		scope := notPermitted(sts)
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not ready: %s\n", strings.Join(waiting, ", "))
		} else {
			_, _ = io.WriteString(w, "ok\n")
		}
		for _, line := range scope {
			fmt.Fprintln(w, line)
		}
	})
	m := &metricsServer{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, ln: ln, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		_ = m.srv.Serve(ln)
	}()
	return m
}

func (m *metricsServer) Addr() string { return m.ln.Addr().String() }

func (m *metricsServer) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = m.srv.Shutdown(ctx)
	<-m.done
}

// buildLabels are the labels of informerkit_build_info.
type buildLabels struct {
	Version     string // the watcher's module version; "(devel)" when built from a work tree
	Informerkit string // the library's module version
	GoVersion   string
	ClientGo    string // k8s.io/client-go's module version
}

// buildInfo reads the binary's build information (runtime/debug).
func buildInfo() buildLabels {
	bi, _ := debug.ReadBuildInfo()
	return buildLabelsOf(bi, runtime.Version())
}

// buildLabelsOf picks the labels from bi (nil: no build information):
// a module replaced by another version reports the version built in, a
// module without a version "(devel)", one not in the binary "unknown".
func buildLabelsOf(bi *debug.BuildInfo, goVersion string) buildLabels {
	l := buildLabels{Version: "(devel)", Informerkit: "unknown", GoVersion: goVersion, ClientGo: "unknown"}
	if bi == nil {
		return l
	}
	if bi.GoVersion != "" {
		l.GoVersion = bi.GoVersion
	}
	version := func(m *debug.Module) string {
		for m.Replace != nil {
			m = m.Replace
		}
		if m.Version == "" {
			return "(devel)"
		}
		return m.Version
	}
	if bi.Main.Path != "" {
		l.Version = version(&bi.Main)
	}
	for _, d := range bi.Deps {
		switch d.Path {
		case "k8s.io/client-go":
			l.ClientGo = version(d)
		case "github.com/informerkit/informerkit":
			l.Informerkit = version(d)
		}
	}
	return l
}

// buildInfoGauge is informerkit_build_info: 1, labelled with the versions
// built in (the Prometheus convention for build information).
func buildInfoGauge(l buildLabels) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "informerkit_build_info",
		Help: "Always 1; the labels say what the watcher was built from: its module version, the informerkit library's, Go's and client-go's.",
		ConstLabels: prometheus.Labels{
			"version": l.Version, "informerkit_version": l.Informerkit, "go_version": l.GoVersion, "client_go_version": l.ClientGo,
		},
	})
	g.Set(1)
	return g
}
