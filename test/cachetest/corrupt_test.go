package cachetest

import (
	"context"
	"errors"
	"fmt"
	"github.com/informerkit/informerkit/genericlister"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/test/controlplane"
)

// TestCorruptObjectInStorage is issue 7's "object the server cannot send"
// case. With the API server in this test, an object whose stored bytes do
// not decode never reaches a client: the server fails the whole LIST of
// the resource (500, reason StorageReadError, naming the storage key;
// Kubernetes 1.37 with AllowUnsafeMalformedObjectDeletion, on by default)
// and its watch cache stops. Measured against this server (a raw watch and
// raw requests, 2026-11-29): open watches get nothing from the moment of
// the corruption (a write to a healthy object is not delivered) and are
// closed by the server ~31 s later, when its watch cache gives up retrying
// (30 s) and reinitializes, which then fails every ~1 s; until then
// consistent LISTs fail with 500 StorageReadError after ~3 s (the cache
// waits for a fresh revision, then asks etcd), while LISTs "not older
// than" a revision and new watches (watch-list too) are answered from the
// stale cache; after it, every request the cache serves is answered 429
// "storage is (re)initializing" (Retry-After 1 s growing to 30 s), which
// client-go retries inside the request and its reflector retries forever
// without relisting or telling its error handler — except a paginated
// consistent LIST, which goes to etcd and fails with 500 StorageReadError
// at once. A healthy idle watch got a bookmark every ~60 s (once the
// first came after 120 s).
//
// So informerkit needs its liveness bound (Options.WatchIdleTimeout, shortened
// here): the silent stream ends, the informer relists with a consistent,
// paginated probe list, and the test shows that the informer keeps the
// objects it had, reports the problem as a typed error (errors.Is
// ErrStoreRead, errors.As *apierrors.StatusError) in a Failed status, logs
// it once, retries at the reflector's backoff (no request storm), and
// recovers by itself once the object is deleted with
// ignoreStoreReadErrorWithClusterBreakingPotential: the cache then equals
// the server and handlers get the delete.
func TestCorruptObjectInStorage(t *testing.T) {
	controlplane.Parallel(t)
	const n = 10
	group := "corrupt.cachetest.example.com"
	f := setup(t, group, n)
	before := controlplane.SnapshotGoroutines()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var logMu sync.Mutex
	var logLines []string
	logger := funcr.New(func(prefix, args string) {
		logMu.Lock()
		defer logMu.Unlock()
		logLines = append(logLines, prefix+" "+args)
	}, funcr.Options{Verbosity: 1})
	sc := controlplane.Scenario(t)
	cfg, counter := controlplane.CountRequests(cp.Config())
	// Short, so that the test is short; a quiet healthy watch is probed
	// (relisted) every idle period before the corruption, harmlessly.
	const idle = 4 * time.Second
	fac, err := dynamicinformer.NewForConfig(cfg, dynamicinformer.Options{Defaults: []dynamicinformer.ResourceOption{dynamicinformer.WithNamespaces(f.ns)}, Logger: logger, WatchIdleTimeout: idle})
	if err != nil {
		t.Fatal(err)
	}
	shutdown := sync.OnceFunc(fac.Shutdown)
	defer shutdown()
	var stMu sync.Mutex
	var statuses []dynamicinformer.Status
	defer fac.OnStatusChange(func(s dynamicinformer.Status) {
		stMu.Lock()
		statuses = append(statuses, s)
		stMu.Unlock()
	})()

	h := fac.ForResource(f.gvr)
	// An informer over two namespaces: it has no idle bound (its merged
	// watch asks for no bookmarks). When the server closes the watches of
	// the broken cache it resumes them, and those requests are answered
	// 429 until the bound on an unanswered watch request
	// (listwatch.WatchOpenBound) makes it relist, in pages: it meets the
	// same error.
	multi := fac.ForResource(f.gvr, dynamicinformer.WithNamespaces(f.ns, "default"))
	var delMu sync.Mutex
	var deleted []string
	if _, err := h.Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj interface{}) {
			key, _ := toolscache.DeletionHandlingMetaNamespaceKeyFunc(obj)
			delMu.Lock()
			deleted = append(deleted, key)
			delMu.Unlock()
		},
	}); err != nil {
		t.Fatal(err)
	}
	fac.Start(ctx)
	if !toolscache.WaitForCacheSync(ctx.Done(), h.Informer().HasSynced, multi.Informer().HasSynced) {
		t.Fatal("informer did not sync")
	}

	// Corrupt w005 in etcd.
	const bad = "w005"
	etcd := cp.EtcdClient()
	keys, err := etcd.Get(ctx, "/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var etcdKey string
	for _, kv := range keys.Kvs {
		if strings.HasSuffix(string(kv.Key), "/"+group+"/widgets/"+f.ns+"/"+bad) {
			etcdKey = string(kv.Key)
		}
	}
	if etcdKey == "" {
		t.Fatalf("no etcd key for %s among %d keys", bad, len(keys.Kvs))
	}
	if _, err := etcd.Put(ctx, etcdKey, "\x00 this is not JSON {"); err != nil {
		t.Fatal(err)
	}
	corrupted := time.Now()
	t.Logf("wrote garbage to etcd key %s", etcdKey)
	// Never leave the corrupt object behind for the package's other tests
	// (the server's watch cache loops on it).
	t.Cleanup(func() {
		yes := true
		_ = cp.Dynamic().Resource(f.gvr).Namespace(f.ns).Delete(context.Background(), bad,
			metav1.DeleteOptions{IgnoreStoreReadErrorWithClusterBreakingPotential: &yes})
	})

	// What the server does: the LIST of the resource fails as a whole.
	client := cp.Dynamic().Resource(f.gvr).Namespace(f.ns)
	var listErr error
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, listErr = client.List(ctx, metav1.ListOptions{ResourceVersion: ""})
		return listErr != nil, nil
	}); err != nil {
		t.Fatalf("the server still lists the resource after the corruption")
	}
	t.Logf("server LIST: %v (reason %q)", listErr, apierrors.ReasonForError(listErr))
	if !apierrors.IsStoreReadError(listErr) {
		t.Errorf("server LIST error is not a StorageReadError: %v", listErr)
	}

	// A healthy object is still written fine; the informer cannot see it
	// while its list fails, but it must keep what it has and say why.
	counter.Reset()
	good, err := client.Get(ctx, "w002", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	good.SetLabels(map[string]string{"app": "relabeled"})
	if _, err := client.Update(ctx, good, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var st dynamicinformer.Status
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		st = h.Status()
		return errors.Is(st.Err, dynamicinformer.ErrStoreRead), nil
	}); err != nil {
		t.Fatalf("status never reported ErrStoreRead; last status %+v", st)
	}
	failedAfter := st.Since.Sub(corrupted).Round(100 * time.Millisecond)
	t.Logf("informer status %v after the corruption (idle timeout %v): %s: %v", failedAfter, idle, st.State, st.Err)
	var se *apierrors.StatusError
	if st.State != dynamicinformer.Failed || !errors.As(st.Err, &se) || !apierrors.IsStoreReadError(se) || !strings.Contains(st.Err.Error(), bad) {
		t.Errorf("status %s, err %v: want Failed, an *apierrors.StatusError with reason StorageReadError naming %s", st.State, st.Err, bad)
	}
	if got := len(h.Informer().GetStore().ListKeys()); got != n {
		t.Errorf("cache holds %d objects while the server cannot list, want the %d it had", got, n)
	}

	// Retries are paced by the reflector's backoff, and logged once.
	time.Sleep(8 * time.Second)
	lists := counter.Count("list", "/widgets")
	t.Logf("list requests for the resource in ~8s of failure: %d", lists)
	if lists > 30 {
		t.Errorf("%d list requests in ~8s: the informer is hammering the server", lists)
	}
	logMu.Lock()
	failures := 0
	for _, l := range logLines {
		if strings.Contains(l, "list/watch failed") {
			failures++
		}
	}
	logMu.Unlock()
	if failures != 1 {
		t.Errorf("logged %d list/watch failures, want 1 (once per class of error)", failures)
	}

	// The two-namespace informer: Failed with the same error once the
	// server has closed the broken cache's watches (~30 s), its resume
	// went unanswered and it relisted.
	var mst dynamicinformer.Status
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) {
		mst = multi.Status()
		return errors.Is(mst.Err, dynamicinformer.ErrStoreRead), nil
	}); err != nil {
		t.Fatalf("the two-namespace informer never reported ErrStoreRead; last status %+v", mst)
	}
	multiFailedAfter := mst.Since.Sub(corrupted).Round(100 * time.Millisecond)
	t.Logf("two-namespace informer: %s %v after the corruption: %v", mst.State, multiFailedAfter, mst.Err)
	if mst.State != dynamicinformer.Failed || len(multi.Informer().GetStore().ListKeys()) != n {
		t.Errorf("two-namespace informer: state %s with %d objects, want Failed keeping %d", mst.State, len(multi.Informer().GetStore().ListKeys()), n)
	}

	// Remove the object the only way the server allows, and recover.
	yes := true
	if err := client.Delete(ctx, bad, metav1.DeleteOptions{IgnoreStoreReadErrorWithClusterBreakingPotential: &yes}); err != nil {
		t.Fatalf("unsafe delete of the corrupt object: %v", err)
	}
	deletedAt := time.Now()
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		st = h.Status()
		if st.State != dynamicinformer.Synced || st.Err != nil {
			return false, nil
		}
		cached, err := genericlister.New(h.Informer().GetIndexer(), h.GVR().GroupResource()).Namespace(f.ns).Get("w002")
		if err != nil || cached.GetLabels()["app"] != "relabeled" {
			return false, nil
		}
		for _, inf := range []*dynamicinformer.InformerHandle{h, multi} {
			if st := inf.Status(); st.State != dynamicinformer.Synced || st.Err != nil {
				return false, nil
			}
			if _, exists, _ := inf.Informer().GetStore().GetByKey(f.ns + "/" + bad); exists {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		t.Fatalf("informer did not recover after the corrupt object was deleted; status %+v", st)
	}
	recovered := time.Since(deletedAt).Round(100 * time.Millisecond)
	t.Logf("recovered (Synced, cache current) %v after the unsafe delete", recovered)
	server, err := client.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, u := range server.Items {
		want[u.GetNamespace()+"/"+u.GetName()] = u.GetResourceVersion()
	}
	for name, inf := range map[string]*dynamicinformer.InformerHandle{"one-namespace": h, "two-namespace": multi} {
		gotRV := map[string]string{}
		for _, obj := range inf.Informer().GetStore().List() {
			m := obj.(metav1.Object)
			gotRV[m.GetNamespace()+"/"+m.GetName()] = m.GetResourceVersion()
		}
		if fmt.Sprint(gotRV) != fmt.Sprint(want) {
			t.Errorf("%s cache %v, server %v", name, gotRV, want)
		}
	}
	delMu.Lock()
	if fmt.Sprint(deleted) != fmt.Sprint([]string{f.ns + "/" + bad}) {
		t.Errorf("handler deletes %v, want only %s/%s", deleted, f.ns, bad)
	}
	delMu.Unlock()

	stMu.Lock()
	var seq []string
	for _, s := range statuses {
		seq = append(seq, string(s.State))
	}
	stMu.Unlock()
	t.Logf("status sequence: %v", seq)

	cancel()
	shutdown()
	before.VerifyNoLeaks(t)
	sc.Injected("garbage written to one of %d objects' etcd key while an informer watched (liveness bound %v); a healthy object updated; then the corrupt object removed with IgnoreStoreReadErrorWithClusterBreakingPotential", n, idle)
	sc.Held("Failed with ErrStoreRead (*StatusError, StorageReadError naming the key) %v after the corruption, all %d objects kept; %d list requests in the next ~8 s, failure logged once; a two-namespace informer (no idle bound) Failed with ErrStoreRead %v after; both recovered %v after the unsafe delete: caches equal the server (the healthy update in), handler got exactly the one delete; no goroutine leak",
		failedAfter, n, lists, multiFailedAfter, recovered)
}
