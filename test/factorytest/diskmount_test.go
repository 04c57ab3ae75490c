package factorytest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/test/controlplane"
)

// mount runs mount(8) with args and unmounts target at cleanup; it skips
// the test, saying why, where mounting is not allowed (permission bits do
// not stop root, so a read-only or full directory needs a mount).
func mount(t *testing.T, target string, args ...string) {
	t.Helper()
	if out, err := exec.Command("mount", args...).CombinedOutput(); err != nil {
		t.Skipf("cannot mount (%v: %s): a read-only or full directory cannot be made for root without it", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", target).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", target, err, out)
		}
	})
}

// TestDiskCacheReadOnlyDir: CacheDir on a read-only file system (a
// read-only bind mount) cannot be used: Status.CacheErr is ErrCache
// naming the cause, and the informer works from the server (synced with
// every object, then an object created later reaches the handler).
func TestDiskCacheReadOnlyDir(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 4*time.Minute)
	ns := unique("diskro")
	kube := cp.Kube()
	seedConfigMaps(t, ctx, kube, ns)
	src, dir := t.TempDir(), filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	mount(t, dir, "--bind", src, dir)
	if out, err := exec.Command("mount", "-o", "remount,bind,ro", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot remount read-only (%v: %s)", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "probe"), nil, 0o600); err == nil {
		t.Fatal("the read-only mount is writable")
	}
	leaks := controlplane.SnapshotGoroutines()

	f, h, rec, _ := diskRun(t, ctx, dir, ns, dynamicinformer.Options{})
	defer f.Shutdown()
	st := h.Status()
	t.Logf("read-only directory: CacheErr %v", st.CacheErr)
	if !errors.Is(st.CacheErr, dynamicinformer.ErrCache) || !strings.Contains(st.CacheErr.Error(), "read-only file system") {
		t.Errorf("CacheErr %v; want ErrCache saying read-only file system", st.CacheErr)
	}
	if st.Objects != 20 || st.Restored != 0 {
		t.Errorf("status %+v; want 20 objects from the server, none restored", st)
	}
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "later"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSeen(t, ctx, rec, 1, 0, 0)
	f.Shutdown()
	leaks.VerifyNoLeaks(t)
}

// TestDiskCacheFullDisk: CacheDir on a 64 KiB tmpfs, and 30 configmaps of
// 8 KiB: journaling the first list fills it. Status.CacheErr then says
// so (ErrCache, "no space left on device"), and the informer keeps
// working from the server: synced with every object, and a configmap
// created afterwards, and one deleted, reach the handler.
func TestDiskCacheFullDisk(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 4*time.Minute)
	ns := unique("diskfull")
	kube := cp.Kube()
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	data := map[string]string{"v": strings.Repeat("x", 8<<10)}
	for i := 0; i < 30; i++ {
		if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}, Data: data}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	mount(t, dir, "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", dir)
	leaks := controlplane.SnapshotGoroutines()

	f, h, rec, _ := diskRun(t, ctx, dir, ns, dynamicinformer.Options{})
	defer f.Shutdown()
	eventually(t, ctx, "CacheErr reports the full disk", func() bool { return h.Status().CacheErr != nil })
	st := h.Status()
	t.Logf("full disk: CacheErr %v", st.CacheErr)
	if !errors.Is(st.CacheErr, dynamicinformer.ErrCache) || !strings.Contains(st.CacheErr.Error(), "no space left on device") {
		t.Errorf("CacheErr %v; want ErrCache saying no space left on device", st.CacheErr)
	}
	if st.Objects != 30 || st.State != dynamicinformer.Synced {
		t.Errorf("status %+v; want Synced with 30 objects", st)
	}
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "later"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := kube.CoreV1().ConfigMaps(ns).Delete(ctx, "cm-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSeen(t, ctx, rec, 1, 0, 1)
	converged(t, ctx, h, rec.recorder, ns)
	f.Shutdown()
	leaks.VerifyNoLeaks(t)
}

// freeze freezes the file system mounted at dir (fsfreeze: every write
// and fsync on it waits until it is thawed), as a stalled disk would be,
// and returns what thaws it. It thaws at cleanup, and after a minute in
// any case, so that a failing test does not leave writers hung.
func freeze(t *testing.T, dir string) (thaw func()) {
	t.Helper()
	if out, err := exec.Command("fsfreeze", "-f", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot freeze %s (%v: %s)", dir, err, strings.TrimSpace(string(out)))
	}
	var once sync.Once
	thaw = func() {
		once.Do(func() {
			if out, err := exec.Command("fsfreeze", "-u", dir).CombinedOutput(); err != nil {
				t.Errorf("fsfreeze -u %s: %v: %s", dir, err, out)
			}
		})
	}
	watchdog := time.AfterFunc(time.Minute, thaw)
	t.Cleanup(func() { watchdog.Stop(); thaw() })
	return thaw
}

// filesSize is the total size of the files in dir (reading is not
// held up by a frozen file system).
func filesSize(t *testing.T, dir string) int64 {
	t.Helper()
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			total += fi.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return total
}

// statusWithin calls h.Status, failing the test if it does not answer
// within d (it must never wait for the disk).
func statusWithin(t *testing.T, h *dynamicinformer.InformerHandle, d time.Duration) dynamicinformer.Status {
	t.Helper()
	got := make(chan dynamicinformer.Status, 1)
	go func() { got <- h.Status() }()
	select {
	case st := <-got:
		return st
	case <-time.After(d):
		t.Fatalf("Status did not answer within %v while the disk was stalled", d)
		return dynamicinformer.Status{}
	}
}

// TestDiskCacheStalledDisk: CacheDir on an ext4 file system (a loop
// mount) that is frozen while the informer runs, so that the journal's
// writes and syncs wait as on a stalled disk. Meanwhile 30 configmaps
// are created, 10 updated and 5 deleted: every change reaches the
// handler and the cache, Status answers at once (Synced, no CacheErr),
// and the files do not grow. Thawed, the journal
// writes what it queued: after a shutdown, a restart on the directory
// resumes from it with no list and restores the 45 objects the server
// has, and its handler sees no change.
func TestDiskCacheStalledDisk(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 4*time.Minute)
	for _, tool := range []string{"mkfs.ext4", "fsfreeze"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found: a stalled disk is made with a frozen ext4 file system", tool)
		}
	}
	img := filepath.Join(t.TempDir(), "fs.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 64<<20); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", img).CombinedOutput(); err != nil {
		t.Skipf("mkfs.ext4: %v: %s", err, out)
	}
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	mount(t, dir, "-o", "loop", img, dir)
	ns := unique("diskstall")
	kube := cp.Kube()
	seedConfigMaps(t, ctx, kube, ns)
	leaks := controlplane.SnapshotGoroutines()

	f, h, rec, _ := diskRun(t, ctx, dir, ns, dynamicinformer.Options{})
	defer f.Shutdown()
	// The first list journaled and synced: the next second's sync
	// writes nothing.
	var last int64 = -1
	eventually(t, ctx, "the first list written", func() bool {
		w := h.Status().Disk.Written
		settled := w > 0 && w == last
		last = w
		time.Sleep(1500 * time.Millisecond)
		return settled
	})
	thaw := freeze(t, dir)
	defer thaw() // (a failure thaws before f.Shutdown, which waits for the disk)
	stored := filesSize(t, dir)

	for i := 20; i < 50; i++ {
		if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 10; i++ {
		if _, err := kube.CoreV1().ConfigMaps(ns).Patch(ctx, fmt.Sprintf("cm-%d", i), types.MergePatchType, []byte(`{"data":{"changed":"yes"}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 10; i < 15; i++ {
		if err := kube.CoreV1().ConfigMaps(ns).Delete(ctx, fmt.Sprintf("cm-%d", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	stalled, cancel := context.WithTimeout(ctx, 30*time.Second)
	waitSeen(t, stalled, rec, 30, 10, 5)
	cancel()
	time.Sleep(2 * time.Second) // two of the disk goroutine's ticks
	st := statusWithin(t, h, 5*time.Second)
	t.Logf("stalled disk: status %s, %d objects, CacheErr %v; files %d bytes", st.State, st.Objects, st.CacheErr, stored)
	if st.State != dynamicinformer.Synced || st.Objects != 45 || st.CacheErr != nil {
		t.Errorf("status %+v; want Synced with 45 objects, no CacheErr", st)
	}
	if now := filesSize(t, dir); now != stored {
		t.Fatalf("the files grew from %d to %d bytes while the file system was frozen: the disk did not stall", stored, now)
	}
	if objs, err := h.Lister().List(labels.Everything()); err != nil || len(objs) != 45 {
		t.Errorf("lister: %d objects (%v), want 45", len(objs), err)
	}
	thaw()
	eventually(t, ctx, "the queued journal written once thawed", func() bool { return filesSize(t, dir) > stored })
	f.Shutdown()
	leaks.VerifyNoLeaks(t)

	f2, h2, rec2, c2 := diskRun(t, ctx, dir, ns, dynamicinformer.Options{})
	defer f2.Shutdown()
	converged(t, ctx, h2, rec2.recorder, ns)
	initial, a, u, d, _ := rec2.seen()
	lists, _ := c2.counts()
	st2 := h2.Status()
	if st2.Disk.Start != dynamicinformer.DiskResumed || st2.Restored != 45 || initial != 45 || lists != 0 || len(a)+len(u)+len(d) != 0 {
		t.Errorf("restart: disk %+v, restored %d, %d initial adds, %d lists, changes %v %v %v; want Resumed, 45 restored and added, no list, no change",
			st2.Disk, st2.Restored, initial, lists, a, u, d)
	}
	f2.Shutdown()
}
