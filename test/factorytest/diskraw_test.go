package factorytest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/test/controlplane"
)

// TestRestoredWatchedObjectsAreTheServers: an informer that caches
// objects as decoded (no projection, no transform) writes those that
// reach it through the watch to disk as the server sent them — the
// server's JSON, not encoded again (an informer with a transform
// encodes them: the control); a restart restores every one exactly as
// the server holds it.
func TestRestoredWatchedObjectsAreTheServers(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 4*time.Minute)
	ns := unique("diskraw")
	kube := cp.Kube()
	seedConfigMaps(t, ctx, kube, ns)
	dir := t.TempDir()
	leaks := controlplane.SnapshotGoroutines()

	f1, h1, rec1, _ := diskRun(t, ctx, dir, ns, dynamicinformer.Options{})
	// Through the watch: five created, one updated, with values whose
	// JSON needs escapes, numbers in strings and non-ASCII text.
	var watched []string
	for i := 0; i < 5; i++ {
		name := fmt.Sprintf("w-%d", i)
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"i": fmt.Sprint(i)},
				Annotations: map[string]string{"example.com/note": "quote \" backslash \\ <b>&amp; é ✓ \u2028"}},
			Data: map[string]string{"n": fmt.Sprint(i * 1000), "text": "line 1\nline 2\ttab"},
		}
		if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		watched = append(watched, name)
	}
	cm0, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "cm-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm0.Data = map[string]string{"changed": "through the watch"}
	if _, err := kube.CoreV1().ConfigMaps(ns).Update(ctx, cm0, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	watched = append(watched, "cm-0")
	waitSeen(t, ctx, rec1, 5, 1, 0)
	converged(t, ctx, h1, rec1.recorder, ns)
	f1.Shutdown()

	// The server's JSON of each watched object is on disk as it was
	// sent (its quoted keys, in its order).
	asSent := func(name string) []byte { return []byte(fmt.Sprintf(`{"name":%q,"namespace":%q`, name, ns)) }
	stored := storedBytes(t, dir)
	for _, name := range watched {
		if !bytes.Contains(stored, asSent(name)) {
			t.Errorf("%s came through the watch but its JSON as sent is not in the stored files", name)
		}
	}
	// An informer whose transform changes objects (StripManagedFields)
	// encodes what it caches: none of it is the server's JSON, so the
	// check above tells the two forms apart.
	projected := t.TempDir()
	f3, _, _ := diskStart(t, ctx, projected, dynamicinformer.Options{}, nil, dynamicinformer.WithNamespaces(ns),
		dynamicinformer.WithProjection(dynamicinformer.Projection{StripManagedFields: true}))
	f3.Shutdown()
	if encoded := storedBytes(t, projected); len(encoded) == 0 || bytes.Contains(encoded, asSent("w-0")) || bytes.Contains(encoded, asSent("cm-5")) {
		t.Errorf("an informer with a transform wrote %d bytes, among them the server's JSON", len(encoded))
	}

	f2, h2, _, c2 := diskRun(t, ctx, dir, ns, dynamicinformer.Options{})
	defer f2.Shutdown()
	st := h2.Status()
	if lists, _ := c2.counts(); lists != 0 || st.Disk.Start != dynamicinformer.DiskResumed || st.Restored != 25 {
		t.Fatalf("restart: %d lists, status %+v; want 0, Resumed, 25 restored", lists, st.Disk)
	}
	restoredAsServer(t, ctx, h2, ns, 25)
	f2.Shutdown()
	leaks.VerifyNoLeaks(t)
}

// TestRestoredCompactObjectsAreTheServers: a compact cache
// (Projection{Compact: true}) journals the encoding its decoder builds,
// for listed objects and for those that come through the watch; a
// restart resumes (no list) and every restored object, read through the
// lister, is the server's.
func TestRestoredCompactObjectsAreTheServers(t *testing.T) {
	controlplane.Parallel(t)
	ctx := ctxT(t, 4*time.Minute)
	ns := unique("diskcompact")
	kube := cp.Kube()
	seedConfigMaps(t, ctx, kube, ns)
	dir := t.TempDir()
	leaks := controlplane.SnapshotGoroutines()
	compact := []dynamicinformer.ResourceOption{dynamicinformer.WithNamespaces(ns),
		dynamicinformer.WithProjection(dynamicinformer.Projection{Compact: true})}

	f1, h1, rec1, _ := diskStartCounted(t, ctx, cp.Config(), dir, []string{ns}, compact...)
	for i := 0; i < 3; i++ {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("w-%d", i), Labels: map[string]string{"i": fmt.Sprint(i)}},
			Data: map[string]string{"n": fmt.Sprint(i * 1000), "text": "é ✓ \"quoted\""}}
		if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cm0, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "cm-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm0.Data = map[string]string{"changed": "through the watch"}
	if _, err := kube.CoreV1().ConfigMaps(ns).Update(ctx, cm0, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSeen(t, ctx, rec1, 3, 1, 0)
	converged(t, ctx, h1, rec1.recorder, ns)
	f1.Shutdown()

	f2, h2, _, lists := diskStartCounted(t, ctx, cp.Config(), dir, []string{ns}, compact...)
	defer f2.Shutdown()
	if st := h2.Status(); lists() != 0 || st.Disk.Start != dynamicinformer.DiskResumed || st.Restored != 23 {
		t.Fatalf("restart: %d lists, status %+v; want 0, Resumed, 23 restored", lists(), st.Disk)
	}
	restoredAsServer(t, ctx, h2, ns, 23)
	f2.Shutdown()
	leaks.VerifyNoLeaks(t)
}

// restoredAsServer checks that the server holds n configmaps in ns and
// that h's lister returns each exactly as the server holds it (before
// any change after the restore).
func restoredAsServer(t *testing.T, ctx context.Context, h *dynamicinformer.InformerHandle, ns string, n int) {
	t.Helper()
	server, err := cp.Dynamic().Resource(configmaps).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(server.Items) != n {
		t.Fatalf("server holds %d configmaps, want %d", len(server.Items), n)
	}
	for i := range server.Items {
		want := &server.Items[i]
		got, err := h.Lister().ByNamespace(ns).Get(want.GetName())
		if err != nil {
			t.Fatalf("%s not restored (%v)", want.GetName(), err)
		}
		if u, ok := got.(*unstructured.Unstructured); !ok || !reflect.DeepEqual(u.Object, want.Object) {
			t.Errorf("%s restored as\n%v\nthe server holds\n%v", want.GetName(), got, want.Object)
		}
	}
}

// storedBytes returns the content of every file of the configmaps'
// stored caches in dir.
func storedBytes(t *testing.T, dir string) []byte {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "configmaps.core.v1-*"))
	var stored []byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, b...)
	}
	return stored
}
