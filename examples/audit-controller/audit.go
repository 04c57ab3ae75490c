package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/informerkit/informerkit/controller"
	"github.com/informerkit/informerkit/discoveryresolver"
	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/shard/membership"
)

// audit wires the pieces: the informer factory, the controller with the
// auditor as its reconciler, the Event recorder, the summary writer and
// the metrics.
type audit struct {
	cfg     *Config
	log     logr.Logger
	info    io.Writer
	factory *dynamicinformer.Factory
	kube    kubernetes.Interface
	ctrl    *controller.Controller
	auditor *auditor
	metrics *metrics
	events  record.EventBroadcaster
	handles []*dynamicinformer.InformerHandle

	cancel  context.CancelFunc
	wg      sync.WaitGroup // the controller's Run and the summary writer
	runErr  error          // Run's error, set before wg.Done
	written atomic.Uint64  // the auditor version of the last summary written
}

// member, with --shard-group, is the replica's membership: every informer
// follows its shard.
func newAudit(restCfg *rest.Config, cfg *Config, rules ruleSet, log logr.Logger, info io.Writer, member *membership.Member) (*audit, error) {
	m := newMetrics()
	factory, err := dynamicinformer.NewForConfig(restCfg, dynamicinformer.Options{Defaults: shardOptions(cfg, member), Logger: log.WithName("informers"), RediscoveryInterval: 2 * time.Second, Metrics: m.informers,
		CacheDir: cfg.CacheDir, CacheSecrets: cfg.CacheSecrets})
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return nil, err
	}
	a := &audit{cfg: cfg, log: log, info: info, factory: factory, kube: kube, metrics: m}
	a.events = record.NewBroadcaster()
	recorder := a.events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "audit-controller"})
	a.auditor = newAuditor(rules, recorder, a.metrics, log.WithName("auditor"))
	a.ctrl, err = controller.New(factory, a.auditor, controller.Options{
		Workers:   cfg.Workers,
		OnRemoved: a.auditor.resourceRemoved,
		Logger:    log.WithName("controller"),
	})
	if err != nil {
		return nil, err
	}
	a.metrics.watchController(a.ctrl)
	return a, nil
}

// namespaceOption is the informers' namespace restriction (none: all).
func namespaceOption(ns []string) []dynamicinformer.ResourceOption {
	if len(ns) == 0 {
		return nil
	}
	return []dynamicinformer.ResourceOption{dynamicinformer.WithNamespaces(ns...)}
}

// setup resolves the resources and hands them to the controller. An
// unknown or ambiguous name is a usage error.
func (a *audit) setup(ctx context.Context) error {
	opts := namespaceOption(a.cfg.Namespaces)
	for _, name := range a.cfg.Resources {
		h, err := a.factory.ForName(ctx, name, opts...)
		if err != nil {
			var amb *discoveryresolver.AmbiguousError
			if errors.Is(err, discoveryresolver.ErrNotFound) || errors.Is(err, discoveryresolver.ErrNotWatchable) ||
				errors.Is(err, discoveryresolver.ErrSubresource) || errors.As(err, &amb) ||
				errors.Is(err, dynamicinformer.ErrInvalid) {
				return usagef("--resource %s: %v", name, err)
			}
			return fmt.Errorf("--resource %s: %w", name, err)
		}
		a.handles = append(a.handles, h)
		if err := a.ctrl.Watch(h); err != nil {
			return err
		}
	}
	if len(a.cfg.Groups) > 0 || len(a.cfg.Categories) > 0 {
		if err := a.ctrl.Subscribe(discoveryresolver.Filter{Groups: a.cfg.Groups, Categories: a.cfg.Categories}, opts...); err != nil {
			return err
		}
	}
	return nil
}

// start runs the Event sink, the informers, the controller and the
// summary writer until stop.
func (a *audit) start(ctx context.Context) {
	ctx, a.cancel = context.WithCancel(ctx)
	a.events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: a.kube.CoreV1().Events("")})
	a.factory.Start(ctx)
	a.wg.Add(2)
	go func() {
		defer a.wg.Done()
		a.runErr = a.ctrl.Run(ctx)
	}()
	go func() {
		defer a.wg.Done()
		a.writeSummaries(ctx)
	}()
	if a.cfg.CacheDir != "" {
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			a.reportCache(ctx)
		}()
	}
}

// reportCache says, once the informers have synced, what --cache-dir did
// for each: how many objects it restored (the rest of the cache came
// from the watch, not a list), or why the directory is not used.
func (a *audit) reportCache(ctx context.Context) {
	a.factory.WaitForCacheSync(ctx)
	if ctx.Err() != nil {
		return
	}
	for _, st := range a.factory.Statuses() {
		switch {
		case st.CacheErr != nil:
			fmt.Fprintf(a.info, "cache %s: %v\n", st.GVR, st.CacheErr)
		case st.Restored > 0:
			fmt.Fprintf(a.info, "cache %s: %s (%d objects), %d restored from %s\n", st.GVR, st.State, st.Objects, st.Restored, a.cfg.CacheDir)
		default:
			fmt.Fprintf(a.info, "cache %s: %s (%d objects), cold start (nothing usable stored)\n", st.GVR, st.State, st.Objects)
		}
	}
}

// stop ends everything start started, writes the last summary and
// returns the controller's error.
func (a *audit) stop() error {
	if a.cancel != nil {
		a.cancel()
		a.wg.Wait()
	}
	for _, h := range a.handles {
		h.Release()
	}
	a.factory.Shutdown()
	a.events.Shutdown()
	return a.runErr
}

// writeSummaries writes the summary ConfigMap whenever the findings
// changed, at most once per --summary-interval, and once more at the end.
func (a *audit) writeSummaries(ctx context.Context) {
	t := time.NewTicker(a.cfg.SummaryInterval)
	defer t.Stop()
	pending := false
	for {
		select {
		case <-ctx.Done():
			if pending || a.written.Load() == 0 {
				wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				a.writeSummary(wctx)
				cancel()
			}
			return
		case <-a.auditor.changed:
			pending = true
		case <-t.C:
			if pending {
				pending = !a.writeSummary(ctx)
			}
		}
	}
}

// writeSummary creates or updates the summary ConfigMap; it reports
// whether it succeeded (a failure is retried at the next tick).
func (a *audit) writeSummary(ctx context.Context) bool {
	r, version := a.auditor.snapshot()
	cms := a.kube.CoreV1().ConfigMaps(a.cfg.SummaryNamespace)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: a.cfg.SummaryName, Namespace: a.cfg.SummaryNamespace,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "audit-controller"}},
		Data: summaryData(r),
	}
	existing, err := cms.Get(ctx, cm.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
	case err == nil:
		cm.ResourceVersion = existing.ResourceVersion
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		a.log.Error(err, "cannot write the summary", "namespace", cm.Namespace, "name", cm.Name)
		return false
	}
	a.written.Store(version)
	return true
}

// summaryWritten reports whether the summary on the server reflects the
// findings as they are now.
func (a *audit) summaryWritten() bool {
	_, version := a.auditor.snapshot()
	return a.written.Load() == version && version > 0
}
