package listwatch

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// ShardFilter keeps the objects of one shard. The server is asked for
// the shard (Selectors.Shard) but may ignore the selector (its
// ShardedListAndWatch feature gate off): Funcs checks every list item and
// every watch event itself, so such a server costs bandwidth, never
// correctness.
type ShardFilter struct {
	// Contains reports whether obj is in the shard. It must be safe for
	// concurrent use and must not modify obj.
	Contains func(obj runtime.Object) bool
	// Outside, if set, is told how many objects of one list page or one
	// watch event were dropped (called only with n > 0).
	Outside func(n int)
}

// Funcs returns in with every list's items and every watch's added,
// modified and deleted events filtered by f.Contains. Bookmarks and
// errors pass unchanged. Objects are dropped, never changed: an object's
// UID (and namespace) never changes, so an object never moves into or out
// of a shard by an update.
func (f ShardFilter) Funcs(in Funcs) Funcs {
	return Funcs{
		List: func(ctx context.Context, ns string, o metav1.ListOptions) (runtime.Object, error) {
			obj, err := in.List(ctx, ns, o)
			if err != nil {
				return obj, err
			}
			n, err := f.filterList(obj)
			if err != nil {
				return nil, err
			}
			f.outside(n)
			return obj, nil
		},
		Watch: func(ctx context.Context, ns string, o metav1.ListOptions) (watch.Interface, error) {
			w, err := in.Watch(ctx, ns, o)
			if err != nil {
				return w, err
			}
			return newShardWatch(w, f), nil
		},
	}
}

func (f ShardFilter) outside(n int) {
	if n > 0 && f.Outside != nil {
		f.Outside(n)
	}
}

// filterList drops the items of list obj outside the shard, in place, and
// returns how many it dropped.
func (f ShardFilter) filterList(obj runtime.Object) (int, error) {
	switch l := obj.(type) {
	case *unstructured.UnstructuredList:
		kept := l.Items[:0]
		for i := range l.Items {
			if f.Contains(&l.Items[i]) {
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
			if f.Contains(&l.Items[i]) {
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
		if f.Contains(it) {
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

func newShardWatch(in watch.Interface, f ShardFilter) *shardWatch {
	w := &shardWatch{in: in, result: make(chan watch.Event), stop: make(chan struct{})}
	go w.run(f)
	return w
}

func (w *shardWatch) run(f ShardFilter) {
	defer close(w.result)
	for {
		select {
		case ev, ok := <-w.in.ResultChan():
			if !ok {
				return
			}
			switch ev.Type {
			case watch.Added, watch.Modified, watch.Deleted:
				if !f.Contains(ev.Object) {
					f.outside(1)
					continue
				}
			}
			select {
			case w.result <- ev:
			case <-w.stop:
				return
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
