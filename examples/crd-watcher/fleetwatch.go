package main

// Watching a fleet: several kubeconfig contexts (--context a,b or
// --all-contexts) held as one cache by informerkit's fleet package. Every
// event, STATUS and CONTACT line names its context: a CLUSTER column in
// text, "cluster" in -o json. One context is the single-cluster watcher
// (watcher.go), whose output does not change.

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/fleet"
	"github.com/informerkit/informerkit/subscription"
)

// fleet reports whether c watches several contexts as one fleet.
func (c *Config) fleet() bool { return len(c.Contexts) > 1 || c.AllContexts }

// validateFleet refuses, with several contexts, what the fleet watcher
// does not do (yet).
func validateFleet(c *Config) error {
	if c.AllContexts && (c.Context != "" || len(c.Contexts) > 0) {
		return usagef("--all-contexts and --context are mutually exclusive")
	}
	if !c.fleet() {
		return nil
	}
	for _, f := range []struct {
		flag string
		set  bool
	}{
		{"--all", c.All}, {"--shard", c.Shard != ""}, {"--shard-group", c.ShardGroup != ""},
		{"--metrics-addr", c.MetricsAddr != ""}, {"--cache-dir", c.CacheDir != ""},
		{"--permitted-namespaces", c.PermittedNamespaces},
	} {
		if f.set {
			return usagef("%s is not supported with several contexts (--context a,b or --all-contexts) yet", f.flag)
		}
	}
	return nil
}

// fleetKubeconfig is the one kubeconfig file a fleet's contexts are read
// from: --kubeconfig, else $KUBECONFIG (one file), else ~/.kube/config.
func fleetKubeconfig(c *Config, getenv func(string) string) (string, error) {
	if c.Kubeconfig != "" {
		return c.Kubeconfig, nil
	}
	if env := getenv(clientcmd.RecommendedConfigPathEnvVar); env != "" {
		paths := filepath.SplitList(env)
		if len(paths) != 1 {
			return "", fmt.Errorf("with several contexts the kubeconfig must be one file: $KUBECONFIG names %d (pick one with --kubeconfig)", len(paths))
		}
		return paths[0], nil
	}
	return filepath.Join(getenv("HOME"), clientcmd.RecommendedHomeDir, clientcmd.RecommendedFileName), nil
}

// fleetContexts reads the kubeconfig at path and returns the contexts to
// watch (every one with --all-contexts) and their servers. A context the
// file does not have is an error.
func fleetContexts(c *Config, path string) (names []string, servers map[string]string, err error) {
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	var have []string
	for name := range kc.Contexts {
		have = append(have, name)
	}
	sort.Strings(have)
	names = c.Contexts
	if c.AllContexts {
		names = have
		if len(names) == 0 {
			return nil, nil, fmt.Errorf("--all-contexts: kubeconfig %s has no contexts", path)
		}
	}
	servers = map[string]string{}
	for _, name := range names {
		kctx, ok := kc.Contexts[name]
		if !ok {
			return nil, nil, fmt.Errorf("no context %q in kubeconfig %s (it has %s)", name, path, strings.Join(have, ", "))
		}
		if cl, ok := kc.Clusters[kctx.Cluster]; ok {
			servers[name] = cl.Server
		}
	}
	return names, servers, nil
}

// fleetWatcher watches cfg's resources in every context of a fleet.
type fleetWatcher struct {
	cfg      *Config
	out      *printer
	fl       *fleet.Fleet
	servers  map[string]string // context → server URL, for CONTACT lines
	res      []*fleetResource
	started  time.Time
	failed   chan error // --exit-on-failure: the first failure
	failOnce sync.Once
	tables   map[string]*tableOutput // -o table / -o wide: one per context; nil otherwise

	mu     sync.Mutex                // guards the maps below
	states map[string]printedState   // "context\x00resource" → what its last STATUS line said
	lost   map[string]time.Time      // context → when contact was lost
	broken map[string]bool           // contexts whose configuration is unusable, reported
	counts map[string]map[string]int // "context\x00gvr" → event type → count
}

// fleetResource is one --resource over the fleet.
type fleetResource struct {
	name string
	spec ResourceSpec
	gvr  schema.GroupVersionResource // set when named resource.version.group under --wait-for-crds
	r    *fleet.Resource

	mu   sync.Mutex                             // guards gvrs
	gvrs map[string]schema.GroupVersionResource // context → what the name resolved to there
}

type printedState struct {
	state  dynamicinformer.State
	reason string
}

// runFleet is run for a fleet: it returns the exit code.
func runFleet(ctx context.Context, cfg *Config, out *printer, stderr io.Writer, logger logr.Logger) int {
	path, err := fleetKubeconfig(cfg, os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "crd-watcher: no usable cluster configuration: %v\n", err)
		return exitError
	}
	names, servers, err := fleetContexts(cfg, path)
	if err != nil {
		fmt.Fprintf(stderr, "crd-watcher: no usable cluster configuration: %v\n", err)
		return exitError
	}
	for _, n := range names {
		out.clusterWidth = max(out.clusterWidth, len(n))
	}
	src := &fleet.KubeconfigSource{Path: path, Contexts: names}
	w := &fleetWatcher{
		cfg: cfg, out: out, servers: servers, failed: make(chan error, 1),
		states: map[string]printedState{}, lost: map[string]time.Time{}, broken: map[string]bool{}, counts: map[string]map[string]int{},
		fl: fleet.New(src, fleet.Options{Logger: logger, Factory: dynamicinformer.Options{
			Logger: logger, ContactCheckInterval: contactInterval, ContactCheckTimeout: cfg.RequestTimeout,
			Defaults: []dynamicinformer.ResourceOption{
				dynamicinformer.WithProjection(dynamicinformer.Projection{StripManagedFields: true}),
				dynamicinformer.WithAccessCheck(cfg.AccessCheck),
			},
		}}),
	}
	if cfg.Output == "table" || cfg.Output == "wide" {
		if w.tables, err = fleetTables(cfg, path, names, out); err != nil {
			fmt.Fprintf(stderr, "crd-watcher: no usable cluster configuration: %v\n", err)
			return exitError
		}
	}
	out.info("watching %d contexts of %s as one fleet: %s", len(names), path, strings.Join(names, ", "))
	for _, spec := range cfg.Resources {
		fr := &fleetResource{name: spec.Name, spec: spec, gvrs: map[string]schema.GroupVersionResource{}}
		opts := (&watcher{cfg: cfg}).resourceOptions(spec)
		if gvr, ok := parseQualifiedGVR(spec.Name); ok && cfg.WaitForCRDs {
			fr.gvr = gvr
			fr.r = w.fl.ForResource(gvr, opts...)
		} else {
			fr.r = w.fl.ForName(spec.Name, opts...)
		}
		if _, err := fr.r.AddEventHandler(w.handler(fr)); err != nil {
			fmt.Fprintf(stderr, "crd-watcher: %s: %v\n", spec.Name, err)
			w.fl.Shutdown()
			return exitError
		}
		w.res = append(w.res, fr)
	}
	w.started = time.Now()
	// The fleet runs until the end of the run, not until ctx ends: the
	// final status must see the informers' last real states.
	w.fl.Start(context.WithoutCancel(ctx))
	defer w.fl.Shutdown()
	reported := make(chan struct{})
	go func() {
		defer close(reported)
		w.report(ctx)
	}()
	go w.ready(ctx)
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	defer signal.Stop(usr1)
	code := exitOK
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-usr1:
			w.printStatus("status (SIGUSR1)", false)
		case err := <-w.failed:
			fmt.Fprintf(stderr, "crd-watcher: exiting (--exit-on-failure): %v\n", err)
			code = exitFailure
			break loop
		}
	}
	<-reported
	w.poll()                // the last changes, before the final status
	final := w.statusRows() // before the fleet stops: the last real states
	w.fl.Shutdown()         // no more events: the tables' last rows print before the final status
	for _, t := range w.tables {
		t.stop()
	}
	w.printRows("final status", true, final)
	return code
}

// handler prints fr's events, each with its context.
func (w *fleetWatcher) handler(fr *fleetResource) fleet.Handler {
	return fleet.HandlerFuncs{
		AddFunc: func(cluster string, obj any, initial bool) {
			w.onEvent(cluster, fr, subscription.Event{Type: subscription.Added, Object: obj, IsInitialList: initial})
		},
		UpdateFunc: func(cluster string, oldObj, newObj any) {
			w.onEvent(cluster, fr, subscription.Event{Type: subscription.Updated, Object: newObj, OldObject: oldObj})
		},
		DeleteFunc: func(cluster string, obj any) {
			ev := subscription.Event{Type: subscription.Deleted, Object: obj}
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				ev.Object, ev.FinalStateUnknown = d.Obj, true
			}
			w.onEvent(cluster, fr, ev)
		},
	}
}

func (w *fleetWatcher) onEvent(cluster string, fr *fleetResource, ev subscription.Event) {
	u, ok := objectOf(ev.Object)
	if !ok {
		return
	}
	ev.GVR = fr.gvrIn(cluster, u)
	w.mu.Lock()
	k := cluster + "\x00" + gvrString(ev.GVR)
	if w.counts[k] == nil {
		w.counts[k] = map[string]int{}
	}
	w.counts[k][string(ev.Type)]++
	w.mu.Unlock()
	if t := w.tables[cluster]; t != nil {
		ns, label, field := (&watcher{cfg: w.cfg}).selection(fr.spec)
		t.event(ev, u, ns, label, field)
		return
	}
	w.out.eventIn(cluster, ev, "")
}

// fleetTables builds a table output per context (-o table, -o wide), each
// with its own Table client and a CLUSTER column.
func fleetTables(cfg *Config, path string, names []string, out *printer) (map[string]*tableOutput, error) {
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	tables := map[string]*tableOutput{}
	for _, name := range names {
		rc, err := clientcmd.NewNonInteractiveClientConfig(*kc, name, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("context %q: %w", name, err)
		}
		client, err := newRESTTable(rc)
		if err != nil {
			return nil, fmt.Errorf("context %q: %w", name, err)
		}
		t := newTableOutput(client, out, cfg.Output == "wide", len(cfg.Resources) > 1, cfg.RequestTimeout, nil)
		t.cluster = name
		tables[name] = t
	}
	return tables, nil
}

// gvrIn is what fr is in cluster: the name as resolved there (ForName
// resolves it in each cluster on its own).
func (fr *fleetResource) gvrIn(cluster string, u *unstructured.Unstructured) schema.GroupVersionResource {
	if fr.gvr.Resource != "" {
		return fr.gvr
	}
	fr.mu.Lock()
	gvr, ok := fr.gvrs[cluster]
	fr.mu.Unlock()
	if ok {
		return gvr
	}
	if cs, ok := fr.r.Status().Cluster(cluster); ok && cs.GVR.Resource != "" {
		fr.remember(cluster, cs.GVR)
		return cs.GVR
	}
	gv, _ := schema.ParseGroupVersion(u.GetAPIVersion())
	return gv.WithResource(strings.SplitN(fr.name, ".", 2)[0])
}

func (fr *fleetResource) remember(cluster string, gvr schema.GroupVersionResource) {
	fr.mu.Lock()
	fr.gvrs[cluster] = gvr
	fr.mu.Unlock()
}

// statusInterval is how often the fleet's statuses are read for STATUS
// and CONTACT lines.
const statusInterval = 250 * time.Millisecond

// report prints STATUS and CONTACT lines as the fleet's statuses change,
// until ctx ends.
func (w *fleetWatcher) report(ctx context.Context) {
	t := time.NewTicker(statusInterval)
	defer t.Stop()
	for {
		w.poll()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// poll prints what changed since the last poll: an informer's state or
// reason (STATUS), a context's contact (CONTACT), a context whose
// configuration is unusable.
func (w *fleetWatcher) poll() {
	now := time.Now()
	for _, fr := range w.res {
		for _, cs := range fr.r.Status().Clusters {
			st := cs.Status
			if st.GVR.Resource == "" {
				st.GVR = fr.gvr
				if st.GVR.Resource == "" {
					st.GVR = schema.GroupVersionResource{Resource: fr.name}
				}
			} else if fr.gvr.Resource == "" {
				fr.remember(cs.Cluster, st.GVR)
			}
			ps := printedState{state: st.State, reason: statusDetail(st)}
			k := cs.Cluster + "\x00" + fr.name
			w.mu.Lock()
			prev, seen := w.states[k]
			if !seen && startingUp(st) && now.Sub(w.started) < statusGrace {
				w.mu.Unlock()
				continue // a quiet start, as with one context: the state it settles in is printed
			}
			w.states[k] = ps
			w.mu.Unlock()
			if seen && prev == ps {
				continue
			}
			w.out.statusLine(cs.Cluster, st, prev.state, false)
			if st.State == dynamicinformer.Failed {
				w.fail(fmt.Errorf("context %q: %s %s: %s", cs.Cluster, gvrString(st.GVR), st.State, statusDetail(st)))
			}
		}
	}
	for _, c := range w.fl.Status().Clusters {
		server := w.servers[c.Name]
		w.mu.Lock()
		since, wasLost := w.lost[c.Name]
		switch {
		case c.ContactErr != nil && !wasLost:
			w.lost[c.Name] = now
		case c.ContactErr == nil && wasLost:
			delete(w.lost, c.Name)
		}
		broken := c.Err != nil && !w.broken[c.Name]
		if broken {
			w.broken[c.Name] = true
		}
		w.mu.Unlock()
		switch {
		case c.ContactErr != nil && !wasLost:
			w.out.contactIn(c.Name, server, fmt.Sprintf("cannot reach the API server at %s (context %q): %v", server, c.Name, innermost(c.ContactErr)), 0)
			w.fail(fmt.Errorf("context %q: no contact with the API server: %v", c.Name, innermost(c.ContactErr)))
		case c.ContactErr == nil && wasLost:
			w.out.contactIn(c.Name, server, "", now.Sub(since))
		}
		if broken {
			w.out.info("%s context %q cannot be used: %v", now.Format("15:04:05.000"), c.Name, c.Err)
			w.fail(fmt.Errorf("context %q: %w", c.Name, c.Err))
		}
	}
}

// startingUp: a state an informer passes through as it starts (resolving
// its name, not started, listing).
func startingUp(st dynamicinformer.Status) bool {
	return st.State == dynamicinformer.Syncing && st.ContactErr == nil ||
		st.State == dynamicinformer.Pending && st.Err == nil
}

// fail ends the run under --exit-on-failure (the first failure only).
func (w *fleetWatcher) fail(err error) {
	if !w.cfg.ExitOnFailure {
		return
	}
	w.failOnce.Do(func() { w.failed <- err })
}

// ready says once when every resource has synced in every context that
// can sync now (the others say why in their STATUS lines).
func (w *fleetWatcher) ready(ctx context.Context) {
	for _, fr := range w.res {
		if _, err := fr.r.WaitForSync(ctx, fleet.ReachableClusters); err != nil {
			return
		}
	}
	w.poll() // the STATUS lines first: the SYNC line points at them
	synced, all := 0, 0
	for _, fr := range w.res {
		for _, cs := range fr.r.Status().Clusters {
			all++
			if cs.HasSynced {
				synced++
			}
		}
	}
	w.out.info("%s SYNC    %d/%d informers synced after %s (contexts × resources; the others say why in their STATUS lines)",
		time.Now().Format("15:04:05.000"), synced, all, roundDuration(time.Since(w.started)))
}

// printStatus prints the status table (text) or, at the end in -o json,
// a final STATUS record per context and resource.
func (w *fleetWatcher) printStatus(title string, final bool) {
	w.printRows(title, final, w.statusRows())
}

// statusRow is one context's informer of one resource.
type statusRow struct {
	cluster string
	st      dynamicinformer.Status
}

// statusRows are the informers' statuses now, by context and resource.
func (w *fleetWatcher) statusRows() []statusRow {
	type row = statusRow
	var rows []row
	for _, fr := range w.res {
		for _, cs := range fr.r.Status().Clusters {
			st := cs.Status
			if st.GVR.Resource == "" {
				st.GVR = schema.GroupVersionResource{Resource: fr.name}
			}
			rows = append(rows, row{cs.Cluster, st})
		}
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].cluster != rows[j].cluster {
			return rows[i].cluster < rows[j].cluster
		}
		return gvrString(rows[i].st.GVR) < gvrString(rows[j].st.GVR)
	})
	return rows
}

// printRows prints the status table of rows (text) or, at the end in
// -o json, a final STATUS record per row.
func (w *fleetWatcher) printRows(title string, final bool, rows []statusRow) {
	now := time.Now()
	var b strings.Builder
	fmt.Fprintf(&b, "--- %s (%s) ---\n", title, now.Format("15:04:05"))
	w.mu.Lock()
	var lost []string
	for name, since := range w.lost {
		lost = append(lost, fmt.Sprintf("NO CONTACT with the API server of context %q since %s", name, since.Format("15:04:05")))
	}
	counts := map[string]map[string]int{}
	for k, m := range w.counts {
		counts[k] = map[string]int{"ADDED": m["ADDED"], "UPDATED": m["UPDATED"], "DELETED": m["DELETED"]}
	}
	w.mu.Unlock()
	sort.Strings(lost)
	for _, l := range lost {
		b.WriteString(l + "\n")
	}
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tRESOURCE\tSTATE\tOBJECTS\tADDED\tUPDATED\tDELETED\tFOR\tREASON")
	for _, r := range rows {
		c := counts[r.cluster+"\x00"+gvrString(r.st.GVR)]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\n", r.cluster, gvrString(r.st.GVR), r.st.State, r.st.Objects,
			c["ADDED"], c["UPDATED"], c["DELETED"], now.Sub(r.st.Since).Round(time.Second), statusDetail(r.st))
	}
	if len(rows) == 0 {
		fmt.Fprintln(tw, "(no informers)")
	}
	_ = tw.Flush()
	w.out.writeLine(w.out.errOut, strings.TrimRight(b.String(), "\n"))
	if final && w.out.json {
		for _, r := range rows {
			w.out.statusLine(r.cluster, r.st, "", true)
		}
	}
}
