package labelindex

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// TestLabelIndexersMatchLabelIndexFunc is the property test of the string
// table behind LabelIndexers: over random adds, label-changing and
// label-keeping updates and deletes, an indexer using it holds exactly the
// index of an indexer using the stateless LabelIndexFunc. Tables of
// several sizes run side by side, down to ones so small that they are
// emptied on nearly every call, so the reset path is exercised too.
func TestLabelIndexersMatchLabelIndexFunc(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 7))
	newIdx := func(ix toolscache.Indexers) toolscache.Indexer {
		return toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, ix)
	}
	want := newIdx(toolscache.Indexers{LabelIndex: LabelIndexFunc})
	got := map[string]toolscache.Indexer{
		"default": newIdx(LabelIndexers()),
		"max=1":   newIdx(labelIndexers(1)),
		"max=5":   newIdx(labelIndexers(5)),
		"max=64":  newIdx(labelIndexers(64)),
	}
	randLabels := func() map[string]string {
		l := map[string]string{}
		for k := 0; k < r.IntN(5); k++ {
			l[fmt.Sprintf("k%d", r.IntN(6))] = fmt.Sprintf("v%d", r.IntN(8))
		}
		if r.IntN(4) == 0 {
			l["unique"] = fmt.Sprint(r.Int())
		}
		return l
	}
	const nObjects, nOps = 300, 6000
	current := map[string]map[string]string{}
	for op := 0; op < nOps; op++ {
		name := fmt.Sprintf("o%d", r.IntN(nObjects))
		ns := fmt.Sprintf("ns%d", r.IntN(3))
		key := ns + "/" + name
		old, exists := current[key]
		var apply func(toolscache.Indexer) error
		switch {
		case exists && r.IntN(5) == 0:
			delete(current, key)
			obj := widget(ns, name, nil, nil)
			apply = func(i toolscache.Indexer) error { return i.Delete(obj) }
		default:
			l := randLabels()
			if exists && r.IntN(2) == 0 {
				l = old // the common update: labels unchanged
			}
			current[key] = l
			// A fresh object per indexer: as from a watch, each update
			// brings newly decoded strings.
			apply = func(i toolscache.Indexer) error {
				var obj interface{} = widget(ns, name, l, nil)
				if r.IntN(3) == 0 {
					obj = &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: l}}
				}
				return i.Update(obj)
			}
		}
		if err := apply(want); err != nil {
			t.Fatal(err)
		}
		for _, i := range got {
			if err := apply(i); err != nil {
				t.Fatal(err)
			}
		}
		if op%500 == 499 || op == nOps-1 {
			w := indexContents(t, want)
			for name, i := range got {
				if g := indexContents(t, i); !reflect.DeepEqual(g, w) {
					t.Fatalf("after %d operations, %s index differs from LabelIndexFunc's:\n got %v\nwant %v", op+1, name, g, w)
				}
			}
		}
	}
}

// indexContents returns LabelIndex as value -> sorted keys.
func indexContents(t *testing.T, idx toolscache.Indexer) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, v := range idx.ListIndexFuncValues(LabelIndex) {
		keys, err := idx.IndexKeys(LabelIndex, v)
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) > 0 {
			out[v] = sorted(keys)
		}
	}
	return out
}

// TestLabelIndexersConcurrent calls one LabelIndexers function from many
// goroutines (as concurrent Index calls under an indexer's read lock do);
// run with -race.
func TestLabelIndexersConcurrent(t *testing.T) {
	f := labelIndexers(16)[LabelIndex]
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				lbl := map[string]string{"app": fmt.Sprint(i % 40), "g": fmt.Sprint(g)}
				got, err := f(widget("ns", "x", lbl, nil))
				if err != nil {
					t.Error(err)
					return
				}
				want, _ := LabelIndexFunc(widget("ns", "x", lbl, nil))
				if !reflect.DeepEqual(sorted(got), sorted(want)) {
					t.Errorf("got %v, want %v", got, want)
					return
				}
			}
		}()
	}
	wg.Wait()
}
