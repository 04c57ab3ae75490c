package labelindex

import (
	"fmt"
	"sort"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	toolscache "k8s.io/client-go/tools/cache"
)

func labelled(ns, name string, labels map[string]interface{}) *unstructured.Unstructured {
	md := map[string]interface{}{"name": name, "namespace": ns}
	if labels != nil {
		md["labels"] = labels
	}
	return &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": md}}
}

// metaOnly is an object read only through metav1.ObjectMetaAccessor, as
// *cache.Compact is.
type metaOnly struct{ m *metav1.ObjectMeta }

func (o metaOnly) GetObjectMeta() metav1.Object { return o.m }

func TestLabelKeyIndexFunc(t *testing.T) {
	f := LabelKeyIndexFunc("app")
	compact := metaOnly{&metav1.ObjectMeta{Name: "c", Namespace: "ns", Labels: map[string]string{"app": "db"}}}
	for _, c := range []struct {
		name string
		obj  interface{}
		want []string
	}{
		{"unstructured", labelled("ns", "a", map[string]interface{}{"app": "web", "tier": "x"}), []string{"web"}},
		{"empty value", labelled("ns", "a", map[string]interface{}{"app": ""}), []string{""}},
		{"null value reads as empty", labelled("ns", "a", map[string]interface{}{"app": nil}), []string{""}},
		{"absent", labelled("ns", "a", map[string]interface{}{"tier": "x"}), nil},
		{"no labels", labelled("ns", "a", nil), nil},
		{"non-string value of the key", labelled("ns", "a", map[string]interface{}{"app": int64(1)}), nil},
		{"non-string value of another key (listers filter)", labelled("ns", "a", map[string]interface{}{"app": "web", "n": int64(1)}), []string{"web"}},
		{"partial metadata", &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"app": "api"}}}, []string{"api"}},
		{"metadata accessor (as *cache.Compact)", compact, []string{"db"}},
		{"not an object", "a string", nil},
	} {
		got, err := f(c.obj)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) || len(got) != len(c.want) {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}

func sortedKeys(t *testing.T, idx toolscache.Indexer, index, value string) []string {
	t.Helper()
	keys, err := idx.IndexKeys(index, value)
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(keys)
	return keys
}

// TestEnsureLabelKeyIndex: without the marker nothing is added; with it the
// first call adds a per-key index covering the objects already stored,
// later updates keep it current, and at most MaxAutoLabelKeys keys are
// added (explicit per-key indexes do not count).
func TestEnsureLabelKeyIndex(t *testing.T) {
	plain := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
	if EnsureLabelKeyIndex(plain, "app") || HasIndex(plain, LabelKeyIndexName("app")) {
		t.Fatal("an indexer without the marker got a per-key index")
	}

	ix := AutoLabelKeyIndexers()
	for k, v := range LabelKeyIndexers("explicit") {
		ix[k] = v
	}
	idx := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, ix)
	for i := 0; i < 10; i++ {
		if err := idx.Add(labelled("ns", fmt.Sprintf("o%d", i), map[string]interface{}{"app": fmt.Sprintf("a%d", i%2)})); err != nil {
			t.Fatal(err)
		}
	}
	if HasIndex(idx, LabelKeyIndexName("app")) {
		t.Fatal("index present before it was asked for")
	}
	if !HasIndex(idx, AutoLabelKeyIndex) || !HasIndex(idx, LabelKeyIndexName("explicit")) {
		t.Fatal("HasIndex misses installed indexes")
	}
	if !EnsureLabelKeyIndex(idx, "app") {
		t.Fatal("EnsureLabelKeyIndex with the marker returned false")
	}
	if got := sortedKeys(t, idx, LabelKeyIndexName("app"), "a1"); fmt.Sprint(got) != "[ns/o1 ns/o3 ns/o5 ns/o7 ns/o9]" {
		t.Fatalf("added index misses stored objects: %v", got)
	}
	if err := idx.Update(labelled("ns", "o1", map[string]interface{}{"app": "a0"})); err != nil {
		t.Fatal(err)
	}
	if got := sortedKeys(t, idx, LabelKeyIndexName("app"), "a1"); fmt.Sprint(got) != "[ns/o3 ns/o5 ns/o7 ns/o9]" {
		t.Fatalf("added index not maintained on update: %v", got)
	}
	if !EnsureLabelKeyIndex(idx, "app") || !EnsureLabelKeyIndex(idx, "explicit") {
		t.Fatal("second call for an existing index returned false")
	}
	added := 1
	for i := 0; added < MaxAutoLabelKeys; i++ {
		if !EnsureLabelKeyIndex(idx, fmt.Sprintf("k%d", i)) {
			t.Fatalf("key %d refused before the limit", added+1)
		}
		added++
	}
	if EnsureLabelKeyIndex(idx, "one-too-many") || HasIndex(idx, LabelKeyIndexName("one-too-many")) {
		t.Fatalf("more than MaxAutoLabelKeys=%d keys were added", MaxAutoLabelKeys)
	}
	if !EnsureLabelKeyIndex(idx, "app") {
		t.Fatal("an added key is refused after the limit")
	}
}

// TestEnsureLabelKeyIndexConcurrent runs on-demand adds, reads and writes
// at once (under -race: no data race on the indexer's index map, which
// GetIndexers would have), and checks that each key was added once and that
// the count stays within the limit.
func TestEnsureLabelKeyIndexConcurrent(t *testing.T) {
	idx := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, AutoLabelKeyIndexers())
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				key := fmt.Sprintf("k%d", (g+i)%(MaxAutoLabelKeys+4))
				EnsureLabelKeyIndex(idx, key)
				if err := idx.Update(labelled("ns", fmt.Sprintf("o%d", i%50), map[string]interface{}{key: fmt.Sprint(g)})); err != nil {
					t.Error(err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	n := 0
	for i := 0; i < MaxAutoLabelKeys+4; i++ {
		if HasIndex(idx, LabelKeyIndexName(fmt.Sprintf("k%d", i))) {
			n++
		}
	}
	if n != MaxAutoLabelKeys {
		t.Fatalf("%d per-key indexes after concurrent adds, want exactly %d", n, MaxAutoLabelKeys)
	}
	// Every stored object is in the index of each of its indexed keys.
	for _, obj := range idx.List() {
		u := obj.(*unstructured.Unstructured)
		for k, v := range u.GetLabels() {
			if !HasIndex(idx, LabelKeyIndexName(k)) {
				continue
			}
			found := false
			for _, key := range sortedKeys(t, idx, LabelKeyIndexName(k), v) {
				if key == "ns/"+u.GetName() {
					found = true
				}
			}
			if !found {
				t.Fatalf("%s with %s=%s missing from its index", u.GetName(), k, v)
			}
		}
	}
}

// TestValueSlicesBounded: values beyond the table's bound still index
// correctly (a fresh slice each), the table stops growing at the bound, and
// a value seen before gets the very slice it got before.
func TestValueSlicesBounded(t *testing.T) {
	var vs valueSlices
	first := vs.get("v0")
	for i := 0; i < maxValueSlices+100; i++ {
		v := fmt.Sprintf("v%d", i)
		if got := vs.get(v); len(got) != 1 || got[0] != v {
			t.Fatalf("get(%q) = %q", v, got)
		}
	}
	if n := vs.n.Load(); n != maxValueSlices {
		t.Fatalf("table holds %d values, want the bound %d", n, maxValueSlices)
	}
	if again := vs.get("v0"); &again[0] != &first[0] {
		t.Fatal("a value in the table got a new slice")
	}
	beyond := fmt.Sprintf("v%d", maxValueSlices+50)
	if a, b := vs.get(beyond), vs.get(beyond); &a[0] == &b[0] {
		t.Fatal("a value beyond the bound was stored")
	}
}
