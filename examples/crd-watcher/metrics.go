package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/informerkit/informerkit/dynamicinformer"
)

var allStates = []dynamicinformer.State{
	dynamicinformer.Pending, dynamicinformer.Syncing, dynamicinformer.Synced,
	dynamicinformer.Removed, dynamicinformer.Failed, dynamicinformer.Stopped,
}

var eventTypes = []string{string(dynamicinformer.Added), string(dynamicinformer.Updated), string(dynamicinformer.Deleted)}

// counters counts events per GVR and type.
type counters struct {
	mu sync.Mutex
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

// writeMetrics writes the Prometheus text exposition format (version 0.0.4)
// by hand: per GVR the cached object count, event counters by type, and a
// 0/1 gauge per informer state. Several informers of one GVR (different
// selectors) add up in objects_cached; the state gauge shows each state any
// of them is in.
func writeMetrics(w io.Writer, sts []dynamicinformer.Status, counts map[schema.GroupVersionResource]map[string]uint64) {
	objects := map[schema.GroupVersionResource]int{}
	states := map[schema.GroupVersionResource]map[dynamicinformer.State]bool{}
	gvrs := map[schema.GroupVersionResource]bool{}
	for _, st := range sts {
		gvrs[st.GVR] = true
		objects[st.GVR] += st.Objects
		if states[st.GVR] == nil {
			states[st.GVR] = map[dynamicinformer.State]bool{}
		}
		states[st.GVR][st.State] = true
	}
	for gvr := range counts {
		gvrs[gvr] = true
	}
	sorted := make([]schema.GroupVersionResource, 0, len(gvrs))
	for gvr := range gvrs {
		sorted = append(sorted, gvr)
	}
	sort.Slice(sorted, func(i, j int) bool { return gvrString(sorted[i]) < gvrString(sorted[j]) })

	fmt.Fprintln(w, "# HELP informerkit_objects_cached Objects in the informer cache.")
	fmt.Fprintln(w, "# TYPE informerkit_objects_cached gauge")
	for _, gvr := range sorted {
		fmt.Fprintf(w, "informerkit_objects_cached{%s} %d\n", gvrLabels(gvr), objects[gvr])
	}
	fmt.Fprintln(w, "# HELP informerkit_events_total Events delivered to the watcher, by type.")
	fmt.Fprintln(w, "# TYPE informerkit_events_total counter")
	for _, gvr := range sorted {
		for _, t := range eventTypes {
			fmt.Fprintf(w, "informerkit_events_total{%s,type=%q} %d\n", gvrLabels(gvr), t, counts[gvr][t])
		}
	}
	fmt.Fprintln(w, "# HELP informerkit_informer_state 1 if the informer of the resource is in this state, else 0.")
	fmt.Fprintln(w, "# TYPE informerkit_informer_state gauge")
	for _, gvr := range sorted {
		for _, s := range allStates {
			v := 0
			if states[gvr][s] {
				v = 1
			}
			fmt.Fprintf(w, "informerkit_informer_state{%s,state=%q} %d\n", gvrLabels(gvr), string(s), v)
		}
	}
}

// writeContactMetrics writes whether the API server is in contact and
// when it last answered.
func writeContactMetrics(w io.Writer, contactErr error, last time.Time) {
	up := 1
	if contactErr != nil {
		up = 0
	}
	fmt.Fprintln(w, "# HELP informerkit_server_contact 1 while the API server answers the watcher, 0 while it cannot be reached.")
	fmt.Fprintln(w, "# TYPE informerkit_server_contact gauge")
	fmt.Fprintf(w, "informerkit_server_contact %d\n", up)
	fmt.Fprintln(w, "# HELP informerkit_server_last_contact_timestamp_seconds When the API server last answered the watcher (Unix time).")
	fmt.Fprintln(w, "# TYPE informerkit_server_last_contact_timestamp_seconds gauge")
	fmt.Fprintf(w, "informerkit_server_last_contact_timestamp_seconds %.3f\n", float64(last.UnixMilli())/1000)
}

func gvrLabels(gvr schema.GroupVersionResource) string {
	return fmt.Sprintf(`group="%s",version="%s",resource="%s"`, escapeLabel(gvr.Group), escapeLabel(gvr.Version), escapeLabel(gvr.Resource))
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func escapeLabel(s string) string { return labelEscaper.Replace(s) }

// ready reports whether the watcher is ready: the API server is in
// contact (contactErr nil) and every informer is Synced, or Removed (its
// resource is gone: nothing to wait for). Pending, Syncing, Failed (it
// retries and may recover) and Stopped are not ready. The second result
// lists what it waits for.
func ready(sts []dynamicinformer.Status, contactErr error) (bool, []string) {
	var waiting []string
	if contactErr != nil {
		waiting = append(waiting, "no contact with the API server: "+contactErr.Error())
	}
	for _, st := range sts {
		switch st.State {
		case dynamicinformer.Synced, dynamicinformer.Removed:
		default:
			w := gvrString(st.GVR) + " " + string(st.State)
			if d := statusDetail(st); d != "" {
				w += " (" + d + ")"
			}
			waiting = append(waiting, w)
		}
	}
	return len(waiting) == 0, waiting
}

// health is what the metrics server reads from the watcher.
type health struct {
	statuses    func() []dynamicinformer.Status
	counts      *counters
	contactErr  func([]dynamicinformer.Status) error
	lastContact func([]dynamicinformer.Status) time.Time
}

// metricsServer serves /metrics, /healthz and /readyz.
type metricsServer struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

func startMetrics(addr string, h health) (*metricsServer, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		sts := h.statuses()
		writeMetrics(w, sts, h.counts.snapshot())
		writeContactMetrics(w, h.contactErr(sts), h.lastContact(sts))
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		sts := h.statuses()
		ok, waiting := ready(sts, h.contactErr(sts))
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not ready: %s\n", strings.Join(waiting, ", "))
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	m := &metricsServer{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, ln: ln, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		_ = m.srv.Serve(ln)
	}()
	return m, nil
}

func (m *metricsServer) Addr() string { return m.ln.Addr().String() }

func (m *metricsServer) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = m.srv.Shutdown(ctx)
	<-m.done
}
