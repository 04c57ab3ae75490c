package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/informerkit/informerkit/dynamicinformer"
)

// serverOptions configure a server. Every default is set in withDefaults.
type serverOptions struct {
	PolicyDir string
	CertFile  string
	KeyFile   string
	// Listen is the HTTPS address of the webhook (default 127.0.0.1:8443).
	Listen string
	// ProbeListen is the plain HTTP address of /readyz, /healthz,
	// /metrics and /policies (default 127.0.0.1:8081).
	ProbeListen string
	// Install, when set, writes the ValidatingWebhookConfiguration for the
	// loaded policies at start and after every reload.
	Install *webhookTarget
	// LiveLookups makes every lookup a GET or LIST to the API server
	// instead of a cache read: the round trip a Kyverno-style policy pays,
	// kept for comparison (--live-lookups).
	LiveLookups bool
	// ObserveLatency, if set, receives each request's decision time.
	ObserveLatency func(policy string, d time.Duration)
	Log            logr.Logger
}

func (o serverOptions) withDefaults() serverOptions {
	if o.Listen == "" {
		o.Listen = "127.0.0.1:8443"
	}
	if o.ProbeListen == "" {
		o.ProbeListen = "127.0.0.1:8081"
	}
	return o
}

// server is the running webhook: the factory and caches, the policy
// loader and its watch, the HTTPS webhook and the probe server.
type server struct {
	opts    serverOptions
	kube    kubernetes.Interface
	factory *dynamicinformer.Factory
	caches  *caches
	loader  *policyLoader
	metrics *metrics
	webhook *webhook
	certs   *certReloader

	webhookLn, probeLn net.Listener
	https, probes      *http.Server

	cancel context.CancelFunc
	wg     sync.WaitGroup

	installMu  sync.Mutex // guards installErr
	installErr error
}

// newServer builds and starts everything: the policies are loaded (the
// refused ones reported) and the listeners open when it returns.
func newServer(ctx context.Context, cfg *rest.Config, opts serverOptions) (_ *server, err error) {
	opts = opts.withDefaults()
	s := &server{opts: opts, metrics: newMetrics()}
	ctx, s.cancel = context.WithCancel(ctx)
	defer func() {
		if err != nil {
			s.shutdown()
		}
	}()
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 50, 100
	}
	s.kube, err = kubernetes.NewForConfig(cfg)
	if err != nil {
		return s, err
	}
	s.factory, err = dynamicinformer.NewForConfig(cfg, dynamicinformer.Options{Logger: opts.Log.WithName("informers")})
	if err != nil {
		return s, err
	}
	s.caches = newCaches(s.factory)
	if opts.LiveLookups {
		if s.caches.live, err = dynamic.NewForConfig(cfg); err != nil {
			return s, err
		}
	}
	envSet, err := newCELEnvSet(s.caches)
	if err != nil {
		return s, fmt.Errorf("CEL environment: %w", err)
	}
	resolver := s.factory.Resolver()
	resolve := func(ctx context.Context, ref string) (schema.GroupVersionResource, error) {
		return resolveRef(ctx, resolver, ref)
	}
	s.loader = &policyLoader{dir: opts.PolicyDir, compiler: newCompiler(envSet, resolve), caches: s.caches, metrics: s.metrics,
		log: opts.Log.WithName("policies")}
	if opts.Install != nil {
		s.loader.onLoad = func(set *policySet) { s.install(ctx, set) }
	}
	if s.webhookLn, err = net.Listen("tcp", opts.Listen); err != nil {
		return s, err
	}
	if s.probeLn, err = net.Listen("tcp", opts.ProbeListen); err != nil {
		return s, err
	}
	if t := opts.Install; t != nil && t.URL == "" && t.ServiceName == "" {
		t2 := *t
		t2.URL = "https://" + s.webhookAddr()
		s.opts.Install = &t2
	}
	s.factory.Start(ctx)
	s.loader.load(ctx)
	if opts.Install != nil {
		if err := s.installError(); err != nil {
			return s, fmt.Errorf("--install: %w", err)
		}
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.loader.watch(ctx); err != nil {
			opts.Log.Error(err, "policy files are not watched: edits need a restart", "dir", opts.PolicyDir)
		}
	}()

	s.certs, err = newCertReloader(opts.CertFile, opts.KeyFile, s.metrics.certReloads.Inc)
	if err != nil {
		return s, err
	}
	s.webhook = &webhook{policies: s.loader.current.Load, caches: s.caches, metrics: s.metrics, log: opts.Log.WithName("webhook"),
		observe: opts.ObserveLatency}
	mux := http.NewServeMux()
	mux.Handle(validatePathPrefix, s.webhook)
	s.https = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: s.certs.GetCertificate}}
	probes := http.NewServeMux()
	probes.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	probes.HandleFunc("/readyz", s.serveReadyz)
	probes.HandleFunc("/policies", s.servePolicies)
	probes.Handle("/metrics", promhttp.HandlerFor(s.metrics.registry, promhttp.HandlerOpts{}))
	s.probes = &http.Server{Handler: probes, ReadHeaderTimeout: 10 * time.Second}
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		if err := s.https.ServeTLS(s.webhookLn, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			opts.Log.Error(err, "webhook server")
		}
	}()
	go func() {
		defer s.wg.Done()
		if err := s.probes.Serve(s.probeLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			opts.Log.Error(err, "probe server")
		}
	}()
	return s, nil
}

// webhookAddr is the address the webhook listens on (host:port).
func (s *server) webhookAddr() string { return s.webhookLn.Addr().String() }

// probeAddr is the address of /readyz, /metrics and /policies.
func (s *server) probeAddr() string { return s.probeLn.Addr().String() }

func (s *server) install(ctx context.Context, set *policySet) {
	cfg, err := webhookConfiguration(set, *s.opts.Install)
	if err == nil {
		err = installWebhookConfiguration(ctx, s.kube, cfg)
	}
	s.installMu.Lock()
	s.installErr = err
	s.installMu.Unlock()
	if err != nil {
		s.opts.Log.Error(err, "writing the ValidatingWebhookConfiguration")
		return
	}
	s.opts.Log.Info("ValidatingWebhookConfiguration written", "name", cfg.Name, "webhooks", len(cfg.Webhooks))
}

func (s *server) installError() error {
	s.installMu.Lock()
	defer s.installMu.Unlock()
	return s.installErr
}

// readiness says whether every cache a loaded policy reads is Synced,
// and lists those that are not.
func (s *server) readiness() (bool, []cacheState) {
	// The states requests see (as published), so that /readyz and the
	// answers agree.
	var notReady []cacheState
	for _, st := range s.caches.states() {
		if q := s.caches.quickState(st.Ref); !q.ready() {
			notReady = append(notReady, q)
		}
	}
	return len(notReady) == 0, notReady
}

func (s *server) serveReadyz(w http.ResponseWriter, _ *http.Request) {
	ok, notReady := s.readiness()
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
		for _, st := range notReady {
			fmt.Fprintf(w, "%s\n", st)
		}
		return
	}
	_, _ = w.Write([]byte("ok\n"))
}

// policyStatus is /policies' answer.
type policyStatus struct {
	Generation int64          `json:"generation"`
	Loaded     []loadedPolicy `json:"loaded"`
	Refused    []string       `json:"refused"`
	Caches     []string       `json:"caches"`
}

type loadedPolicy struct {
	Name    string   `json:"name"`
	File    string   `json:"file"`
	Line    int      `json:"line"`
	Lookups []string `json:"lookups,omitempty"`
}

func (s *server) policyStatus() policyStatus {
	set := s.loader.current.Load()
	st := policyStatus{Generation: set.generation, Loaded: []loadedPolicy{}, Refused: []string{}, Caches: []string{}}
	for _, n := range set.names() {
		p := set.byName[n]
		st.Loaded = append(st.Loaded, loadedPolicy{Name: n, File: p.File, Line: p.Line, Lookups: p.lookups})
	}
	for _, e := range set.errors {
		st.Refused = append(st.Refused, e.Error())
	}
	for _, c := range s.caches.states() {
		st.Caches = append(st.Caches, fmt.Sprintf("%s: %s", c.Ref, c))
	}
	return st
}

func (s *server) servePolicies(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(s.policyStatus())
}

// shutdown stops the servers, the policy watch and the informers, and
// waits for their goroutines.
func (s *server) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if s.https != nil {
		_ = s.https.Shutdown(ctx)
	} else if s.webhookLn != nil {
		_ = s.webhookLn.Close()
	}
	if s.probes != nil {
		_ = s.probes.Shutdown(ctx)
	} else if s.probeLn != nil {
		_ = s.probeLn.Close()
	}
	if s.cancel != nil {
		s.cancel()
	}
	s.wg.Wait()
	if s.caches != nil {
		s.caches.releaseAll()
	}
	if s.factory != nil {
		s.factory.Shutdown()
	}
}
