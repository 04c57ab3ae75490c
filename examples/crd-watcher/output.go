package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/subscription"
)

// jsonEvent is one line of -o json output for an object event. Field names
// are part of the tool's interface (README.md).
type jsonEvent struct {
	Time              string   `json:"time"`
	Type              string   `json:"type"`
	Cluster           string   `json:"cluster,omitempty"` // the kubeconfig context, when watching several
	Group             string   `json:"group"`
	Version           string   `json:"version"`
	Resource          string   `json:"resource"`
	Namespace         string   `json:"namespace"`
	Name              string   `json:"name"`
	ResourceVersion   string   `json:"resourceVersion"`
	Initial           bool     `json:"initial,omitempty"`
	FinalStateUnknown bool     `json:"finalStateUnknown,omitempty"`
	NoLongerMatches   bool     `json:"noLongerMatches,omitempty"`
	Diff              []Change `json:"diff,omitempty"`
	// IgnoredChanges, Terminating and Finalizers: see update (diff.go).
	IgnoredChanges int      `json:"ignoredChanges,omitempty"`
	Terminating    bool     `json:"terminating,omitempty"`
	Finalizers     []string `json:"finalizers,omitempty"`
	Object         any      `json:"object,omitempty"`
}

// jsonStatus is one line of -o json output for an informer state change
// (and, with "final": true, for the status at exit).
type jsonStatus struct {
	Time          string   `json:"time"`
	Type          string   `json:"type"` // always "STATUS"
	Cluster       string   `json:"cluster,omitempty"`
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
	// Shard is the informer's shard selector ("" when not sharded),
	// ShardFraction the part of the keyspace it covers, OutsideShard the
	// objects the server sent outside it (> 0: the server ignores shard
	// selectors and the watcher filters them itself).
	Shard         string   `json:"shard,omitempty"`
	ShardFraction *float64 `json:"shardFraction,omitempty"`
	OutsideShard  int64    `json:"outsideShard,omitempty"`
	// Permitted and NotPermitted (--permitted-namespaces) are the
	// namespaces watched ([""]: all) and the others, each with why (the
	// missing verbs: "may not list, watch", or the server's refusal).
	Permitted    []string          `json:"permitted,omitempty"`
	NotPermitted map[string]string `json:"notPermitted,omitempty"`
	// NextAccessCheck is when the namespaces are checked again (RFC 3339;
	// --permitted-namespaces, or a namespace denied): a grant or a
	// revocation made before it shows after it.
	NextAccessCheck string `json:"nextAccessCheck,omitempty"`
	// Restored is how many objects the informer restored from
	// --cache-dir when it started (0: a cold start); CacheError why the
	// cache directory is not used for it (the informer works from the
	// server meanwhile).
	Restored   int    `json:"restored,omitempty"`
	CacheError string `json:"cacheError,omitempty"`
	Final      bool   `json:"final,omitempty"`
}

// jsonShardGroup is one line of -o json output when the shard group, as
// this replica sees it, changes (--shard-group).
type jsonShardGroup struct {
	Time      string   `json:"time"`
	Type      string   `json:"type"` // always "SHARD"
	Group     string   `json:"group"`
	Namespace string   `json:"namespace"`
	Identity  string   `json:"identity"`
	Members   []string `json:"members"`
	Fraction  float64  `json:"fraction"`
	Ranges    int      `json:"ranges"`
	Selector  string   `json:"selector"`
}

// jsonContact is one line of -o json output when contact with the API
// server is lost or restored.
type jsonContact struct {
	Time        string  `json:"time"`
	Type        string  `json:"type"` // always "CONTACT"
	Cluster     string  `json:"cluster,omitempty"`
	Server      string  `json:"server"`
	Contact     bool    `json:"contact"`
	Error       string  `json:"error,omitempty"`
	DownSeconds float64 `json:"downSeconds,omitempty"`
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

	ignorePaths []string // --ignore-paths: changes under these are not shown

	// clusterWidth, above 0 when watching several contexts (a fleet), is
	// the width of the CLUSTER column of text lines.
	clusterWidth int
}

// clusterCell is the CLUSTER column of a text line ("" outside a fleet).
func (p *printer) clusterCell(cluster string) string {
	if p.clusterWidth == 0 {
		return ""
	}
	return fmt.Sprintf("%-*s ", p.clusterWidth, cluster)
}

func newPrinter(out, errOut io.Writer, jsonMode, showObject bool) *printer {
	return &printer{out: out, errOut: errOut, json: jsonMode, showObject: showObject, now: time.Now}
}

// objectOf unwraps what an informer hands to handlers.
func objectOf(obj any) (*unstructured.Unstructured, bool) {
	u, ok := obj.(*unstructured.Unstructured)
	return u, ok
}

// inlineChanges is how many changes an UPDATED line holds on the line
// itself; more go one per line below it, indented.
const inlineChanges = 3

// maxValueLen is how much of a value a diff shows before cutting it.
const maxValueLen = 80

// event prints one object event. unmatched, for a DELETED of an object
// that still exists, is the selector it no longer matches.
func (p *printer) event(ev subscription.Event, unmatched string) {
	p.eventIn("", ev, unmatched)
}

// eventIn prints one object event of cluster ("" outside a fleet).
func (p *printer) eventIn(cluster string, ev subscription.Event, unmatched string) {
	u, ok := objectOf(ev.Object)
	if !ok {
		return
	}
	var upd update
	if ev.Type == subscription.Updated {
		if old, ok := objectOf(ev.OldObject); ok {
			upd = diffUpdate(old.Object, u.Object, p.ignorePaths)
		}
	}
	now := p.now()
	if p.json {
		je := jsonEvent{
			Time: now.UTC().Format(time.RFC3339Nano), Type: string(ev.Type), Cluster: cluster,
			Group: ev.GVR.Group, Version: ev.GVR.Version, Resource: ev.GVR.Resource,
			Namespace: u.GetNamespace(), Name: u.GetName(), ResourceVersion: u.GetResourceVersion(),
			Initial: ev.IsInitialList, FinalStateUnknown: ev.FinalStateUnknown, NoLongerMatches: unmatched != "",
			Diff: upd.Changes, IgnoredChanges: upd.Ignored, Terminating: upd.Terminating, Finalizers: upd.Finalizers,
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
	case ev.Type == subscription.Updated:
		detail = upd.text(inlineChanges, maxValueLen)
	case unmatched != "":
		detail = fmt.Sprintf("(no longer matches the selector %s; the object still exists)", unmatched)
	case ev.IsInitialList:
		detail = "(initial list)"
	case ev.FinalStateUnknown:
		detail = "(final state unknown)"
	}
	line := fmt.Sprintf("%s %-7s %s%s %s", now.Format("15:04:05.000"), ev.Type, p.clusterCell(cluster), gvrString(ev.GVR), key)
	if detail != "" {
		line += "  " + detail
	}
	p.writeLine(p.out, line)
}

// statusDetail says why an informer is in its state: the library's reason
// and, where the API server answered, the server's own words (who was
// refused what: `configmaps is forbidden: User "alice" cannot list
// resource "configmaps" in API group "" at the cluster scope`); for a
// several-namespace informer with some namespaces denied, each of those
// with its reason (deniedText).
func statusDetail(st dynamicinformer.Status) string {
	detail := st.Reason
	if st.Err == nil {
		return detail
	}
	var status apierrors.APIStatus
	cause := st.Err.Error()
	if errors.Is(st.Err, dynamicinformer.ErrNoNamespaces) {
		// --permitted-namespaces without -n, for a user who may not list
		// namespaces: the server's 403 alone does not say what to do.
		cause = "this user may not list namespaces: name the candidate namespaces with -n"
		if errors.As(st.Err, &status) && status.Status().Message != "" {
			cause += " (" + status.Status().Message + ")"
		}
	} else if deniedNamespaces(st) {
		// The library's Err names the denied namespaces and only the
		// first one's reason: say each namespace's reason, from Denied.
		cause = deniedText(st)
	} else if errors.As(st.Err, &status) && status.Status().Message != "" {
		cause = status.Status().Message
	} else {
		var ie *dynamicinformer.InformerError
		if errors.As(st.Err, &ie) && ie.Err != nil {
			cause = innermost(ie.Err).Error()
		}
	}
	if strings.Contains(detail, cause) {
		return detail
	}
	if detail == "" {
		return cause
	}
	return detail + ": " + cause
}

// deniedNamespaces reports whether st.Err is the denial of some of a
// several-namespace informer's namespaces (Status.Denied), the others
// listed: not a failure of the informer's own.
func deniedNamespaces(st dynamicinformer.Status) bool {
	if len(st.Denied) == 0 || !errors.Is(st.Err, dynamicinformer.ErrForbidden) {
		return false
	}
	switch st.State {
	case dynamicinformer.Restored, dynamicinformer.Syncing, dynamicinformer.Synced, dynamicinformer.Stale:
		return true
	}
	return false
}

// notAnError: the informer's Err says a resource is not served — it was
// removed (a CRD deleted) or is waited for (a CRD not installed yet).
// That is its state and reason, not an error of the watcher's.
func notAnError(st dynamicinformer.Status) bool {
	return (st.State == dynamicinformer.Removed || st.State == dynamicinformer.Pending) && errors.Is(st.Err, dynamicinformer.ErrNotServed)
}

// status prints an informer's state change; prev is the state last
// printed for it ("" if none).
func (p *printer) status(st dynamicinformer.Status, prev dynamicinformer.State) {
	p.statusLine("", st, prev, false)
}

// finalStatus prints, in JSON mode, an informer's last state at exit (in
// text mode the final status table says it).
func (p *printer) finalStatus(st dynamicinformer.Status) {
	if p.json {
		p.statusLine("", st, "", true)
	}
}

// statusLine prints an informer's state (of cluster: "" outside a fleet).
func (p *printer) statusLine(cluster string, st dynamicinformer.Status, prev dynamicinformer.State, final bool) {
	now := p.now()
	if p.json {
		js := jsonStatus{
			Time: now.UTC().Format(time.RFC3339Nano), Type: "STATUS", Cluster: cluster,
			Group: st.GVR.Group, Version: st.GVR.Version, Resource: st.GVR.Resource,
			State: string(st.State), Reason: st.Reason, Objects: st.Objects,
			Namespaces: st.Namespaces, LabelSelector: st.LabelSelector, FieldSelector: st.FieldSelector,
			Shard: st.Shard, OutsideShard: st.OutsideShard, Final: final, Restored: st.Restored,
		}
		if st.CacheErr != nil {
			js.CacheError = st.CacheErr.Error()
		}
		if f, _, _, ok := selectorSummary(st.Shard); ok {
			js.ShardFraction = &f
		}
		js.Permitted = st.Permitted
		if next := nextAccessCheck(st); !next.IsZero() {
			js.NextAccessCheck = next.UTC().Format(time.RFC3339)
		}
		if len(st.NotPermitted) > 0 {
			js.NotPermitted = make(map[string]string, len(st.NotPermitted))
			for ns, why := range st.NotPermitted {
				js.NotPermitted[ns] = notPermittedReason(why)
			}
		}
		if st.Err != nil && !notAnError(st) {
			js.Error = statusDetail(st)
		} else if st.Err != nil && js.Reason == "" {
			js.Reason = statusDetail(st)
		}
		p.writeJSON(js)
		return
	}
	line := fmt.Sprintf("%s STATUS  %s%s ", now.Format("15:04:05.000"), p.clusterCell(cluster), gvrString(st.GVR))
	if prev != "" && prev != st.State {
		line += string(prev) + " → "
	}
	if st.Shard != "" {
		line += fmt.Sprintf("%s (%d objects, shard %s)", st.State, st.Objects, shardCell(st.Shard))
	} else {
		line += fmt.Sprintf("%s (%d objects)", st.State, st.Objects)
	}
	if d := statusDetail(st); d != "" {
		line += ": " + d
	}
	if s := scopeText(st); s != "" {
		line += "; " + s
	}
	if next := nextAccessCheck(st); !next.IsZero() {
		// Not part of what makes a line news (transitions.take): the time
		// moves at every check.
		line += "; next access check at " + next.Local().Format("15:04:05")
	}
	if s := cacheText(st); s != "" {
		line += "; " + s
	}
	p.writeLine(p.errOut, line)
}

// nextAccessCheck is when the namespaces of st are checked again, for
// an informer whose access is checked (--permitted-namespaces, or some
// namespace denied); zero otherwise.
func nextAccessCheck(st dynamicinformer.Status) time.Time {
	if st.Permitted == nil && len(st.Denied) == 0 {
		return time.Time{}
	}
	return st.NextAccessCheck
}

// cacheText says what --cache-dir did for the informer: how many objects
// it restored, or why the directory is not used.
func cacheText(st dynamicinformer.Status) string {
	var parts []string
	if st.Restored > 0 {
		parts = append(parts, fmt.Sprintf("%d restored from disk", st.Restored))
	}
	if st.CacheErr != nil {
		parts = append(parts, st.CacheErr.Error())
	}
	return strings.Join(parts, "; ")
}

// contact reports that contact with the API server at server was lost
// (text says why) or restored (text "", down is how long it was lost):
// a line on stderr in both modes, and a CONTACT record in JSON mode.
func (p *printer) contact(server, text string, down time.Duration) {
	p.contactIn("", server, text, down)
}

// contactIn is contact for the API server of cluster ("" outside a fleet).
func (p *printer) contactIn(cluster, server, text string, down time.Duration) {
	now := p.now()
	if text != "" {
		p.writeLine(p.errOut, fmt.Sprintf("%s CONTACT %slost: %s", now.Format("15:04:05.000"), p.clusterCell(cluster), text))
	} else {
		p.writeLine(p.errOut, fmt.Sprintf("%s CONTACT %srestored: the API server at %s answers again (after %s)", now.Format("15:04:05.000"), p.clusterCell(cluster), server, roundDuration(down)))
	}
	if p.json {
		p.writeJSON(jsonContact{
			Time: now.UTC().Format(time.RFC3339Nano), Type: "CONTACT", Cluster: cluster, Server: server,
			Contact: text == "", Error: text, DownSeconds: down.Seconds(),
		})
	}
}

// shardGroup reports the shard group as this replica now sees it: a
// line on stderr in both modes, and a SHARD record in JSON mode.
func (p *printer) shardGroup(v groupView) {
	now := p.now()
	p.writeLine(p.errOut, fmt.Sprintf("%s SHARD   %s", now.Format("15:04:05.000"), v))
	if p.json {
		p.writeJSON(jsonShardGroup{
			Time: now.UTC().Format(time.RFC3339Nano), Type: "SHARD", Group: v.Group, Namespace: v.Namespace,
			Identity: v.Identity, Members: v.Members, Fraction: v.Shard.Size(), Ranges: len(v.Shard.Ranges()),
			Selector: v.Shard.Selector(),
		})
	}
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

// statusTable renders the informers' statuses with event counts; server,
// when not empty, is a line about contact with the API server printed
// under the title, and group one about the shard group. When an informer
// is sharded, a SHARD column says how much of the keyspace each holds and
// the selectors follow the table (each distinct one once).
func (p *printer) statusTable(title, server, group string, sts []dynamicinformer.Status, counts map[schema.GroupVersionResource]map[string]uint64) {
	var b strings.Builder
	fmt.Fprintf(&b, "--- %s (%s) ---\n", title, p.now().Format("15:04:05"))
	if server != "" {
		b.WriteString(server + "\n")
	}
	if group != "" {
		b.WriteString(group + "\n")
	}
	sharded := false
	for _, st := range sts {
		sharded = sharded || st.Shard != ""
	}
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	if sharded {
		fmt.Fprintln(tw, "RESOURCE\tSTATE\tOBJECTS\tSHARD\tADDED\tUPDATED\tDELETED\tFOR\tREASON")
	} else {
		fmt.Fprintln(tw, "RESOURCE\tSTATE\tOBJECTS\tADDED\tUPDATED\tDELETED\tFOR\tREASON")
	}
	sort.Slice(sts, func(i, j int) bool { return gvrString(sts[i].GVR) < gvrString(sts[j].GVR) })
	var selectors []string // distinct, in table order
	for _, st := range sts {
		c := counts[st.GVR]
		reason := statusDetail(st)
		shardCol := ""
		if sharded {
			shardCol = shardCell(st.Shard) + "\t"
			if st.Shard != "" && !slices.Contains(selectors, st.Shard) {
				selectors = append(selectors, st.Shard)
			}
			if st.OutsideShard > 0 && reason == "" {
				reason = fmt.Sprintf("the server sent %d objects outside the shard (filtered here)", st.OutsideShard)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s%d\t%d\t%d\t%s\t%s\n", gvrString(st.GVR), st.State, st.Objects, shardCol,
			c["ADDED"], c["UPDATED"], c["DELETED"], p.now().Sub(st.Since).Round(time.Second), reason)
	}
	if len(sts) == 0 {
		fmt.Fprintln(tw, "(no informers)")
	}
	_ = tw.Flush()
	for _, sel := range selectors {
		var names []string
		for _, st := range sts {
			if st.Shard == sel {
				names = append(names, gvrString(st.GVR))
			}
		}
		fmt.Fprintf(&b, "shard selector of %s: %s\n", strings.Join(names, ", "), sel)
	}
	p.writeLine(p.errOut, strings.TrimRight(b.String(), "\n"))
}
