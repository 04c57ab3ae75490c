package factorytest

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/shard"
	"github.com/informerkit/informerkit/test/controlplane"
	"github.com/informerkit/informerkit/test/shardtest"
)

// cacheRVs is an informer's cache as key -> resourceVersion.
func cacheRVs(h *dynamicinformer.InformerHandle) map[string]string {
	out := map[string]string{}
	for _, o := range h.Informer().GetStore().List() {
		k, rv := key(o)
		out[k] = rv
	}
	return out
}

// diffOf is what handlers must see after a restored state was compared
// with a new list: adds, updates (resourceVersion changed) and deletes
// from restored to now, keys sorted.
func diffOf(restored, now map[string]string) (added, updated, deleted []string) {
	for k, rv := range now {
		old, ok := restored[k]
		switch {
		case !ok:
			added = append(added, k)
		case old != rv:
			updated = append(updated, k)
		}
	}
	for k := range restored {
		if _, ok := now[k]; !ok {
			deleted = append(deleted, k)
		}
	}
	sort.Strings(added)
	sort.Strings(updated)
	sort.Strings(deleted)
	return added, updated, deleted
}

// TestRestartDecidedAtStartDiffs: informers whose namespaces
// (WithPermittedNamespaces) or shard (WithShardSource) are decided as
// they start are kept on disk. A restart restores what was stored, then
// lists what they watch now and diffs (Diffed, with the reason): the
// handlers see the restored objects as the initial list, then exactly
// the difference to the server's state — the changes made while down,
// and for the shard source, which moved from half of the objects to all
// of them, the other half as adds.
func TestRestartDecidedAtStartDiffs(t *testing.T) {
	controlplane.Parallel(t)
	half, err := shard.Static(0, 2)
	if err != nil {
		t.Fatal(err)
	}
	all, err := shard.Static(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		nss    int
		reason string
		// user, if set, is given rights and makes the client
		// configuration (else the admin's).
		user func(t *testing.T, ctx context.Context, nss []string) *rest.Config
		// opts are the informer's options in the first run and the
		// second; inScope says which of the server's objects the second
		// run's cache holds.
		opts    func(nss []string, run int) []dynamicinformer.ResourceOption
		inScope func(obj metav1.Object) bool
	}{
		{
			// A user who may read configmaps in the two namespaces, and
			// get (not list) namespaces: the stored state's cluster
			// identity is the kube-system namespace's UID.
			name: "permitted namespaces", nss: 2, reason: "permitted",
			user: func(t *testing.T, ctx context.Context, nss []string) *rest.Config {
				u := unique("diskdecided-user")
				for _, ns := range nss {
					if err := cp.Grant(ctx, u, ns, "cm", readConfigMaps); err != nil {
						t.Fatal(err)
					}
				}
				if err := cp.Grant(ctx, u, "", "ns", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get"}}); err != nil {
					t.Fatal(err)
				}
				return cp.UserConfig(u)
			},
			opts: func(nss []string, _ int) []dynamicinformer.ResourceOption {
				return []dynamicinformer.ResourceOption{dynamicinformer.WithPermittedNamespaces(nss...)}
			},
			inScope: func(metav1.Object) bool { return true },
		},
		{
			name: "shard source", nss: 1, reason: "shard source",
			opts: func(nss []string, run int) []dynamicinformer.ResourceOption {
				s := half
				if run == 2 {
					s = all
				}
				return []dynamicinformer.ResourceOption{dynamicinformer.WithNamespaces(nss...), dynamicinformer.WithShardSource(shardtest.NewManualSource(s))}
			},
			inScope: func(o metav1.Object) bool { return all.Contains(o) },
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := ctxT(t, 4*time.Minute)
			kube := cp.Kube()
			var nss []string
			for i := 0; i < c.nss; i++ {
				ns := unique("diskdecided")
				seedConfigMaps(t, ctx, kube, ns)
				nss = append(nss, ns)
			}
			dir := t.TempDir()
			config := func() *rest.Config { return cp.Config() }
			if c.user != nil {
				user := c.user(t, ctx, nss)
				config = func() *rest.Config { return rest.CopyConfig(user) }
			}
			leaks := controlplane.SnapshotGoroutines()
			run := func(n int) (*dynamicinformer.Factory, *dynamicinformer.InformerHandle, *initialRecorder, func() int) {
				return diskStartCounted(t, ctx, config(), dir, nss, c.opts(nss, n)...)
			}

			f1, h1, _, _ := run(1)
			if st := h1.Status(); st.CacheErr != nil || st.Disk.Start != dynamicinformer.DiskCold || st.Objects == 0 {
				t.Fatalf("first run: %+v", st)
			}
			// What the shutdown stores is the cache (nothing changes it
			// meanwhile).
			stored := cacheRVs(h1)
			f1.Shutdown()
			for _, ns := range nss {
				changeWhileDown(t, ctx, kube, ns)
			}
			server := map[string]string{}
			for _, ns := range nss {
				l, err := kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
				if err != nil {
					t.Fatal(err)
				}
				for i := range l.Items {
					if o := &l.Items[i]; c.inScope(o) {
						server[o.Namespace+"/"+o.Name] = o.ResourceVersion
					}
				}
			}
			added, updated, deleted := diffOf(stored, server)

			f2, h2, rec2, lists2 := run(2)
			defer f2.Shutdown()
			defer func() {
				if t.Failed() {
					initial, a, u, d, _ := rec2.seen()
					t.Logf("status %+v; lists %d; handler: %d initial, adds %v, updates %v, deletes %v; want %v %v %v", h2.Status(), lists2(), initial, a, u, d, added, updated, deleted)
				}
			}()
			waitSeen(t, ctx, rec2, len(added), len(updated), len(deleted))
			eventually(t, ctx, "the cache equals the server", func() bool { return fmt.Sprint(cacheRVs(h2)) == fmt.Sprint(server) })
			initial, a, u, d, noChange := rec2.seen()
			st := h2.Status()
			t.Logf("%d stored, %d on the server now; restart: %d restored, %d lists; handler: %d initial, %d adds, %d updates, %d deletes; disk %+v",
				len(stored), len(server), st.Restored, lists2(), initial, len(a), len(u), len(d), st.Disk)
			if st.Restored != len(stored) || initial != len(stored) || st.CacheErr != nil {
				t.Errorf("restored %d, initial adds %d, cache err %v; want %d, %d, nil", st.Restored, initial, st.CacheErr, len(stored), len(stored))
			}
			if st.Disk.Start != dynamicinformer.DiskDiffed || !strings.Contains(st.Disk.Reason, c.reason) {
				t.Errorf("disk status %+v; want Diffed, the reason naming %q", st.Disk, c.reason)
			}
			if lists2() != c.nss {
				t.Errorf("restart sent %d lists, want one per namespace (%d)", lists2(), c.nss)
			}
			if fmt.Sprint(a) != fmt.Sprint(added) || fmt.Sprint(u) != fmt.Sprint(updated) || fmt.Sprint(d) != fmt.Sprint(deleted) || noChange != 0 {
				t.Errorf("handler saw adds %v updates %v (%d unchanged) deletes %v; want %v %v %v", a, u, noChange, d, added, updated, deleted)
			}
			f2.Shutdown()
			leaks.VerifyNoLeaks(t)
		})
	}
}
