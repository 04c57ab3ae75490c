package main

// The lookup benchmark: the same two policies, one reading informerkit
// caches and one sending a GET or LIST per lookup (the Kyverno-style round
// trip), each called by the API server for concurrent admission requests.
// Short by default (1,000 cached objects, 50 at once); INFORMERKIT_LONG=1
// runs the recorded size (10,000 objects, 200 at once). Recorded in
// docs/PERFORMANCE.md.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/test/controlplane"
)

const benchPolicies = `name: bench-get
match:
  namespaces: [e2e-bench]
  resources: [widgets.v1.xref.example.com]
  operations: [CREATE]
validations:
- expression: 'lookup.get("gadgets.v1.xref.example.com", request.namespace, object.spec.xRef) != null'
  message: "spec.xRef must name an existing Gadget"
---
name: bench-count
match:
  namespaces: [e2e-bench]
  resources: [widgets.v1.xref.example.com]
  operations: [CREATE]
validations:
- expression: 'lookup.count("gadgets.v1.xref.example.com", request.namespace, "team=" + object.spec.team) < 100000'
  message: "too many Gadgets in the team"
`

// latencies is a concurrent collector of durations.
type latencies struct {
	mu sync.Mutex // guards d
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

// percentile returns the p-th percentile (0 < p <= 100) and the count.
func (l *latencies) percentile(p float64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0
	}
	s := slices.Clone(l.d)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

func (l *latencies) reset() {
	l.mu.Lock()
	l.d = nil
	l.mu.Unlock()
}

func (l *latencies) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.d)
}

// benchResult is one mode's figures.
type benchResult struct {
	mode                   string
	admissions             int
	webhookP50, webhookP99 time.Duration
	clientP50, clientP99   time.Duration
	requestsPerAdmission   float64
	wall                   time.Duration
}

func TestLookupBenchmark(t *testing.T) {
	if testing.Short() {
		t.Skip("creates thousands of objects")
	}
	objects := controlplane.Sized(1000, 10000)
	concurrency := controlplane.Sized(50, 200)
	admissions := controlplane.Sized(500, 4000)
	const ns, teams = "e2e-bench", 100
	ctx := context.Background()
	if err := sharedCRDs(); err != nil {
		t.Fatal(err)
	}
	setupNamespace(t, ns)

	start := time.Now()
	gadgets := cp.Dynamic().Resource(gadgetsGVR).Namespace(ns)
	work := make(chan int)
	var wg sync.WaitGroup
	var errOnce sync.Once
	var createErr error
	for range 32 {
		wg.Go(func() {
			for i := range work {
				g := newObject("xref.example.com/v1", "Gadget", ns, fmt.Sprintf("g%05d", i), map[string]any{"spec": map[string]any{"size": int64(i)}})
				g.SetLabels(map[string]string{"team": fmt.Sprintf("t%02d", i%teams)})
				if _, err := gadgets.Create(ctx, g, metav1.CreateOptions{}); err != nil {
					errOnce.Do(func() { createErr = err })
				}
			}
		})
	}
	for i := range objects {
		work <- i
	}
	close(work)
	wg.Wait()
	if createErr != nil {
		t.Fatal(createErr)
	}
	t.Logf("%d Gadgets created in %v", objects, time.Since(start).Round(time.Millisecond))

	var results []benchResult
	for _, live := range []bool{false, true} {
		results = append(results, runBenchMode(t, ns, live, objects, concurrency, admissions, teams))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d cached Gadgets, %d admissions (after %d not measured), %d at once through the API server, 2 policies (a get by name, a count by label selector) per admission\n", objects, admissions, concurrency, concurrency)
	fmt.Fprintf(&b, "| lookups | webhook p50 | webhook p99 | admission p50 | admission p99 | lookup requests per admission | wall |\n|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %v | %v | %v | %v | %.2f | %v |\n", r.mode, r.webhookP50, r.webhookP99, r.clientP50, r.clientP99, r.requestsPerAdmission, r.wall.Round(time.Millisecond))
	}
	cached, live := results[0], results[1]
	fmt.Fprintf(&b, "webhook p99: live / cached = %.1fx\n", float64(live.webhookP99)/float64(max(cached.webhookP99, 1)))
	t.Log("\n" + b.String())
	if cached.requestsPerAdmission != 0 {
		t.Errorf("the cached lookups sent %.2f API requests per admission, want 0", cached.requestsPerAdmission)
	}
	if live.requestsPerAdmission < 2 {
		t.Errorf("the live lookups sent %.2f API requests per admission, want 2 (a GET and a LIST)", live.requestsPerAdmission)
	}
}

// runBenchMode starts a webhook with the bench policies (cached or live
// lookups), sends the admissions through the API server, and stops it.
func runBenchMode(t *testing.T, ns string, live bool, objects, concurrency, admissions, teams int) benchResult {
	t.Helper()
	ctx := context.Background()
	mode := "cache"
	if live {
		mode = "live GET/LIST"
	}
	dir := t.TempDir()
	writePolicy(t, dir, "bench.yaml", benchPolicies)
	ca, err := newCertAuthority("bench-ca")
	if err != nil {
		t.Fatal(err)
	}
	certDir := t.TempDir()
	if _, err := ca.issue(certDir); err != nil {
		t.Fatal(err)
	}
	cfg, counter := controlplane.CountRequests(cp.Config())
	cfg.QPS, cfg.Burst = 100000, 100000
	var webhookLat, getLat, countLat latencies
	configName := "aw-bench"
	s, err := newServer(ctx, cfg, serverOptions{
		PolicyDir: dir, CertFile: certDir + "/tls.crt", KeyFile: certDir + "/tls.key",
		Listen: "127.0.0.1:0", ProbeListen: "127.0.0.1:0",
		// The longest timeout the API server allows: on a loaded machine a
		// slow answer is measured, not turned into a failed admission.
		Install:     &webhookTarget{CABundle: ca.CertPEM, ConfigName: configName, TimeoutSeconds: 30},
		LiveLookups: live,
		ObserveLatency: func(policy string, d time.Duration) {
			switch policy {
			case "bench-get":
				getLat.add(d)
			case "bench-count":
				countLat.add(d)
			default:
				return
			}
			webhookLat.add(d)
		},
		Log: newLogger(testWriter{t}, 0),
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := func() {
		s.shutdown()
		_ = cp.Kube().AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, configName, metav1.DeleteOptions{})
	}
	defer stop()
	if err := waitUntil(ctx, 2*time.Minute, "the caches", func() (bool, string) { ok, nr := s.readiness(); return ok, fmt.Sprint(nr) }); err != nil {
		t.Fatal(err)
	}
	if !live {
		idx, err := s.caches.indexer("gadgets.v1.xref.example.com")
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := idx.ByIndex(toolscache.NamespaceIndex, ns); len(got) != objects {
			t.Fatalf("cache holds %d Gadgets in %s, want %d", len(got), ns, objects)
		}
	}
	widget := func(i int) map[string]any {
		return map[string]any{"spec": map[string]any{"xRef": fmt.Sprintf("g%05d", rand.IntN(objects)), "team": fmt.Sprintf("t%02d", i%teams)}}
	}
	if err := waitForWebhook(ctx, cp.Dynamic(), widgetsGVR, newObject("xref.example.com/v1", "Widget", ns, "probe", map[string]any{"spec": map[string]any{"xRef": "none", "team": "t00"}}), "spec.xRef must name an existing Gadget"); err != nil {
		t.Fatal(err)
	}
	clientCfg := cp.Config()
	clientCfg.QPS, clientCfg.Burst = 100000, 100000
	dyn, err := dynamic.NewForConfig(clientCfg)
	if err != nil {
		t.Fatal(err)
	}
	client := dyn.Resource(widgetsGVR).Namespace(ns)
	var clientLat latencies
	// drive sends n admissions, concurrency at once.
	drive := func(n int) error {
		work := make(chan int)
		var wg sync.WaitGroup
		var errOnce sync.Once
		var runErr error
		for range concurrency {
			wg.Go(func() {
				for i := range work {
					t0 := time.Now()
					_, err := client.Create(ctx, newObject("xref.example.com/v1", "Widget", ns, fmt.Sprintf("w%06d", i), widget(i)), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
					clientLat.add(time.Since(t0))
					if err != nil {
						errOnce.Do(func() { runErr = err })
					}
				}
			})
		}
		for i := range n {
			work <- i
		}
		close(work)
		wg.Wait()
		return runErr
	}
	// A warm-up round, not measured: the API server's connections to the
	// webhook (TLS handshakes) and the label index of the first count.
	if err := drive(concurrency); err != nil {
		t.Fatalf("%s: a warm-up admission failed: %v", mode, err)
	}
	webhookLat.reset()
	getLat.reset()
	countLat.reset()
	clientLat.reset()
	counter.Reset()
	begin := time.Now()
	runErr := drive(admissions)
	wall := time.Since(begin)
	if runErr != nil {
		t.Fatalf("%s: an admission failed: %v", mode, runErr)
	}
	// Requests for the looked-up objects (a GET of one object counts as
	// "list" here); the others (discovery refreshes) do not depend on
	// admissions.
	lookups := counter.Count("list", "/"+gadgetsGVR.Resource)
	byVerb := map[string]int{}
	for req, n := range counter.Snapshot() {
		byVerb[req.Verb] += n
	}
	r := benchResult{
		mode: mode, admissions: admissions,
		webhookP50: webhookLat.percentile(50), webhookP99: webhookLat.percentile(99),
		clientP50: clientLat.percentile(50), clientP99: clientLat.percentile(99),
		requestsPerAdmission: float64(lookups) / float64(admissions), wall: wall,
	}
	if n := webhookLat.len(); n != 2*admissions {
		t.Errorf("%s: the webhook decided %d requests, want %d (2 policies × %d)", mode, n, 2*admissions, admissions)
	}
	t.Logf("%s: webhook p50/p99 by policy: get %v / %v, count %v / %v", mode, getLat.percentile(50), getLat.percentile(99), countLat.percentile(50), countLat.percentile(99))
	t.Logf("%s: API requests sent by the webhook during the run, by verb (a GET of one object counts as list): %v; for Gadgets: %d", mode, byVerb, lookups)
	// The configuration must be gone from the API server's view before the
	// next mode: an admission without any webhook is admitted.
	stop()
	if err := waitUntil(ctx, 60*time.Second, "the API server to drop the bench webhook", func() (bool, string) {
		_, err := client.Create(ctx, newObject("xref.example.com/v1", "Widget", ns, "after", map[string]any{"spec": map[string]any{"xRef": "none", "team": "t00"}}), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil, fmt.Sprint(err)
	}); err != nil {
		t.Fatal(err)
	}
	return r
}
