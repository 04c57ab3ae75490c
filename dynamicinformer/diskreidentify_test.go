package dynamicinformer

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clienttesting "k8s.io/client-go/testing"

	"github.com/informerkit/informerkit/internal/persist"
)

// TestDiskReidentifiedUntilRefilled replays, call by call, what the gate
// tells the disk cache of an informer whose CRD was deleted and created
// again (TestRestartAfterCRDDeleted under load): the cache is emptied;
// a first refill starts while the CRD does not exist yet (discovery
// still served the resource), reads no CRD, and its list fails with a
// 404; the CRD is created; the second refill lists the new objects.
// That list is identified with the new CRD — its objects are stored
// under it, so a restart finds them — because the identity is read
// before every list until one has refilled the cache, not only before
// the first. Once one has, a list reads nothing; an emptying makes it
// due again.
func TestDiskReidentifiedUntilRefilled(t *testing.T) {
	client := diskFakeClient("10")
	var mu sync.Mutex
	crdUID := "" // no CRD
	var gets atomic.Int32
	client.PrependReactor("get", "customresourcedefinitions", func(a clienttesting.Action) (bool, kruntime.Object, error) {
		gets.Add(1)
		mu.Lock()
		defer mu.Unlock()
		name := a.(clienttesting.GetAction).GetName()
		if crdUID == "" {
			return true, nil, apierrors.NewNotFound(crdsGVR.GroupResource(), name)
		}
		return true, &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
			"metadata": map[string]interface{}{"name": name, "uid": crdUID}}}, nil
	})
	fd := &factoryDisk{path: t.TempDir(), client: client}
	defer fd.close()
	dir, err := fd.open()
	if err != nil {
		t.Fatal(err)
	}
	key := resourceConfig{namespaces: []string{"team-a"}}.spec(widgetsGVR, false)
	text := diskSpec(key)
	name := diskName(key, text)
	// As restore leaves it when the CRD was deleted while the process
	// was down: a new state under no CRD.
	id := persist.Identity{Spec: text, Cluster: "cluster-a"}
	w, err := dir.Create(name, id, persist.State{})
	if err != nil {
		t.Fatal(err)
	}
	e := &entry{logger: logr.Discard(), key: key, disk: &entryDisk{factory: fd, name: name, spec: text, w: w, id: id,
		rvs: map[string]string{}, held: true, kick: make(chan struct{}, 1)}}
	e.gvr.Store(&widgetsGVR)
	j := diskJournal{e}
	obj := func(name, rv string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "example.com/v1", "kind": "Widget"}}
		u.SetNamespace("team-a")
		u.SetName(name)
		u.SetResourceVersion(rv)
		return u
	}
	list := func(rv string, items ...*unstructured.Unstructured) *unstructured.UnstructuredList {
		l := &unstructured.UnstructuredList{Object: map[string]interface{}{"apiVersion": "example.com/v1", "kind": "WidgetList"}}
		l.SetResourceVersion(rv)
		for _, it := range items {
			l.Items = append(l.Items, *it)
		}
		return l
	}
	reads := func(what string, want int32) {
		t.Helper()
		if n := gets.Swap(0); n != want {
			t.Fatalf("%s: %d reads of the CRD, want %d", what, n, want)
		}
	}

	e.diskEmptied() // the removal's deletes were handed: the cache is empty

	// The first refill: the gate opened on a stale discovery; no CRD,
	// and the list is answered 404 (nothing handed).
	e.diskListing()
	j.ListBegun()
	reads("the first refill", 1)

	mu.Lock()
	crdUID = "crd-2"
	mu.Unlock()

	// The second refill lists the new instance's object; then an event.
	e.diskListing()
	j.ListBegun()
	j.ListPage(list("20", obj("w-0", "20")), true, "20")
	if taken := j.Observe(watch.Event{Type: watch.Added, Object: obj("w-1", "21")}); taken != nil {
		taken()
	}
	e.diskApply()
	reads("the second refill", 1)

	// Refilled: a later list (a relist) reads nothing.
	e.diskListing()
	j.ListBegun()
	j.ListPage(list("30", obj("w-0", "20"), obj("w-1", "21")), true, "30")
	e.diskApply()
	reads("a relist after the refill", 0)

	e.disk.mu.Lock()
	w = e.disk.w
	e.disk.mu.Unlock()
	if w == nil {
		t.Fatalf("the disk cache stopped: %v", e.disk.err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if stored, err := dir.Stored(name); err != nil || stored.CRD != "crd-2" {
		t.Fatalf("stored under CRD %q (%v), want crd-2", stored.CRD, err)
	}
	st, _, err := dir.Load(name, persist.Identity{Spec: text, Cluster: "cluster-a", CRD: "crd-2"})
	if err != nil || len(st.Objects) != 2 || st.RV != "30" {
		t.Fatalf("a restart finds %d objects at %q (%v); want w-0 and w-1 at 30", len(st.Objects), st.RV, err)
	}

	// Emptied again (the gate's empty list): due again, until a list
	// begun after the read has ended.
	w, err = dir.Continue(name, persist.Identity{Spec: text, Cluster: "cluster-a", CRD: "crd-2"}, st, persist.LoadInfo{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	e.disk.mu.Lock()
	e.disk.w, e.disk.id = w, persist.Identity{Spec: text, Cluster: "cluster-a", CRD: "crd-2"}
	e.disk.mu.Unlock()
	e.diskEmptied()
	j.ListBegun()
	j.ListPage(list(""), true, "")
	e.diskListing()
	reads("the first list after another emptying", 1)
	j.ListBegun()
	e.diskListing() // that list failed
	reads("a list after one that failed", 1)
	j.ListBegun()
	j.ListPage(list("40"), true, "40")
	e.diskApply()
	e.diskListing()
	reads("a list after the refill", 0)
}

// TestDiskReidentifyFailureStopsJournal: an identity that cannot be read
// after an emptying (the CRD's GET fails) does not leave the refill
// journaled under the old identity: the state is closed as it was,
// nothing more is written, and CacheErr says why.
func TestDiskReidentifyFailureStopsJournal(t *testing.T) {
	client := diskFakeClient("10")
	client.PrependReactor("get", "customresourcedefinitions", func(clienttesting.Action) (bool, kruntime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("etcd is away")
	})
	fd := &factoryDisk{path: t.TempDir(), client: client}
	defer fd.close()
	dir, err := fd.open()
	if err != nil {
		t.Fatal(err)
	}
	key := resourceConfig{namespaces: []string{"team-a"}}.spec(widgetsGVR, false)
	text := diskSpec(key)
	id := persist.Identity{Spec: text, Cluster: "cluster-a", CRD: "crd-1"}
	w, err := dir.Create(diskName(key, text), id, persist.State{})
	if err != nil {
		t.Fatal(err)
	}
	e := &entry{logger: logr.Discard(), key: key, disk: &entryDisk{factory: fd, name: diskName(key, text), spec: text, w: w, id: id,
		rvs: map[string]string{}, held: true, kick: make(chan struct{}, 1)}}
	e.gvr.Store(&widgetsGVR)
	e.diskEmptied()
	e.diskListing()
	j := diskJournal{e}
	j.ListBegun()
	u := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "example.com/v1", "kind": "Widget"}}
	u.SetNamespace("team-a")
	u.SetName("w-0")
	u.SetResourceVersion("20")
	l := &unstructured.UnstructuredList{Object: map[string]interface{}{"apiVersion": "example.com/v1", "kind": "WidgetList"}}
	l.Items = append(l.Items, *u)
	j.ListPage(l, true, "20")
	e.diskApply()
	if _, err := e.disk.status(); !errors.Is(err, ErrCache) {
		t.Fatalf("CacheErr %v, want ErrCache", err)
	}
	e.disk.mu.Lock()
	stopped := e.disk.w == nil
	e.disk.mu.Unlock()
	st, _, err := dir.Load(diskName(key, text), id)
	if !stopped || err != nil || len(st.Objects) != 0 {
		t.Fatalf("journal stopped %v; stored %d objects (%v); want the old state as it was, empty", stopped, len(st.Objects), err)
	}
}
