package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/informerkit/informerkit/dynamicinformer"
)

// gvrString spells a GVR the way kubectl accepts it fully qualified:
// crontabs.v1.stable.example.com, pods.v1 (core group).
func gvrString(gvr schema.GroupVersionResource) string {
	if gvr.Group == "" {
		return gvr.Resource + "." + gvr.Version
	}
	return gvr.Resource + "." + gvr.Version + "." + gvr.Group
}

// jsonEvent is one line of -o json output for an object event. Field names
// are part of the tool's interface (README.md).
type jsonEvent struct {
	Time              string   `json:"time"`
	Type              string   `json:"type"`
	Group             string   `json:"group"`
	Version           string   `json:"version"`
	Resource          string   `json:"resource"`
	Namespace         string   `json:"namespace"`
	Name              string   `json:"name"`
	ResourceVersion   string   `json:"resourceVersion"`
	Initial           bool     `json:"initial,omitempty"`
	FinalStateUnknown bool     `json:"finalStateUnknown,omitempty"`
	Diff              []Change `json:"diff,omitempty"`
	Object            any      `json:"object,omitempty"`
}

// jsonStatus is one line of -o json output for an informer state change
// (and, with "final": true, for the status at exit).
type jsonStatus struct {
	Time          string   `json:"time"`
	Type          string   `json:"type"` // always "STATUS"
	Group         string   `json:"group"`
	Version       string   `json:"version"`
	Resource      string   `json:"resource"`
	State         string   `json:"state"`
	Reason        string   `json:"reason,omitempty"`
	Error         string   `json:"error,omitempty"`
	Objects       int      `json:"objects"`
	Namespaces    []string `json:"namespaces,omitempty"`
	LabelSelector string   `json:"labelSelector,omitempty"`
	FieldSelector string   `json:"fieldSelector,omitempty"`
	Final         bool     `json:"final,omitempty"`
}

// printer writes events to out and, in text mode, status lines to errOut.
// Every write is one whole line under a lock: lines from informers running
// concurrently never interleave.
type printer struct {
	mu         sync.Mutex
	out        io.Writer
	errOut     io.Writer
	json       bool
	showObject bool
	now        func() time.Time
}

func newPrinter(out, errOut io.Writer, jsonMode, showObject bool) *printer {
	return &printer{out: out, errOut: errOut, json: jsonMode, showObject: showObject, now: time.Now}
}

// objectOf unwraps what an informer hands to handlers.
func objectOf(obj any) (*unstructured.Unstructured, bool) {
	u, ok := obj.(*unstructured.Unstructured)
	return u, ok
}

func (p *printer) event(ev dynamicinformer.Event) {
	u, ok := objectOf(ev.Object)
	if !ok {
		return
	}
	var changes []Change
	if ev.Type == dynamicinformer.Updated {
		if old, ok := objectOf(ev.OldObject); ok {
			changes = Diff(old.Object, u.Object)
		}
	}
	now := p.now()
	if p.json {
		je := jsonEvent{
			Time: now.UTC().Format(time.RFC3339Nano), Type: string(ev.Type),
			Group: ev.GVR.Group, Version: ev.GVR.Version, Resource: ev.GVR.Resource,
			Namespace: u.GetNamespace(), Name: u.GetName(), ResourceVersion: u.GetResourceVersion(),
			Initial: ev.IsInitialList, FinalStateUnknown: ev.FinalStateUnknown, Diff: changes,
		}
		if p.showObject {
			je.Object = u.Object
		}
		p.writeJSON(je)
		return
	}
	key := u.GetName()
	if ns := u.GetNamespace(); ns != "" {
		key = ns + "/" + key
	}
	var detail string
	switch {
	case ev.Type == dynamicinformer.Updated && len(changes) == 0:
		detail = "(no change)"
	case ev.Type == dynamicinformer.Updated:
		detail = FormatChanges(changes, 60)
	case ev.IsInitialList:
		detail = "(initial list)"
	case ev.FinalStateUnknown:
		detail = "(final state unknown)"
	}
	line := fmt.Sprintf("%s %-7s %s %s", now.Format("15:04:05.000"), ev.Type, gvrString(ev.GVR), key)
	if detail != "" {
		line += "  " + detail
	}
	p.writeLine(p.out, line)
}

func (p *printer) status(st dynamicinformer.Status, prev dynamicinformer.State, final bool) {
	now := p.now()
	if p.json {
		js := jsonStatus{
			Time: now.UTC().Format(time.RFC3339Nano), Type: "STATUS",
			Group: st.GVR.Group, Version: st.GVR.Version, Resource: st.GVR.Resource,
			State: string(st.State), Reason: st.Reason, Objects: st.Objects,
			Namespaces: st.Namespaces, LabelSelector: st.LabelSelector, FieldSelector: st.FieldSelector,
			Final: final,
		}
		if st.Err != nil {
			js.Error = st.Err.Error()
		}
		p.writeJSON(js)
		return
	}
	if final {
		return // the status table says it at exit
	}
	line := fmt.Sprintf("%s STATUS  %s ", now.Format("15:04:05.000"), gvrString(st.GVR))
	if prev != "" && prev != st.State {
		line += string(prev) + " → "
	}
	line += fmt.Sprintf("%s (%d objects)", st.State, st.Objects)
	if st.Reason != "" {
		line += ": " + st.Reason
	}
	if st.Err != nil && !strings.Contains(st.Err.Error(), st.Reason) {
		line += " [" + st.Err.Error() + "]"
	}
	p.writeLine(p.errOut, line)
}

// info writes a human-readable note to stderr (both modes).
func (p *printer) info(format string, args ...any) {
	p.writeLine(p.errOut, fmt.Sprintf(format, args...))
}

func (p *printer) writeJSON(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(map[string]string{"type": "ERROR", "error": err.Error()})
	}
	p.writeLine(p.out, string(b))
}

func (p *printer) writeLine(w io.Writer, line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, _ = io.WriteString(w, line+"\n")
}

// statusTable renders the informers' statuses with event counts.
func (p *printer) statusTable(title string, sts []dynamicinformer.Status, counts map[schema.GroupVersionResource]map[string]uint64) {
	var b strings.Builder
	fmt.Fprintf(&b, "--- %s (%s) ---\n", title, p.now().Format("15:04:05"))
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RESOURCE\tSTATE\tOBJECTS\tADDED\tUPDATED\tDELETED\tFOR\tREASON")
	sort.Slice(sts, func(i, j int) bool { return gvrString(sts[i].GVR) < gvrString(sts[j].GVR) })
	for _, st := range sts {
		c := counts[st.GVR]
		reason := st.Reason
		if st.Err != nil && !strings.Contains(st.Err.Error(), reason) {
			reason = strings.TrimSpace(reason + " " + st.Err.Error())
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\n", gvrString(st.GVR), st.State, st.Objects,
			c["ADDED"], c["UPDATED"], c["DELETED"], p.now().Sub(st.Since).Round(time.Second), reason)
	}
	if len(sts) == 0 {
		fmt.Fprintln(tw, "(no informers)")
	}
	_ = tw.Flush()
	p.writeLine(p.errOut, strings.TrimRight(b.String(), "\n"))
}
