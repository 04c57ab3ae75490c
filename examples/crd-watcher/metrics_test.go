package main

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/informerkit/informerkit/dynamicinformer"
)

func TestWriteMetrics(t *testing.T) {
	ct := schema.GroupVersionResource{Group: "stable.example.com", Version: "v1", Resource: "crontabs"}
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	gone := schema.GroupVersionResource{Group: "x.example.com", Version: "v1", Resource: `we"ird`}
	sts := []dynamicinformer.Status{
		{GVR: ct, State: dynamicinformer.Synced, Objects: 3},
		{GVR: pods, State: dynamicinformer.Synced, Objects: 2, Namespaces: []string{"a"}},
		{GVR: pods, State: dynamicinformer.Syncing, Objects: 1, Namespaces: []string{"b"}},
	}
	c := newCounters()
	c.inc(ct, "ADDED")
	c.inc(ct, "ADDED")
	c.inc(ct, "UPDATED")
	c.inc(gone, "DELETED") // events of a GVR whose informer is gone still count
	var b strings.Builder
	writeMetrics(&b, sts, c.snapshot())
	got := b.String()
	for _, want := range []string{
		"# TYPE informerkit_objects_cached gauge\n",
		"# TYPE informerkit_events_total counter\n",
		"# TYPE informerkit_informer_state gauge\n",
		`informerkit_objects_cached{group="stable.example.com",version="v1",resource="crontabs"} 3` + "\n",
		`informerkit_objects_cached{group="",version="v1",resource="pods"} 3` + "\n",
		`informerkit_events_total{group="stable.example.com",version="v1",resource="crontabs",type="ADDED"} 2` + "\n",
		`informerkit_events_total{group="stable.example.com",version="v1",resource="crontabs",type="UPDATED"} 1` + "\n",
		`informerkit_events_total{group="stable.example.com",version="v1",resource="crontabs",type="DELETED"} 0` + "\n",
		`informerkit_events_total{group="x.example.com",version="v1",resource="we\"ird",type="DELETED"} 1` + "\n",
		`informerkit_informer_state{group="stable.example.com",version="v1",resource="crontabs",state="Synced"} 1` + "\n",
		`informerkit_informer_state{group="stable.example.com",version="v1",resource="crontabs",state="Pending"} 0` + "\n",
		`informerkit_informer_state{group="",version="v1",resource="pods",state="Synced"} 1` + "\n",
		`informerkit_informer_state{group="",version="v1",resource="pods",state="Syncing"} 1` + "\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("metrics lack %q:\n%s", want, got)
		}
	}
	// Every sample line is "name{labels} value".
	for _, l := range strings.Split(strings.TrimSpace(got), "\n") {
		if strings.HasPrefix(l, "#") {
			continue
		}
		if i := strings.LastIndex(l, "} "); i < 0 || !strings.Contains(l[:i], "{") {
			t.Errorf("malformed sample line %q", l)
		}
	}
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
}
