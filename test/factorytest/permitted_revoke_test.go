package factorytest

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/test/controlplane"
)

// waitDenied waits until the server's authorizer denies user the listing
// of configmaps in ns (its RBAC cache follows a deleted binding within
// milliseconds).
func waitDenied(t *testing.T, ctx context.Context, user, ns string) {
	t.Helper()
	kube := kubernetes.NewForConfigOrDie(cp.UserConfig(user))
	for {
		r, err := kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "watch", Resource: "configmaps"}}}, metav1.CreateOptions{})
		if err != nil {
			t.Error(err)
			return
		}
		if !r.Status.Allowed {
			return
		}
		select {
		case <-ctx.Done():
			t.Error("still allowed")
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestPermittedRevokedWhileWatching (issue 32, item 2: a 403 from a
// running watch triggers a re-check at once). A user with Roles in 4
// namespaces, a re-check period of 10 minutes (so the periodic check
// cannot be what acts):
//
//   - A RoleBinding deleted while the informer watches: the server does
//     not end an open watch (it authorizes a watch when it opens), so the
//     namespace's objects, even one created after the revocation, keep
//     coming. When the watch ends (here the connections are cut, as a
//     network failure or the server's watch timeout would end it) the
//     merged watch resumes each namespace from its last event; the server
//     refuses the revoked namespace's watch (one request, no list), and
//     the relist checks access again at once: the namespace's objects
//     leave as deletes, Status.NotPermitted names it with the missing
//     verbs.
//   - A binding deleted between a namespace's list and its watch (the
//     server refuses the watch with a real 403): the informer does not
//     fail; it relists at once, the re-check denies the namespace, its
//     objects leave as deletes; one refused watch, no 403 loop. (The
//     list comes from a 410 Expired answered to one namespace's resumed
//     watch after a cut, as when the server's watch cache has moved
//     past the version resumed from.)
//
// Requests are counted over each episode and over a quiet time after.
func TestPermittedRevokedWhileWatching(t *testing.T) {
	// Side by side with the others: the connections it cuts are its own
	// proxy's, and its informer reviews only the namespaces it names.
	controlplane.Parallel(t)
	proxy := cp.NewProxy(t)
	ctx := ctxT(t, 3*time.Minute)
	sc := scenario(t)
	ns := permittedNamespaces(t, ctx, "revoked", 4)
	// armed: revoke this namespace's binding once its list has answered,
	// before the answer reaches the informer (so its watch is refused).
	var armed atomic.Pointer[string]
	// expire: answer this namespace's next watch with 410 Expired.
	var expire atomic.Pointer[string]
	u := newPermittedUserVia(t, ctx, proxy, "revoked-user", readConfigMaps, func(user string, rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			if x := expire.Load(); x != nil && r.URL.Query().Get("watch") != "" &&
				r.URL.Path == "/api/v1/namespaces/"+*x+"/configmaps" && expire.CompareAndSwap(x, nil) {
				return expiredResponse(r), nil
			}
			resp, err := rt.RoundTrip(r)
			x := armed.Load()
			if x != nil && err == nil && r.Method == http.MethodGet && r.URL.Query().Get("watch") == "" &&
				r.URL.Path == "/api/v1/namespaces/"+*x+"/configmaps" && armed.CompareAndSwap(x, nil) {
				if err := cp.Kube().RbacV1().RoleBindings(*x).Delete(ctx, user+"-cm", metav1.DeleteOptions{}); err != nil {
					t.Error(err)
				}
				waitDenied(t, ctx, user, *x)
			}
			return resp, err
		})
	}, ns...)
	user, counter := u.name, u.counter
	const period = 10 * time.Minute
	run := startPermitted(t, ctx, u, period, ns...)
	h, rec := run.h, run.rec
	var mu sync.Mutex
	var failed []string // statuses Failed, and why
	remove := run.f.OnStatusChange(func(st dynamicinformer.Status) {
		if st.State == dynamicinformer.Failed {
			mu.Lock()
			failed = append(failed, st.Reason)
			mu.Unlock()
		}
	})
	defer remove()
	eventually(t, ctx, "synced with the 4 namespaces", func() bool {
		return h.Status().Ready() && slices.Equal(recorded(rec), adminKeys(t, ctx, ns...))
	})

	// Episode 1: revoked while the watch is open.
	revoke(t, ctx, user, ns[0], "cm")
	waitDenied(t, ctx, user, ns[0])
	if _, err := cp.Kube().CoreV1().ConfigMaps(ns[0]).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after-revoke"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "an object created after the revocation, through the open watch", func() bool {
		return slices.Contains(recorded(rec), ns[0]+"/after-revoke")
	})
	counter.Reset()
	cut := time.Now()
	proxy.CutAll()
	want := adminKeys(t, ctx, ns[1:]...)
	eventually(t, ctx, "the revoked namespace's objects gone", func() bool {
		return slices.Equal(recorded(rec), want) && slices.Equal(storeKeys(h), want)
	})
	took1 := time.Since(cut).Round(time.Millisecond)
	// At once: the reflector's back-off between a watch's end and the
	// relist (0.8 s doubling, jittered up to twice) is all it waits.
	if took1 > 20*time.Second {
		t.Fatalf("revoked namespace left %v after the watch ended, want at once (within 20 s; the period is %v)", took1, period)
	}
	if _, _, _, deletes := rec.snapshot(); deletes != 3 {
		t.Fatalf("%d deletes, want the revoked namespace's 3 objects", deletes)
	}
	st := h.Status()
	if why := st.NotPermitted[ns[0]]; !strings.Contains(why, "may not list, watch configmaps in namespace "+ns[0]) || !slices.Equal(st.Permitted, slices.Sorted(slices.Values(ns[1:]))) || !st.Ready() {
		t.Fatalf("after the revocation: Ready=%v Permitted %v NotPermitted %v; want %v permitted, %s not (missing list, watch)", st.Ready(), st.Permitted, st.NotPermitted, ns[1:], ns[0])
	}
	time.Sleep(3 * time.Second)
	ep1 := requestsOf(counter, ns)
	counter.Reset()
	time.Sleep(5 * time.Second)
	quiet1, quietKeys1 := requestsOf(counter, ns).sum(), counter.Keys()
	if ep1.lists[0] != 0 || ep1.watches[0] > 1 || ep1.totalWatches > 2*3+1 || ep1.rules > 2*5 || quiet1 != 0 {
		t.Fatalf("episode 1: %+v, then %d reviews, lists or watches in 5 s (%v); want at most the one refused watch of %s (no list), a round of reviews, lists and watches, then none", ep1, quiet1, quietKeys1, ns[0])
	}

	// Episode 2: revoked between the list and the watch (a real 403 on
	// the watch).
	counter.Reset()
	armed.Store(&ns[1])
	expire.Store(&ns[3])
	cut = time.Now()
	proxy.CutAll()
	want = adminKeys(t, ctx, ns[2:]...)
	eventually(t, ctx, "the namespace refused at its watch gone", func() bool {
		return slices.Equal(recorded(rec), want) && slices.Equal(storeKeys(h), want)
	})
	took2 := time.Since(cut).Round(time.Millisecond)
	if armed.Load() != nil {
		t.Fatal("the binding was not revoked between the list and the watch")
	}
	if took2 > 20*time.Second {
		t.Fatalf("namespace refused at its watch left after %v, want at once", took2)
	}
	st = h.Status()
	if why := st.NotPermitted[ns[1]]; !strings.Contains(why, "may not list, watch configmaps in namespace "+ns[1]) || !slices.Equal(st.Permitted, slices.Sorted(slices.Values(ns[2:]))) || !st.Ready() {
		t.Fatalf("after the refused watch: Ready=%v Permitted %v NotPermitted %v", st.Ready(), st.Permitted, st.NotPermitted)
	}
	time.Sleep(3 * time.Second)
	ep2 := requestsOf(counter, ns)
	counter.Reset()
	time.Sleep(5 * time.Second)
	quiet2, quietKeys2 := requestsOf(counter, ns).sum(), counter.Keys()
	if expire.Load() != nil {
		t.Fatalf("no watch of %s was answered 410 Expired", ns[3])
	}
	if ep2.lists[1] != 1 || ep2.watches[1] > 2 || ep2.lists[0] != 0 || ep2.watches[0] != 0 || ep2.rules > 3*5 || quiet2 != 0 {
		t.Fatalf("episode 2: %+v, then %d reviews, lists or watches in 5 s (%v); want one list of %s and at most two watches (resumed, refused), none of %s, at most 3 rounds of reviews, then none", ep2, quiet2, quietKeys2, ns[1], ns[0])
	}
	mu.Lock()
	fails := slices.Clone(failed)
	mu.Unlock()
	if len(fails) != 0 {
		t.Fatalf("the informer was Failed on the way: %q; want a re-check, not a failure", fails)
	}
	run.stop(t)
	t.Logf("period %v. episode 1 (revoked, watch open; then connections cut): the open watch still delivered; deletes %v after the cut; requests %+v; then %d reviews, lists or watches in 5 s (all requests: %v)", period, took1, ep1, quiet1, quietKeys1)
	t.Logf("episode 2 (revoked between list and watch, a real 403 on the watch): deletes %v after the cut, never Failed; requests %+v; then %d reviews, lists or watches in 5 s (all requests: %v)", took2, ep2, quiet2, quietKeys2)
	sc.Injected("WithPermittedNamespaces over 4 namespaces, re-check period %v; a RoleBinding deleted while watching, then the connections cut; then a binding deleted between a namespace's list and its watch", period)
	sc.Held("open watch kept delivering after the revocation; the resumed watch was refused and the relist re-checked at once: deletes %v and %v after the cuts, NotPermitted with the missing verbs, never Failed; requests %+v and %+v, then 0 in 5 s", took1, took2, ep1, ep2)
}

// episodeRequests are the requests of an episode: lists and watches of
// configmaps per namespace (index of ns), in all, and rules reviews.
type episodeRequests struct {
	lists, watches            []int
	totalLists, totalWatches  int
	rules, access, namespaces int
}

func requestsOf(c *controlplane.RequestCounter, ns []string) episodeRequests {
	r := episodeRequests{lists: make([]int, len(ns)), watches: make([]int, len(ns))}
	for i, n := range ns {
		r.lists[i] = c.Count("list", "/namespaces/"+n+"/configmaps")
		r.watches[i] = c.Count("watch", "/namespaces/"+n+"/configmaps")
	}
	r.totalLists, r.totalWatches = c.Count("list", "/configmaps"), c.Count("watch", "/configmaps")
	r.rules, r.access = c.Count("post", "selfsubjectrulesreviews"), c.Count("post", "selfsubjectaccessreviews")
	r.namespaces = c.Snapshot()[controlplane.Request{Verb: "list", Path: "/api/v1/namespaces"}]
	return r
}

// sum counts the reviews, the namespace lists and the lists and watches
// of configmaps.
func (r episodeRequests) sum() int {
	return r.totalLists + r.totalWatches + r.rules + r.access + r.namespaces
}

// TestPermittedNamespaceWatched (issue 32, item 1: namespaces from a
// namespace watch when the caller may): a user who may list and watch
// namespaces, with a re-check period of 10 minutes: one namespace watch
// for the factory, no namespace list per check; a namespace created, and
// its RoleBinding a moment later, comes in as adds within seconds; a
// permitted namespace deleted (marked for deletion: the test server runs
// no namespace controller) takes its objects out as deletes within
// seconds; one not permitted deleted leaves Status.NotPermitted within
// seconds. Requests are counted over the episode.
func TestPermittedNamespaceWatched(t *testing.T) {
	// Not parallel: it counts the access reviews that every namespace
	// created on the server causes, and other tests create namespaces.
	ctx := ctxT(t, 3*time.Minute)
	sc := scenario(t)
	ns := permittedNamespaces(t, ctx, "nswatch", 2)
	deniedNS := permittedNamespaces(t, ctx, "nswatch-denied", 1)[0]
	u := newPermittedUser(t, ctx, "nswatch-user", readConfigMaps, nil, ns...)
	user, counter := u.name, u.counter
	if err := cp.Grant(ctx, user, "", "ns", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"list", "watch"}}); err != nil {
		t.Fatal(err)
	}
	const period = 10 * time.Minute
	run := startPermitted(t, ctx, u, period)
	h, rec := run.h, run.rec
	eventually(t, ctx, "synced with the 2 permitted namespaces", func() bool {
		return h.Status().Ready() && slices.Equal(recorded(rec), adminKeys(t, ctx, ns...))
	})
	nsWatch := controlplane.Request{Verb: "watch", Path: "/api/v1/namespaces"}
	eventually(t, ctx, "the namespace watch", func() bool { return counter.Snapshot()[nsWatch] == 1 })
	counter.Reset()

	// A namespace created, its RoleBinding a moment later.
	newNS := permittedNamespaces(t, ctx, "nswatch-new", 1)[0]
	created := time.Now()
	time.Sleep(500 * time.Millisecond)
	if err := cp.Grant(ctx, user, newNS, "cm", readConfigMaps); err != nil {
		t.Fatal(err)
	}
	want := adminKeys(t, ctx, append(slices.Clone(ns), newNS)...)
	eventually(t, ctx, "the new namespace's objects", func() bool { return slices.Equal(recorded(rec), want) })
	tookCreated := time.Since(created).Round(time.Millisecond)
	if tookCreated > 20*time.Second {
		t.Fatalf("a namespace created came in after %v, want within seconds (the period is %v)", tookCreated, period)
	}
	if _, adds, _, deletes := rec.snapshot(); adds != len(want) || deletes != 0 {
		t.Fatalf("%d adds, %d deletes; want %d adds, no delete", adds, deletes, len(want))
	}

	// A permitted namespace deleted.
	if err := cp.Kube().CoreV1().Namespaces().Delete(ctx, ns[0], metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	want = adminKeys(t, ctx, ns[1], newNS)
	eventually(t, ctx, "the deleted namespace's objects gone", func() bool {
		return slices.Equal(recorded(rec), want) && slices.Equal(storeKeys(h), want)
	})
	tookDeleted := time.Since(deleted).Round(time.Millisecond)
	if tookDeleted > 10*time.Second {
		t.Fatalf("a namespace deleted left after %v, want within seconds", tookDeleted)
	}
	if _, _, _, deletes := rec.snapshot(); deletes != 2 {
		t.Fatalf("%d deletes, want the deleted namespace's 2 objects", deletes)
	}
	if st := h.Status(); !slices.Equal(st.Permitted, slices.Sorted(slices.Values([]string{ns[1], newNS}))) {
		t.Fatalf("Permitted %v, want %s and %s", st.Permitted, ns[1], newNS)
	}

	// A namespace not permitted deleted: no longer named. (Before, it
	// stayed in NotPermitted until the next relist: its removal changes
	// nothing held.)
	if _, ok := h.Status().NotPermitted[deniedNS]; !ok {
		t.Fatalf("NotPermitted %v does not name %s", h.Status().NotPermitted, deniedNS)
	}
	if err := cp.Kube().CoreV1().Namespaces().Delete(ctx, deniedNS, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted = time.Now()
	eventually(t, ctx, "the deleted namespace not permitted no longer named", func() bool {
		_, ok := h.Status().NotPermitted[deniedNS]
		return !ok
	})
	tookUnnamed := time.Since(deleted).Round(time.Millisecond)
	if tookUnnamed > 10*time.Second {
		t.Fatalf("a namespace not permitted deleted was still named after %v, want within seconds", tookUnnamed)
	}
	time.Sleep(2 * time.Second)
	snap := counter.Snapshot()
	nsLists, nsWatches := snap[controlplane.Request{Verb: "list", Path: "/api/v1/namespaces"}], snap[nsWatch]
	rules := counter.Count("post", "selfsubjectrulesreviews")
	lists, watches := counter.Count("list", "/configmaps"), counter.Count("watch", "/configmaps")
	if nsLists != 0 || nsWatches != 0 || rules > 2*wakesPerNewNamespace || lists > 2*3 || watches > 2*3 {
		t.Fatalf("episode: %d namespace lists, %d namespace watches, %d rules reviews, %d lists and %d watches of configmaps; want no namespace request (the watch serves), a review per wake of the new namespace, two relists: %v",
			nsLists, nsWatches, rules, lists, watches, counter.Keys())
	}
	run.stop(t)
	t.Logf("period %v: namespace created (binding 0.5 s later) -> adds after %v; namespace deleted -> deletes after %v; a namespace not permitted deleted -> unnamed after %v; episode: %d namespace lists, %d namespace watches, %d rules reviews, %d lists, %d watches of configmaps",
		period, tookCreated, tookDeleted, tookUnnamed, nsLists, nsWatches, rules, lists, watches)
	sc.Injected("WithPermittedNamespaces, a user who may list and watch namespaces, period %v; a namespace created with a RoleBinding 0.5 s later; a permitted namespace deleted", period)
	sc.Held("created -> adds after %v, deleted -> deletes after %v; %d rules reviews, no namespace list in the episode; no goroutine leak", tookCreated, tookDeleted, rules)
}

// wakesPerNewNamespace: the wakes after a namespace is created (at once,
// 1, 2, 4, 8, 16 s), each a rules review of it while it is denied.
const wakesPerNewNamespace = 6

// expiredResponse is the server's answer to a watch from a
// resourceVersion it no longer has: 410 with an Expired status.
func expiredResponse(r *http.Request) *http.Response {
	body := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version","reason":"Expired","code":410}`
	return &http.Response{
		StatusCode: http.StatusGone, Status: "410 Gone", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": []string{"application/json"}},
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)), Request: r,
	}
}
