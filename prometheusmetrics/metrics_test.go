package prometheusmetrics

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/dynamicinformer/metrics"
)

var widgets = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}

func widget(ns, name, rv string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]interface{}{"name": name, "namespace": ns, "resourceVersion": rv},
	}}
	return u
}

// scrape GETs url and parses it with Prometheus's own text parser.
func scrape(t *testing.T, client *http.Client, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return fams
}

// sample finds the sample of name whose labels include want.
func sample(fams map[string]*dto.MetricFamily, name string, want map[string]string) (*dto.Metric, bool) {
	f := fams[name]
	if f == nil {
		return nil, false
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		return m, true
	}
	return nil, false
}

func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	m, ok := sample(fams, name, want)
	switch {
	case !ok:
		return -1
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	}
	return -1
}

func labels(kv ...string) map[string]string {
	m := map[string]string{"group": widgets.Group, "version": widgets.Version, "resource": widgets.Resource}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// waitFor polls cond until it holds or 20 s pass; then it fails the test
// with what and the details each describe returns.
func waitFor(t *testing.T, what string, cond func() bool, describe ...func() string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			var details []string
			for _, d := range describe {
				details = append(details, d())
			}
			t.Fatalf("%s: not within 20s %s", what, strings.Join(details, "; "))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A factory's informers, scraped over HTTP and parsed by Prometheus's text
// parser: states, objects (two informers of a resource add up), events by
// type, requests, client-go's processing histogram, wanted/running; the
// names pass Prometheus's linter; a released informer takes its part of
// the gauges back and the resource's gauges go with its last informer,
// while its counters stay.
func TestScrape(t *testing.T) {
	before := runtime.NumGoroutine()
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(kruntime.NewScheme(),
		map[schema.GroupVersionResource]string{widgets: "WidgetList"},
		widget("a", "w1", "10"), widget("a", "w2", "11"), widget("b", "w3", "12"))
	m := New()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	httpClient := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	url := srv.URL + "/metrics"

	f := dynamicinformer.NewSharedInformerFactory(client, dynamicinformer.Options{DisableCRDTracking: true, Metrics: m})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a := f.ForResource(widgets, dynamicinformer.WithNamespaces("a"))
	b := f.ForResource(widgets, dynamicinformer.WithNamespaces("b"))
	f.Start(ctx)
	if !f.WaitForCacheSync(ctx)[widgets] {
		t.Fatal("not synced")
	}
	if _, err := client.Resource(widgets).Namespace("a").Create(ctx, widget("a", "w4", "13"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.Resource(widgets).Namespace("a").Delete(ctx, "w1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var fams map[string]*dto.MetricFamily
	waitFor(t, "events in /metrics", func() bool {
		fams = scrape(t, httpClient, url)
		return value(fams, "informerkit_informer_events_total", labels("type", "DELETED")) == 1 &&
			value(fams, "informerkit_informer_events_total", labels("type", "ADDED")) == 4
	})
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"informerkit_objects_cached", labels(), 3}, // a: w2, w4; b: w3
		{"informerkit_informer_state", labels("state", "Synced"), 2},
		{"informerkit_informer_state", labels("state", "Pending"), 0},
		{"informerkit_informer_state", labels("state", "Failed"), 0},
		{"informerkit_informer_events_total", labels("type", "UPDATED"), 0},
		{"informerkit_informers_wanted", nil, 2},
		{"informerkit_informers_running", nil, 2},
		{"informerkit_handler_panics_total", labels(), 0},
		{"informerkit_watch_restarts_total", labels(), 0},
	} {
		if got := value(fams, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if got := value(fams, "informerkit_list_watch_requests_total", labels("verb", "list")); got < 2 {
		t.Errorf("list requests %v, want at least 2 (one per informer)", got)
	}
	if _, ok := sample(fams, "informerkit_list_watch_errors_total", labels()); ok {
		t.Errorf("errors reported with none: %v", fams["informerkit_list_watch_errors_total"])
	}
	if s, ok := sample(fams, "informerkit_informer_processing_duration_seconds", labels()); !ok || s.Histogram.GetSampleCount() == 0 {
		t.Errorf("processing histogram empty: %v", s)
	}
	if ts := value(fams, "informerkit_last_sync_timestamp_seconds", labels()); ts < float64(time.Now().Add(-time.Minute).Unix()) {
		t.Errorf("last sync timestamp %v, want about now", ts)
	}
	if rv := value(fams, "informerkit_store_resource_version", labels()); rv < 10 {
		t.Errorf("store resourceVersion %v, want one of the objects'", rv)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}

	// One informer goes: its objects and state leave the gauges.
	// A scrape is not atomic (a gauge read before the informer stopped and
	// another after), and Release returns before the informer has stopped:
	// each step waits until one scrape shows all of its state.
	b.Release()
	waitFor(t, "b released: 1 informer wanted, 2 objects, 1 Synced", func() bool {
		fams = scrape(t, httpClient, url)
		return value(fams, "informerkit_informers_wanted", nil) == 1 &&
			value(fams, "informerkit_objects_cached", labels()) == 2 &&
			value(fams, "informerkit_informer_state", labels("state", "Synced")) == 1
	}, func() string {
		return fmt.Sprintf("wanted %v, objects %v, Synced %v", value(fams, "informerkit_informers_wanted", nil),
			value(fams, "informerkit_objects_cached", labels()), value(fams, "informerkit_informer_state", labels("state", "Synced")))
	})
	// The last one goes: the resource's gauges go, its counters stay.
	a.Release()
	var left []string
	waitFor(t, "a released and its gauges gone", func() bool {
		fams = scrape(t, httpClient, url)
		left = left[:0]
		for _, gauge := range []string{"informerkit_objects_cached", "informerkit_informer_state", "informerkit_last_sync_timestamp_seconds", "informerkit_informer_queued_items"} {
			if _, ok := sample(fams, gauge, labels()); ok {
				left = append(left, gauge)
			}
		}
		return value(fams, "informerkit_informers_wanted", nil) == 0 && len(left) == 0
	}, func() string { return fmt.Sprintf("series for widgets left: %v", left) })
	if got := value(fams, "informerkit_informer_events_total", labels("type", "ADDED")); got != 4 {
		t.Errorf("events after release: %v, want the 4 counted", got)
	}
	f.Shutdown()
	srv.Close()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("goroutines: %d before, %d after\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Failed requests are counted by reason (the adapter's side: what the
// library reports, it exposes).
func TestRequestErrorsByReason(t *testing.T) {
	m := New()
	in := m.NewInformer(metrics.Identity{GVR: widgets})
	in.Request("list", "Forbidden")
	in.Request("list", "Forbidden")
	in.Request("watch", "ConnectionError")
	in.Request("watch", "")
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		byName[f.GetName()] = f
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"informerkit_list_watch_requests_total", labels("verb", "list"), 2},
		{"informerkit_list_watch_requests_total", labels("verb", "watch"), 2},
		{"informerkit_list_watch_errors_total", labels("verb", "list", "reason", "Forbidden"), 2},
		{"informerkit_list_watch_errors_total", labels("verb", "watch", "reason", "ConnectionError"), 1},
	} {
		if got := value(byName, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}

// A sharded informer's drops (the server ignores the shard selector)
// reach the resource's counter.
func TestOutsideShard(t *testing.T) {
	m := New()
	in := m.NewInformer(metrics.Identity{GVR: widgets})
	in.OutsideShard(3)
	in.OutsideShard(2)
	got := testutil.ToFloat64(m.outsideShard.WithLabelValues(widgets.Group, widgets.Version, widgets.Resource))
	if got != 5 {
		t.Fatalf("informerkit_objects_outside_shard_total = %v, want 5", got)
	}
	in.State("Stopped")
}

// informers_wanted and informers_running follow from the informers'
// states alone: wanted from NewInformer to Stopped, running while
// Syncing, Synced or Stale, and an informer that moves to another version (the
// old one Stopped, the new one starting at its state) leaves both as
// they were.
func TestInformerCountsFromStates(t *testing.T) {
	m := New()
	counts := func() [2]float64 { return [2]float64{testutil.ToFloat64(m.wanted), testutil.ToFloat64(m.running)} }
	check := func(step string, want [2]float64) {
		t.Helper()
		if got := counts(); got != want {
			t.Fatalf("%s: wanted/running %v, want %v", step, got, want)
		}
	}
	a := m.NewInformer(metrics.Identity{GVR: widgets})
	a.State("Pending")
	b := m.NewInformer(metrics.Identity{GVR: widgets, Namespaces: []string{"x"}})
	b.State("Pending")
	check("two created", [2]float64{2, 0})
	a.State("Syncing")
	a.State("Synced")
	b.State("Syncing")
	check("both running", [2]float64{2, 2})
	a.State("Stale")
	check("one stale: still running", [2]float64{2, 2})
	stale := testutil.ToFloat64(m.state.WithLabelValues(widgets.Group, widgets.Version, widgets.Resource, "Stale"))
	synced := testutil.ToFloat64(m.state.WithLabelValues(widgets.Group, widgets.Version, widgets.Resource, "Synced"))
	if stale != 1 || synced != 0 {
		t.Fatalf("one stale: state Stale %v, Synced %v; want 1 and 0", stale, synced)
	}
	a.State("Synced")
	b.State("Failed")
	check("one failed", [2]float64{2, 1})
	// a moves to v2.
	a.State("Stopped")
	a2 := m.NewInformer(metrics.Identity{GVR: widgets.GroupResource().WithVersion("v2")})
	a2.State("Synced")
	check("after the move", [2]float64{2, 1})
	a.State("Synced") // after Stopped: ignored
	check("a call after Stopped", [2]float64{2, 1})
	a2.State("Stopped")
	b.State("Stopped")
	check("all stopped", [2]float64{0, 0})
}

func TestDiskSeries(t *testing.T) {
	m := New()
	in := m.NewInformer(metrics.Identity{GVR: widgets}).(metrics.DiskInformer)
	in.DiskStart("Cold", "another cluster", 0, 0)
	in.DiskStart("Resumed", "", 20, 90*time.Second)
	in.DiskWritten(100)
	in.DiskWritten(50)
	l := []string{widgets.Group, widgets.Version, widgets.Resource}
	for name, c := range map[string]struct{ got, want float64 }{
		"cold starts": {testutil.ToFloat64(m.diskStarts.WithLabelValues(append(l, "Cold", "another cluster")...)), 1},
		"resumed":     {testutil.ToFloat64(m.diskStarts.WithLabelValues(append(l, "Resumed", "")...)), 1},
		"restored":    {testutil.ToFloat64(m.diskRestored.WithLabelValues(l...)), 20},
		"age":         {testutil.ToFloat64(m.diskAge.WithLabelValues(l...)), 90},
		"bytes":       {testutil.ToFloat64(m.diskWritten.WithLabelValues(l...)), 150},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", name, c.got, c.want)
		}
	}
}
