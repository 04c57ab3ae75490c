package query

import (
	"fmt"
	"math/rand"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"

	ikcache "github.com/informerkit/informerkit/cache"
)

// The model: objects as Go values, with an evaluator and a sort written
// independently of the package, for brute-force comparison.

type mobj struct {
	ns, name string
	app      string // label app ("" = none)
	replicas *int64
	ratio    *float64
	enabled  *bool
	phase    *string
	tags     []string
	created  time.Time
	rv       uint64
}

func (m *mobj) key() string { return m.ns + "/" + m.name }

func (m *mobj) render() *unstructured.Unstructured {
	md := map[string]interface{}{
		"namespace": m.ns, "name": m.name, "resourceVersion": strconv.FormatUint(m.rv, 10),
		"creationTimestamp": m.created.UTC().Format(time.RFC3339),
	}
	if m.app != "" {
		md["labels"] = map[string]interface{}{"app": m.app}
	}
	spec := map[string]interface{}{}
	if m.replicas != nil {
		spec["replicas"] = *m.replicas
	}
	if m.ratio != nil {
		spec["ratio"] = *m.ratio
	}
	if m.enabled != nil {
		spec["enabled"] = *m.enabled
	}
	if m.tags != nil {
		tags := make([]interface{}, len(m.tags))
		for i, t := range m.tags {
			tags[i] = t
		}
		spec["tags"] = tags
	}
	obj := map[string]interface{}{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": md, "spec": spec}
	if m.phase != nil {
		obj["status"] = map[string]interface{}{"phase": *m.phase}
	}
	return &unstructured.Unstructured{Object: obj}
}

var (
	modelNamespaces = []string{"a", "b", "c"}
	modelApps       = []string{"", "web", "db", "cache"}
	modelPhases     = []string{"Pending", "Running", "Failed"}
	modelTags       = []string{"red", "green", "blue"}
	modelEpoch      = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

func randomObject(r *rand.Rand, ns, name string, rv uint64) *mobj {
	m := &mobj{ns: ns, name: name, rv: rv, app: modelApps[r.Intn(len(modelApps))],
		created: modelEpoch.Add(time.Duration(r.Intn(20)) * time.Hour)}
	if r.Intn(5) > 0 {
		v := int64(r.Intn(6))
		m.replicas = &v
	}
	if r.Intn(3) > 0 {
		v := float64(r.Intn(8)) / 4
		m.ratio = &v
	}
	if r.Intn(3) > 0 {
		v := r.Intn(2) == 0
		m.enabled = &v
	}
	if r.Intn(4) > 0 {
		v := modelPhases[r.Intn(len(modelPhases))]
		m.phase = &v
	}
	for _, t := range modelTags {
		if r.Intn(3) == 0 {
			m.tags = append(m.tags, t)
		}
	}
	return m
}

// mpred is a predicate with its model evaluation.
type mpred struct {
	pred Predicate
	eval func(*mobj) bool
}

func randomPredicate(r *rand.Rand) mpred {
	num := func(get func(*mobj) *float64, path string, lit float64) mpred {
		ops := []Operator{Eq, Ne, Lt, Gt, Le, Ge, Exists, In, NotIn}
		op := ops[r.Intn(len(ops))]
		p := Predicate{Path: path, Op: op, Values: []Value{Number(lit)}}
		lit2 := lit + 1
		if op == In || op == NotIn {
			p.Values = []Value{Number(lit), Number(lit2)}
		}
		if op == Exists {
			p.Values = nil
		}
		return mpred{p, func(m *mobj) bool {
			v := get(m)
			if v == nil {
				return op == Ne || op == NotIn
			}
			switch op {
			case Eq:
				return *v == lit
			case Ne:
				return *v != lit
			case Lt:
				return *v < lit
			case Gt:
				return *v > lit
			case Le:
				return *v <= lit
			case Ge:
				return *v >= lit
			case In:
				return *v == lit || *v == lit2
			case NotIn:
				return *v != lit && *v != lit2
			}
			return true
		}}
	}
	switch r.Intn(7) {
	case 0:
		return num(func(m *mobj) *float64 {
			if m.replicas == nil {
				return nil
			}
			f := float64(*m.replicas)
			return &f
		}, "spec.replicas", float64(r.Intn(6)))
	case 1:
		return num(func(m *mobj) *float64 { return m.ratio }, ".spec.ratio", float64(r.Intn(8))/4)
	case 2:
		lit := r.Intn(2) == 0
		return mpred{Predicate{Path: "spec.enabled", Op: Eq, Values: []Value{Bool(lit)}},
			func(m *mobj) bool { return m.enabled != nil && *m.enabled == lit }}
	case 3:
		ph := modelPhases[r.Intn(len(modelPhases))]
		switch r.Intn(3) {
		case 0:
			return mpred{Predicate{Path: "status.phase", Op: Prefix, Values: []Value{String(ph[:2])}},
				func(m *mobj) bool { return m.phase != nil && strings.HasPrefix(*m.phase, ph[:2]) }}
		case 1:
			return mpred{Predicate{Path: "status.phase", Op: NotIn, Values: []Value{String(ph)}},
				func(m *mobj) bool { return m.phase == nil || *m.phase != ph }}
		}
		return mpred{Predicate{Path: "status.phase", Op: Contains, Values: []Value{String(ph[2:4])}},
			func(m *mobj) bool { return m.phase != nil && strings.Contains(*m.phase, ph[2:4]) }}
	case 4:
		tag := modelTags[r.Intn(len(modelTags))]
		if r.Intn(2) == 0 {
			return mpred{Predicate{Path: "spec.tags", Op: Contains, Values: []Value{String(tag)}},
				func(m *mobj) bool { return slices.Contains(m.tags, tag) }}
		}
		return mpred{Predicate{Path: "spec.tags[*]", Op: Ne, Values: []Value{String(tag)}},
			func(m *mobj) bool { return !slices.Contains(m.tags, tag) }}
	case 5:
		at := modelEpoch.Add(time.Duration(r.Intn(20)) * time.Hour)
		if r.Intn(2) == 0 {
			return mpred{Predicate{Path: "metadata.creationTimestamp", Op: Ge, Values: []Value{Time(at)}},
				func(m *mobj) bool { return !m.created.Before(at) }}
		}
		return mpred{Predicate{Path: "metadata.creationTimestamp", Op: Lt, Values: []Value{Time(at)}},
			func(m *mobj) bool { return m.created.Before(at) }}
	}
	n := fmt.Sprintf("w%d", r.Intn(10))
	return mpred{Predicate{Path: "metadata.name", Op: Prefix, Values: []Value{String(n)}},
		func(m *mobj) bool { return strings.HasPrefix(m.name, n) }}
}

// morder is a sort field with its model sort value (missing = nil).
type morder struct {
	order Order
	get   func(*mobj) sortValue
}

var modelOrders = []morder{
	{Asc("spec.replicas"), func(m *mobj) sortValue {
		if m.replicas == nil {
			return sortValue{}
		}
		return sortValue{kind: kindNumber, num: float64(*m.replicas)}
	}},
	{Asc("spec.ratio"), func(m *mobj) sortValue {
		if m.ratio == nil {
			return sortValue{}
		}
		return sortValue{kind: kindNumber, num: *m.ratio}
	}},
	{Asc("status.phase"), func(m *mobj) sortValue {
		if m.phase == nil {
			return sortValue{}
		}
		return sortValue{kind: kindString, str: *m.phase}
	}},
	{Asc("metadata.creationTimestamp"), func(m *mobj) sortValue {
		return sortValue{kind: kindString, str: m.created.UTC().Format(time.RFC3339)}
	}},
	{Asc("spec.enabled"), func(m *mobj) sortValue {
		if m.enabled == nil {
			return sortValue{}
		}
		return sortValue{kind: kindBool, num: float64(boolInt(*m.enabled))}
	}},
	{Asc("spec.tags[*]"), func(m *mobj) sortValue {
		if len(m.tags) == 0 {
			return sortValue{}
		}
		return sortValue{kind: kindString, str: m.tags[0]}
	}},
}

type mquery struct {
	q      Query
	ns     []string
	app    string
	preds  []mpred
	orders []morder
	desc   []bool
}

func randomQuery(r *rand.Rand) mquery {
	var mq mquery
	for _, ns := range modelNamespaces {
		if r.Intn(3) == 0 {
			mq.ns = append(mq.ns, ns)
		}
	}
	if r.Intn(3) == 0 {
		mq.app = modelApps[1+r.Intn(len(modelApps)-1)]
	}
	for i := r.Intn(3); i > 0; i-- {
		mq.preds = append(mq.preds, randomPredicate(r))
	}
	q := New().InNamespaces(mq.ns...).WithLimit(1 + r.Intn(7))
	if mq.app != "" {
		q = q.WithLabels("app=" + mq.app)
	}
	for _, p := range mq.preds {
		q = q.Where(p.pred.Path, p.pred.Op, p.pred.Values...)
	}
	for i := r.Intn(3); i > 0; i-- {
		o := modelOrders[r.Intn(len(modelOrders))]
		d := r.Intn(2) == 0
		mq.orders = append(mq.orders, o)
		mq.desc = append(mq.desc, d)
		q = q.SortBy(Order{Path: o.order.Path, Descending: d})
	}
	mq.q = q.WithCount()
	return mq
}

func (mq *mquery) match(m *mobj) bool {
	if len(mq.ns) > 0 && !slices.Contains(mq.ns, m.ns) {
		return false
	}
	if mq.app != "" && m.app != mq.app {
		return false
	}
	for _, p := range mq.preds {
		if !p.eval(m) {
			return false
		}
	}
	return true
}

func (mq *mquery) compare(a, b *mobj) int {
	for i, o := range mq.orders {
		c := compareSortValues(o.get(a), o.get(b))
		if mq.desc[i] {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	return strings.Compare(a.key(), b.key())
}

// expected is the brute-force page: every matching object (read at rv0 or
// before, after the first page), sorted, after the last item returned.
func (mq *mquery) expected(objs map[string]*mobj, rv0 uint64, after *mobj, limit int) (page []string, total int) {
	var all []*mobj
	for _, m := range objs {
		if !mq.match(m) {
			continue
		}
		total++
		if after != nil && (m.rv > rv0 || mq.compare(m, after) <= 0) {
			continue
		}
		all = append(all, m)
	}
	slices.SortFunc(all, mq.compare)
	for i, m := range all {
		if limit > 0 && i == limit {
			break
		}
		page = append(page, m.key())
	}
	return page, total
}

// world is the cache under test: objects, an indexer fed like an
// informer's and an Index fed by the same events.
type world struct {
	form    func(*unstructured.Unstructured) interface{} // how the cache stores an object
	objs    map[string]*mobj
	store   toolscache.Indexer
	indexes map[string]*Index
	rv      uint64
}

func newWorld() *world {
	return &world{objs: map[string]*mobj{}, indexes: map[string]*Index{},
		store: toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})}
}

func (w *world) index(t *testing.T, q Query) *Index {
	p, err := compile(Query{OrderBy: q.OrderBy})
	if err != nil {
		t.Fatal(err)
	}
	if x, ok := w.indexes[p.orderSig]; ok {
		return x
	}
	x := newIndex(p)
	for _, o := range w.store.List() {
		x.OnAdd(o, true)
	}
	w.indexes[p.orderSig] = x
	return x
}

func (w *world) stored(m *mobj) interface{} {
	if w.form == nil {
		return m.render()
	}
	return w.form(m.render())
}

func (w *world) put(m *mobj) {
	w.rv++
	m.rv = w.rv
	u := w.stored(m)
	old, had := w.objs[m.key()]
	w.objs[m.key()] = m
	if had {
		_ = w.store.Update(u)
		for _, x := range w.indexes {
			x.OnUpdate(w.stored(old), u)
		}
		return
	}
	_ = w.store.Add(u)
	for _, x := range w.indexes {
		x.OnAdd(u, false)
	}
}

func (w *world) remove(key string) {
	w.rv++
	m := w.objs[key]
	delete(w.objs, key)
	u := w.stored(m)
	_ = w.store.Delete(u)
	for _, x := range w.indexes {
		if len(w.indexes)%2 == 0 {
			x.OnDelete(toolscache.DeletedFinalStateUnknown{Key: key, Obj: u})
		} else {
			x.OnDelete(u)
		}
	}
}

func (w *world) randomWrite(r *rand.Rand) {
	switch n := r.Intn(10); {
	case n < 2 && len(w.objs) > 0:
		keys := mapKeys(w.objs)
		w.remove(keys[r.Intn(len(keys))])
	case n < 7 && len(w.objs) > 0:
		keys := mapKeys(w.objs)
		old := w.objs[keys[r.Intn(len(keys))]]
		w.put(randomObject(r, old.ns, old.name, 0))
	default:
		w.put(randomObject(r, modelNamespaces[r.Intn(len(modelNamespaces))], fmt.Sprintf("w%d", r.Intn(400)), 0))
	}
}

func mapKeys(m map[string]*mobj) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func itemKeys(t *testing.T, items []runtime.Object) []string {
	var out []string
	for _, o := range items {
		k, ok := objectKey(o)
		if !ok {
			t.Fatalf("item without key: %v", o)
		}
		out = append(out, k)
	}
	return out
}

// TestModel walks random queries page by page over random objects, with
// random writes between pages, through Scan and through an Index, and
// checks every page against the brute-force model and the walk against
// the paging guarantee.
func TestModel(t *testing.T) {
	seeds := 150
	if testing.Short() {
		seeds = 30
	}
	forms := []struct {
		name string
		form func(*unstructured.Unstructured) interface{}
	}{
		{"unstructured", nil},
		{"compact", func(u *unstructured.Unstructured) interface{} {
			c, err := ikcache.NewCompact(u)
			if err != nil {
				t.Fatal(err)
			}
			return c
		}},
	}
	for seed := 0; seed < seeds; seed++ {
		r := rand.New(rand.NewSource(int64(seed)))
		w := newWorld()
		form := forms[seed%len(forms)]
		w.form = form.form
		for i := 0; i < 30+r.Intn(120); i++ {
			w.put(randomObject(r, modelNamespaces[r.Intn(len(modelNamespaces))], fmt.Sprintf("w%d", r.Intn(400)), 0))
		}
		for qi := 0; qi < 8; qi++ {
			mq := randomQuery(r)
			useIndex := qi%2 == 1
			writes := qi%4 >= 2
			walkModel(t, r, w, mq, useIndex, writes, fmt.Sprintf("%s seed %d query %d (%s)", form.name, seed, qi, mq.q))
		}
	}
}

func walkModel(t *testing.T, r *rand.Rand, w *world, mq mquery, useIndex, writes bool, name string) {
	t.Helper()
	q := mq.q
	start := map[string]*mobj{}
	for k, m := range w.objs {
		start[k] = m
	}
	changed := map[string]bool{}
	seen := map[string]bool{}
	var rv0 uint64
	var last *mobj
	for pageNo := 0; ; pageNo++ {
		var page *Page[runtime.Object]
		var err error
		if useIndex {
			page, err = w.index(t, q).Query(q)
		} else {
			page, err = Scan(FromIndexer(w.store), q)
		}
		if err != nil {
			t.Fatalf("%s page %d: %v", name, pageNo, err)
		}
		if pageNo == 0 {
			// The walk's version: at least every matching object's, at
			// most the cache's (Scan reads it from the candidates).
			rv0, _ = strconv.ParseUint(page.ResourceVersion, 10, 64)
			for _, m := range w.objs {
				if (mq.match(m) && m.rv > rv0) || m.rv > w.rv {
					t.Fatalf("%s: resourceVersion %s, object %s at %d", name, page.ResourceVersion, m.key(), m.rv)
				}
			}
			if rv0 > maxRV(w.objs) {
				t.Fatalf("%s: resourceVersion %s after the cache's %d", name, page.ResourceVersion, maxRV(w.objs))
			}
		}
		got := itemKeys(t, page.Items)
		want, total := mq.expected(w.objs, rv0, last, q.Limit)
		if !slices.Equal(got, want) {
			t.Fatalf("%s page %d (index %v):\n got %v\nwant %v", name, pageNo, useIndex, got, want)
		}
		if page.Total == nil || *page.Total != total {
			t.Fatalf("%s page %d: total %v, want %d", name, pageNo, page.Total, total)
		}
		for _, k := range got {
			if seen[k] {
				t.Fatalf("%s: %s returned twice", name, k)
			}
			seen[k] = true
		}
		if page.Continue == "" {
			break
		}
		if len(got) > 0 {
			last = w.objs[got[len(got)-1]]
		}
		q.Continue = page.Continue
		if writes {
			for i := r.Intn(4); i > 0; i-- {
				w.randomWrite(r)
			}
			for k, m := range start {
				if w.objs[k] != m {
					changed[k] = true
				}
			}
		}
	}
	for k, m := range start {
		if !changed[k] && mq.match(m) && !seen[k] {
			t.Fatalf("%s: %s, unchanged during the walk, never returned", name, k)
		}
	}
}

func maxRV(objs map[string]*mobj) uint64 {
	var rv uint64
	for _, m := range objs {
		rv = max(rv, m.rv)
	}
	return rv
}
