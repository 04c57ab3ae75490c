package genericlister

import (
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	toolscache "k8s.io/client-go/tools/cache"

	ikcache "github.com/informerkit/informerkit/cache"
	"github.com/informerkit/informerkit/internal/labelindex"
)

var widgets = schema.GroupResource{Group: "example.com", Resource: "widgets"}

// The universe of random labels: few keys and values so that selectors
// match a useful share of objects; values are digits so that gt and lt
// requirements apply.
const (
	nKeys       = 6
	nValues     = 5
	nNamespaces = 4
)

func randomLabels(r *rand.Rand) map[string]string {
	l := map[string]string{}
	for k := 0; k < nKeys; k++ {
		if r.IntN(10) < 6 {
			l[fmt.Sprintf("k%d", k)] = fmt.Sprint(r.IntN(nValues))
		}
	}
	if r.IntN(10) == 0 {
		l["empty"] = ""
	}
	return l
}

func newObject(ns, name string, l map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "example.com/v1",
		"kind":       "Widget",
		"spec":       map[string]interface{}{"size": int64(len(name))},
	}}
	u.SetNamespace(ns)
	u.SetName(name)
	if len(l) > 0 {
		u.SetLabels(l)
	}
	return u
}

var operators = []selection.Operator{
	selection.Equals, selection.DoubleEquals, selection.In, selection.NotEquals,
	selection.NotIn, selection.Exists, selection.DoesNotExist,
	selection.GreaterThan, selection.LessThan,
}

func randomSelector(r *rand.Rand) (labels.Selector, error) {
	sel := labels.NewSelector()
	n := r.IntN(4) // 0..3 requirements; 0 is Everything
	for i := 0; i < n; i++ {
		key := fmt.Sprintf("k%d", r.IntN(nKeys))
		if r.IntN(12) == 0 {
			key = "empty"
		}
		op := operators[r.IntN(len(operators))]
		var vals []string
		switch op {
		case selection.Equals, selection.DoubleEquals, selection.NotEquals, selection.GreaterThan, selection.LessThan:
			vals = []string{fmt.Sprint(r.IntN(nValues + 1))}
		case selection.In, selection.NotIn:
			for j := 0; j <= r.IntN(3); j++ {
				vals = append(vals, fmt.Sprint(r.IntN(nValues+1)))
			}
		}
		req, err := labels.NewRequirement(key, op, vals)
		if err != nil {
			return nil, err
		}
		sel = sel.Add(*req)
	}
	return sel, nil
}

// world is the ground truth the indexers are compared with.
type world map[string]*unstructured.Unstructured // key -> object

func (w world) expect(ns string, sel labels.Selector) []string {
	out := []string{}
	for key, u := range w {
		if ns != "" && u.GetNamespace() != ns {
			continue
		}
		if sel.Matches(labels.Set(u.GetLabels())) {
			out = append(out, key)
		}
	}
	sort.Strings(out)
	return out
}

func keysOf[T runtime.Object](t *testing.T, objs []T) []string {
	t.Helper()
	out := []string{}
	for _, o := range objs {
		k, err := toolscache.MetaNamespaceKeyFunc(o)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, k)
	}
	sort.Strings(out)
	if len(out) != len(objs) {
		t.Fatalf("duplicates in %v", out)
	}
	return out
}

// indexerVariants are the indexer configurations the lister must answer
// identically from: both indexes, both over compact-mode objects, label
// index only, per-key indexes for some keys (alone, with the namespace
// index, with the inverted index for the other keys), per-key indexes
// added on demand (cache.AutoLabelKeyIndexers: indexes appear while the test
// runs, after objects exist), namespace index only, none (scan).
func indexerVariants() map[string]toolscache.Indexer {
	merge := func(all ...toolscache.Indexers) toolscache.Indexers {
		out := toolscache.Indexers{}
		for _, m := range all {
			for k, v := range m {
				out[k] = v
			}
		}
		return out
	}
	ns := toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc}
	both := merge(labelindex.LabelIndexers(), ns)
	someKeys := ikcache.LabelKeyIndexers("k0", "k2", "k5", "empty")
	return map[string]toolscache.Indexer{
		"label+namespace": toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, both),
		"compact":         toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, both),
		"label":           toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, labelindex.LabelIndexers()),
		"keys":            toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, someKeys),
		"keys+namespace":  toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, merge(someKeys, ns)),
		"keys+label":      toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, merge(someKeys, labelindex.LabelIndexers())),
		"auto+namespace":  toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, merge(ikcache.AutoLabelKeyIndexers(), ns)),
		"auto+compact":    toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, merge(ikcache.AutoLabelKeyIndexers(), ns)),
		"namespace":       toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, ns),
		"none":            toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{}),
	}
}

// TestListMatchesBruteForce is the property test of issue 8: for a few
// thousand random objects and random selectors using every operator, the
// indexed List (all namespaces and one namespace, Lister and the generic
// adapter) equals a brute-force scan — before and after label-changing
// updates, deletes and adds.
func TestListMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 2026))
	// The default run checks 1000 objects and 250 selectors;
	// INFORMERKIT_LONG=1 checks 2000 and 250, -short 500 and 100.
	nObjects, nSelectors := 1000, 250
	switch {
	case os.Getenv("INFORMERKIT_LONG") != "":
		nObjects, nSelectors = 2000, 250
	case testing.Short():
		nObjects, nSelectors = 500, 100
	}
	w := world{}
	variants := indexerVariants()
	compactor := ikcache.NewCompactor(ikcache.CompactorOptions{})
	add := func(u *unstructured.Unstructured) {
		key, _ := toolscache.MetaNamespaceKeyFunc(u)
		w[key] = u
		for name, idx := range variants {
			var obj interface{} = u
			if strings.HasSuffix(name, "compact") {
				obj, _ = compactor.Transform(u)
			}
			if err := idx.Update(obj); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := 0; i < nObjects; i++ {
		add(newObject(fmt.Sprintf("ns%d", r.IntN(nNamespaces)), fmt.Sprintf("o%d", i), randomLabels(r)))
	}

	check := func(round string, nSelectors int) {
		t.Helper()
		for s := 0; s < nSelectors; s++ {
			sel, err := randomSelector(r)
			if err != nil {
				t.Fatal(err)
			}
			ns := ""
			if r.IntN(2) == 0 {
				ns = fmt.Sprintf("ns%d", r.IntN(nNamespaces+1)) // ns4 is empty
			}
			want := w.expect(ns, sel)
			for name, idx := range variants {
				l := New(idx, widgets)
				var got []*unstructured.Unstructured
				var gotGeneric []runtime.Object
				if ns == "" {
					got, err = l.List(sel)
					if err == nil {
						gotGeneric, err = NewGeneric(l.indexer, l.resource).List(sel)
					}
				} else {
					got, err = l.Namespace(ns).List(sel)
					if err == nil {
						gotGeneric, err = NewGeneric(l.indexer, l.resource).ByNamespace(ns).List(sel)
					}
				}
				if err != nil {
					t.Fatalf("%s %s: List(%q) in %q: %v", round, name, sel, ns, err)
				}
				if g := keysOf(t, got); strings.Join(g, " ") != strings.Join(want, " ") {
					t.Fatalf("%s %s: List(%q) in %q:\n got %d %.400v\nwant %d %.400v", round, name, sel, ns, len(g), g, len(want), want)
				}
				if g := keysOf(t, gotGeneric); strings.Join(g, " ") != strings.Join(want, " ") {
					t.Fatalf("%s %s: generic List(%q) in %q: got %d, want %d", round, name, sel, ns, len(g), len(want))
				}
			}
		}
	}
	check("initial", nSelectors)

	// Label-changing updates (new objects, as an informer stores them),
	// deletes and adds.
	keys := make([]string, 0, len(w))
	for k := range w {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, key := range keys {
		switch i % 5 {
		case 0, 1: // relabel
			old := w[key]
			add(newObject(old.GetNamespace(), old.GetName(), randomLabels(r)))
		case 2: // delete
			old := w[key]
			delete(w, key)
			for _, idx := range variants {
				if err := idx.Delete(old); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for i := 0; i < nObjects/5; i++ {
		add(newObject(fmt.Sprintf("ns%d", r.IntN(nNamespaces)), fmt.Sprintf("new%d", i), randomLabels(r)))
	}
	check("after updates", nSelectors)

	// The on-demand variants must have answered from per-key indexes they
	// added, not by scanning: every key the selectors used has its index.
	for _, name := range []string{"auto+namespace", "auto+compact"} {
		for k := 0; k < nKeys; k++ {
			if !ikcache.HasIndex(variants[name], labelindex.LabelKeyIndexName(fmt.Sprintf("k%d", k))) {
				t.Errorf("%s: no per-key index for k%d after %d selectors", name, k, 2*nSelectors)
			}
		}
	}
}

// TestGenericListerPartialObjectMetadata runs the same comparison over an
// indexer of *metav1.PartialObjectMetadata, as a metadata-only informer
// fills it.
func TestGenericListerPartialObjectMetadata(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 8))
	both := labelindex.LabelIndexers()
	both[toolscache.NamespaceIndex] = toolscache.MetaNamespaceIndexFunc
	idx := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, both)
	w := world{}
	for i := 0; i < 1000; i++ {
		u := newObject(fmt.Sprintf("ns%d", r.IntN(nNamespaces)), fmt.Sprintf("o%d", i), randomLabels(r))
		key, _ := toolscache.MetaNamespaceKeyFunc(u)
		w[key] = u
		p := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "example.com/v1", Kind: "Widget"}}
		p.Namespace, p.Name, p.Labels = u.GetNamespace(), u.GetName(), u.GetLabels()
		if err := idx.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	g := NewGeneric(idx, widgets)
	typed := NewTyped[*metav1.PartialObjectMetadata](idx, widgets)
	l := New(idx, widgets, ConvertToUnstructured())
	for s := 0; s < 500; s++ {
		sel, err := randomSelector(r)
		if err != nil {
			t.Fatal(err)
		}
		ns := fmt.Sprintf("ns%d", r.IntN(nNamespaces))
		want := w.expect(ns, sel)
		got, err := g.ByNamespace(ns).List(sel)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range got {
			if _, ok := o.(*metav1.PartialObjectMetadata); !ok {
				t.Fatalf("generic lister returned %T, want the cached *PartialObjectMetadata", o)
			}
		}
		if k := keysOf(t, got); strings.Join(k, " ") != strings.Join(want, " ") {
			t.Fatalf("List(%q) in %q: got %.400v, want %.400v", sel, ns, k, want)
		}
		ps, err := typed.Namespace(ns).List(sel)
		if err != nil {
			t.Fatal(err)
		}
		if k := keysOf(t, ps); strings.Join(k, " ") != strings.Join(want, " ") {
			t.Fatalf("Typed List(%q) in %q: got %.400v, want %.400v", sel, ns, k, want)
		}
		us, err := l.Namespace(ns).List(sel)
		if err != nil {
			t.Fatal(err)
		}
		if k := keysOf(t, us); strings.Join(k, " ") != strings.Join(want, " ") {
			t.Fatalf("Lister List(%q) in %q: got %.400v, want %.400v", sel, ns, k, want)
		}
	}
}
