package query

import (
	"errors"
	"sync"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/internal/labelindex"
)

// MaxIndexes bounds the indexes Indexes builds on first use, per informer;
// queries in further orders are answered by Scan.
const MaxIndexes = 16

// ErrClosed is returned by Indexes after Close.
var ErrClosed = errors.New("query: indexes closed")

// Indexes answers queries on one shared informer (a factory's
// InformerHandle.Informer() or any client-go SharedIndexInformer) from
// ordered indexes, one per order: declared up front (Declare) or built the
// first time a query asks for an order (up to MaxIndexes). An index is
// maintained by an event handler on the informer; until that handler has
// caught up with the cache (its registration HasSynced, and it has seen the
// walk's resourceVersion), pages are answered by Scan over the informer's
// indexer, with the same answer and the same paging guarantee. Close
// removes the handlers.
//
// Safe for concurrent use.
type Indexes struct {
	informer toolscache.SharedIndexInformer

	mu      sync.Mutex // guards byOrder and closed
	byOrder map[string]*informerIndex
	closed  bool
}

type informerIndex struct {
	idx *Index
	reg toolscache.ResourceEventHandlerRegistration
}

// NewIndexes returns the query indexes of informer, none built yet.
func NewIndexes(informer toolscache.SharedIndexInformer) *Indexes {
	return &Indexes{informer: informer, byOrder: map[string]*informerIndex{}}
}

// Declare builds the index of an order now (if it is not built already).
// Indexes declared count towards MaxIndexes too.
func (x *Indexes) Declare(orders ...Order) error {
	p, err := compile(Query{OrderBy: orders})
	if err != nil {
		return err
	}
	_, err = x.index(p, true)
	return err
}

// index returns the index of p's order, adding it when add and there is
// room; nil when there is none.
func (x *Indexes) index(p *plan, add bool) (*informerIndex, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return nil, ErrClosed
	}
	if ii, ok := x.byOrder[p.orderSig]; ok || !add || len(x.byOrder) >= MaxIndexes {
		return ii, nil
	}
	idx := newIndex(p)
	reg, err := x.informer.AddEventHandler(idx)
	if err != nil {
		return nil, err
	}
	ii := &informerIndex{idx: idx, reg: reg}
	x.byOrder[p.orderSig] = ii
	return ii, nil
}

// Query answers q (see Index.Query and Scan; the answer is the same).
func (x *Indexes) Query(q Query) (*Page[runtime.Object], error) {
	p, err := compile(q)
	if err != nil {
		return nil, err
	}
	ii, err := x.index(p, true)
	if err != nil {
		return nil, err
	}
	if ii != nil && ii.reg.HasSynced() && (p.cursor == nil || !p.cursor.hasRV || ii.idx.caughtUp(p.cursor.rv)) {
		return ii.idx.query(p), nil
	}
	return Scan(FromIndexer(x.informer.GetIndexer()), q)
}

// Close removes the indexes' handlers from the informer; later queries
// get ErrClosed.
func (x *Indexes) Close() {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return
	}
	x.closed = true
	for _, ii := range x.byOrder {
		_ = x.informer.RemoveEventHandler(ii.reg)
	}
	x.byOrder = nil
}

// FromIndexer returns the candidates of a client-go indexer: the objects
// of a namespace from its namespace index when it has one, else all
// objects. (genericlister's Lister.Query also narrows by label indexes.)
func FromIndexer(indexer toolscache.Indexer) Candidates {
	return func(namespace string, _ labels.Selector, fn func(obj interface{})) error {
		var objs []interface{}
		if namespace != "" && labelindex.HasIndex(indexer, toolscache.NamespaceIndex) {
			var err error
			if objs, err = indexer.ByIndex(toolscache.NamespaceIndex, namespace); err != nil {
				return err
			}
		} else {
			objs = indexer.List()
		}
		for _, o := range objs {
			fn(o)
		}
		return nil
	}
}
