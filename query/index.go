package query

import (
	"errors"
	"sync"

	"github.com/google/btree"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
)

// ErrIndexOrder is returned by Index.Query for a query whose OrderBy is
// not the index's order.
var ErrIndexOrder = errors.New("query: the query's order is not the index's")

// btreeDegree is the B-tree's degree: nodes of up to 63 entries, which
// keeps a walk mostly within cache lines of one node.
const btreeDegree = 32

// Index is an ordered index of one cache in one order: a B-tree of the
// cache's objects by their sort values and key, maintained by the
// informer's events. It is a toolscache.ResourceEventHandler: add it to an
// informer (informer.AddEventHandler(index)) and it holds the cache's
// objects once the registration HasSynced. Indexes does that for you, for
// every order a query asks for.
//
// Query answers a page by walking the tree from the continue token's
// position (keyset paging): a page costs the same at any depth, in
// proportion to the objects it walks past — the page's own items and
// the objects between them that the query's namespaces, selector and
// predicates reject.
//
// The index keeps, per object, its key, its sort values and a reference to
// the cached object (no copy). Events are applied under a lock a query
// holds only while it walks one page. Safe for concurrent use.
type Index struct {
	orders []corder
	sig    string

	mu    sync.RWMutex // guards tree, byKey, maxRV and hasRV
	tree  *btree.BTreeG[*entry]
	byKey map[string]*entry
	maxRV uint64 // the highest resourceVersion of an object the index has applied
	hasRV bool
}

// NewIndex returns an empty index for the order orders (an empty order is
// the order of keys). Its paths must parse (ErrInvalidPath otherwise).
func NewIndex(orders ...Order) (*Index, error) {
	p, err := compile(Query{OrderBy: orders})
	if err != nil {
		return nil, err
	}
	return newIndex(p), nil
}

func newIndex(p *plan) *Index {
	orders := p.orders
	return &Index{
		orders: orders,
		sig:    p.orderSig,
		tree:   btree.NewG(btreeDegree, func(a, b *entry) bool { return compareEntries(orders, a, b) < 0 }),
		byKey:  map[string]*entry{},
	}
}

// Len returns the number of objects in the index.
func (x *Index) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.tree.Len()
}

// OnAdd implements toolscache.ResourceEventHandler.
func (x *Index) OnAdd(obj interface{}, _ bool) { x.put(obj) }

// OnUpdate implements toolscache.ResourceEventHandler.
func (x *Index) OnUpdate(_, newObj interface{}) { x.put(newObj) }

// OnDelete implements toolscache.ResourceEventHandler; it accepts
// toolscache.DeletedFinalStateUnknown.
func (x *Index) OnDelete(obj interface{}) {
	var key string
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		key = t.Key
	} else if k, ok := objectKey(obj); ok {
		key = k
	} else {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if old, ok := x.byKey[key]; ok {
		x.tree.Delete(old)
		delete(x.byKey, key)
	}
}

// put adds or replaces obj; its sort values are read before the lock.
func (x *Index) put(obj interface{}) {
	e, ok := newEntry(x.orders, obj)
	if !ok {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if old, ok := x.byKey[e.key]; ok {
		if compareEntries(x.orders, old, e) == 0 {
			// Same position (most updates leave sort fields alone):
			// replace in place, no tree surgery.
			*old = *e
			x.noteRV(e)
			return
		}
		x.tree.Delete(old)
	}
	x.tree.ReplaceOrInsert(e)
	x.byKey[e.key] = e
	x.noteRV(e)
}

func (x *Index) noteRV(e *entry) {
	if e.hasRV && (!x.hasRV || e.rv > x.maxRV) {
		x.maxRV, x.hasRV = e.rv, true
	}
}

// caughtUp reports whether the index has applied every event up to rv
// (events come in resourceVersion order).
func (x *Index) caughtUp(rv uint64) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.hasRV && x.maxRV >= rv
}

// Query answers q from the index. q.OrderBy must be the index's order
// (ErrIndexOrder otherwise). Pages follow the paging guarantee of the
// package documentation for tokens this index made, or tokens made by any
// reader of the same resource once the index has seen their
// resourceVersion (Indexes checks that for you).
func (x *Index) Query(q Query) (*Page[runtime.Object], error) {
	p, err := compile(q)
	if err != nil {
		return nil, err
	}
	if p.orderSig != x.sig {
		return nil, ErrIndexOrder
	}
	return x.query(p), nil
}

func (x *Index) query(p *plan) *Page[runtime.Object] {
	x.mu.RLock()
	defer x.mu.RUnlock()
	rv, hasRV := p.walkRV(x.maxRV, x.hasRV)
	var page []*entry
	more := false
	walk := func(e *entry) bool {
		if !p.admits(e) || !p.matches(e.obj) {
			return true
		}
		if p.limit > 0 && len(page) == p.limit {
			more = true
			return false
		}
		page = append(page, e)
		return true
	}
	if p.cursor != nil {
		x.tree.AscendGreaterOrEqual(&p.cursor.at, walk)
	} else {
		x.tree.Ascend(walk)
	}
	total := 0
	if p.count {
		x.tree.Ascend(func(e *entry) bool {
			if p.matches(e.obj) {
				total++
			}
			return true
		})
	}
	return p.finish(page, more, rv, hasRV, total)
}
