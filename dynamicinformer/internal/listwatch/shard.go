package listwatch

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/informerkit/informerkit/dynamicinformer/internal/reflectorseam"
	"github.com/informerkit/informerkit/shard"
)

// ShardFilter keeps the objects of one shard. It sets
// metav1.ListOptions.ShardSelector on every request it passes on — after
// the selectors and the tweak, on every page of a list (a continue token
// does not remember the selector) — and, because the server may ignore
// the selector (its ShardedListAndWatch feature gate off), it checks
// every list item and every watch event itself: such a server costs
// bandwidth, never correctness.
//
// The shard may change (Current): a list keeps the shard of its first
// page for all its pages, a watch the shard it was opened with, and each
// is filtered by that shard, so every list is one shard's complete list.
type ShardFilter struct {
	// Current returns the shard to ask for now; it is read at the first
	// page of each list and at each watch. It must be safe for concurrent
	// use.
	Current func() shard.Shard
	// Outside, if set, is told how many objects of one list page or one
	// watch event were dropped (called only with n > 0).
	Outside func(n int)
	// Listed, if set, is called with a shard once a list of it is
	// complete: its last page was received, or a watch-list stream's
	// bookmark that ends its initial events was taken by the stream's
	// reader.
	Listed func(s shard.Shard)

	mu     sync.Mutex // guards pinned
	pinned map[string]shard.Shard
}

// Funcs returns in with the shard selector set on every request and
// every list's items and every watch's added, modified and deleted events
// filtered by the request's shard. Bookmarks and errors pass unchanged.
// Objects are dropped, never changed: an object's UID (and namespace)
// never changes, so an update never moves an object into or out of a
// shard.
func (f *ShardFilter) Funcs(in Funcs) Funcs {
	return Funcs{
		List: func(ctx context.Context, ns string, o metav1.ListOptions) (runtime.Object, error) {
			s := f.listShard(o.Continue)
			o.ShardSelector = s.Selector()
			obj, err := in.List(ctx, ns, o)
			if err != nil {
				return obj, err
			}
			n, err := filterList(obj, s.Contains)
			if err != nil {
				return nil, err
			}
			f.outside(n)
			if next := continueOf(obj); next != "" {
				f.pin(next, s)
			} else if f.Listed != nil {
				if d, ok := ctx.Value(deferredListedKey{}).(*DeferredListed); ok {
					d.set(func() { f.Listed(s) })
				} else {
					f.Listed(s)
				}
			}
			return obj, nil
		},
		Watch: func(ctx context.Context, ns string, o metav1.ListOptions) (watch.Interface, error) {
			s := f.Current()
			o.ShardSelector = s.Selector()
			w, err := in.Watch(ctx, ns, o)
			if err != nil {
				return w, err
			}
			return newShardWatch(w, f, s), nil
		},
	}
}

// listShard is the shard of a list page: the current one for a first
// page, the first page's for a continued one.
func (f *ShardFilter) listShard(cont string) shard.Shard {
	if cont != "" {
		f.mu.Lock()
		s, ok := f.pinned[cont]
		delete(f.pinned, cont)
		f.mu.Unlock()
		if ok {
			return s
		}
	}
	return f.Current()
}

// maxPinned bounds the continue tokens remembered (lists given up before
// their last page leave theirs behind).
const maxPinned = 16

func (f *ShardFilter) pin(cont string, s shard.Shard) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pinned == nil || len(f.pinned) >= maxPinned {
		f.pinned = map[string]shard.Shard{}
	}
	f.pinned[cont] = s
}

func (f *ShardFilter) outside(n int) {
	if n > 0 && f.Outside != nil {
		f.Outside(n)
	}
}

func continueOf(obj runtime.Object) string {
	if l, err := meta.ListAccessor(obj); err == nil {
		return l.GetContinue()
	}
	return ""
}

// filterList drops the items of list obj outside the shard, in place, and
// returns how many it dropped.
func filterList(obj runtime.Object, contains func(any) bool) (int, error) {
	switch l := obj.(type) {
	case *unstructured.UnstructuredList:
		kept := l.Items[:0]
		for i := range l.Items {
			if contains(&l.Items[i]) {
				kept = append(kept, l.Items[i])
			}
		}
		dropped := len(l.Items) - len(kept)
		clear(l.Items[len(kept):])
		l.Items = kept
		return dropped, nil
	case *metav1.PartialObjectMetadataList:
		kept := l.Items[:0]
		for i := range l.Items {
			if contains(&l.Items[i]) {
				kept = append(kept, l.Items[i])
			}
		}
		dropped := len(l.Items) - len(kept)
		clear(l.Items[len(kept):])
		l.Items = kept
		return dropped, nil
	}
	items, err := meta.ExtractList(obj)
	if err != nil {
		return 0, err
	}
	kept := items[:0]
	for _, it := range items {
		if contains(it) {
			kept = append(kept, it)
		}
	}
	if len(kept) == len(items) {
		return 0, nil
	}
	return len(items) - len(kept), meta.SetList(obj, kept)
}

// shardWatch forwards the events of a server watch that are in the shard.
// Its goroutine ends when the server watch's channel closes or Stop is
// called.
type shardWatch struct {
	in     watch.Interface
	result chan watch.Event
	stop   chan struct{}
	once   sync.Once
}

func newShardWatch(in watch.Interface, f *ShardFilter, s shard.Shard) *shardWatch {
	w := &shardWatch{in: in, result: make(chan watch.Event), stop: make(chan struct{})}
	go w.run(f, s)
	return w
}

func (w *shardWatch) run(f *ShardFilter, s shard.Shard) {
	defer close(w.result)
	for {
		select {
		case ev, ok := <-w.in.ResultChan():
			if !ok {
				return
			}
			switch ev.Type {
			case watch.Added, watch.Modified, watch.Deleted:
				if !s.Contains(ev.Object) {
					f.outside(1)
					continue
				}
			}
			select {
			case w.result <- ev:
			case <-w.stop:
				return
			}
			if ev.Type == watch.Bookmark && f.Listed != nil && reflectorseam.EndsInitialEvents(ev.Object) {
				f.Listed(s)
			}
		case <-w.stop:
			return
		}
	}
}

// ResultChan implements watch.Interface.
func (w *shardWatch) ResultChan() <-chan watch.Event { return w.result }

// Stop implements watch.Interface: it stops the server watch and ends the
// forwarding goroutine. It may be called more than once.
func (w *shardWatch) Stop() {
	w.once.Do(func() {
		close(w.stop)
		w.in.Stop()
	})
}

type deferredListedKey struct{}

// DeferredListed holds back the Listed call of a ShardFilter for lists
// made with its context (DeferListed) until Run: a list delivered to the
// reflector as watch events is in the reflector's hands only once those
// events were taken, not when the list is received.
type DeferredListed struct {
	mu sync.Mutex // guards f
	f  func()
}

// DeferListed returns a context whose lists' Listed calls wait for d.Run.
func DeferListed(ctx context.Context) (context.Context, *DeferredListed) {
	d := &DeferredListed{}
	return context.WithValue(ctx, deferredListedKey{}, d), d
}

func (d *DeferredListed) set(f func()) {
	d.mu.Lock()
	d.f = f
	d.mu.Unlock()
}

// Run makes the held-back Listed call, if any (once).
func (d *DeferredListed) Run() {
	d.mu.Lock()
	f := d.f
	d.f = nil
	d.mu.Unlock()
	if f != nil {
		f()
	}
}
