package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/subscription"
)

// A restart from --cache-dir that resumes within the grace prints one
// line, Synced, as a cold start does: Restored is a state it passes
// through. One that stays Restored (the server does not answer) is
// reported after the grace.
func TestTransitionsRestoredIsTransient(t *testing.T) {
	var p printed
	tr := newTransitions(200*time.Millisecond, func(dynamicinformer.Status) bool { return true }, p.print)
	defer tr.stop()
	tr.observe(status("pods", dynamicinformer.Pending, 0, nil))
	tr.observe(status("pods", dynamicinformer.Restored, 5000, nil))
	tr.observe(status("pods", dynamicinformer.Synced, 5000, nil))
	tr.observe(status("nodes", dynamicinformer.Restored, 3, nil))
	time.Sleep(400 * time.Millisecond)
	if got, want := p.get(), "pods →Synced 5000\nnodes →Restored 3"; got != want {
		t.Fatalf("lines:\n%s\nwant:\n%s", got, want)
	}
}

// STATUS lines say how many objects were restored from disk and why the
// cache directory is not used: text after the state, JSON in "restored"
// and "cacheError" (omitted when there is nothing to say).
func TestStatusSaysRestoredAndCacheErr(t *testing.T) {
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	cacheErr := &dynamicinformer.InformerError{GVR: gvr, Kind: dynamicinformer.ErrCache, Err: errors.New("directory locked by another process")}
	for _, c := range []struct {
		st       dynamicinformer.Status
		text     string
		restored float64
		cacheErr string
	}{
		{dynamicinformer.Status{GVR: gvr, State: dynamicinformer.Synced, Objects: 5002, Restored: 5000}, "Synced (5002 objects); 5000 restored from disk", 5000, ""},
		{dynamicinformer.Status{GVR: gvr, State: dynamicinformer.Synced, Objects: 7, CacheErr: cacheErr}, "Synced (7 objects); " + cacheErr.Error(), 0, cacheErr.Error()},
		{dynamicinformer.Status{GVR: gvr, State: dynamicinformer.Synced, Objects: 7}, "Synced (7 objects)", 0, ""},
	} {
		var text bytes.Buffer
		newPrinter(&text, &text, false, false).status(c.st, "")
		if line := strings.TrimSpace(text.String()); !strings.HasSuffix(line, "STATUS  configmaps.v1 "+c.text) {
			t.Errorf("text %q, want it to end in %q", line, c.text)
		}
		var js bytes.Buffer
		newPrinter(&js, &js, true, false).status(c.st, "")
		var rec map[string]any
		if err := json.Unmarshal(js.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		if r, _ := rec["restored"].(float64); r != c.restored {
			t.Errorf("%s: restored %v, want %v", js.String(), rec["restored"], c.restored)
		}
		if e, _ := rec["cacheError"].(string); e != c.cacheErr {
			t.Errorf("%s: cacheError %q, want %q", js.String(), e, c.cacheErr)
		}
	}
}

func TestCacheSecretsNeedsCacheDir(t *testing.T) {
	if _, err := parseArgs([]string{"--resource", "secrets", "--cache-secrets"}, nil); err == nil || !strings.Contains(err.Error(), "--cache-secrets needs --cache-dir") {
		t.Errorf("--cache-secrets without --cache-dir: %v", err)
	}
	c, err := parseArgs([]string{"--resource", "secrets", "--cache-dir", "/tmp/x", "--cache-secrets"}, nil)
	if err != nil || c.CacheDir != "/tmp/x" || !c.CacheSecrets {
		t.Errorf("parsed %+v, %v", c, err)
	}
}

// syncWriter is a buffer written by the printer from several goroutines.
type syncWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// cacheDirRun runs the watcher's printing of one crontabs informer in
// team-a kept in dir, against a fake server whose crontabs CRD has the
// UID crd and holds the objects names (all at resourceVersion rv), until
// it is Synced with them and until (then) holds; it returns what was
// printed and the last status.
func cacheDirRun(t *testing.T, dir, crd, rv string, names []string, until func(context.Context, *watcher) error) (string, dynamicinformer.Status) {
	t.Helper()
	kubeSystem := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": "kube-system", "uid": "cluster-a"}}}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		crontabsGVR: "CronTabList", {Version: "v1", Resource: "namespaces"}: "NamespaceList"}, kubeSystem)
	client.PrependReactor("list", "namespaces", func(clienttesting.Action) (bool, runtime.Object, error) {
		l := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "v1", "kind": "NamespaceList"}}
		l.SetResourceVersion(rv)
		return true, l, nil
	})
	client.PrependReactor("get", "customresourcedefinitions", func(a clienttesting.Action) (bool, runtime.Object, error) {
		return true, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
			"metadata": map[string]any{"name": a.(clienttesting.GetAction).GetName(), "uid": crd}}}, nil
	})
	client.PrependReactor("list", "crontabs", func(clienttesting.Action) (bool, runtime.Object, error) {
		l := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "stable.example.com/v1", "kind": "CronTabList"}}
		l.SetResourceVersion(rv)
		for _, n := range names {
			u := unstructured.Unstructured{Object: map[string]any{"apiVersion": "stable.example.com/v1", "kind": "CronTab"}}
			u.SetNamespace("team-a")
			u.SetName(n)
			u.SetUID(types.UID(crd + "-" + n))
			u.SetResourceVersion(rv)
			l.Items = append(l.Items, u)
		}
		return true, l, nil
	})
	f := dynamicinformer.NewSharedInformerFactory(client, dynamicinformer.Options{CacheDir: dir, DisableCRDTracking: true})
	defer f.Shutdown()
	var out syncWriter
	p := newPrinter(&out, &out, false, false)
	w := &watcher{cfg: &Config{CacheDir: dir}, factory: f, out: p, counts: newCounters(), seen: map[string]int{}, changed: make(chan struct{}),
		failed: make(chan error, 1), restoredGVR: map[schema.GroupVersionResource]bool{}}
	w.tr = newTransitions(statusGrace, func(dynamicinformer.Status) bool { return true }, p.status)
	defer w.tr.stop()
	var mu sync.Mutex
	var last dynamicinformer.Status // the last one printed (or not) by onStatus
	changed := make(chan struct{}, 1)
	defer f.OnStatusChange(func(st dynamicinformer.Status) {
		w.onStatus(st)
		mu.Lock()
		last = st
		mu.Unlock()
		select {
		case changed <- struct{}{}:
		default: // a wake-up is pending
		}
	})()
	h := f.ForResource(crontabsGVR, dynamicinformer.WithNamespaces("team-a"))
	if _, err := h.Informer().AddEventHandler(w.handlerFor(crontabsGVR, []string{"team-a"}, "", "")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f.Start(ctx)
	for {
		mu.Lock()
		st := last
		mu.Unlock()
		if st.State == dynamicinformer.Synced && st.Objects == len(names) {
			break
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("not Synced with %d objects: %+v", len(names), st)
		}
	}
	if err := until(ctx, w); err != nil {
		t.Fatalf("%v; printed:\n%s", err, out.String())
	}
	return out.String(), h.Status()
}

// A CRD deleted and created again while the watcher was down is not a
// cold start: the stored objects (of the old CRD) are printed DELETED, the
// new CRD's objects ADDED (not "initial list"), and the STATUS line
// counts the stored objects as restored (after a Removed one saying why,
// when the informer was seen Removed) — as the README says.
func TestCacheDirCRDCreatedAgain(t *testing.T) {
	dir := t.TempDir()
	first, _ := cacheDirRun(t, dir, "crd-1", "10", []string{"ct-1", "ct-2"}, func(ctx context.Context, w *watcher) error {
		for _, name := range []string{"ct-1", "ct-2"} {
			if err := w.waitEvent(ctx, subscription.Added, crontabsGVR, "team-a", name); err != nil {
				return err
			}
		}
		return nil
	})
	if !strings.Contains(first, "team-a/ct-1  (initial list)") {
		t.Fatalf("first run:\n%s", first)
	}
	printed, st := cacheDirRun(t, dir, "crd-2", "20", []string{"ct-3"}, func(ctx context.Context, w *watcher) error {
		for _, e := range []struct {
			typ  subscription.EventType
			name string
		}{{subscription.Deleted, "ct-1"}, {subscription.Deleted, "ct-2"}, {subscription.Added, "ct-3"}} {
			if err := w.waitEvent(ctx, e.typ, crontabsGVR, "team-a", e.name); err != nil {
				return err
			}
		}
		return nil
	})
	if st.Disk.Start != dynamicinformer.DiskRemoved || st.Restored != 2 {
		t.Fatalf("second run: disk %+v, restored %d; want the 2 stored objects restored, then deleted", st.Disk, st.Restored)
	}
	// Events in order; the STATUS line is printed by another goroutine.
	var events, status []string
	for _, l := range strings.Split(strings.TrimSpace(printed), "\n") {
		_, rest, _ := strings.Cut(l, " ") // without the time
		if strings.HasPrefix(rest, "STATUS") {
			status = append(status, rest)
		} else {
			events = append(events, rest)
		}
	}
	wantEvents := []string{
		"DELETED crontabs.v1.stable.example.com team-a/ct-1",
		"DELETED crontabs.v1.stable.example.com team-a/ct-2",
		"ADDED   crontabs.v1.stable.example.com team-a/ct-3",
	}
	// The last STATUS line is Synced; a Removed one before it, if the
	// informer was seen Removed, says why.
	synced := regexp.MustCompile(`^STATUS  crontabs\.v1\.stable\.example\.com (Removed → )?Synced \(1 objects\); 2 restored from disk$`)
	removed := "STATUS  crontabs.v1.stable.example.com Removed (0 objects): the CustomResourceDefinition was deleted and created again while the process was down; 2 restored from disk"
	statusOK := len(status) > 0 && synced.MatchString(status[len(status)-1])
	for _, l := range status[:max(len(status)-1, 0)] {
		statusOK = statusOK && l == removed
	}
	if !slices.Equal(events, wantEvents) || !statusOK {
		t.Errorf("second run printed\n%s\nwant the events\n%s\nand STATUS lines matching\n%s\n(after %s)", printed, strings.Join(wantEvents, "\n"), synced, removed)
	}

	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(readme)), " ")
	for _, s := range []string{
		"A stored state of a CRD deleted and created again while the watcher was down is not a cold start: its objects, of the old CRD, are printed `DELETED`, then the new CRD's `ADDED` (not `(initial list)`)",
		"(`Synced (1 objects); 2 restored from disk`)",
		"(`Removed (0 objects): the CustomResourceDefinition was deleted and created again while the process was down; 2 restored from disk`)",
	} {
		if !strings.Contains(text, s) {
			t.Errorf("README lacks %q", s)
		}
	}
	if strings.Contains(text, "another CRD instance (deleted and created again)") {
		t.Errorf("README still says a CRD deleted and created again starts cold")
	}
}
