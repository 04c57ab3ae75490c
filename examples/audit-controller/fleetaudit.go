package main

// Auditing a fleet: several kubeconfig contexts (--context a,b or
// --all-contexts) held as one cache by informerkit's fleet package. Each
// cluster has its own findings: Events on its objects and its summary
// ConfigMap are written in that cluster, and the report names it. One
// context is the single-cluster auditor (audit.go), unchanged.

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"

	"github.com/informerkit/informerkit/controller"
	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/fleet"
)

// fleet reports whether c audits several contexts as one fleet.
func (c *Config) fleet() bool { return len(c.Contexts) > 1 || c.AllContexts }

// validateFleet refuses, with several contexts, what the fleet auditor
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
		{"--group", len(c.Groups) > 0}, {"--category", len(c.Categories) > 0},
		{"--shard", c.Shard != ""}, {"--shard-group", c.ShardGroup != ""},
		{"--metrics-addr", c.MetricsAddr != ""}, {"--cache-dir", c.CacheDir != ""},
	} {
		if f.set {
			return usagef("%s is not supported with several contexts (--context a,b or --all-contexts) yet", f.flag)
		}
	}
	return nil
}

// clusterAudit is one cluster's findings, Event recorder and summary
// writer (the single-cluster audit's, without its informers).
type clusterAudit struct {
	*audit
}

// fleetAudit audits cfg's resources in every context of a fleet.
type fleetAudit struct {
	cfg   *Config
	rules ruleSet
	log   logr.Logger
	info  io.Writer
	fl    *fleet.Fleet

	mu       sync.Mutex               // guards clusters
	clusters map[string]*clusterAudit // by context
	ctx      context.Context          // the run, for the clusters' summary writers
	wg       sync.WaitGroup           // the summary writers
}

// runFleet is run for a fleet: it returns the exit code.
func runFleet(ctx context.Context, cfg *Config, rules ruleSet, log logr.Logger, stdout, stderr io.Writer) int {
	rulesLoad := clientcmd.NewDefaultClientConfigLoadingRules()
	rulesLoad.ExplicitPath = cfg.Kubeconfig
	path := cfg.Kubeconfig
	if path == "" {
		files := rulesLoad.GetLoadingPrecedence()
		if len(files) != 1 {
			fmt.Fprintf(stderr, "audit-controller: with several contexts the kubeconfig must be one file (pick one with --kubeconfig)\n")
			return exitError
		}
		path = files[0]
	}
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		fmt.Fprintf(stderr, "audit-controller: no usable cluster configuration: kubeconfig %s: %v\n", path, err)
		return exitError
	}
	names := cfg.Contexts
	if cfg.AllContexts {
		names = nil
		for name := range kc.Contexts {
			names = append(names, name)
		}
		sort.Strings(names)
	}
	if len(names) == 0 {
		fmt.Fprintf(stderr, "audit-controller: no usable cluster configuration: kubeconfig %s has no contexts\n", path)
		return exitError
	}
	fa := &fleetAudit{cfg: cfg, rules: rules, log: log, info: stderr, clusters: map[string]*clusterAudit{}, ctx: ctx}
	for _, name := range names {
		if _, ok := kc.Contexts[name]; !ok {
			fmt.Fprintf(stderr, "audit-controller: no usable cluster configuration: no context %q in kubeconfig %s\n", name, filepath.Clean(path))
			return exitError
		}
		rc, err := clientcmd.NewNonInteractiveClientConfig(*kc, name, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
		if err != nil {
			fmt.Fprintf(stderr, "audit-controller: no usable cluster configuration: context %q: %v\n", name, err)
			return exitError
		}
		kube, err := kubernetes.NewForConfig(rc)
		if err != nil {
			fmt.Fprintf(stderr, "audit-controller: context %q: %v\n", name, err)
			return exitError
		}
		fa.clusters[name] = fa.newCluster(name, kube)
	}
	fmt.Fprintf(stderr, "auditing %d contexts of %s as one fleet: %s\n", len(names), path, strings.Join(names, ", "))
	fa.fl = fleet.New(&fleet.KubeconfigSource{Path: path, Contexts: names}, fleet.Options{Logger: log.WithName("fleet"),
		Factory: dynamicinformer.Options{Logger: log.WithName("informers"), RediscoveryInterval: 2 * time.Second}})
	var resources []*fleet.Resource
	for _, name := range cfg.Resources {
		r := fa.fl.ForName(name, namespaceOption(cfg.Namespaces)...)
		if _, err := r.AddEventHandler(fa.handler(r, name)); err != nil {
			fmt.Fprintf(stderr, "audit-controller: --resource %s: %v\n", name, err)
			fa.fl.Shutdown()
			return exitError
		}
		resources = append(resources, r)
	}
	for _, c := range fa.clusters {
		c.startWriting(ctx, &fa.wg)
	}
	fa.fl.Start(context.WithoutCancel(ctx))
	go fa.reportSync(ctx, resources)
	<-ctx.Done()
	fa.fl.Shutdown() // handlers are done: the findings are final
	fa.wg.Wait()     // each cluster's last summary written
	for _, name := range names {
		c := fa.clusters[name]
		c.events.Shutdown()
		r, _ := c.auditor.snapshot()
		fmt.Fprintf(stdout, "cluster %s: %s", name, r.String())
	}
	return exitOK
}

// newCluster is one cluster's auditor, Event recorder and summary writer.
func (fa *fleetAudit) newCluster(name string, kube kubernetes.Interface) *clusterAudit {
	log := fa.log.WithValues("cluster", name)
	a := &audit{cfg: fa.cfg, log: log, info: fa.info, kube: kube, metrics: newMetrics()}
	a.events = record.NewBroadcaster()
	recorder := a.events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "audit-controller"})
	a.auditor = newAuditor(fa.rules, recorder, a.metrics, log.WithName("auditor"))
	return &clusterAudit{audit: a}
}

// startWriting starts the cluster's Event sink and summary writer, which
// run until ctx ends (the summary once more then).
func (c *clusterAudit) startWriting(ctx context.Context, wg *sync.WaitGroup) {
	c.events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.kube.CoreV1().Events("")})
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.writeSummaries(ctx)
	}()
}

// handler audits r's objects as their clusters' events arrive: the fleet
// calls it sequentially per cluster, so one object's checks never race.
func (fa *fleetAudit) handler(r *fleet.Resource, name string) fleet.Handler {
	var mu sync.Mutex // guards gvrs
	gvrs := map[string]schema.GroupVersionResource{}
	gvrIn := func(cluster string, u *unstructured.Unstructured) schema.GroupVersionResource {
		mu.Lock()
		gvr, ok := gvrs[cluster]
		mu.Unlock()
		if ok {
			return gvr
		}
		if cs, ok := r.Status().Cluster(cluster); ok && cs.GVR.Resource != "" {
			mu.Lock()
			gvrs[cluster] = cs.GVR
			mu.Unlock()
			return cs.GVR
		}
		gv, _ := schema.ParseGroupVersion(u.GetAPIVersion())
		return gv.WithResource(strings.SplitN(name, ".", 2)[0])
	}
	reconcile := func(cluster string, obj any, gone bool) {
		if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		c := fa.clusters[cluster]
		if c == nil {
			return // not a context of the fleet's (the source names only those)
		}
		req := controller.Request{Key: controller.Key{GVR: gvrIn(cluster, u), Namespace: u.GetNamespace(), Name: u.GetName()}}
		if !gone {
			req.Object = u
		}
		_ = c.auditor.Reconcile(fa.ctx, req) // never fails
	}
	return fleet.HandlerFuncs{
		AddFunc:    func(cluster string, obj any, _ bool) { reconcile(cluster, obj, false) },
		UpdateFunc: func(cluster string, _, obj any) { reconcile(cluster, obj, false) },
		DeleteFunc: func(cluster string, obj any) { reconcile(cluster, obj, true) },
	}
}

// reportSync says once on stderr when every resource has synced in every
// context that can sync now, and why the others have not.
func (fa *fleetAudit) reportSync(ctx context.Context, resources []*fleet.Resource) {
	start := time.Now()
	var lines []string
	for _, r := range resources {
		st, err := r.WaitForSync(ctx, fleet.ReachableClusters)
		if ctx.Err() != nil {
			return
		}
		_ = err // the status says which clusters did not sync, and why
		for _, c := range st.Clusters {
			if !c.HasSynced {
				why := c.Reason
				if c.ContactErr != nil {
					why = c.ContactErr.Error()
				} else if c.Err != nil {
					why = c.Err.Error()
				}
				lines = append(lines, fmt.Sprintf("  cluster %s: %s %s: %s", c.Cluster, r, c.State, why))
			}
		}
	}
	fmt.Fprintf(fa.info, "synced after %s in every reachable cluster\n", time.Since(start).Round(time.Millisecond))
	for _, l := range lines {
		fmt.Fprintln(fa.info, l)
	}
}
