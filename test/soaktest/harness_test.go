package soaktest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/shard"
	"github.com/informerkit/informerkit/shard/membership"
)

// resource is one kind of object the writers change and informers cache.
type resource struct {
	name       string // short name in messages
	gvr        schema.GroupVersionResource
	kind       string
	crd        *apiextensionsv1.CustomResourceDefinition // nil: built-in
	finalizers bool                                      // writers may add and remove a finalizer
}

func (r *resource) apiVersion() string { return r.gvr.GroupVersion().String() }

// scope says which of the server's objects an informer should hold.
type scope struct {
	res        *resource
	namespaces []string        // empty: all
	selector   labels.Selector // nil: every object
	shard      func() shard.Shard
}

func (s scope) String() string {
	var parts []string
	parts = append(parts, s.res.name)
	if len(s.namespaces) > 0 {
		parts = append(parts, "ns="+strings.Join(s.namespaces, ","))
	}
	if s.selector != nil {
		parts = append(parts, "selector="+s.selector.String())
	}
	if s.shard != nil {
		parts = append(parts, fmt.Sprintf("shard of %.3f of the hash space", s.shard().Size()))
	}
	return strings.Join(parts, " ")
}

func (s scope) holds(o metav1.Object, obj any) bool {
	if len(s.namespaces) > 0 {
		found := false
		for _, ns := range s.namespaces {
			if o.GetNamespace() == ns {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	if s.selector != nil && !s.selector.Matches(labels.Set(o.GetLabels())) {
		return false
	}
	if s.shard != nil && !s.shard().Contains(obj) {
		return false
	}
	return true
}

// subject is one informer under check.
type subject struct {
	name  string
	scope scope
	store func() []any
	// status is nil for an informer that has none (plain client-go).
	status func() dynamicinformer.Status
	// wantErr is what Status.Err must be (errors.Is) once Synced; nil:
	// no error.
	wantErr error
	rec     *recorder
	// shard group members
	handle *dynamicinformer.InformerHandle
	member *membership.Member
}

// recorder is a handler that keeps what replaying its events gives: the
// resourceVersion of every object it was told of and not told was deleted.
type recorder struct {
	mu     sync.Mutex
	objs   map[string]string // key -> resourceVersion
	last   map[string]string // key -> last event, for messages
	counts map[string]int
	// anomalies: an add of a key held, an update or delete of a key not
	// held (recorded, reported; client-go's contract allows none of them
	// in steady state).
	anomalies  int
	anomalyLog []string
	// dropDeletes makes the recorder lose that many deletes (to show the
	// check sees it).
	dropDeletes int
}

func newRecorder() *recorder {
	return &recorder{objs: map[string]string{}, last: map[string]string{}, counts: map[string]int{}}
}

func objectKey(o any) (string, string) {
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		if d.Obj == nil {
			return d.Key, ""
		}
		o = d.Obj
	}
	m, err := meta.Accessor(o)
	if err != nil {
		return fmt.Sprintf("<%T>", o), ""
	}
	if m.GetNamespace() == "" {
		return m.GetName(), m.GetResourceVersion()
	}
	return m.GetNamespace() + "/" + m.GetName(), m.GetResourceVersion()
}

func (r *recorder) anomaly(format string, args ...any) {
	r.anomalies++
	if len(r.anomalyLog) < 10 {
		r.anomalyLog = append(r.anomalyLog, fmt.Sprintf(format, args...))
	}
}

func (r *recorder) OnAdd(o any, initial bool) {
	k, rv := objectKey(o)
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.objs[k]; ok {
		r.anomaly("add of %s@%s while held at %s", k, rv, old)
	}
	r.objs[k] = rv
	r.last[k] = "add@" + rv
	r.counts["add"]++
}

func (r *recorder) OnUpdate(_, o any) {
	k, rv := objectKey(o)
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.objs[k]; !ok {
		r.anomaly("update of %s@%s not held", k, rv)
	}
	r.objs[k] = rv
	r.last[k] = "update@" + rv
	r.counts["update"]++
}

func (r *recorder) OnDelete(o any) {
	k, rv := objectKey(o)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dropDeletes > 0 {
		r.dropDeletes--
		r.last[k] = "delete@" + rv + " (dropped on purpose)"
		return
	}
	if _, ok := r.objs[k]; !ok {
		r.anomaly("delete of %s@%s not held", k, rv)
	}
	delete(r.objs, k)
	r.last[k] = "delete@" + rv
	r.counts["delete"]++
}

func (r *recorder) snapshot() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]string, len(r.objs))
	for k, v := range r.objs {
		out[k] = v
	}
	return out
}

func (r *recorder) lastEvent(k string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.last[k]; ok {
		return e
	}
	return "none"
}

func (r *recorder) stats() (counts map[string]int, anomalies int, log []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	counts = map[string]int{}
	for k, v := range r.counts {
		counts[k] = v
	}
	return counts, r.anomalies, append([]string(nil), r.anomalyLog...)
}

func keysOf(objs []any) map[string]string {
	out := make(map[string]string, len(objs))
	for _, o := range objs {
		k, rv := objectKey(o)
		out[k] = rv
	}
	return out
}

// divergence is one way an informer differs from what the check wants.
type divergence struct {
	subject string
	scope   string
	what    string // "cache vs server", "handler replay vs cache", "status", "shard cover"
	missing []string
	extra   []string
	stale   []string
	detail  string
}

func (d divergence) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "informer %q (%s): %s:", d.subject, d.scope, d.what)
	list := func(name string, keys []string) {
		if len(keys) == 0 {
			return
		}
		shown := keys
		if len(shown) > 8 {
			shown = shown[:8]
		}
		fmt.Fprintf(&b, " %d %s %v", len(keys), name, shown)
	}
	list("missing", d.missing)
	list("extra", d.extra)
	list("stale", d.stale)
	if d.detail != "" {
		b.WriteString(" " + d.detail)
	}
	return b.String()
}

// compare lists the keys of want missing from got, those of got not in
// want, and those at another resourceVersion.
func compare(want, got map[string]string, wantName, gotName string) (missing, extra, stale []string) {
	for k, rv := range want {
		g, ok := got[k]
		switch {
		case !ok:
			missing = append(missing, k+"@"+rv)
		case g != rv:
			stale = append(stale, fmt.Sprintf("%s %s=%s %s=%s", k, gotName, g, wantName, rv))
		}
	}
	for k, rv := range got {
		if _, ok := want[k]; !ok {
			extra = append(extra, k+"@"+rv)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	sort.Strings(stale)
	return missing, extra, stale
}

// serverState is one fresh LIST (as admin, all namespaces) per resource.
type serverState map[*resource][]*unstructured.Unstructured

func listAll(ctx context.Context, dyn dynamic.Interface, res []*resource) (serverState, error) {
	out := serverState{}
	for _, r := range res {
		l, err := dyn.Resource(r.gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", r.name, err)
		}
		items := make([]*unstructured.Unstructured, len(l.Items))
		for i := range l.Items {
			items[i] = &l.Items[i]
		}
		out[r] = items
	}
	return out, nil
}

func (s serverState) expected(sc scope) map[string]string {
	out := map[string]string{}
	for _, o := range s[sc.res] {
		if sc.holds(o, o) {
			k, rv := objectKey(o)
			out[k] = rv
		}
	}
	return out
}

// checkOnce compares every subject (and the shard group) with one fresh
// LIST of the server.
func checkOnce(ctx context.Context, dyn dynamic.Interface, res []*resource, subjects []*subject, group []*subject) []divergence {
	snap, err := listAll(ctx, dyn, res)
	if err != nil {
		return []divergence{{subject: "-", what: "server", detail: err.Error()}}
	}
	var out []divergence
	for _, s := range subjects {
		want := snap.expected(s.scope)
		cache := keysOf(s.store())
		if m, e, st := compare(want, cache, "server", "cache"); len(m)+len(e)+len(st) > 0 {
			d := divergence{subject: s.name, scope: s.scope.String(), what: "cache vs server", missing: m, extra: e, stale: st}
			d.detail = lastEvents(s.rec, m, e, st)
			out = append(out, d)
		}
		if s.rec != nil {
			replay := s.rec.snapshot()
			if m, e, st := compare(cache, replay, "cache", "handler"); len(m)+len(e)+len(st) > 0 {
				d := divergence{subject: s.name, scope: s.scope.String(), what: "handler replay vs cache", missing: m, extra: e, stale: st}
				d.detail = lastEvents(s.rec, m, e, st)
				out = append(out, d)
			}
		}
		if s.status != nil {
			st := s.status()
			ok := st.State == dynamicinformer.Synced
			if s.wantErr == nil && st.Err != nil || s.wantErr != nil && !errors.Is(st.Err, s.wantErr) {
				ok = false
			}
			if !ok {
				out = append(out, divergence{subject: s.name, scope: s.scope.String(), what: "status",
					detail: fmt.Sprintf("state %s (%s), err %v; want Synced, err %v", st.State, st.Reason, st.Err, s.wantErr)})
			}
		}
	}
	if len(group) > 0 {
		res := group[0].scope.res
		count := map[string]int{}
		for _, m := range group {
			for k := range keysOf(m.store()) {
				count[k]++
			}
		}
		want := snap.expected(scope{res: res})
		var missing, extra, dup []string
		for k, rv := range want {
			switch count[k] {
			case 0:
				missing = append(missing, k+"@"+rv)
			case 1:
			default:
				dup = append(dup, fmt.Sprintf("%s held by %d members", k, count[k]))
			}
		}
		for k := range count {
			if _, ok := want[k]; !ok {
				extra = append(extra, k)
			}
		}
		if len(missing)+len(extra)+len(dup) > 0 {
			sort.Strings(missing)
			sort.Strings(extra)
			sort.Strings(dup)
			var names []string
			for _, m := range group {
				names = append(names, m.name)
			}
			out = append(out, divergence{subject: "shard group " + strings.Join(names, ","), scope: res.name,
				what: "shard cover (every object exactly once)", missing: missing, extra: extra, stale: dup})
		}
	}
	return out
}

func lastEvents(rec *recorder, lists ...[]string) string {
	if rec == nil {
		return ""
	}
	var parts []string
	for _, l := range lists {
		for i, k := range l {
			if i == 3 {
				break
			}
			key, _, _ := strings.Cut(k, "@")
			key, _, _ = strings.Cut(key, " ")
			parts = append(parts, key+": "+rec.lastEvent(key))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "(last handler event: " + strings.Join(parts, "; ") + ")"
}

// check polls checkOnce until it holds or timeout passes; it returns how
// long it took, on timeout the last divergences, and otherwise what the
// last poll that failed saw (which informers were the last to converge).
func check(ctx context.Context, dyn dynamic.Interface, res []*resource, subjects, group []*subject, timeout time.Duration) (took time.Duration, divs []divergence, lagging []string) {
	start := time.Now()
	for {
		divs := checkOnce(ctx, dyn, res, subjects, group)
		if len(divs) == 0 {
			return time.Since(start), nil, lagging
		}
		if time.Since(start) > timeout || ctx.Err() != nil {
			return time.Since(start), divs, lagging
		}
		lagging = lagging[:0]
		for _, d := range divs {
			lagging = append(lagging, d.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// retry runs f until it succeeds or ctx ends (faults heal through API
// server restarts and proxy faults).
func retry(ctx context.Context, what string, f func(context.Context) error) error {
	var err error
	for ctx.Err() == nil {
		c, cancel := context.WithTimeout(ctx, 20*time.Second)
		err = f(c)
		cancel()
		if err == nil {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("%s: %w (last error: %v)", what, ctx.Err(), err)
}

// bind creates (or, if it exists, keeps) a RoleBinding in ns, or a
// ClusterRoleBinding when ns is empty, of role to user.
func bind(ctx context.Context, user, ns, name string) error {
	kube := cp.Kube()
	subject := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	var err error
	if ns == "" {
		_, err = kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		}, metav1.CreateOptions{})
	} else {
		_, err = kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		}, metav1.CreateOptions{})
	}
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// unbind deletes the binding bind made.
func unbind(ctx context.Context, ns, name string) error {
	kube := cp.Kube()
	var err error
	if ns == "" {
		err = kube.RbacV1().ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{})
	} else {
		err = kube.RbacV1().RoleBindings(ns).Delete(ctx, name, metav1.DeleteOptions{})
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func role(ctx context.Context, ns, name string, rules ...rbacv1.PolicyRule) error {
	kube := cp.Kube()
	var err error
	if ns == "" {
		_, err = kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{})
	} else {
		_, err = kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{})
	}
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}
