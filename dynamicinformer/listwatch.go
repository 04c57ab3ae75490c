package dynamicinformer

import (
	"context"
	"strconv"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/pager"
)

// listWatchFuncs is one namespace's list and watch (namespace "" = all).
type listWatchFuncs struct {
	list  func(ctx context.Context, ns string, opts metav1.ListOptions) (runtime.Object, error)
	watch func(ctx context.Context, ns string, opts metav1.ListOptions) (watch.Interface, error)
}

// dynamicFuncs lists and watches the resource gvr returns at each call
// (it changes when an informer follows a new preferred version).
func dynamicFuncs(client dynamic.Interface, gvr func() schema.GroupVersionResource) listWatchFuncs {
	return listWatchFuncs{
		list: func(ctx context.Context, ns string, o metav1.ListOptions) (runtime.Object, error) {
			return client.Resource(gvr()).Namespace(ns).List(ctx, o)
		},
		watch: func(ctx context.Context, ns string, o metav1.ListOptions) (watch.Interface, error) {
			return client.Resource(gvr()).Namespace(ns).Watch(ctx, o)
		},
	}
}

// metadataFuncs is dynamicFuncs for the metadata client.
func metadataFuncs(client metadata.Interface, gvr func() schema.GroupVersionResource) listWatchFuncs {
	return listWatchFuncs{
		list: func(ctx context.Context, ns string, o metav1.ListOptions) (runtime.Object, error) {
			return client.Resource(gvr()).Namespace(ns).List(ctx, o)
		},
		watch: func(ctx context.Context, ns string, o metav1.ListOptions) (watch.Interface, error) {
			return client.Resource(gvr()).Namespace(ns).Watch(ctx, o)
		},
	}
}

// optionsListerWatcher applies selectors and the tweak function, over one
// namespace or all.
type optionsListerWatcher struct {
	funcs       listWatchFuncs
	ns          string
	cfg         resourceConfig
	noWatchList bool
}

// IsWatchListSemanticsUnSupported: see gatedListerWatcher.
func (lw *optionsListerWatcher) IsWatchListSemanticsUnSupported() bool { return lw.noWatchList }

func (c resourceConfig) apply(o *metav1.ListOptions) {
	if c.labelSelector != "" {
		o.LabelSelector = c.labelSelector
	}
	if c.fieldSelector != "" {
		o.FieldSelector = c.fieldSelector
	}
	if c.tweak != nil {
		c.tweak(o)
	}
}

func (lw *optionsListerWatcher) ListWithContext(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
	lw.cfg.apply(&o)
	return lw.funcs.list(ctx, lw.ns, o)
}

func (lw *optionsListerWatcher) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	lw.cfg.apply(&o)
	return lw.funcs.watch(ctx, lw.ns, o)
}

// multiNamespaceListerWatcher lists and watches several namespaces as one
// collection. Lists are concatenated (their resourceVersion is the highest
// of the namespaces'); watches are merged. Because events of different
// namespaces can arrive out of resourceVersion order, a merged watch cannot
// safely resume from a resourceVersion: every new watch after the first one
// of a list forces a relist ("expired"); relists are consistent and each
// namespace is listed in pages (see ListWithContext). Watch-list streaming is declined
// (the reflector falls back to list). This costs one list per namespace
// each time a watch ends; for many namespaces prefer one informer per
// namespace or a cluster-wide informer with a selector.
type multiNamespaceListerWatcher struct {
	funcs      listWatchFuncs
	namespaces []string
	cfg        resourceConfig
	emptyList  func(rv string, items []runtime.Object) (runtime.Object, error)

	mu       sync.Mutex // guards listRV, consumed
	listRV   string
	consumed bool
}

func (lw *multiNamespaceListerWatcher) ListWithContext(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
	lw.cfg.apply(&o)
	o.Limit, o.Continue = 0, ""
	if o.ResourceVersion != "" && o.ResourceVersion != "0" {
		// A relist after a watch ended asks for "not older than" the last
		// version, which the server answers from its watch cache — with
		// 429 "storage is (re)initializing" for as long as that cache
		// cannot initialize. Ask for a consistent list instead (what a
		// relist of several namespaces must cost anyway); see below.
		o.ResourceVersion, o.ResourceVersionMatch = "", ""
	}
	var items []runtime.Object
	var maxRV uint64
	for _, ns := range lw.namespaces {
		// Each namespace in pages, as the reflector would list it: a
		// paginated consistent list is answered from storage while the
		// server's watch cache cannot initialize (an object it cannot
		// read), so the list fails with that error (ErrStoreRead) instead
		// of a 429 the reflector would retry forever.
		p := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return lw.funcs.list(ctx, ns, opts)
		})
		obj, _, err := p.List(ctx, o)
		if err != nil {
			return nil, err
		}
		rv, _ := metaListRV(obj)
		if n, err := strconv.ParseUint(rv, 10, 64); err == nil && n > maxRV {
			maxRV = n
		}
		its, err := meta.ExtractList(obj)
		if err != nil {
			return nil, err
		}
		items = append(items, its...)
	}
	rv := strconv.FormatUint(maxRV, 10)
	lw.mu.Lock()
	lw.listRV, lw.consumed = rv, false
	lw.mu.Unlock()
	return lw.emptyList(rv, items)
}

func (lw *multiNamespaceListerWatcher) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	if o.SendInitialEvents != nil && *o.SendInitialEvents {
		return nil, errNotServedFallback
	}
	lw.mu.Lock()
	fresh := !lw.consumed && o.ResourceVersion == lw.listRV
	lw.consumed = true
	lw.mu.Unlock()
	if !fresh {
		return nil, apierrors.NewResourceExpired("informerkit: multi-namespace watch resumes by relisting")
	}
	lw.cfg.apply(&o)
	o.AllowWatchBookmarks = false // bookmarks of one namespace say nothing of the others
	watches := make([]watch.Interface, 0, len(lw.namespaces))
	for _, ns := range lw.namespaces {
		w, err := lw.funcs.watch(ctx, ns, o)
		if err != nil {
			for _, w := range watches {
				w.Stop()
			}
			return nil, err
		}
		watches = append(watches, w)
	}
	return newMergedWatch(watches), nil
}

// mergedWatch forwards the events of several watches; it ends when any of
// them ends (the reflector then relists) or when stopped.
type mergedWatch struct {
	result  chan watch.Event
	stop    chan struct{}
	once    sync.Once
	watches []watch.Interface
}

func newMergedWatch(ws []watch.Interface) *mergedWatch {
	m := &mergedWatch{result: make(chan watch.Event), stop: make(chan struct{}), watches: ws}
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer m.Stop()
			for {
				select {
				case ev, ok := <-w.ResultChan():
					if !ok {
						return
					}
					select {
					case m.result <- ev:
					case <-m.stop:
						return
					}
				case <-m.stop:
					return
				}
			}
		}()
	}
	go func() {
		wg.Wait()
		close(m.result)
	}()
	return m
}

func (m *mergedWatch) ResultChan() <-chan watch.Event { return m.result }

func (m *mergedWatch) Stop() {
	m.once.Do(func() {
		close(m.stop)
		for _, w := range m.watches {
			w.Stop()
		}
	})
}

// listBuilder returns a function that builds a list of newList's type
// holding items at resourceVersion rv (meta.SetList checks the item types).
func listBuilder(newList func() runtime.Object) func(rv string, items []runtime.Object) (runtime.Object, error) {
	return func(rv string, items []runtime.Object) (runtime.Object, error) {
		l := newList()
		acc, err := meta.ListAccessor(l)
		if err != nil {
			return nil, err
		}
		acc.SetResourceVersion(rv)
		if err := meta.SetList(l, items); err != nil {
			return nil, err
		}
		return l, nil
	}
}

// unstructuredList builds UnstructuredLists of gvr's group-version.
func unstructuredList(gvr func() schema.GroupVersionResource) func(rv string, items []runtime.Object) (runtime.Object, error) {
	return listBuilder(func() runtime.Object {
		return &unstructured.UnstructuredList{Object: map[string]interface{}{
			"apiVersion": gvr().GroupVersion().String(), "kind": "List",
		}}
	})
}

// metadataList builds PartialObjectMetadataLists.
var metadataList = listBuilder(func() runtime.Object { return &metav1.PartialObjectMetadataList{} })

var _ toolscache.ListerWatcherWithContext = (*multiNamespaceListerWatcher)(nil)
var _ toolscache.ListerWatcherWithContext = (*optionsListerWatcher)(nil)

// List implements the deprecated toolscache.Lister.
func (lw *optionsListerWatcher) List(o metav1.ListOptions) (runtime.Object, error) {
	return lw.ListWithContext(context.Background(), o)
}

// Watch implements the deprecated toolscache.Watcher.
func (lw *optionsListerWatcher) Watch(o metav1.ListOptions) (watch.Interface, error) {
	return lw.WatchWithContext(context.Background(), o)
}
