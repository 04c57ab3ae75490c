package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/informerkit/informerkit/controller"
	"github.com/informerkit/informerkit/prometheusmetrics"
)

// metrics are the auditor's Prometheus metrics and the library's
// informer metrics (informerkit_*, see package prometheusmetrics), on a
// registry of their own (nothing global).
type metrics struct {
	reg          *prometheus.Registry
	informers    *prometheusmetrics.Metrics // the factory's (Options.Metrics)
	checked      *prometheus.CounterVec
	audited      *prometheus.GaugeVec
	noncompliant *prometheus.GaugeVec
	violations   *prometheus.GaugeVec
}

func newMetrics() *metrics {
	m := &metrics{
		reg:       prometheus.NewRegistry(),
		informers: prometheusmetrics.New(),
		checked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "audit_checks_total", Help: "Objects checked against the rules, per resource.",
		}, []string{"resource"}),
		audited: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "audit_objects", Help: "Objects under audit now, per resource.",
		}, []string{"resource"}),
		noncompliant: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "audit_noncompliant_objects", Help: "Objects breaking at least one rule now, per resource.",
		}, []string{"resource"}),
		violations: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "audit_violations", Help: "Objects breaking a rule now, per resource and rule.",
		}, []string{"resource", "rule"}),
	}
	m.reg.MustRegister(m.informers, m.checked, m.audited, m.noncompliant, m.violations)
	return m
}

// account adds (sign +1) or removes (-1) one object with violations vs;
// present=false means there was no object.
func (m *metrics) account(gvr schema.GroupVersionResource, vs []Violation, present bool, sign float64) {
	if !present {
		return
	}
	res := resourceName(gvr)
	m.audited.WithLabelValues(res).Add(sign)
	if len(vs) > 0 {
		m.noncompliant.WithLabelValues(res).Add(sign)
	}
	for _, v := range vs {
		m.violations.WithLabelValues(res, v.Rule).Add(sign)
	}
}

// watchController exports the controller's counters.
func (m *metrics) watchController(c *controller.Controller) {
	counter := func(name, help string, f func(controller.Stats) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(f(c.Stats())) })
	}
	m.reg.MustRegister(
		counter("audit_controller_reconciles_total", "Reconciles that succeeded.", func(s controller.Stats) int64 { return s.Reconciled }),
		counter("audit_controller_failures_total", "Reconciles that failed or panicked.", func(s controller.Stats) int64 { return s.Failed }),
		counter("audit_controller_dropped_total", "Keys not reconciled because their resource was removed.", func(s controller.Stats) int64 { return s.Dropped }),
		counter("audit_controller_panics_total", "Panics recovered (reconcile and event handling).", func(s controller.Stats) int64 { return s.ReconcilePanics + s.HandlerPanics }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "audit_controller_queue_depth", Help: "Keys waiting in the work queue."},
			func() float64 { return float64(c.Stats().Queued) }),
	)
}

// serve serves /metrics and /healthz on addr until ctx ends; it returns
// the bound address.
func (m *metrics) serve(ctx context.Context, addr string) (string, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return
		}
	}()
	context.AfterFunc(ctx, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	})
	return l.Addr().String(), nil
}
