package query

import (
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"
)

// TestScanPartsModel: two clusters with their own resourceVersions (the
// same numbers in both), queried as one cache with "cluster" as a field,
// with writes between pages, against the brute-force model.
func TestScanPartsModel(t *testing.T) {
	clusters := []string{"east", "west"}
	for seed := 0; seed < 60; seed++ {
		r := rand.New(rand.NewSource(int64(seed)))
		worlds := map[string]*world{}
		for _, c := range clusters {
			w := newWorld()
			for i := 0; i < 20+r.Intn(60); i++ {
				w.put(randomObject(r, modelNamespaces[r.Intn(3)], fmt.Sprintf("w%d", r.Intn(200)), 0))
			}
			worlds[c] = w
		}
		for qi := 0; qi < 6; qi++ {
			mq := randomQuery(r)
			q := mq.q
			var only, not string
			switch r.Intn(3) {
			case 0:
				only = clusters[r.Intn(2)]
				q = q.Where("cluster", Eq, String(only))
			case 1:
				not = clusters[r.Intn(2)]
				q = q.Where("cluster", Ne, String(not))
			}
			byCluster, desc := r.Intn(2) == 0, r.Intn(2) == 0
			if byCluster {
				q.OrderBy = append([]Order{{Path: "cluster", Descending: desc}}, q.OrderBy...)
			}
			type cm struct {
				cluster string
				m       *mobj
			}
			match := func(x cm) bool {
				return mq.match(x.m) && (only == "" || x.cluster == only) && (not == "" || x.cluster != not)
			}
			compare := func(a, b cm) int {
				if byCluster {
					c := strings.Compare(a.cluster, b.cluster)
					if desc {
						c = -c
					}
					if c != 0 {
						return c
					}
				}
				for i, o := range mq.orders {
					c := compareSortValues(o.get(a.m), o.get(b.m))
					if mq.desc[i] {
						c = -c
					}
					if c != 0 {
						return c
					}
				}
				return strings.Compare(a.cluster+"\x00"+a.m.key(), b.cluster+"\x00"+b.m.key())
			}
			parts := func() []Part {
				var out []Part
				for _, c := range clusters {
					out = append(out, Part{Name: c, Candidates: FromIndexer(worlds[c].store)})
				}
				return out
			}
			rv0 := map[string]uint64{}
			for _, c := range clusters {
				for _, m := range worlds[c].objs {
					if match(cm{c, m}) {
						rv0[c] = max(rv0[c], m.rv)
					}
				}
			}
			seen := map[string]bool{}
			var last *cm
			for pageNo := 0; ; pageNo++ {
				page, err := ScanParts("cluster", parts(), q)
				if err != nil {
					t.Fatal(err)
				}
				var want []string
				var all []cm
				for _, c := range clusters {
					for _, m := range worlds[c].objs {
						x := cm{c, m}
						if !match(x) || (last != nil && (m.rv > rv0[c] || compare(x, *last) <= 0)) {
							continue
						}
						all = append(all, x)
					}
				}
				slices.SortFunc(all, compare)
				for i, x := range all {
					if i == q.Limit {
						break
					}
					want = append(want, x.cluster+":"+x.m.key())
				}
				var got []string
				for _, it := range page.Items {
					k, _ := objectKey(it.Object)
					got = append(got, it.Part+":"+k)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("seed %d query %d (%s) page %d:\n got %v\nwant %v", seed, qi, q, pageNo, got, want)
				}
				for _, k := range got {
					if seen[k] {
						t.Fatalf("%s twice", k)
					}
					seen[k] = true
				}
				if page.Continue == "" {
					break
				}
				lk := got[len(got)-1]
				c := lk[:strings.IndexByte(lk, ':')]
				last = &cm{c, worlds[c].objs[lk[len(c)+1:]]}
				q.Continue = page.Continue
				for i := r.Intn(3); i > 0; i-- {
					worlds[clusters[r.Intn(2)]].randomWrite(r)
				}
			}
		}
	}
}

func TestScanPartsTokenMismatch(t *testing.T) {
	w := newWorld()
	for i := 0; i < 5; i++ {
		w.put(&mobj{ns: "a", name: fmt.Sprint(i), created: modelEpoch})
	}
	q := New().WithLimit(2)
	p, err := ScanParts("cluster", []Part{{Name: "x", Candidates: FromIndexer(w.store)}}, q)
	if err != nil || p.Continue == "" {
		t.Fatal(err)
	}
	if _, err := Scan(FromIndexer(w.store), q.After(p.Continue)); err == nil {
		t.Fatal("a fleet token continued a single cache's walk")
	}
}
