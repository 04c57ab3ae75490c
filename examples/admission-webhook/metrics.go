package main

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the webhook's Prometheus metrics, on their own registry
// (served at /metrics on the probe address).
type metrics struct {
	registry *prometheus.Registry

	requests  *prometheus.CounterVec   // policy
	decisions *prometheus.CounterVec   // policy, decision (allowed|denied), reason
	latency   *prometheus.HistogramVec // policy
	// cacheNotReady counts requests answered by the failure policy because
	// a cache they needed was not Synced.
	cacheNotReady   *prometheus.CounterVec // policy, resource, state
	policiesLoaded  prometheus.Gauge
	policiesRefused prometheus.Gauge
	reloads         prometheus.Counter
	certReloads     prometheus.Counter
}

// Decision reasons.
const (
	reasonNoMatch       = "no_match"        // the policy does not judge this request
	reasonValidations   = "validations"     // the validations decided
	reasonCacheNotReady = "cache_not_ready" // the failure policy decided: a cache was not Synced
	reasonEvalError     = "evaluation_error"
	reasonNoPolicy      = "no_policy" // no loaded policy of that name
)

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "admission_webhook_requests_total", Help: "Admission requests received, by policy.",
		}, []string{"policy"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "admission_webhook_decisions_total", Help: "Admission decisions, by policy, decision (allowed, denied) and reason.",
		}, []string{"policy", "decision", "reason"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "admission_webhook_request_duration_seconds", Help: "Time to decide an admission request, by policy.",
			Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1},
		}, []string{"policy"}),
		cacheNotReady: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "admission_webhook_cache_not_ready_total", Help: "Requests answered by the policy's failure policy because a cache it reads was not Synced, by policy, resource and state.",
		}, []string{"policy", "resource", "state"}),
		policiesLoaded: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "admission_webhook_policies_loaded", Help: "Policies loaded and serving.",
		}),
		policiesRefused: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "admission_webhook_policies_refused", Help: "Policies (or files) refused at the last load.",
		}),
		reloads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "admission_webhook_policy_loads_total", Help: "Loads of the policy directory.",
		}),
		certReloads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "admission_webhook_certificate_loads_total", Help: "Serving certificate loads from disk.",
		}),
	}
	m.registry.MustRegister(m.requests, m.decisions, m.latency, m.cacheNotReady, m.policiesLoaded, m.policiesRefused, m.reloads, m.certReloads,
		collectors.NewGoCollector())
	return m
}
