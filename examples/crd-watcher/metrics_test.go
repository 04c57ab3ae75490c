package main

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/prometheusmetrics"
)

// /metrics, scraped over HTTP and parsed with Prometheus's own text
// parser: the library's informer metrics (a real factory's informer on a
// fake client), the events the watcher printed (a GVR whose informer is
// gone still counts; label values are escaped), and contact with the API
// server.
func TestMetricsEndpoint(t *testing.T) {
	ct := schema.GroupVersionResource{Group: "stable.example.com", Version: "v1", Resource: "crontabs"}
	gone := schema.GroupVersionResource{Group: "x.example.com", Version: "v1", Resource: `we"ird`}
	cronTab := func(name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "stable.example.com/v1", "kind": "CronTab",
			"metadata": map[string]interface{}{"name": name, "namespace": "a", "resourceVersion": "7"},
		}}
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{ct: "CronTabList"}, cronTab("c1"), cronTab("c2"), cronTab("c3"))
	pm := prometheusmetrics.New()
	f := dynamicinformer.NewSharedInformerFactory(client, dynamicinformer.Options{DisableCRDTracking: true, Metrics: pm})
	defer f.Shutdown()
	f.ForResource(ct)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	f.Start(ctx)
	f.WaitForCacheSync(ctx)

	c := newCounters()
	c.inc(ct, "ADDED")
	c.inc(ct, "ADDED")
	c.inc(ct, "UPDATED")
	c.inc(gone, "DELETED")
	var contactErr atomic.Pointer[error]
	last := time.Unix(1700000000, 500_000_000)
	m, err := startMetrics("127.0.0.1:0", health{
		informers: pm, statuses: f.Statuses, counts: c,
		contactErr: func([]dynamicinformer.Status) error {
			if e := contactErr.Load(); e != nil {
				return *e
			}
			return nil
		},
		lastContact: func([]dynamicinformer.Status) time.Time { return last },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	url := "http://" + m.Addr() + "/metrics"
	gvr := func(g schema.GroupVersionResource, kv ...string) map[string]string {
		l := map[string]string{"group": g.Group, "version": g.Version, "resource": g.Resource}
		for i := 0; i+1 < len(kv); i += 2 {
			l[kv[i]] = kv[i+1]
		}
		return l
	}
	var fams map[string]*dto.MetricFamily
	deadline := time.Now().Add(20 * time.Second)
	for {
		fams = scrapeMetrics(t, url)
		if metricValue(fams, "informerkit_objects_cached", gvr(ct)) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("objects_cached never 3: %v", fams["informerkit_objects_cached"])
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, want := range []struct {
		name   string
		labels map[string]string
		value  float64
	}{
		{"informerkit_informer_state", gvr(ct, "state", "Synced"), 1},
		{"informerkit_informer_state", gvr(ct, "state", "Pending"), 0},
		{"informerkit_events_total", gvr(ct, "type", "ADDED"), 2},
		{"informerkit_events_total", gvr(ct, "type", "UPDATED"), 1},
		{"informerkit_events_total", gvr(ct, "type", "DELETED"), 0},
		{"informerkit_events_total", gvr(gone, "type", "DELETED"), 1},
		{"informerkit_informer_events_total", gvr(ct, "type", "ADDED"), 3},
		{"informerkit_server_contact", nil, 1},
		{"informerkit_server_last_contact_timestamp_seconds", nil, 1700000000.5},
		{"informerkit_informers_running", nil, 1},
		{"informerkit_build_info", map[string]string{"version": buildInfo().Version, "go_version": buildInfo().GoVersion, "client_go_version": buildInfo().ClientGo}, 1},
	} {
		if got := metricValue(fams, want.name, want.labels); got != want.value {
			t.Errorf("%s%v = %v, want %v", want.name, want.labels, got, want.value)
		}
	}
	if got := buildInfo(); got.GoVersion == "" || got.ClientGo == "" || got.Version == "" {
		t.Errorf("build info %+v has an empty label", got)
	}
	if fams["informerkit_events_total"].GetType() != dto.MetricType_COUNTER || fams["informerkit_objects_cached"].GetType() != dto.MetricType_GAUGE {
		t.Errorf("types: events %v, objects %v; want counter, gauge", fams["informerkit_events_total"].GetType(), fams["informerkit_objects_cached"].GetType())
	}
	down := errors.New("connection refused")
	contactErr.Store(&down)
	if got := metricValue(scrapeMetrics(t, url), "informerkit_server_contact", nil); got != 0 {
		t.Errorf("informerkit_server_contact with the server gone = %v, want 0", got)
	}
}

// scrapeMetrics GETs url and parses it with Prometheus's text parser.
func scrapeMetrics(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return fams
}

// metricValue is the value of the sample of name whose labels include
// want (-1: none).
func metricValue(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	f := fams[name]
	if f == nil {
		return -1
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
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Untyped != nil:
			return m.Untyped.GetValue()
		}
	}
	return -1
}

// Ready means every informer is Synced and the API server answers, or the
// informer's resource is gone (Removed). A Failed informer (it retries and
// may recover: forbidden until a role is bound) and lost contact are not
// ready.
func TestReady(t *testing.T) {
	gvr := func(r string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Version: "v1", Resource: r}
	}
	ok, waiting := ready([]dynamicinformer.Status{
		{GVR: gvr("a"), State: dynamicinformer.Synced},
		{GVR: gvr("b"), State: dynamicinformer.Removed},
	}, nil)
	if !ok || len(waiting) != 0 {
		t.Errorf("synced/removed informers: ready = %v %v, want true", ok, waiting)
	}
	ok, waiting = ready([]dynamicinformer.Status{
		{GVR: gvr("a"), State: dynamicinformer.Synced},
		{GVR: gvr("p"), State: dynamicinformer.Pending},
		{GVR: gvr("s"), State: dynamicinformer.Syncing},
		{GVR: gvr("f"), State: dynamicinformer.Failed, Reason: "forbidden", Err: errors.New("forbidden")},
		{GVR: gvr("x"), State: dynamicinformer.Stopped},
	}, nil)
	if ok || strings.Join(waiting, ",") != "p.v1 Pending,s.v1 Syncing,f.v1 Failed (forbidden),x.v1 Stopped" {
		t.Errorf("pending/syncing/failed/stopped informers: ready = %v %q, want false naming p, s, f and x", ok, waiting)
	}
	ok, waiting = ready([]dynamicinformer.Status{{GVR: gvr("a"), State: dynamicinformer.Synced}}, errors.New("connection refused"))
	if ok || len(waiting) != 1 || !strings.Contains(waiting[0], "no contact with the API server: connection refused") {
		t.Errorf("synced informer, server gone: ready = %v %q, want false", ok, waiting)
	}
	// A Stale informer is not ready; the contact line says why once.
	stale := dynamicinformer.Status{GVR: gvr("a"), State: dynamicinformer.Stale, Reason: "no contact with the API server: connection refused"}
	ok, waiting = ready([]dynamicinformer.Status{stale, {GVR: gvr("b"), State: dynamicinformer.Stale, Reason: stale.Reason}}, errors.New("connection refused"))
	if ok || len(waiting) != 1 || !strings.Contains(waiting[0], "no contact with the API server: connection refused") {
		t.Errorf("stale informers, server gone: ready = %v %q, want false with one contact line", ok, waiting)
	}
	ok, waiting = ready([]dynamicinformer.Status{stale}, nil)
	if ok || strings.Join(waiting, ",") != "a.v1 Stale (no contact with the API server: connection refused)" {
		t.Errorf("stale informer: ready = %v %q, want false naming it", ok, waiting)
	}
	// A Synced informer with a denied namespace is not ready; it says
	// which and why. Namespaces not permitted (WithPermittedNamespaces) do
	// not count.
	ok, waiting = ready([]dynamicinformer.Status{
		{GVR: gvr("cm"), State: dynamicinformer.Synced, Denied: map[string]string{"team-a": "may not list, watch"}},
		{GVR: gvr("p"), State: dynamicinformer.Synced, Permitted: []string{"a"}, NotPermitted: map[string]string{"b": "may not list"}},
	}, nil)
	if ok || strings.Join(waiting, ",") != "cm.v1 denied in namespace team-a: may not list, watch" {
		t.Errorf("synced informer with a denied namespace: ready = %v %q, want false naming it", ok, waiting)
	}
}
