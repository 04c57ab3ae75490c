package main

// End-to-end tests of issue 33, items 6 and 8 (the watcher's part): the
// first list of an empty custom resource, a resource named twice, a
// removal in JSON, resources named as kubectl names them.

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	kdynamicinformer "k8s.io/client-go/dynamic/dynamicinformer"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/test/controlplane"
)

// freshCRD installs a CRD nothing has asked for yet: the API server builds
// its storage (and watch cache) on the first request for it.
func freshCRD(t *testing.T, cp *controlplane.ControlPlane, kind string) schema.GroupVersionResource {
	t.Helper()
	crd := controlplane.NewCRD(perRun("empty")+".e2e.example.com", kind, strings.ToLower(kind)+"s")
	if err := cp.InstallCRD(context.Background(), crd); err != nil {
		t.Fatal(err)
	}
	return controlplane.GVR(crd)
}

// watcherSync is how long the watcher's informer of gvr takes from the
// informers' start to Synced, run in this process on the watcher's own
// path (newWatcher, setup with the access check, start).
func watcherSync(t *testing.T, cp *controlplane.ControlPlane, gvr schema.GroupVersionResource) time.Duration {
	t.Helper()
	cfg, err := parseArgs([]string{"--resource", gvrString(gvr), "-o", "json"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	w, err := newWatcher(cfg, cp.Config(), endpoint{Host: cp.Config().Host}, newPrinter(&out, &out, true, false), logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := w.setup(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.shutdown()
	start := time.Now()
	w.start(ctx)
	deadline := start.Add(time.Minute)
	for {
		sts := w.factory.Statuses()
		if len(sts) == 1 && sts[0].State == dynamicinformer.Synced {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			t.Fatalf("not synced within a minute: %+v", sts)
		}
		time.Sleep(time.Millisecond)
	}
}

// clientGoSync is how long client-go's dynamic informer of gvr takes
// from its start to HasSynced.
func clientGoSync(t *testing.T, cp *controlplane.ControlPlane, gvr schema.GroupVersionResource) time.Duration {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cp.Config())
	if err != nil {
		t.Fatal(err)
	}
	f := kdynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	inf := f.ForResource(gvr).Informer()
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); f.Shutdown() }()
	start := time.Now()
	f.Start(ctx.Done())
	for !inf.HasSynced() {
		if time.Since(start) > time.Minute {
			t.Fatal("client-go's informer not synced within a minute")
		}
		time.Sleep(time.Millisecond)
	}
	return time.Since(start)
}

// Issue 33, item 6: an empty custom resource syncs in the watcher about
// as fast as client-go's dynamic informer syncs it. The first request for
// a custom resource finds the API server's watch cache for it still
// initializing: the watch-list stream is refused 429 and client-go's
// reflector retries it after its back-off, about 1 s, while a plain list
// is served at once. Measured: the watcher first (the first request),
// client-go's informer on the same resource next (its cache now built),
// and client-go's informer on another fresh resource (a first request,
// as the watcher's). The watcher, which falls back to the list at once,
// must be no slower than client-go on a fresh resource; against client-go
// on the warm resource the gap is logged (it was the check, until a CPU
// hog made a first request cost a second without any back-off). And a
// fresh empty custom resource breaks no quiet start: no SYNC, Syncing or
// Pending line.
func TestE2EItemsAEmptyCRSync(t *testing.T) {
	controlplane.Parallel(t)
	cp := controlPlane(t)
	// A loaded machine only adds time, to either side: the best of three
	// tries is compared. The defect this guards against (the first
	// watch-list refused 429 and retried after the reflector's back-off)
	// puts the watcher where client-go is on a fresh resource, back-off
	// included; without it the watcher was faster in each of six tries
	// under a CPU hog (by 0.1–0.7 s).
	var ratios []float64
	best, bestWarm, bestCold := time.Duration(1<<62), time.Duration(1<<62), time.Duration(1<<62)
	for i := 0; i < 3; i++ {
		gvr := freshCRD(t, cp, "Hollow")
		ours := watcherSync(t, cp, gvr)
		warm := clientGoSync(t, cp, gvr)
		cold := clientGoSync(t, cp, freshCRD(t, cp, "Vacant"))
		t.Logf("empty CR %s: watcher %s (first request), client-go %s (same resource), client-go %s on a fresh one",
			gvrString(gvr), ours.Round(time.Millisecond), warm.Round(time.Millisecond), cold.Round(time.Millisecond))
		ratios = append(ratios, float64(ours)/float64(cold))
		best, bestWarm, bestCold = min(best, ours), min(bestWarm, warm), min(bestCold, cold)
	}
	t.Logf("watcher / client-go on a fresh resource: %.2f; best %s against %s fresh, %s on the watcher's resource once built",
		ratios, best.Round(time.Millisecond), bestCold.Round(time.Millisecond), bestWarm.Round(time.Millisecond))
	if best > bestCold {
		t.Errorf("the watcher synced a fresh empty custom resource in %s at best, client-go a fresh one in %s: the watcher should not pay the reflector's back-off client-go pays", best, bestCold)
	}

	// The quiet start, as the timing above: a loaded machine can make any
	// one list slower than the status grace (a Syncing line), the defect
	// makes every one slower; one quiet start of three fresh resources
	// shows it is gone.
	var quiet bool
	var stderrs []string
	for i := 0; i < 3 && !quiet; i++ {
		gvr := freshCRD(t, cp, "Void")
		p := startWatcher(t, "--kubeconfig", cp.Kubeconfig(t), "--resource", gvrString(gvr), "--resource", "namespaces", "--duration", "3s")
		code, _, stderr := p.exited(t, 2*time.Minute)
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, stderr)
		}
		mustNotContain(t, "stderr", stderr, "Pending")
		quiet = strings.Contains(stderr, "STATUS  "+gvrString(gvr)+" Synced (0 objects)") &&
			!strings.Contains(stderr, "SYNC ") && !strings.Contains(stderr, "Syncing")
		stderrs = append(stderrs, stderr)
	}
	if !quiet {
		t.Errorf("no quiet start (one \"Synced (0 objects)\", no SYNC or Syncing line) in 3 fresh empty custom resources:\n%s", strings.Join(stderrs, "\n----\n"))
	}
}

// Issue 33, item 8: the same resource named three ways is watched once,
// with a note and no Stopped line; one row in the final status.
func TestE2EItemsADuplicateName(t *testing.T) {
	controlplane.Parallel(t)
	cp := controlPlane(t)
	ctx := context.Background()
	// A short name and a version-pinned name of the same resource: the
	// pair that gave two informers and a "Stopped … released" line.
	short := perRun("dup")
	crd := controlplane.NewCRD("dup.e2e.example.com", "Dup", perRun("dups"), controlplane.ShortNames(short))
	if err := cp.InstallCRD(ctx, crd); err != nil {
		t.Fatal(err)
	}
	gvr := controlplane.GVR(crd)
	pinned := gvrString(gvr)
	p := startWatcher(t, "--kubeconfig", cp.Kubeconfig(t), "-r", short, "-r", pinned, "-n", "default", "--duration", "6s")
	code, _, stderr := p.exited(t, 2*time.Minute)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	mustContain(t, "stderr", stderr, `note: "`+short+`" and "`+pinned+`" are the same resource`, "watching it once")
	mustNotContain(t, "stderr", stderr, "Stopped", "released")
	if n := strings.Count(stderr, "\n"+pinned+" "); n > 1 {
		t.Errorf("the final status has %d rows of %s, want 1:\n%s", n, pinned, stderr)
	}
}

// Issue 33, item 8: a removal is a state, not an error — its JSON STATUS
// record has no "error"; a Pending wait for a CRD names the resource as
// kubectl does, in STATUS and in /readyz, never in Go form
// ("never.example.com/v1, Resource=later").
func TestE2EItemsARemovalAndNames(t *testing.T) {
	controlplane.Parallel(t)
	cp := controlPlane(t)
	ctx := context.Background()
	crd := controlplane.NewCRD("gone.e2e.example.com", "Ghost", perRun("ghosts"))
	if err := cp.InstallCRD(ctx, crd); err != nil {
		t.Fatal(err)
	}
	gvr := controlplane.GVR(crd)
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": gvr.GroupVersion().String(), "kind": "Ghost"}}
	obj.SetName("boo")
	if _, err := cp.Dynamic().Resource(gvr).Namespace("default").Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	later := schema.GroupVersionResource{Group: perRun("never") + ".example.com", Version: "v1", Resource: "later"}
	p := startWatcher(t, "--kubeconfig", cp.Kubeconfig(t), "-o", "json", "--wait-for-crds", "-r", gvrString(gvr), "-r", gvrString(later),
		"--metrics-addr", "127.0.0.1:0")
	base := metricsBase(t, p)
	// record waits for a STATUS record of resource in state whose text
	// also holds each of with.
	record := func(resource, state string, with ...string) string {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			out, errs := p.lines()
		lines:
			for _, l := range out {
				if strings.Contains(l, `"type":"STATUS"`) && strings.Contains(l, `"resource":"`+resource+`"`) && strings.Contains(l, `"state":"`+state+`"`) {
					for _, w := range with {
						if !strings.Contains(l, w) {
							continue lines
						}
					}
					return l
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("no STATUS %s for %s saying %q\nstdout:\n%s\nstderr:\n%s", state, resource, with, strings.Join(out, "\n"), strings.Join(errs, "\n"))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	record(gvr.Resource, "Synced")
	// The Pending record names the resource as not in discovery. Its first
	// Pending may say only "the API server answered 404 Not Found": when
	// discovery of some other group fails at start (the package's other
	// tests create and delete CRDs; seen beside a CPU hog) the first
	// verdict is unknown and the list's 404 speaks first; the next
	// discovery names the resource.
	pending := record("later", "Pending", gvrString(later)+" is not in discovery")
	t.Logf("pending: %s", pending)
	mustNotContain(t, "Pending record", pending, "Resource=", `"error"`)
	code, body := httpGet(base + "/readyz")
	t.Logf("/readyz %d: %s", code, strings.TrimSpace(body))
	if code != http.StatusServiceUnavailable {
		t.Errorf("/readyz = %d with an informer Pending, want 503", code)
	}
	mustContain(t, "/readyz", body, gvrString(later)+" Pending")
	mustNotContain(t, "/readyz", body, "Resource=")

	if err := cp.APIExtensions().ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, crd.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	removed := record(gvr.Resource, "Removed")
	t.Logf("removed: %s", removed)
	mustNotContain(t, "Removed record", removed, `"error"`, "Resource=")
	mustContain(t, "Removed record", removed, `"reason":"`)
	_, stderr := p.lines()
	mustNotContain(t, "stderr", strings.Join(stderr, "\n"), "Resource=")
}
