package factorytest

import (
	"os"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/internal/persist"
	"github.com/informerkit/informerkit/test/controlplane"
)

// TestRestartAfterCrashInsideList: a process that crashed in the middle
// of its first list left a journal holding half of the list — the half
// whose objects have the highest resourceVersions, so the state's
// resourceVersion is the list's last. Resuming a watch from there would
// never bring the other half, nor the changes made while the process was
// down (they are all older): the cache would be wrong for good. The
// journal marks the list as begun and not completed, so the restart
// restores the half (initial adds), then lists and diffs: Status.Disk is
// Diffed, "stored during a list", one list is sent, and the cache and the
// handler's replay equal the server.
//
// The crashed journal is written as the informer writes it: the stored
// objects' own records (from a complete run's snapshot), after a Listing
// mark, with no Listed mark after them.
func TestRestartAfterCrashInsideList(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 4*time.Minute)
	ns := unique("disklist")
	kube := cp.Kube()
	seedConfigMaps(t, ctx, kube, ns)
	dir := t.TempDir()

	f1, h1, _, _ := diskRun(t, ctx, dir, ns, dynamicinformer.Options{})
	if st := h1.Status(); st.Objects != 20 || st.CacheErr != nil {
		t.Fatalf("first run: %+v", st)
	}
	f1.Shutdown()
	files, _ := filepath.Glob(filepath.Join(dir, "configmaps.core.v1-*.snap"))
	if len(files) != 1 {
		t.Fatalf("stored files %v", files)
	}
	name := strings.TrimSuffix(filepath.Base(files[0]), ".snap")

	// The crash: a cold start's list, half journaled.
	d, err := persist.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	id, err := d.Stored(name)
	if err != nil {
		t.Fatal(err)
	}
	full, _, err := d.Load(name, id)
	if err != nil || full.Listing || len(full.Objects) != 20 {
		t.Fatalf("complete run's state: listing %v, %d objects, err %v; want a completed list of 20", full.Listing, len(full.Objects), err)
	}
	objs := append([]persist.Object(nil), full.Objects...)
	sort.Slice(objs, func(i, j int) bool { return rvNum(t, objs[i].RV) > rvNum(t, objs[j].RV) })
	w, err := d.Create(name, id, persist.State{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Listing(); err != nil {
		t.Fatal(err)
	}
	for _, o := range objs[:10] {
		if err := w.Put(o.Key, o.RV, o.Data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	// (Close folds the journal into the snapshot, as a stop would; the
	// mark goes with it.)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	d.Close()

	added, updated, deleted := changeWhileDown(t, ctx, kube, ns)

	leaks := controlplane.SnapshotGoroutines()
	f2, h2, rec2, c2 := diskRun(t, ctx, dir, ns, dynamicinformer.Options{})
	defer f2.Shutdown()
	converged(t, ctx, h2, rec2.recorder, ns)
	initial, a, u, del, _ := rec2.seen()
	lists, _ := c2.counts()
	st := h2.Status()
	t.Logf("restart after a crash inside the list: disk %+v, %d lists; handler %d initial, adds %v, updates %v, deletes %v (changes while down: adds %v updates %v deletes %v)",
		st.Disk, lists, initial, a, u, del, added, updated, deleted)
	if st.Disk.Start != dynamicinformer.DiskDiffed || st.Disk.Reason != "stored during a list" || st.Disk.Restored != 10 {
		t.Errorf("disk status %+v; want Diffed, \"stored during a list\", 10 restored", st.Disk)
	}
	if lists != 1 || initial != 10 {
		t.Errorf("%d lists, %d initial adds; want 1 list after the 10 restored", lists, initial)
	}
	// The diff's list is journaled as complete when the handler is given
	// an event after it (here an update): a third start then resumes.
	cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "cm-10", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data = map[string]string{"after": "the list"}
	cm, err = kube.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "the update after the list reaches the handler", func() bool {
		_, _, u, _, _ := rec2.seen()
		return slices.Contains(u, ns+"/cm-10")
	})
	f2.Shutdown()
	leaks.VerifyNoLeaks(t)

	f3, h3, rec3, c3 := diskRun(t, ctx, dir, ns, dynamicinformer.Options{})
	defer f3.Shutdown()
	converged(t, ctx, h3, rec3.recorder, ns)
	if lists, _ := c3.counts(); lists != 0 || h3.Status().Disk.Start != dynamicinformer.DiskResumed {
		t.Errorf("third start: %d lists, disk %+v; want a resume", lists, h3.Status().Disk)
	}
}

func rvNum(t *testing.T, rv string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q: %v", rv, err)
	}
	return n
}

// TestRestartAfterQuietRelistResumes: a relist that changes nothing
// (WithRelistPeriod on a quiet resource) is followed by no event; a
// journal that closed a list only at the first later event left it
// journaled as under way, so every restart after it compared a new list.
// The journal closes a list at its end: the restart resumes, sends no
// list, and sees no change.
func TestRestartAfterQuietRelistResumes(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 4*time.Minute)
	ns := unique("diskquiet")
	kube := cp.Kube()
	seedConfigMaps(t, ctx, kube, ns)
	dir := t.TempDir()
	leaks := controlplane.SnapshotGoroutines()

	// One relist, and a shutdown after it ends and before the next one
	// starts. The relist's 20 objects reach the store in a few
	// milliseconds on an idle machine; a loaded one can take longer than
	// the period, and a third list under way at shutdown is not this
	// scenario: then run it again with the period and the settling time
	// doubled (at most 4 times), so the test does not depend on the
	// machine's speed.
	for period, attempt := 3*time.Second, 1; ; period, attempt = 2*period, attempt+1 {
		c1 := &collectionRequests{ns: ns}
		f1, h1, _ := diskStart(t, ctx, dir, dynamicinformer.Options{}, []*collectionRequests{c1},
			dynamicinformer.WithNamespaces(ns), dynamicinformer.WithRelistPeriod(period))
		eventually(t, ctx, "a relist", func() bool { l, _ := c1.counts(); return l >= 2 })
		time.Sleep(period / 6) // the relist's end reaches the store and the journal
		if st := h1.Status(); st.Objects != 20 || st.CacheErr != nil {
			t.Fatalf("first run: %+v", st)
		}
		f1.Shutdown()
		if lists, _ := c1.counts(); lists == 2 {
			break
		} else if attempt == 4 {
			t.Fatalf("%d lists before the shutdown with a relist period of %v: the machine is too slow for this scenario", lists, period)
		}
		t.Logf("attempt %d: a third list started before the shutdown (relist period %v); again with %v", attempt, period, 2*period)
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	f2, h2, rec2, c2 := diskRun(t, ctx, dir, ns, dynamicinformer.Options{})
	defer f2.Shutdown()
	st := h2.Status()
	lists, _ := c2.counts()
	if st.Disk.Start != dynamicinformer.DiskResumed || st.Disk.Restored != 20 || lists != 0 {
		t.Errorf("restart after a quiet relist: disk %+v, %d lists; want Resumed, 20 restored, no list", st.Disk, lists)
	}
	converged(t, ctx, h2, rec2.recorder, ns)
	if initial, a, u, d, _ := rec2.seen(); initial != 20 || len(a)+len(u)+len(d) != 0 {
		t.Errorf("handler saw %d initial adds, then adds %v updates %v deletes %v; want 20 and nothing else", initial, a, u, d)
	}
	f2.Shutdown()
	leaks.VerifyNoLeaks(t)
}
