package query

import (
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/informerkit/informerkit/internal/labelindex"
)

// entry is one object with its position in an order: its sort values and
// key.
type entry struct {
	vals  []sortValue
	key   string // the cache key; part + "\x00" + the cache key in a partitioned cache
	part  string
	obj   interface{}
	rv    uint64
	hasRV bool
}

// compareEntries orders by the sort values (each in its direction), then
// by key ascending.
func compareEntries(orders []corder, a, b *entry) int {
	for i := range orders {
		c := compareSortValues(a.vals[i], b.vals[i])
		if orders[i].desc {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	return strings.Compare(a.key, b.key)
}

// newEntry builds obj's entry for orders; ok is false for an object
// without a key.
func newEntry(orders []corder, obj interface{}) (*entry, bool) {
	return newPartEntry(orders, obj, "", "")
}

// newPartEntry is newEntry for an object of a part of a partitioned
// cache whose part names are read at partField.
func newPartEntry(orders []corder, obj interface{}, partField, part string) (*entry, bool) {
	key, ok := objectKey(obj)
	if !ok {
		return nil, false
	}
	e := &entry{key: key, obj: obj, part: part}
	if partField != "" {
		e.key = part + "\x00" + key
	}
	e.rv, e.hasRV = objectRV(obj)
	if len(orders) > 0 {
		v := &view{obj: obj, partField: partField, part: part}
		e.vals = make([]sortValue, len(orders))
		for i, o := range orders {
			x, found := v.first(o.steps)
			e.vals[i] = toSortValue(x, found)
		}
	}
	return e, true
}

// matches reports whether obj is in the query's namespaces, matches its
// selector and satisfies its predicates.
func (p *plan) matches(obj interface{}) bool { return p.matchesIn(obj, "") }

// matchesIn is matches for an object of part.
func (p *plan) matchesIn(obj interface{}, part string) bool {
	if p.namespaces != nil {
		if _, found := slices.BinarySearch(p.namespaces, objectNamespace(obj)); !found {
			return false
		}
	}
	if p.selector != nil {
		l, ok := labelindex.ObjectLabels(obj)
		if !ok || !p.selector.Matches(l) {
			return false
		}
	}
	if len(p.preds) == 0 {
		return true
	}
	v := view{obj: obj, partField: p.partField, part: part}
	for i := range p.preds {
		if !p.preds[i].holds(&v) {
			return false
		}
	}
	return true
}

// holds evaluates one predicate (see Operator).
func (pr *cpred) holds(v *view) bool {
	var found bool
	if v.isPart(pr.steps) {
		found = pr.test(v.part)
	} else if u, ok := v.obj.(*unstructured.Unstructured); ok {
		found = pr.anyValue(pr.steps, u.Object) // no closure: the common case allocates nothing
	} else {
		v.values(pr.steps, func(x interface{}) bool {
			found = pr.test(x)
			return !found
		})
	}
	if pr.op == Ne || pr.op == NotIn {
		return !found
	}
	return found
}

// anyValue reports whether test holds for a value steps reach in v (as
// collect walks them).
func (pr *cpred) anyValue(steps []step, v interface{}) bool {
	for i, s := range steps {
		switch s.kind {
		case stepField:
			m, ok := v.(map[string]interface{})
			if !ok {
				return false
			}
			if v, ok = m[s.name]; !ok {
				return false
			}
		case stepIndex:
			l, ok := v.([]interface{})
			if !ok || s.index >= len(l) {
				return false
			}
			v = l[s.index]
		case stepAll:
			l, ok := v.([]interface{})
			if !ok {
				return false
			}
			for _, e := range l {
				if pr.anyValue(steps[i+1:], e) {
					return true
				}
			}
			return false
		}
	}
	return pr.test(v)
}

// test is the operator on one value; for != and notin it is = and in
// (holds negates the outcome over all values).
func (pr *cpred) test(x interface{}) bool {
	switch pr.op {
	case Exists:
		return x != nil
	case Eq, Ne, In, NotIn:
		for _, lit := range pr.vals {
			if c, ok := compareLiteral(x, lit); ok && c == 0 {
				return true
			}
		}
		return false
	case Lt, Gt, Le, Ge:
		c, ok := compareLiteral(x, pr.vals[0])
		if !ok {
			return false
		}
		switch pr.op {
		case Lt:
			return c < 0
		case Gt:
			return c > 0
		case Le:
			return c <= 0
		}
		return c >= 0
	case Prefix:
		s, ok := x.(string)
		return ok && strings.HasPrefix(s, pr.vals[0].text)
	case Contains:
		switch y := x.(type) {
		case string:
			return strings.Contains(y, pr.vals[0].text)
		case []interface{}:
			for _, e := range y {
				if c, ok := compareLiteral(e, pr.vals[0]); ok && c == 0 {
					return true
				}
			}
		}
	}
	return false
}

// afterCursor reports whether e comes after the cursor, and whether it
// may be returned on a page after the first (see the paging guarantee:
// an object changed after the walk's resourceVersion is not).
func (p *plan) admits(e *entry) bool {
	c := p.cursor
	if c == nil {
		return true
	}
	if c.rvs != nil {
		if rv, ok := c.rvs[e.part]; ok && e.hasRV && e.rv > rv {
			return false
		}
	} else if c.hasRV && e.hasRV && e.rv > c.rv {
		return false
	}
	return compareEntries(p.orders, e, &c.at) > 0
}

// walkRV is the resourceVersion of the walk: the token's, or on the first
// page the highest the cache has seen.
func (p *plan) walkRV(seen uint64, hasSeen bool) (uint64, bool) {
	if p.cursor != nil {
		return p.cursor.rv, p.cursor.hasRV
	}
	return seen, hasSeen
}

func rvString(rv uint64, ok bool) string {
	if !ok {
		return ""
	}
	return strconv.FormatUint(rv, 10)
}

// Candidates calls fn with at least every object of a cache that is in
// namespace ("" for all namespaces) and matches selector (nil for all),
// and may call it with others: the query checks every object itself, so
// candidates only make it faster. genericlister answers from its label and
// namespace indexes; FromIndexer scans.
type Candidates func(namespace string, selector labels.Selector, fn func(obj interface{})) error

// Scan answers q from candidates, by filtering and sorting every
// candidate: its cost grows with the cache (or with the candidates an
// index narrows to), not with the page. Use an Index or Indexes for
// pages whose cost does not depend on the cache's size. Its answers are
// the ones an Index gives, with the same paging guarantee (see the
// package documentation), and its tokens are interchangeable with an
// Index's.
func Scan(candidates Candidates, q Query) (*Page[runtime.Object], error) {
	p, err := compile(q)
	if err != nil {
		return nil, err
	}
	var seen uint64
	hasSeen, total := false, 0
	var page []*entry
	visit := func(obj interface{}) {
		if !p.matches(obj) {
			return
		}
		total++
		e, ok := newEntry(p.orders, obj)
		if !ok {
			return
		}
		// The walk's version is the highest of the matching objects':
		// the cache has applied every event up to it (events come in
		// resourceVersion order) and every object of the first page is
		// at or below it, which is all the paging guarantee needs.
		if e.hasRV && (!hasSeen || e.rv > seen) {
			seen, hasSeen = e.rv, true
		}
		if p.admits(e) {
			page = append(page, e)
		}
	}
	if err := eachNamespace(p, candidates, visit); err != nil {
		return nil, err
	}
	slices.SortFunc(page, func(a, b *entry) int { return compareEntries(p.orders, a, b) })
	more := p.limit > 0 && len(page) > p.limit
	if more {
		page = page[:p.limit]
	}
	rv, hasRV := p.walkRV(seen, hasSeen)
	return p.finish(page, more, rv, hasRV, total), nil
}

// finish makes the page.
func (p *plan) finish(page []*entry, more bool, rv uint64, hasRV bool, total int) *Page[runtime.Object] {
	out := &Page[runtime.Object]{Items: make([]runtime.Object, 0, len(page)), ResourceVersion: rvString(rv, hasRV)}
	for _, e := range page {
		if o, ok := e.obj.(runtime.Object); ok {
			out.Items = append(out.Items, o)
		}
	}
	if more && len(page) > 0 {
		out.Continue = encodeToken(p, page[len(page)-1], rv, hasRV, nil)
	}
	if p.count {
		out.Total = &total
	}
	return out
}
