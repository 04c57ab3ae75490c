package soaktest

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/shard"
	"github.com/informerkit/informerkit/shard/membership"
	"github.com/informerkit/informerkit/test/controlplane"
)

// config is one soak run's parameters.
type config struct {
	prefix string // names of namespaces, CRD groups and the user
	seed   uint64
	rate   int // writes per second, all writers together
	// iterations bounds the run (0: until duration has passed).
	iterations int
	duration   time.Duration
	kinds      []string
	window     func(*rand.Rand) time.Duration
	// quiet bounds the wait of each check.
	quiet time.Duration
	// minimal: only the default informer (plus extra); no user
	// factory, no shard group.
	minimal bool
	// group: the schedule's first iterations take this many kinds each.
	group int
	// extra adds subjects (the broken informers of the self-test).
	extra func(ctx context.Context, h *harness) []*subject
	logf  func(format string, args ...any)
}

// quietBound bounds each check's wait. It covers client-go's reflector
// back-off at its cap ([30, 60) s), where a few faults in a row can take
// it, and the server's watch cache of a resource with a corrupt object,
// which closes its watches ~30 s after the corruption.
const quietBound = 90 * time.Second

const (
	userSuffix    = "-user"
	leaseDuration = 3 * time.Second
	renewInterval = 300 * time.Millisecond
	finalizer     = "soak.example.com/hold"
	pool          = 40 // names per resource and namespace
)

// harness is a running soak: resources, informers, writers and faults.
type harness struct {
	cfg        config
	dyn        dynamic.Interface // admin, through the proxy: the check's LISTs
	wdyn       dynamic.Interface // the writers' client (5 s timeout)
	res        []*resource
	widgets    *resource
	gadgets    *resource
	configmaps *resource
	namespaces []string // a, b (the user may read configmaps here), c (it may not)
	user       string

	admin, userF *dynamicinformer.Factory
	disk         *diskProc // nil in minimal runs

	mu       sync.Mutex // guards subjects, group, memberN
	subjects []*subject
	group    []*subject
	memberN  int

	proxyMu   sync.Mutex // one proxy fault (stall, refuse, compact) at a time
	restartMu sync.Mutex
	gadgetsMu sync.Mutex // one fault of the gadgets CRD (crd, crd-recreate, corrupt) at a time
	widgetsMu sync.Mutex // guards widgetsV2
	widgetsV2 bool       // the widgets CRD stores v2 (crd-version)

	stats *stats
}

// stats is what a run counts.
type stats struct {
	mu          sync.Mutex
	ops         map[string]int // op -> succeeded
	refused     map[string]int // op -> not found, conflict, exists (the object was not as the writer guessed)
	errs        map[string]int // op -> other errors (faults)
	created     int
	faults      map[string]int
	faultErrs   []string
	converge    map[string][]time.Duration // fault kind -> time to converge of iterations with it (that converged)
	diverged    map[string]int             // fault kind -> iterations with it that did not converge
	iterations  int
	divergences []divergenceRecord
	writeTime   time.Duration
}

// divergenceRecord is one iteration that did not converge: the
// iteration (its faults), the ones before it, and what the check saw.
type divergenceRecord struct {
	iteration string
	before    []string
	divs      []divergence
}

func (r divergenceRecord) String() string {
	before := "none"
	if len(r.before) > 0 {
		before = strings.Join(r.before, "; ")
	}
	return fmt.Sprintf("%s (earlier: %s):\n%s", r.iteration, before, formatDivs(r.divs))
}

func newStats() *stats {
	return &stats{ops: map[string]int{}, refused: map[string]int{}, errs: map[string]int{}, faults: map[string]int{}, converge: map[string][]time.Duration{}, diverged: map[string]int{}}
}

func (s *stats) op(op string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case err == nil:
		s.ops[op]++
		if op == "create" {
			s.created++
		}
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsInvalid(err) || apierrors.IsForbidden(err):
		s.refused[op]++
	default:
		s.errs[op]++
	}
}

func newResource(prefix, kind, plural string, finalizers bool) *resource {
	crd := controlplane.NewCRD(prefix+".soak.example.com", kind, plural)
	return &resource{name: plural, gvr: controlplane.GVR(crd), kind: kind, crd: crd, finalizers: finalizers}
}

// newHarness creates the namespaces, CRDs, RBAC and informers and waits
// for the first check to hold.
func newHarness(t *testing.T, ctx context.Context, cfg config) *harness {
	t.Helper()
	h := &harness{cfg: cfg, dyn: cp.Dynamic(), stats: newStats(), user: cfg.prefix + userSuffix}
	wcfg := cp.Config()
	wcfg.Timeout = 5 * time.Second
	h.wdyn = dynamic.NewForConfigOrDie(wcfg)
	h.widgets = newResource(cfg.prefix, "Widget", "widgets", true)
	// No finalizers on gadgets: the CRD fault deletes their CRD, whose
	// deletion waits for every object to go.
	h.gadgets = newResource(cfg.prefix, "Gadget", "gadgets", false)
	h.configmaps = &resource{name: "configmaps", gvr: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, kind: "ConfigMap", finalizers: true}
	h.res = []*resource{h.widgets, h.gadgets, h.configmaps}
	for _, s := range []string{"a", "b", "c", "leases"} {
		ns := cfg.prefix + "-" + s
		if err := cp.CreateNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
		if s != "leases" {
			h.namespaces = append(h.namespaces, ns)
		}
	}
	for _, r := range []*resource{h.widgets, h.gadgets} {
		if err := cp.InstallCRD(ctx, r.crd); err != nil {
			t.Fatal(err)
		}
	}
	// The user may read configmaps in a and b (not c) and gadgets
	// everywhere.
	cmRule := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}
	gRule := rbacv1.PolicyRule{APIGroups: []string{h.gadgets.gvr.Group}, Resources: []string{"gadgets"}, Verbs: []string{"get", "list", "watch"}}
	for _, ns := range h.namespaces[:2] {
		if err := role(ctx, ns, h.user+"-cm", cmRule); err != nil {
			t.Fatal(err)
		}
	}
	if err := role(ctx, "", h.user+"-gadgets", gRule); err != nil {
		t.Fatal(err)
	}
	if err := h.grant(ctx); err != nil {
		t.Fatal(err)
	}

	// Some objects before the informers start.
	rnd := rand.New(rand.NewPCG(cfg.seed, 1))
	for i := 0; i < 60; i++ {
		h.write(ctx, rnd, "create")
	}

	var err error
	h.admin, err = dynamicinformer.NewForConfig(cp.Config(), dynamicinformer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	add := func(name string, sc scope, hd *dynamicinformer.InformerHandle, wantErr error) *subject {
		s := &subject{name: name, scope: sc, store: func() []any { return hd.Informer().GetStore().List() },
			status: hd.Status, wantErr: wantErr, rec: newRecorder(), handle: hd}
		if _, err := hd.Informer().AddEventHandler(s.rec); err != nil {
			t.Fatal(err)
		}
		h.subjects = append(h.subjects, s)
		return s
	}
	add("default", scope{res: h.widgets}, h.admin.ForResource(h.widgets.gvr), nil)
	if !cfg.minimal {
		add("strip-managed-fields", scope{res: h.widgets},
			h.admin.ForResource(h.widgets.gvr, dynamicinformer.WithProjection(dynamicinformer.Projection{StripManagedFields: true})), nil)
		add("metadata-only", scope{res: h.gadgets},
			h.admin.ForResource(h.gadgets.gvr, dynamicinformer.WithProjection(dynamicinformer.Projection{MetadataOnly: true})), nil)
		add("gadgets", scope{res: h.gadgets}, h.admin.ForResource(h.gadgets.gvr), nil)
		add("compact", scope{res: h.configmaps},
			h.admin.ForResource(h.configmaps.gvr, dynamicinformer.WithProjection(dynamicinformer.Projection{Compact: true})), nil)
		sel := labels.SelectorFromSet(labels.Set{"soak/in": "yes"})
		add("label-selector", scope{res: h.widgets, selector: sel},
			h.admin.ForResource(h.widgets.gvr, dynamicinformer.WithLabelSelector(sel.String())), nil)
		for i := 0; i < 3; i++ {
			h.join(t, ctx)
		}

		h.userF, err = dynamicinformer.NewForConfig(cp.UserConfig(h.user), dynamicinformer.Options{})
		if err != nil {
			t.Fatal(err)
		}
		add("namespaces", scope{res: h.configmaps, namespaces: h.namespaces[:2]},
			h.userF.ForResource(h.configmaps.gvr, dynamicinformer.WithNamespaces(h.namespaces...)), dynamicinformer.ErrForbidden)
		add("access-check", scope{res: h.gadgets},
			h.userF.ForResource(h.gadgets.gvr, dynamicinformer.WithAccessCheck(true)), nil)
		if err := h.startDisk(ctx, t.TempDir()); err != nil {
			t.Fatal(err)
		}
	}
	if cfg.extra != nil {
		h.subjects = append(h.subjects, cfg.extra(ctx, h)...)
	}
	h.admin.Start(ctx)
	if h.userF != nil {
		h.userF.Start(ctx)
	}
	took, divs, _ := h.check(ctx, 90*time.Second)
	if len(divs) > 0 {
		t.Fatalf("seed %d: the informers never converged at the start:\n%s", cfg.seed, formatDivs(divs))
	}
	cfg.logf("start: %d informers converged %v after starting", len(h.subjects)+len(h.group), took.Round(time.Millisecond))
	return h
}

func (h *harness) grant(ctx context.Context) error {
	for _, ns := range h.namespaces[:2] {
		if err := bind(ctx, h.user, ns, h.user+"-cm"); err != nil {
			return err
		}
	}
	return bind(ctx, h.user, "", h.user+"-gadgets")
}

func (h *harness) revoke(ctx context.Context) error {
	if err := unbind(ctx, h.namespaces[1], h.user+"-cm"); err != nil {
		return err
	}
	return unbind(ctx, "", h.user+"-gadgets")
}

// join adds a shard group member: a Lease membership and an informer of
// the admin factory following it.
func (h *harness) join(t *testing.T, ctx context.Context) error {
	h.mu.Lock()
	id := fmt.Sprintf("m%d", h.memberN)
	h.memberN++
	h.mu.Unlock()
	var m *membership.Member
	err := retry(ctx, "join "+id, func(ctx context.Context) error {
		var err error
		m, err = membership.Join(ctx, cp.Kube(), membership.Options{
			Namespace: h.cfg.prefix + "-leases", Group: "widgets", Identity: id,
			LeaseDuration: leaseDuration, RenewInterval: renewInterval, HandoffTimeout: 2 * leaseDuration,
		})
		return err
	})
	if err != nil {
		if t != nil {
			t.Fatal(err)
		}
		return err
	}
	hd := h.admin.ForResource(h.widgets.gvr, dynamicinformer.WithShardSource(m))
	s := &subject{name: "shard-" + id, scope: scope{res: h.widgets, shard: func() shard.Shard { s, _ := m.Current(); return s }},
		store: func() []any { return hd.Informer().GetStore().List() }, status: hd.Status, rec: newRecorder(), handle: hd, member: m}
	if _, err := hd.Informer().AddEventHandler(s.rec); err != nil {
		return err
	}
	h.mu.Lock()
	h.group = append(h.group, s)
	h.mu.Unlock()
	return nil
}

// check runs the check over every subject and the shard group.
func (h *harness) check(ctx context.Context, timeout time.Duration) (time.Duration, []divergence, []string) {
	h.mu.Lock()
	subjects := append([]*subject(nil), h.subjects...)
	group := append([]*subject(nil), h.group...)
	h.mu.Unlock()
	return check(ctx, h.dyn, h.res, append(subjects, group...), group, timeout)
}

func formatDivs(divs []divergence) string {
	var b strings.Builder
	for _, d := range divs {
		b.WriteString("  " + d.String() + "\n")
	}
	return b.String()
}

// shutdown stops every informer and membership.
func (h *harness) shutdown() {
	h.admin.Shutdown()
	if h.userF != nil {
		h.userF.Shutdown()
	}
	h.mu.Lock()
	group := h.group
	h.group = nil
	h.mu.Unlock()
	for _, s := range group {
		s.member.Stop()
	}
	if h.disk != nil {
		h.disk.shutdown()
	}
}

// object builds an object of r for create and server-side apply.
func (h *harness) object(r *resource, ns, name string, n int, in bool) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": r.apiVersion(), "kind": r.kind,
		"metadata": map[string]any{"name": name, "namespace": ns},
	}}
	if r.crd == nil {
		u.Object["data"] = map[string]any{"n": strconv.Itoa(n)}
	} else {
		u.Object["spec"] = map[string]any{"n": int64(n)}
	}
	sel := "no"
	if in {
		sel = "yes"
	}
	u.SetLabels(map[string]string{"soak/in": sel, "soak/batch": fmt.Sprintf("b%d", n%4)})
	return u
}

var writeOps = []struct {
	op     string
	weight int
}{
	{"create", 25}, {"apply", 15}, {"merge-patch", 18}, {"label", 15}, {"delete", 10},
	{"deletecollection", 2}, {"finalizer-add", 8}, {"finalizer-remove", 7},
}

func pickOp(rnd *rand.Rand) string {
	total := 0
	for _, o := range writeOps {
		total += o.weight
	}
	p := rnd.IntN(total)
	for _, o := range writeOps {
		if p < o.weight {
			return o.op
		}
		p -= o.weight
	}
	return "create"
}

// write does one write (op, or a drawn one when op is ""), drawn from rnd.
func (h *harness) write(ctx context.Context, rnd *rand.Rand, op string) {
	r := h.res[rnd.IntN(len(h.res))]
	ns := h.namespaces[rnd.IntN(len(h.namespaces))]
	name := fmt.Sprintf("o-%02d", rnd.IntN(pool))
	n := rnd.IntN(1 << 20)
	in := rnd.IntN(2) == 0
	if op == "" {
		op = pickOp(rnd)
	}
	if (op == "finalizer-add" || op == "finalizer-remove") && !r.finalizers {
		op = "merge-patch"
	}
	c := h.wdyn.Resource(r.gvr).Namespace(ns)
	var err error
	switch op {
	case "create":
		_, err = c.Create(ctx, h.object(r, ns, name, n, in), metav1.CreateOptions{})
	case "apply":
		var data []byte
		data, err = json.Marshal(h.object(r, ns, name, n, in).Object)
		if err == nil {
			force := true
			_, err = c.Patch(ctx, name, types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: "soak-apply", Force: &force})
		}
	case "merge-patch":
		patch := fmt.Sprintf(`{"spec":{"n":%d}}`, n)
		if r.crd == nil {
			patch = fmt.Sprintf(`{"data":{"n":"%d"}}`, n)
		}
		_, err = c.Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	case "label":
		sel := "no"
		if in {
			sel = "yes"
		}
		_, err = c.Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"labels":{"soak/in":"`+sel+`"}}}`), metav1.PatchOptions{})
	case "delete":
		err = c.Delete(ctx, name, metav1.DeleteOptions{})
	case "deletecollection":
		err = c.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: fmt.Sprintf("soak/batch=b%d", n%4)})
	case "finalizer-add":
		_, err = c.Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"finalizers":["`+finalizer+`"]}}`), metav1.PatchOptions{})
	case "finalizer-remove":
		_, err = c.Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	}
	h.stats.op(op, err)
}

// writers runs the writers at the configured rate until ctx ends.
func (h *harness) writers(ctx context.Context, seed uint64) *sync.WaitGroup {
	const n = 8
	interval := time.Second / time.Duration(h.cfg.rate)
	tick := time.NewTicker(interval)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(seed, uint64(i)))
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				h.write(ctx, rnd, "")
			}
		}(i)
	}
	go func() { wg.Wait(); tick.Stop() }()
	return &wg
}

// inject runs one fault to its end, healed.
func (h *harness) inject(ctx context.Context, f fault) error {
	p := cp.Proxy()
	switch f.Kind {
	case faultCut:
		p.CutAll()
		sleep(ctx, f.For)
		p.CutAll()
	case faultStall:
		h.proxyMu.Lock()
		defer h.proxyMu.Unlock()
		p.SetStalled(true)
		sleep(ctx, f.For)
		p.SetStalled(false)
	case faultRefuse:
		h.proxyMu.Lock()
		defer h.proxyMu.Unlock()
		p.SetRefuse(true)
		p.CutAll()
		sleep(ctx, f.For)
		p.SetRefuse(false)
	case faultCompact:
		h.proxyMu.Lock()
		defer h.proxyMu.Unlock()
		p.SetStalled(true)
		// Writes the informers cannot see, straight to the API server,
		// then a compaction past them: the informers' watches resume
		// from a compacted revision (410 Gone) and must relist.
		direct := cp.DirectConfig()
		direct.Timeout = 5 * time.Second
		d := dynamic.NewForConfigOrDie(direct)
		h.gapWrites(ctx, d, f.Pick)
		_, err := cp.Compact(ctx)
		sleep(ctx, f.For)
		p.CutAll()
		p.SetStalled(false)
		return err
	case faultRestart:
		h.restartMu.Lock()
		defer h.restartMu.Unlock()
		if err := cp.RestartAPIServer(ctx); err != nil {
			return err
		}
	case faultCRD:
		h.gadgetsMu.Lock()
		defer h.gadgetsMu.Unlock()
		if err := retry(ctx, "delete CRD", func(ctx context.Context) error { return cp.DeleteCRD(ctx, h.gadgets.crd.Name) }); err != nil {
			return err
		}
		sleep(ctx, f.For)
		// Re-created with the same schema or (odd Pick) a structural one
		// that prunes what it does not name.
		crd := h.gadgets.crd.DeepCopy()
		if f.Pick%2 == 1 {
			crd.Spec.Versions[0].Schema = structuralSchema()
		}
		return retry(ctx, "re-create CRD", func(ctx context.Context) error { return cp.InstallCRD(ctx, crd) })
	case faultCRDRecreate:
		h.gadgetsMu.Lock()
		defer h.gadgetsMu.Unlock()
		if err := retry(ctx, "delete CRD", func(ctx context.Context) error { return cp.DeleteCRD(ctx, h.gadgets.crd.Name) }); err != nil {
			return err
		}
		sleep(ctx, f.For)
		// Another version set: v2 is added and stores; v1, which the
		// informers watch, is still served (without conversion, objects
		// are the same in both). A structural schema too.
		crd := h.gadgets.crd.DeepCopy()
		crd.Spec.Versions[0].Storage = false
		crd.Spec.Versions[0].Schema = structuralSchema()
		v2 := crd.Spec.Versions[0]
		v2.Name, v2.Storage = "v2", true
		crd.Spec.Versions = append(crd.Spec.Versions, v2)
		return retry(ctx, "re-create CRD with v1 and v2", func(ctx context.Context) error { return cp.InstallCRD(ctx, crd) })
	case faultCRDVersion:
		h.widgetsMu.Lock()
		defer h.widgetsMu.Unlock()
		if err := retry(ctx, "switch the storage version", func(ctx context.Context) error { return h.switchWidgetsVersion(ctx, !h.widgetsV2) }); err != nil {
			return err
		}
		h.widgetsV2 = !h.widgetsV2
	case faultCorrupt:
		h.gadgetsMu.Lock()
		defer h.gadgetsMu.Unlock()
		return h.corrupt(ctx, f)
	case faultRBAC:
		if err := retry(ctx, "revoke", h.revoke); err != nil {
			return err
		}
		p.CutAll() // open watches were authorized when they opened
		sleep(ctx, f.For)
		return retry(ctx, "grant", h.grant)
	case faultDiskRestart:
		if h.disk == nil {
			return nil
		}
		return h.disk.restart(ctx, f.For)
	case faultShard:
		h.mu.Lock()
		if len(h.group) == 0 {
			h.mu.Unlock()
			return nil
		}
		i := f.Pick % len(h.group)
		s := h.group[i]
		h.group = append(h.group[:i:i], h.group[i+1:]...)
		h.mu.Unlock()
		if (f.Pick/7)%2 == 0 {
			// leaves gracefully
			lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err := s.member.Leave(lctx)
			cancel()
			s.handle.Release()
			if err != nil {
				h.stats.mu.Lock()
				h.stats.faultErrs = append(h.stats.faultErrs, "leave: "+err.Error())
				h.stats.mu.Unlock()
			}
		} else {
			// dies: stops renewing; the others take over after its Lease
			s.handle.Release()
			s.member.Stop()
		}
		return h.join(nil, ctx)
	default:
		return fmt.Errorf("unknown fault %q", f.Kind)
	}
	return nil
}

// switchWidgetsVersion updates the widgets CRD in place: v2 served and
// the storage version (toV2), or v1 the storage version again and v2 no
// longer served (it stays listed: objects stored as v2 are in
// status.storedVersions). v1, the watched version, is served throughout.
func (h *harness) switchWidgetsVersion(ctx context.Context, toV2 bool) error {
	c := cp.APIExtensions().ApiextensionsV1().CustomResourceDefinitions()
	crd, err := c.Get(ctx, h.widgets.crd.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	var v1 apiextensionsv1.CustomResourceDefinitionVersion
	for _, v := range crd.Spec.Versions {
		if v.Name == "v1" {
			v1 = v
		}
	}
	v1.Served, v1.Storage = true, !toV2
	v2 := v1
	v2.Name, v2.Served, v2.Storage = "v2", toV2, toV2
	crd.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{v1, v2}
	if _, err := c.Update(ctx, crd, metav1.UpdateOptions{}); err != nil {
		return err
	}
	return cp.WaitForCRD(ctx, crd)
}

// corrupt writes garbage to the etcd value of one gadget (created
// first if there is none), so the server's watch cache of gadgets
// cannot decode it and its LISTs fail with StorageReadError; after f.For
// the object is deleted with ignoreStoreReadErrorWithClusterBreakingPotential,
// the only way the server allows (the heal runs even if ctx ends: a
// corrupt value left behind breaks every later iteration).
func (h *harness) corrupt(ctx context.Context, f fault) error {
	ns := h.namespaces[f.Pick%len(h.namespaces)]
	name := fmt.Sprintf("corrupt-%d", f.Pick)
	c := cp.Dynamic().Resource(h.gadgets.gvr).Namespace(ns)
	obj := h.object(h.gadgets, ns, name, f.Pick, true)
	obj.SetLabels(map[string]string{"soak/in": "yes"}) // no batch: the writers' deletecollection leaves it alone
	if err := retry(ctx, "create the gadget to corrupt", func(ctx context.Context) error {
		_, err := c.Create(ctx, obj, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil // an earlier attempt's answer was lost (a cut)
		}
		return err
	}); err != nil {
		return err
	}
	etcd := cp.EtcdClient()
	suffix := "/" + h.gadgets.gvr.Group + "/gadgets/" + ns + "/" + name
	keys, err := etcd.Get(ctx, "/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return err
	}
	key := ""
	for _, kv := range keys.Kvs {
		if strings.HasSuffix(string(kv.Key), suffix) {
			key = string(kv.Key)
		}
	}
	if key == "" {
		return fmt.Errorf("no etcd key ends with %s", suffix)
	}
	if _, err := etcd.Put(ctx, key, "\x00 soak: not an object {"); err != nil {
		return err
	}
	sleep(ctx, f.For)
	hctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	yes := true
	return retry(hctx, "unsafe delete of the corrupt gadget", func(ctx context.Context) error {
		err := c.Delete(ctx, name, metav1.DeleteOptions{IgnoreStoreReadErrorWithClusterBreakingPotential: &yes})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

// gapWrites deletes and patches configmaps (and widgets) with the
// informers stalled.
func (h *harness) gapWrites(ctx context.Context, d dynamic.Interface, pick int) {
	for _, r := range []*resource{h.configmaps, h.widgets} {
		ns := h.namespaces[pick%len(h.namespaces)]
		l, err := d.Resource(r.gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for i, o := range l.Items {
			var err error
			if i%2 == 0 {
				err = d.Resource(r.gvr).Namespace(ns).Delete(ctx, o.GetName(), metav1.DeleteOptions{})
				h.stats.op("gap-delete", err)
			} else {
				_, err = d.Resource(r.gvr).Namespace(ns).Patch(ctx, o.GetName(), types.MergePatchType, []byte(`{"metadata":{"annotations":{"soak/gap":"1"}}}`), metav1.PatchOptions{})
				h.stats.op("gap-patch", err)
			}
			if i >= 12 {
				break
			}
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// runIteration writes for it.Window with it.Faults, stops, heals and
// checks; it returns the time to converge and the divergences.
func (h *harness) runIteration(ctx context.Context, it iteration) (time.Duration, []divergence, []string) {
	wctx, stop := context.WithCancel(ctx)
	start := time.Now()
	wg := h.writers(wctx, it.WriterSeed)
	var fwg sync.WaitGroup
	for _, f := range it.Faults {
		fwg.Add(1)
		go func(f fault) {
			defer fwg.Done()
			sleep(ctx, f.At)
			if err := h.inject(ctx, f); err != nil {
				h.stats.mu.Lock()
				h.stats.faultErrs = append(h.stats.faultErrs, fmt.Sprintf("%v: %v", f, err))
				h.stats.mu.Unlock()
			}
			h.stats.mu.Lock()
			h.stats.faults[f.Kind]++
			h.stats.mu.Unlock()
		}(f)
	}
	sleep(ctx, it.Window)
	stop()
	wg.Wait()
	h.stats.mu.Lock()
	h.stats.writeTime += time.Since(start)
	h.stats.mu.Unlock()
	fwg.Wait()
	// Quiet: writers stopped, every fault healed.
	took, divs, lagging := h.check(ctx, h.cfg.quiet)
	if h.disk != nil && len(divs) == 0 {
		h.disk.tally()
	}
	h.stats.mu.Lock()
	defer h.stats.mu.Unlock()
	h.stats.iterations++
	kinds := []string{"none"}
	if len(it.Faults) > 0 {
		kinds = nil
		for _, f := range it.Faults {
			kinds = append(kinds, f.Kind)
		}
	}
	for _, k := range kinds {
		if len(divs) > 0 {
			h.stats.diverged[k]++
		} else {
			h.stats.converge[k] = append(h.stats.converge[k], took)
		}
	}
	return took, divs, lagging
}

// run runs the schedule. A divergence is logged at once (with the seed,
// the iteration, its faults and the ones before), recorded for the
// report, and the run goes on; run returns the records.
func (h *harness) run(ctx context.Context) []divergenceRecord {
	sched := newSchedule(h.cfg.seed, h.cfg.kinds, h.cfg.window)
	sched.group = h.cfg.group
	deadline := time.Now().Add(h.cfg.duration)
	var prev []iteration
	for i := 0; ; i++ {
		if h.cfg.iterations > 0 && i >= h.cfg.iterations || h.cfg.iterations == 0 && time.Now().After(deadline) || ctx.Err() != nil {
			h.stats.mu.Lock()
			defer h.stats.mu.Unlock()
			return append([]divergenceRecord(nil), h.stats.divergences...)
		}
		it := sched.next()
		h.cfg.logf("%s", it)
		took, divs, lagging := h.runIteration(ctx, it)
		if len(divs) > 0 {
			rec := divergenceRecord{iteration: it.String(), divs: divs}
			for _, p := range prev {
				rec.before = append(rec.before, p.String())
			}
			h.stats.mu.Lock()
			h.stats.divergences = append(h.stats.divergences, rec)
			h.stats.mu.Unlock()
			h.cfg.logf("  DIVERGED: not converged within %v after the faults healed (seed %d): %s", h.cfg.quiet, h.cfg.seed, rec)
		} else if len(lagging) > 0 {
			h.cfg.logf("  converged %v after the faults healed; the last poll before saw:\n    %s", took.Round(time.Millisecond), strings.Join(lagging, "\n    "))
		} else {
			h.cfg.logf("  converged %v after the faults healed", took.Round(time.Millisecond))
		}
		prev = append(prev, it)
		if len(prev) > 3 {
			prev = prev[1:]
		}
	}
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	// nearest rank
	i := int(math.Ceil(p*float64(len(s)))) - 1
	if i < 0 {
		i = 0
	}
	return s[i]
}

// report renders the run's numbers as Markdown.
func (h *harness) report(elapsed time.Duration) string {
	s := h.stats
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	written, refused, errs := 0, 0, 0
	for _, v := range s.ops {
		written += v
	}
	for _, v := range s.refused {
		refused += v
	}
	for _, v := range s.errs {
		errs += v
	}
	attempts := written + refused + errs
	fmt.Fprintf(&b, "seed %d, %v, target %d writes/s: %d iterations; %d writes sent (%.0f/s over %v of writing), %d accepted (%d creates), %d refused as expected (not found, conflict, already exists, finalizer on a deleted object), %d failed during faults; divergences: %d\n\n",
		h.cfg.seed, elapsed.Round(time.Second), h.cfg.rate, s.iterations, attempts, float64(attempts)/s.writeTime.Seconds(), s.writeTime.Round(time.Second), written, s.created, refused, errs, len(s.divergences))
	var ops []string
	for op := range s.ops {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	var parts []string
	for _, op := range ops {
		parts = append(parts, fmt.Sprintf("%s %d", op, s.ops[op]))
	}
	fmt.Fprintf(&b, "writes accepted by kind: %s\n\n", strings.Join(parts, ", "))
	b.WriteString("| fault | injected | iterations with it | diverged | converge p50 | converge p99 | max |\n|---|---|---|---|---|---|---|\n")
	var kinds []string
	for k := range s.converge {
		kinds = append(kinds, k)
	}
	for k := range s.diverged {
		if _, ok := s.converge[k]; !ok {
			kinds = append(kinds, k)
		}
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		ds := s.converge[k]
		max := percentile(ds, 1)
		p50, p99, mx := "-", "-", "-" // no iteration with it converged
		if len(ds) > 0 {
			p50, p99, mx = percentile(ds, 0.5).Round(time.Millisecond).String(), percentile(ds, 0.99).Round(time.Millisecond).String(), max.Round(time.Millisecond).String()
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %s | %s | %s |\n", k, s.faults[k], len(ds)+s.diverged[k], s.diverged[k], p50, p99, mx)
	}
	if len(s.divergences) > 0 {
		fmt.Fprintf(&b, "\ndivergences (seed %d reproduces the schedule):\n\n", h.cfg.seed)
		for i, r := range s.divergences {
			fmt.Fprintf(&b, "%d. %s\n", i+1, strings.ReplaceAll(r.String(), "\n  ", "\n   - "))
		}
	}
	if len(s.faultErrs) > 0 {
		fmt.Fprintf(&b, "\nfault errors: %s\n", strings.Join(s.faultErrs, "; "))
	}
	if h.disk != nil {
		fmt.Fprintf(&b, "\n%s\n", h.disk.summary())
	}
	h.mu.Lock()
	all := append(append([]*subject(nil), h.subjects...), h.group...)
	h.mu.Unlock()
	var an []string
	for _, sub := range all {
		if _, n, log := sub.rec.stats(); n > 0 {
			an = append(an, fmt.Sprintf("%s: %d %v", sub.name, n, log))
		}
	}
	if len(an) > 0 {
		fmt.Fprintf(&b, "\nhandler anomalies (add of a held key, update/delete of a key not held): %s\n", strings.Join(an, "; "))
	}
	return b.String()
}

func envDuration(t *testing.T, name string) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return d
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// TestSoak runs informers of every mode through writes and a seeded
// schedule of faults and checks them at every quiet point (see the
// package documentation). Short by default: one iteration per fault kind.
// INFORMERKIT_SOAK=<duration> runs for that long and writes the report to
// INFORMERKIT_SOAK_REPORT (a file) or the test log;
// INFORMERKIT_SOAK_SEED and INFORMERKIT_SOAK_RATE (writes/s, default 100)
// set the seed and the rate.
func TestSoak(t *testing.T) {
	long := envDuration(t, "INFORMERKIT_SOAK")
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("INFORMERKIT_SOAK_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("INFORMERKIT_SOAK_SEED=%q: %v", v, err)
		}
	}
	cfg := shortConfig(seed)
	cfg.rate, cfg.logf = envInt(t, "INFORMERKIT_SOAK_RATE", 100), t.Logf
	if long > 0 {
		cfg.duration, cfg.iterations, cfg.group = long, 0, 0
		cfg.window = func(r *rand.Rand) time.Duration { return 5*time.Second + time.Duration(r.Int64N(int64(5*time.Second))) }
	}
	t.Logf("soak seed %d (INFORMERKIT_SOAK_SEED=%d reproduces the schedule), %d writes/s, %s", seed, seed, cfg.rate,
		map[bool]string{true: "long mode " + long.String(), false: fmt.Sprintf("short mode: %d iterations", cfg.iterations)}[long > 0])
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute+2*long)
	defer cancel()
	leaks := controlplane.SnapshotGoroutines()
	start := time.Now()
	h := newHarness(t, ctx, cfg)
	recs := h.run(ctx)
	h.shutdown()
	for _, r := range recs {
		t.Errorf("soak diverged: seed %d (INFORMERKIT_SOAK_SEED=%d reproduces the schedule), not converged within %v after the faults healed: %s",
			seed, seed, cfg.quiet, r)
	}
	rep := h.report(time.Since(start))
	t.Logf("soak report:\n%s", rep)
	if long > 0 {
		if path := os.Getenv("INFORMERKIT_SOAK_REPORT"); path != "" {
			if err := os.WriteFile(path, []byte(rep), 0o644); err != nil {
				t.Error(err)
			}
		}
	}
	leaks.VerifyNoLeaks(t)
}

// shortGroup is how many fault kinds each of the short mode's iterations
// takes (overlapping): every kind once in 4 iterations.
const shortGroup = 3

// shortConfig is the short mode's run: ceil(kinds/3) iterations of 5 s
// of writes, each with three kinds of fault (the last with the rest).
func shortConfig(seed uint64) config {
	return config{
		prefix: "soak", seed: seed, rate: 100, kinds: allFaults, quiet: quietBound,
		window:     func(*rand.Rand) time.Duration { return 5 * time.Second },
		iterations: (len(allFaults) + shortGroup - 1) / shortGroup, group: shortGroup,
	}
}

// structuralSchema names the fields the writers write (spec.n, labels and
// annotations are metadata) and prunes anything else.
func structuralSchema() *apiextensionsv1.CustomResourceValidation {
	return &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
		Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"n": {Type: "integer"}}},
		},
	}}
}
