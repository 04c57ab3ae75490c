package factorytest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
