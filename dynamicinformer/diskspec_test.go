package dynamicinformer

import (
	"context"
	"errors"
	"io/fs"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	ikcache "github.com/informerkit/informerkit/cache"
	"github.com/informerkit/informerkit/internal/persist"
	"github.com/informerkit/informerkit/shard"
)

var widgetsGVR = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}

// diskSpecCases are specs whose stored encodings are pinned
// (testdata/diskspec.golden, and the encoding before it was versioned).
func diskSpecCases() []spec {
	half, _ := shard.Static(0, 2)
	return []spec{
		resourceConfig{}.spec(configmapsGVR, false),
		resourceConfig{namespaces: []string{"a", "b"}, labelSelector: "app=x", fieldSelector: "metadata.name=n",
			projection: Projection{StripManagedFields: true, DropLastApplied: true, Fields: "status,spec.x"},
			transform:  keyedTransform{key: "t"}, tweak: keyedTweak{key: "k"}, sharingKey: "s"}.spec(widgetsGVR, false),
		resourceConfig{permitted: true, candidates: []string{"a", "b"}, projection: Projection{MetadataOnly: true}}.spec(configmapsGVR, false),
		resourceConfig{projection: Projection{Compact: true, CompactOptions: ikcache.CompactorOptions{MaxDecoded: 5, Idle: 90 * time.Second, KeepListsOnSecondRead: true}},
			shard: half}.spec(widgetsGVR, false),
		resourceConfig{shardSource: newTestSource(shard.Shard{})}.spec(configmapsGVR, false),
		resourceConfig{namespaces: []string{"team-a"}}.spec(widgetsGVR.GroupResource().WithVersion(""), true),
	}
}

// TestDiskSpecEncoding pins the stored spec encoding: a change to one of
// these strings makes every cache stored under it a cold start after the
// upgrade that makes it. The strings informerkit wrote before the
// encoding was versioned are pinned too (legacyDiskSpec), so that those
// caches are still recognised and taken over.
func TestDiskSpecEncoding(t *testing.T) {
	want := []string{
		`informerkit-spec/1 resource="configmaps" version="v1"`,
		`informerkit-spec/1 fieldSelector="metadata.name=n" group="example.com" labelSelector="app=x" namespaces="a,b" projection.DropLastApplied=true projection.Fields="spec.x,status" projection.StripManagedFields=true resource="widgets" sharingKey="s" transformKey="t" tweakKey="k" version="v1"`,
		`informerkit-spec/1 candidates="a,b" permitted=true projection.MetadataOnly=true resource="configmaps" version="v1"`,
		`informerkit-spec/1 group="example.com" projection.Compact=true projection.CompactOptions.Idle=90000000000 projection.CompactOptions.KeepListsOnSecondRead=true projection.CompactOptions.MaxDecoded=5 resource="widgets" shard="shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')" version="v1"`,
		`informerkit-spec/1 resource="configmaps" shardSource=true version="v1"`,
		`informerkit-spec/1 group="example.com" namespaces="team-a" resource="widgets"`,
	}
	legacy := []string{
		`gvr=/v1, Resource=configmaps ns="" label="" field="" projection={MetadataOnly:false StripManagedFields:false DropLastApplied:false Fields: Compact:false CompactOptions:{MaxDecoded:0 Idle:0s KeepListsOnSecondRead:false}} shard="" transform="" tweak="" sharing=""`,
		`gvr=example.com/v1, Resource=widgets ns="a,b" label="app=x" field="metadata.name=n" projection={MetadataOnly:false StripManagedFields:true DropLastApplied:true Fields:spec.x,status Compact:false CompactOptions:{MaxDecoded:0 Idle:0s KeepListsOnSecondRead:false}} shard="" transform="t" tweak="k" sharing="s"`,
		`gvr=/v1, Resource=configmaps ns="" label="" field="" projection={MetadataOnly:true StripManagedFields:false DropLastApplied:false Fields: Compact:false CompactOptions:{MaxDecoded:0 Idle:0s KeepListsOnSecondRead:false}} shard="" transform="" tweak="" sharing="" permitted="a,b"`,
		`gvr=example.com/v1, Resource=widgets ns="" label="" field="" projection={MetadataOnly:false StripManagedFields:false DropLastApplied:false Fields: Compact:true CompactOptions:{MaxDecoded:5 Idle:1m30s KeepListsOnSecondRead:true}} shard="shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')" transform="" tweak="" sharing=""`,
		`gvr=/v1, Resource=configmaps ns="" label="" field="" projection={MetadataOnly:false StripManagedFields:false DropLastApplied:false Fields: Compact:false CompactOptions:{MaxDecoded:0 Idle:0s KeepListsOnSecondRead:false}} shard="" transform="" tweak="" sharing="" shard-source`,
		`gvr=example.com/, Resource=widgets ns="team-a" label="" field="" projection={MetadataOnly:false StripManagedFields:false DropLastApplied:false Fields: Compact:false CompactOptions:{MaxDecoded:0 Idle:0s KeepListsOnSecondRead:false}} shard="" transform="" tweak="" sharing=""`,
	}
	for i, key := range diskSpecCases() {
		if got := diskSpec(key); got != want[i] {
			t.Errorf("case %d: encoded\n%s\nwant\n%s", i, got, want[i])
		}
		if got := legacyDiskSpec(key); got != legacy[i] {
			t.Errorf("case %d: unversioned encoding\n%s\nwant\n%s", i, got, legacy[i])
		}
	}
	d := &entryDisk{spec: want[5], follow: true}
	if got := d.specAt(widgetsGVR); got != want[5]+` followed="v1"` {
		t.Errorf("a following informer's spec at v1: %s", got)
	}
}

// laterProjection is Projection as a later version might declare it: a
// field added (at the end, and one in the middle), one added to the
// compactor's options, the fields in another order.
type laterProjection struct {
	Compact            bool
	MetadataOnly       bool
	Later              string
	StripManagedFields bool
	DropLastApplied    bool
	Fields             string
	CompactOptions     laterCompactorOptions
	LaterToo           int
}

type laterCompactorOptions struct {
	KeepListsOnSecondRead bool
	MaxDecoded            int
	Idle                  time.Duration
	Later                 bool
}

func later(p Projection) laterProjection {
	o := p.CompactOptions
	return laterProjection{Compact: p.Compact, MetadataOnly: p.MetadataOnly, StripManagedFields: p.StripManagedFields,
		DropLastApplied: p.DropLastApplied, Fields: p.Fields,
		CompactOptions: laterCompactorOptions{KeepListsOnSecondRead: o.KeepListsOnSecondRead, MaxDecoded: o.MaxDecoded, Idle: o.Idle}}
}

// TestDiskSpecNewFieldKeepsCaches: a field added to Projection (or to
// the compactor's options inside it), left at its zero value, leaves
// every spec's encoding — and so its stored cache's name and identity —
// as it was; set, it makes another spec.
func TestDiskSpecNewFieldKeepsCaches(t *testing.T) {
	for i, key := range diskSpecCases() {
		lp := later(key.projection)
		if got, want := encodeDiskSpec(key, lp), diskSpec(key); got != want {
			t.Errorf("case %d: with a new field at zero\n%s\nwant\n%s", i, got, want)
		}
		for _, set := range []func(*laterProjection){
			func(p *laterProjection) { p.Later = "x" },
			func(p *laterProjection) { p.LaterToo = 1 },
			func(p *laterProjection) { p.CompactOptions.Later = true },
		} {
			changed := lp
			set(&changed)
			if encodeDiskSpec(key, changed) == diskSpec(key) {
				t.Errorf("case %d: a new field set (%+v) is not in the encoding", i, changed)
			}
		}
	}
}

// TestDiskSpecCoversProjection: every field of Projection, down to the
// compactor's options, is in the encoding (set alone, it changes it), and
// is of a kind the encoding writes as a value (not through fmt).
func TestDiskSpecCoversProjection(t *testing.T) {
	base := diskSpec(resourceConfig{}.spec(configmapsGVR, false))
	var p Projection // each leaf of it set in turn, then reset
	var walk func(path string, v reflect.Value)
	walk = func(path string, v reflect.Value) {
		for i := 0; i < v.NumField(); i++ {
			f, name := v.Field(i), path+v.Type().Field(i).Name
			switch f.Kind() {
			case reflect.Struct:
				walk(name+".", f)
				continue
			case reflect.Bool:
				f.SetBool(true)
			case reflect.String:
				f.SetString("x")
			case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
				f.SetInt(1)
			case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
				f.SetUint(1)
			default:
				t.Errorf("Projection.%s is a %s: give it an explicit encoding in specEncoder.value", name, f.Kind())
				continue
			}
			key := resourceConfig{}.spec(configmapsGVR, false)
			key.projection = p
			if got := diskSpec(key); got == base || !strings.Contains(got, " projection."+name+"=") {
				t.Errorf("Projection.%s set: encoding %s", name, got)
			}
			f.Set(reflect.Zero(f.Type()))
		}
	}
	walk("", reflect.ValueOf(&p).Elem())
}

// TestDiskSpecUpgrade: a cache stored by informerkit before the spec
// encoding was versioned is restored (not a cold start) and written
// again under the versioned name, its old files removed; the cache then
// stored is the one a later informerkit, whose Projection has a new field
// left at zero, finds and accepts (same name, same identity).
func TestDiskSpecUpgrade(t *testing.T) {
	dir := t.TempDir()
	opts := []ResourceOption{WithNamespaces("team-a"), WithProjection(Projection{StripManagedFields: true})}
	run := func() Status {
		f := NewSharedInformerFactory(diskFakeClient("10"), Options{DisableCRDTracking: true, CacheDir: dir})
		defer f.Shutdown()
		h := f.ForResource(configmapsGVR, opts...)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		f.Start(ctx)
		f.WaitForCacheSync(ctx)
		return h.Status()
	}
	key := NewSharedInformerFactory(diskFakeClient("10"), Options{}).cfg.merge(opts).spec(configmapsGVR, false)

	// Stored as informerkit wrote it before: the object at 7.
	pd, err := persist.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	old := legacyDiskSpec(key)
	oldName := diskName(key, old)
	cm := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]interface{}{"name": "settings", "namespace": "team-a", "resourceVersion": "7"}}}
	data, err := appendForDisk(nil, cm)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pd.Create(oldName, persist.Identity{Spec: old, Cluster: "cluster-a"},
		persist.State{RV: "7", Objects: []persist.Object{{Key: "team-a/settings", RV: "7", Data: data}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	pd.Close()

	if st := run(); st.Restored != 1 || st.Disk.Start == DiskCold || st.CacheErr != nil {
		t.Fatalf("start after the upgrade: restored %d, disk %+v (%v); want the stored object restored", st.Restored, st.Disk, st.CacheErr)
	}
	pd, err = persist.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Close()
	if _, err := pd.Stored(oldName); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the unversioned cache's files are still there (%v)", err)
	}
	// A later informerkit: Projection has more fields, all zero here.
	text := encodeDiskSpec(key, later(key.projection))
	st, _, err := pd.Load(diskName(key, text), persist.Identity{Spec: text, Cluster: "cluster-a"})
	if err != nil || len(st.Objects) != 1 || st.Objects[0].Key != "team-a/settings" {
		t.Fatalf("the cache as a later version reads it: %d objects (%v); want team-a/settings", len(st.Objects), err)
	}
}
