package dynamicinformer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	ikcache "github.com/informerkit/informerkit/cache"
	"github.com/informerkit/informerkit/dynamicinformer/internal/codec"
	"github.com/informerkit/informerkit/dynamicinformer/internal/reflectorseam"
	"github.com/informerkit/informerkit/internal/decode"
	"github.com/informerkit/informerkit/internal/decode/decodetest"
	"github.com/informerkit/informerkit/internal/diskcost"
	"github.com/informerkit/informerkit/internal/persist"
	"github.com/informerkit/informerkit/shard"
)

var configmapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// diskObject is a ConfigMap-shaped object of about 2.3 KB of JSON: 20
// data keys, 4 labels.
func diskObject(i int) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "v1", "kind": "ConfigMap"}}
	u.SetNamespace("bench")
	u.SetName(fmt.Sprintf("cm-%d", i))
	u.SetUID("7f1c8a52-3b0e-4d6a-9a51-0c2f5e1d9b3a")
	u.SetResourceVersion(fmt.Sprint(1000 + i))
	u.SetLabels(map[string]string{"app": "bench", "tier": "backend", "team": "platform", "shard": fmt.Sprint(i % 8)})
	data := map[string]interface{}{}
	for k := 0; k < 20; k++ {
		data[fmt.Sprintf("key-%02d", k)] = fmt.Sprintf("value %d of object %d, padded to look like configuration: %080d", k, i, k)
	}
	u.Object["data"] = data
	return u
}

func TestDiskSpecNames(t *testing.T) {
	a := resourceConfig{namespaces: []string{"a"}}.spec(configmapsGVR, false)
	b := resourceConfig{namespaces: []string{"b"}}.spec(configmapsGVR, false)
	if diskSpec(a) == diskSpec(b) || diskName(a, diskSpec(a)) == diskName(b, diskSpec(b)) {
		t.Fatalf("two namespaces share a stored state: %q", diskName(a, diskSpec(a)))
	}
	if diskName(a, diskSpec(a)) != diskName(a, diskSpec(a)) {
		t.Fatal("the name is not a function of the spec")
	}
	for _, c := range []struct {
		cfg     resourceConfig
		gvr     string
		secrets bool
		ok      bool
	}{
		{resourceConfig{}, "configmaps", false, true},
		{resourceConfig{namespaces: []string{"a", "b"}}, "configmaps", false, true},
		{resourceConfig{permitted: true}, "configmaps", false, true},
		{resourceConfig{shardSource: newTestSource(shard.Shard{})}, "configmaps", false, true},
		{resourceConfig{}, "secrets", false, false},
		{resourceConfig{}, "secrets", true, true},
		{resourceConfig{own: 1}, "configmaps", false, false},
	} {
		key := c.cfg.spec(configmapsGVR.GroupVersion().WithResource(c.gvr), false)
		if why, ok := diskEligible(key, c.secrets); ok != c.ok {
			t.Errorf("%+v %s secrets=%v: eligible %v (%s), want %v", c.cfg, c.gvr, c.secrets, ok, why, c.ok)
		}
	}
	// Always diffed, and why: the informers whose namespaces or shard
	// are decided at start.
	for _, c := range []struct {
		cfg  resourceConfig
		want string
	}{
		{resourceConfig{}, ""},
		{resourceConfig{namespaces: []string{"a"}}, ""},
		{resourceConfig{shard: shard.Shard{}}, ""},
		{resourceConfig{namespaces: []string{"a", "b"}}, reasonSeveral},
		{resourceConfig{permitted: true, candidates: []string{"a"}}, reasonPermitted},
		{resourceConfig{shardSource: newTestSource(shard.Shard{})}, reasonShardSource},
	} {
		if got := diskDiffedWhy(c.cfg.spec(configmapsGVR, false)); got != c.want {
			t.Errorf("%+v: always diffed because %q, want %q", c.cfg, got, c.want)
		}
	}
	// A permitted informer's candidates and a shard source are part of
	// the stored spec.
	plain := resourceConfig{}.spec(configmapsGVR, false)
	for _, cfg := range []resourceConfig{{permitted: true}, {permitted: true, candidates: []string{"a"}}, {shardSource: newTestSource(shard.Shard{})}} {
		if k := cfg.spec(configmapsGVR, false); diskSpec(k) == diskSpec(plain) {
			t.Errorf("%+v is stored under the spec of an informer of everything", cfg)
		}
	}
	// An informer that follows the preferred version is kept, named
	// "preferred", with the version it follows in the stored spec.
	follow := resourceConfig{}.spec(configmapsGVR.GroupResource().WithVersion(""), true)
	if why, ok := diskEligible(follow, false); !ok {
		t.Errorf("following informer not kept on disk: %s", why)
	}
	if name := diskName(follow, diskSpec(follow)); !strings.HasPrefix(name, "configmaps.core.preferred-") {
		t.Errorf("following informer's file name %q", name)
	}
	d := &entryDisk{spec: diskSpec(follow), follow: true}
	if d.specAt(configmapsGVR) == d.specAt(configmapsGVR.GroupResource().WithVersion("v2")) {
		t.Error("a following informer's stored spec does not name its version")
	}
}

// diskBench is a journal and an informer entry that journals into it,
// as an informer without transforms does.
func diskBench(b testing.TB) (*entry, func()) {
	d, err := persist.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	w, err := d.Create("bench", persist.Identity{Spec: "s", Cluster: "c"}, persist.State{})
	if err != nil {
		b.Fatal(err)
	}
	e := &entry{logger: logr.Discard(), disk: &entryDisk{w: w, rvs: map[string]string{}, held: true}}
	e.gvr.Store(&configmapsGVR)
	return e, func() { w.Close(); d.Close() }
}

// diskHand journals obj as the informer's journal does an update the
// reflector was handed.
func diskHand(e *entry, obj interface{}) {
	if taken := (diskJournal{e}).Observe(watch.Event{Type: watch.Modified, Object: obj.(kruntime.Object)}); taken != nil {
		taken()
	}
	e.diskApply()
}

// diskEvents is 2×1000 objects: consecutive events of one key alternate
// between its two resourceVersions, so that every event is written.
func diskEvents() []interface{} {
	objs := make([]interface{}, 2000)
	for i := range objs {
		u := diskObject(i % 1000)
		u.SetResourceVersion(fmt.Sprint(1000 + i))
		objs[(i%1000)*2+i/1000] = u
	}
	return objs
}

// BenchmarkDiskJournalPut is the persistence cost of one event: what the
// informer's disk handler does (key, resourceVersion check, the stored
// form, a buffered append with its checksum; the once-a-second fsync is
// not per event).
func BenchmarkDiskJournalPut(b *testing.B) {
	e, done := diskBench(b)
	defer done()
	objs := diskEvents()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		diskHand(e, objs[i%len(objs)])
	}
	b.StopTimer()
	if st := e.disk.w.Stats(); st.Err != nil || st.Records != int64(b.N) {
		b.Fatalf("%d records written of %d (%v)", st.Records, b.N, st.Err)
	}
	b.ReportMetric(float64(e.disk.w.Stats().Written)/float64(b.N), "bytes/event")
}

// BenchmarkDiskJournalPaced is BenchmarkDiskJournalPut at the pace of a
// busy informer's events (one every 5 ms, 200 a second) instead of in a
// row: what one costs when it finds the processor's caches cold. It
// reports the journal's CPU time (thread CPU, internal/diskcost: the
// handler's calls and the syncs that encode and write what they held)
// per event; run with -benchtime 1000x (5 s).
func BenchmarkDiskJournalPaced(b *testing.B) {
	if !diskcost.Supported {
		b.Skip("thread CPU time is not read on this platform")
	}
	e, done := diskBench(b)
	defer done()
	objs := diskEvents()
	diskcost.Enable(true)
	defer diskcost.Enable(false)
	diskcost.Reset()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		diskHand(e, objs[i%len(objs)])
		if i%200 == 199 {
			if err := diskMeasured(e.disk.w.Sync); err != nil {
				b.Fatal(err)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := diskMeasured(e.disk.w.Sync); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	_, ns := diskcost.Read()
	b.ReportMetric(float64(ns)/float64(b.N), "journal-cpu-ns/event")
}

// BenchmarkDiskDecodeRestore is the cost of one restored object at start:
// decoding its stored form into the object handed to the reflector.
func BenchmarkDiskDecodeRestore(b *testing.B) {
	data, err := appendForDisk(nil, diskObject(1))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := decodeFromDisk(data, false); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDiskServerObject is persistence's work on a server-shaped
// object (internal/decode/decodetest: managedFields, a status, 5–7 KB of
// JSON) beside the client's own: decode is what the factory's decoder
// spends on it per event, encode its stored form (what persistence adds
// per event, objects of a compact cache excepted: they are kept
// encoded), restore the decoding of that form at start. decode reports
// the JSON's size, encode the stored form's; compare their ns/op.
func BenchmarkDiskServerObject(b *testing.B) {
	data := decodetest.ServerObject(1)
	m, err := decode.Object(data, decode.Options{})
	if err != nil {
		b.Fatal(err)
	}
	stored, err := appendForDisk(nil, &unstructured.Unstructured{Object: m})
	if err != nil {
		b.Fatal(err)
	}
	if stored[0] != diskTree {
		b.Fatalf("stored as %q, not the tree encoding", stored[0])
	}
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := decode.Object(data, decode.Options{}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(data)), "json-bytes")
	})
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		u := &unstructured.Unstructured{Object: m}
		var dst []byte
		for i := 0; i < b.N; i++ {
			if dst, err = appendForDisk(dst[:0], u); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(stored)), "stored-bytes")
	})
	b.Run("restore", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := decodeFromDisk(stored, false); err != nil {
				b.Fatal(err)
			}
		}
	})
	// What an informer caching objects as decoded does instead of
	// encode: the decoder copies the event's JSON into RawObjects, the
	// journal takes it and writes it as it is.
	raw := codec.NewRawObjects()
	u := &unstructured.Unstructured{Object: m}
	asSent, err := appendRawForDisk(nil, bytes.Clone(data)) // (it releases the bytes)
	if err != nil || asSent[0] != diskJSON {
		b.Fatalf("raw stored as %q (%v)", asSent[:1], err)
	}
	b.Run("raw", func(b *testing.B) {
		b.ReportAllocs()
		var dst []byte
		for i := 0; i < b.N; i++ {
			raw.Put(u, data)
			j, ok := raw.Take(u)
			if !ok {
				b.Fatal("not held")
			}
			if dst, err = appendRawForDisk(dst[:0], j); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(asSent)), "stored-bytes")
	})
	b.Run("restore-raw", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := decodeFromDisk(asSent, false); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDiskEventCost puts the persistence of one event beside what
// the client spends decoding it, in the same run: b.N decodes of the
// object's JSON with apimachinery (client-go's cost per event), b.N with
// informerkit's decoder (the factory's), and b.N journaled events as in
// BenchmarkDiskJournalPut (its writes to the file included; the stored
// form alone is reported too, as encode-cpu-ns/event). Each phase
// is measured in process CPU time (user and system: on a shared machine
// steadier than wall time); it reports each per event and the ratios
// persist/apimachinery and persist/informerkit (ns/op is the wall time of
// the three).
func BenchmarkDiskEventCost(b *testing.B) {
	e, done := diskBench(b)
	defer done()
	objs := diskEvents()
	data, err := diskObject(1).MarshalJSON()
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	// Each phase starts after a collection, so that none is charged for
	// another's garbage.
	runtime.GC()
	c0 := diskcost.ProcessCPU()
	for i := 0; i < b.N; i++ {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			b.Fatal(err)
		}
	}
	c1 := diskcost.ProcessCPU()
	runtime.GC()
	c1gc := diskcost.ProcessCPU()
	for i := 0; i < b.N; i++ {
		if _, err := decode.Object(data, decode.Options{}); err != nil {
			b.Fatal(err)
		}
	}
	c2 := diskcost.ProcessCPU()
	runtime.GC()
	c2gc := diskcost.ProcessCPU()
	var scratch []byte
	for i := 0; i < b.N; i++ {
		if scratch, err = appendForDisk(scratch[:0], objs[i%len(objs)]); err != nil {
			b.Fatal(err)
		}
	}
	c3 := diskcost.ProcessCPU()
	runtime.GC()
	c3gc := diskcost.ProcessCPU()
	for i := 0; i < b.N; i++ {
		diskHand(e, objs[i%len(objs)])
	}
	if err := e.disk.w.Sync(); err != nil { // the buffered tail too
		b.Fatal(err)
	}
	c4 := diskcost.ProcessCPU()
	b.StopTimer()
	if st := e.disk.w.Stats(); st.Err != nil || st.Records != int64(b.N) {
		b.Fatalf("%d records written of %d (%v)", st.Records, b.N, st.Err)
	}
	apim, ik, enc, put := c1-c0, c2-c1gc, c3-c2gc, c4-c3gc
	n := float64(b.N)
	b.ReportMetric(float64(enc.Nanoseconds())/n, "encode-cpu-ns/event")
	b.ReportMetric(float64(apim.Nanoseconds())/n, "apimachinery-cpu-ns/event")
	b.ReportMetric(float64(ik.Nanoseconds())/n, "informerkit-cpu-ns/event")
	b.ReportMetric(float64(put.Nanoseconds())/n, "persist-cpu-ns/event")
	b.ReportMetric(float64(put)/float64(apim), "persist/apimachinery")
	b.ReportMetric(float64(put)/float64(ik), "persist/informerkit")
}

// TestDiskStoredForms: each form the journal is handed is stored and
// decoded back as it was (a compact cache's objects, and the envelopes
// its decoder makes, are written in the encoding they hold).
func TestDiskStoredForms(t *testing.T) {
	u := diskObject(3)
	u.Object["spec"] = map[string]interface{}{"replicas": int64(3), "ratio": 0.5, "on": true, "none": nil, "list": []interface{}{"a", int64(1)}}
	c, err := ikcache.NewCompact(u)
	if err != nil {
		t.Fatal(err)
	}
	odd := diskObject(4)
	odd.Object["spec"] = map[string]interface{}{"n": 3} // an int: not JSON-like, stored as JSON
	// What a compact cache's decoder hands the reflector: an envelope
	// (its Compactor makes the Compact of it later).
	uJSON, err := u.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	env, err := decode.TreeObject(uJSON, decode.Options{})
	if err != nil {
		t.Fatal(err)
	}
	live, err := decode.Object(uJSON, decode.Options{})
	if err != nil {
		t.Fatal(err)
	}
	meta := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns", ResourceVersion: "7", Labels: map[string]string{"a": "b"}}}
	for _, c := range []struct {
		name     string
		obj      interface{}
		encoding byte
		metadata bool
		want     interface{}
	}{
		{"unstructured", u, diskTree, false, u},
		{"compact", c, diskTree, false, u},
		{"compact decoder's envelope", &unstructured.Unstructured{Object: env}, diskTree, false, &unstructured.Unstructured{Object: live}},
		{"not JSON-like", odd, diskJSON, false, func() interface{} {
			o := diskObject(4)
			o.Object["spec"] = map[string]interface{}{"n": int64(3)}
			return o
		}()},
		{"metadata only", meta, diskJSON, true, meta},
	} {
		data, err := appendForDisk([]byte("scratch"), c.obj)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		data = data[len("scratch"):]
		if data[0] != c.encoding {
			t.Errorf("%s: stored as %q, want %q", c.name, data[0], c.encoding)
		}
		back, err := decodeFromDisk(data, c.metadata)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !reflect.DeepEqual(back, c.want) {
			t.Errorf("%s: decoded %#v\nwant %#v", c.name, back, c.want)
		}
	}
	// The server's JSON of an object cached as decoded restores to what
	// the live decoder and client-go's both make of it.
	for i := 0; i < 3; i++ {
		data := decodetest.ServerObject(i)
		stored, err := appendRawForDisk([]byte("scratch"), bytes.Clone(data)) // (it releases the bytes)
		if err != nil || string(stored[len("scratch")+1:]) != string(data) || stored[len("scratch")] != diskJSON {
			t.Fatalf("server object %d stored as %.40q (%v)", i, stored, err)
		}
		back, err := decodeFromDisk(stored[len("scratch"):], false)
		if err != nil {
			t.Fatal(err)
		}
		live, err := decode.Object(data, decode.Options{})
		if err != nil {
			t.Fatal(err)
		}
		clientGo := &unstructured.Unstructured{}
		if err := clientGo.UnmarshalJSON(data); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back, &unstructured.Unstructured{Object: live}) || !reflect.DeepEqual(back, clientGo) {
			t.Errorf("server object %d restored differently from its decoding", i)
		}
	}
	for _, bad := range [][]byte{nil, {'X', 1}, {diskTree, 1, 2, 3}, {diskJSON, '{'}, []byte(`J{"apiVersion":"v1"}`), []byte(`J{"apiVersion":"v1","kind":""}`)} {
		if _, err := decodeFromDisk(bad, false); err == nil {
			t.Errorf("%q decoded", bad)
		}
	}
}

// TestDiskNeverBackInTime: a stored state whose resourceVersion is later
// than the server's (the server went back in time: an etcd restored from
// a backup, same cluster UID) is not restored; the informer lists. Before
// the check it was restored and resumed from a resourceVersion the
// server never reached.
func TestDiskNeverBackInTime(t *testing.T) {
	dir := t.TempDir()
	run := func(serverRV string) Status {
		client := diskFakeClient(serverRV)
		f := NewSharedInformerFactory(client, Options{DisableCRDTracking: true, CacheDir: dir})
		defer f.Shutdown()
		h := f.ForResource(configmapsGVR, WithNamespaces("team-a"))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		f.Start(ctx)
		f.WaitForCacheSync(ctx)
		return h.Status()
	}
	if st := run("10"); st.State != Synced || st.Disk.Start != DiskCold {
		t.Fatalf("first run: %+v", st)
	}
	if st := run("10"); st.Restored != 1 || st.Disk.Start == DiskCold {
		t.Fatalf("second run, the server later: restored %d, disk %+v; want 1 restored", st.Restored, st.Disk)
	}
	st := run("5")
	if st.Restored != 0 || st.Disk.Start != DiskCold || st.Disk.Reason != reasonNewer || st.State != Synced || st.Objects != 1 {
		t.Fatalf("the server earlier than the stored state: restored %d, disk %+v, %s with %d objects; want a cold start (%q)", st.Restored, st.Disk, st.State, st.Objects, reasonNewer)
	}
}

// TestResourceVersionOrder: newerRV orders resourceVersions as integers
// of any length (not as text), and anything that is not one (empty, "0",
// a leading zero, an opaque token) is not newer: the caller then keeps to
// the safe side (restores, does not mark progress).
func TestResourceVersionOrder(t *testing.T) {
	for _, c := range []struct {
		a, b  string
		newer bool
	}{
		{"10", "9", true},
		{"9", "10", false},
		{"10", "10", false},
		{"18446744073709551616", "18446744073709551615", true}, // past uint64
		{"", "5", false},
		{"5", "", false},
		{"0", "5", false},
		{"5", "0", false},
		{"05", "4", false},
		{"abc", "4", false},
	} {
		if got := newerRV(c.a, c.b); got != c.newer {
			t.Errorf("newerRV(%q, %q) = %v, want %v", c.a, c.b, got, c.newer)
		}
	}
}

// TestDiskRestoreRequestsOutsideLock: the requests a restore sends (the
// server's resourceVersion, read for CaughtUp) are sent without the disk
// cache's lock, which Status takes: a request reports its contact, and a
// change of contact updates the Status (a deadlock the soak found). Here
// the server's answer waits for a Status.
func TestDiskRestoreRequestsOutsideLock(t *testing.T) {
	dir := t.TempDir()
	var blocked atomic.Int32
	run := func() Status {
		client := diskFakeClient("10")
		var h atomic.Pointer[InformerHandle]
		client.PrependReactor("list", "namespaces", func(clienttesting.Action) (bool, kruntime.Object, error) {
			if hd := h.Load(); hd != nil {
				done := make(chan struct{})
				go func() {
					hd.Status()
					close(done)
				}()
				select {
				case <-done:
				case <-time.After(2 * time.Second):
					blocked.Add(1)
				}
			}
			return false, nil, nil
		})
		f := NewSharedInformerFactory(client, Options{DisableCRDTracking: true, CacheDir: dir})
		defer f.Shutdown()
		h.Store(f.ForResource(configmapsGVR, WithNamespaces("team-a")))
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		f.Start(ctx)
		f.WaitForCacheSync(ctx)
		return h.Load().Status()
	}
	run()
	if st := run(); st.Restored != 1 || st.State != Synced {
		t.Fatalf("second run: %+v; want 1 restored, Synced", st)
	}
	if n := blocked.Load(); n != 0 {
		t.Fatalf("Status blocked %d times while a restore's request was answered", n)
	}
}

// TestDiskProgressFromBookmark: a quiet resource's stored resourceVersion
// follows the bookmarks its reflector takes, so a restart resumes from the
// last bookmark (a watch from "50"), not from the last object change
// ("7", which the server's history may no longer hold).
func TestDiskProgressFromBookmark(t *testing.T) {
	dir := t.TempDir()
	run := func(bookmark string, caughtUp bool) (Status, []string) {
		client := diskFakeClient("100")
		var mu sync.Mutex
		var watches []string
		w := watch.NewRaceFreeFake()
		client.PrependWatchReactor("configmaps", func(a clienttesting.Action) (bool, watch.Interface, error) {
			mu.Lock()
			defer mu.Unlock()
			watches = append(watches, a.(clienttesting.WatchActionImpl).WatchRestrictions.ResourceVersion)
			return true, w, nil
		})
		f := NewSharedInformerFactory(client, Options{DisableCRDTracking: true, CacheDir: dir})
		defer f.Shutdown()
		h := f.ForResource(configmapsGVR, WithNamespaces("team-a"))
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		f.Start(ctx)
		f.WaitForCacheSync(ctx)
		if bookmark != "" {
			// First the initial list's records (counted as written at
			// the once-a-second sync): wait until nothing is written for
			// more than a sync period.
			before := h.Status().Disk.Written
			for stable := time.Now(); time.Since(stable) < diskSyncPeriod+500*time.Millisecond; time.Sleep(50 * time.Millisecond) {
				if now := h.Status().Disk.Written; now != before {
					before, stable = now, time.Now()
				}
			}
			b := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "v1", "kind": "ConfigMap"}}
			b.SetResourceVersion(bookmark)
			w.Action(watch.Bookmark, b)
			// Journaled once the reflector took it: a record is written.
			for h.Status().Disk.Written == before {
				if ctx.Err() != nil {
					t.Fatalf("the bookmark at %s was never journaled: %+v", bookmark, h.Status().Disk)
				}
				time.Sleep(20 * time.Millisecond)
			}
			// CaughtUp is checked once a sync period, after the cache
			// applied the bookmark.
			for caughtUp && !h.Status().Disk.CaughtUp && ctx.Err() == nil {
				time.Sleep(20 * time.Millisecond)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		return h.Status(), append([]string(nil), watches...)
	}
	if st, _ := run("50", false); st.State != Synced || st.Disk.Start != DiskCold {
		t.Fatalf("first run: %+v", st)
	}
	st, watches := run("", false)
	if st.Restored != 1 || len(watches) == 0 || watches[0] != "50" {
		t.Fatalf("restart: restored %d, watches from %q; want 1 restored, the first watch from the bookmark's 50", st.Restored, watches)
	}
	// The server was at 100 as it restarted: caught up with a bookmark
	// there (checked before the bookmark is journaled, which the run
	// waits for).
	if st.Disk.CaughtUp {
		t.Fatalf("caught up before reaching the server's 100: %+v", st.Disk)
	}
	if st, _ := run("100", true); !st.Disk.CaughtUp || st.Disk.Start != DiskResumed {
		t.Fatalf("after a bookmark at the server's resourceVersion: %+v; want Resumed, caught up", st.Disk)
	}
}

// diskFakeClient is a fake cluster (kube-system's UID "cluster-a") with
// one configmap, team-a/settings at resourceVersion 7, whose namespace
// lists answer at serverRV (the server's resourceVersion).
func diskFakeClient(serverRV string) *dynamicfake.FakeDynamicClient {
	ns := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]interface{}{"name": "kube-system", "uid": "cluster-a"}}}
	cm := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]interface{}{"name": "settings", "namespace": "team-a", "resourceVersion": "7"}}}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(kruntime.NewScheme(), map[schema.GroupVersionResource]string{
		configmapsGVR: "ConfigMapList", namespacesGVR: "NamespaceList",
	}, ns, cm)
	client.PrependReactor("list", "namespaces", func(clienttesting.Action) (bool, kruntime.Object, error) {
		l := &unstructured.UnstructuredList{Object: map[string]interface{}{"apiVersion": "v1", "kind": "NamespaceList"}}
		l.SetResourceVersion(serverRV)
		return true, l, nil
	})
	return client
}

// TestDiskJournalRecordsWhatIsHanded: the journal is what the reflector
// was handed, replayed: a list's objects, then each event the reflector
// took, in order; a relist's unchanged objects are not written again and
// the keys it lacks are deleted; a bookmark outside a list is the state's
// resourceVersion; a list begun and not ended leaves the state "inside a
// list"; an event observed but never taken is not written; and an
// object a transform changes after it was handed is stored as handed.
func TestDiskJournalRecordsWhatIsHanded(t *testing.T) {
	obj := func(name, rv string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "v1", "kind": "ConfigMap"}}
		u.SetNamespace("a")
		u.SetName(name)
		u.SetResourceVersion(rv)
		u.Object["data"] = map[string]interface{}{"v": rv}
		return u
	}
	list := func(cont, rv string, items ...*unstructured.Unstructured) *unstructured.UnstructuredList {
		l := &unstructured.UnstructuredList{Object: map[string]interface{}{"apiVersion": "v1", "kind": "ConfigMapList"}}
		l.SetResourceVersion(rv)
		l.SetContinue(cont)
		for _, it := range items {
			l.Items = append(l.Items, *it)
		}
		return l
	}
	bookmark := func(rv string, endsInitial bool) watch.Event {
		b := obj("", rv)
		if endsInitial {
			b.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
		}
		return watch.Event{Type: watch.Bookmark, Object: b}
	}
	for _, held := range []bool{true, false} {
		t.Run(fmt.Sprintf("held=%v", held), func(t *testing.T) {
			pd, err := persist.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer pd.Close()
			id := persist.Identity{Spec: "s", Cluster: "c"}
			w, err := pd.Create("j", id, persist.State{})
			if err != nil {
				t.Fatal(err)
			}
			e := &entry{logger: logr.Discard(), disk: &entryDisk{w: w, rvs: map[string]string{}, held: held}}
			e.gvr.Store(&configmapsGVR)
			j := diskJournal{e}
			hand := func(ev watch.Event) {
				if taken := j.Observe(ev); taken != nil {
					taken()
				}
			}
			// state syncs and reads what is on disk so far.
			state := func() (map[string]string, string, bool) {
				t.Helper()
				e.diskApply()
				if err := w.Sync(); err != nil {
					t.Fatal(err)
				}
				st, _, err := pd.Load("j", id)
				if err != nil {
					t.Fatal(err)
				}
				got := map[string]string{}
				for _, o := range st.Objects {
					u, err := decodeFromDisk(o.Data, false)
					if err != nil {
						t.Fatal(err)
					}
					v, _, _ := unstructured.NestedString(u.(*unstructured.Unstructured).Object, "data", "v")
					if v != o.RV {
						t.Fatalf("%s stored at %s holds the object of %s", o.Key, o.RV, v)
					}
					got[o.Key] = o.RV
				}
				return got, st.RV, st.Listing
			}
			check := func(what string, want map[string]string, wantRV string, wantListing bool) {
				t.Helper()
				got, rv, listing := state()
				if !reflect.DeepEqual(got, want) || rv != wantRV || listing != wantListing {
					t.Fatalf("%s: %v at %q (listing %v); want %v at %q (listing %v)", what, got, rv, listing, want, wantRV, wantListing)
				}
			}

			j.ListBegun()
			j.ListPage(list("more", "10", obj("x", "5"), obj("y", "6")), false, "10")
			check("inside a paged list", map[string]string{"a/x": "5", "a/y": "6"}, "6", true)
			j.ListPage(list("", "10", obj("w", "4")), true, "10")
			check("the list", map[string]string{"a/x": "5", "a/y": "6", "a/w": "4"}, "10", false)

			hand(watch.Event{Type: watch.Modified, Object: obj("x", "11")})
			hand(watch.Event{Type: watch.Deleted, Object: obj("y", "12")})
			hand(watch.Event{Type: watch.Added, Object: obj("z", "13")})
			if taken := j.Observe(watch.Event{Type: watch.Added, Object: obj("never", "14")}); taken == nil {
				t.Fatal("an add observed has nothing to write once taken")
			} // (the reader never took it)
			hand(bookmark("20", false))
			check("events and a bookmark", map[string]string{"a/x": "11", "a/z": "13", "a/w": "4"}, "20", false)
			hand(bookmark(reflectorseam.SyntheticRV, false)) // the gate's, after a removal: not a state
			check("a made-up bookmark", map[string]string{"a/x": "11", "a/z": "13", "a/w": "4"}, "20", false)

			// A relist: x and z unchanged, w gone.
			before := w.Stats().Records
			j.ListBegun()
			hand(bookmark("25", false)) // (none comes inside a list; ignored if one did)
			j.ListPage(list("", "30", obj("x", "11"), obj("z", "13")), true, "30")
			check("a relist", map[string]string{"a/x": "11", "a/z": "13"}, "30", false)
			if n := w.Stats().Records - before; n != 3 { // Listing, w's delete, Listed
				t.Fatalf("a relist of two unchanged objects and one gone wrote %d records, want 3", n)
			}

			// A watch-list stream: its initial events, then the bookmark
			// that ends them.
			j.ListBegun()
			hand(watch.Event{Type: watch.Added, Object: obj("x", "31")})
			check("inside a watch-list stream", map[string]string{"a/x": "31", "a/z": "13"}, "31", true)
			hand(bookmark("40", true))
			check("a watch-list stream", map[string]string{"a/x": "31"}, "40", false)

			// Handed, then changed in place by a transform: stored as handed.
			o := obj("t", "41")
			hand(watch.Event{Type: watch.Added, Object: o})
			if held {
				check("held", map[string]string{"a/x": "31", "a/t": "41"}, "41", false)
			}
			o.Object["data"] = map[string]interface{}{"v": "changed by a transform"}
			check("changed after it was handed", map[string]string{"a/x": "31", "a/t": "41"}, "41", false)

			// Begun, never ended: the state is inside a list.
			j.ListBegun()
			j.ListPage(list("more", "50", obj("x", "31")), false, "50")
			check("a list abandoned", map[string]string{"a/x": "31", "a/t": "41"}, "41", true)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Two informers of one factory never write the same stored cache: one
// with an equal spec created while a released one is still closing its
// files waits for it; one beside a running one is refused.
func TestDiskClaim(t *testing.T) {
	d := &factoryDisk{}
	ctx1, stop1 := context.WithCancel(context.Background())
	defer stop1()
	release1, err := d.claim(ctx1, "n")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.claim(context.Background(), "n"); !errors.Is(err, errClaimed) {
		t.Fatalf("second claim beside a running informer: %v, want errClaimed", err)
	}
	other, err := d.claim(context.Background(), "other")
	if err != nil {
		t.Fatalf("another name: %v", err)
	}
	other()

	stop1() // released: still closing its files
	got := make(chan error, 1)
	var release2 func()
	go func() {
		var err error
		release2, err = d.claim(context.Background(), "n")
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("claimed (%v) while the stopping informer still writes", err)
	case <-time.After(100 * time.Millisecond):
	}
	release1()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the claim did not follow the release")
	}
	release2()
	if len(d.claims) != 0 {
		t.Fatalf("claims left: %v", d.claims)
	}
}

// TestDiskJournalQueueBounded: what the reflector is handed is queued for
// the disk goroutine; a queue past its bound (a disk that does not keep
// up) is dropped and the journal stops with errJournalBehind in the
// informer's CacheErr, nothing more queued, while what was written stays
// a state the reflector was handed.
func TestDiskJournalQueueBounded(t *testing.T) {
	e, done := diskBench(t)
	defer done()
	e.disk.raw = codec.NewRawObjects()
	e.disk.factory = &factoryDisk{} // (CacheErr's log names its directory)
	j := diskJournal{e}
	hand := func(name, rv string, size int) {
		u := diskObject(0)
		u.SetName(name)
		u.SetResourceVersion(rv)
		e.disk.raw.Put(u, append([]byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"`+name+`","namespace":"a","resourceVersion":"`+rv+`"},"data":{"v":"`), append(bytes.Repeat([]byte("x"), size), `"}}`...)...))
		if taken := j.Observe(watch.Event{Type: watch.Added, Object: u}); taken != nil {
			taken()
		}
	}
	hand("first", "10", 10)
	e.diskApply()
	written := e.disk.w.Stats().Records
	for i := 0; i < diskQueueBytes/(1<<20)+1; i++ { // one MiB each: past the bound
		hand(fmt.Sprintf("big-%d", i), fmt.Sprint(11+i), 1<<20)
	}
	_, err := e.disk.status()
	if !errors.Is(err, errJournalBehind) {
		t.Fatalf("CacheErr after the queue overflowed: %v, want errJournalBehind", err)
	}
	hand("after", "1000", 10)
	if len(e.disk.queue) != 0 || e.disk.queued != 0 {
		t.Fatalf("queue kept after the overflow: %d operations, %d bytes", len(e.disk.queue), e.disk.queued)
	}
	e.diskApply()
	if n := e.disk.w.Stats().Records; n != written {
		t.Fatalf("%d records written after the overflow, want none", n-written)
	}
}
