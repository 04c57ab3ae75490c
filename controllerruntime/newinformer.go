package controllerruntime

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/dynamicinformer"
)

// customClients list and watch for the informers Options.NewInformer
// makes.
type customClients struct {
	dynamic  dynamic.Interface
	metadata metadata.Interface
}

// makeInformer makes entry e's informer of resource gvr: the factory's
// (a handle), or, with Options.NewInformer, the one it returns over a
// ListerWatcher of the entry's namespace and selectors (custom, run by
// the cache until stop or the end of Start). c.mu is held.
func (c *Cache) makeInformer(e *entry, gvr schema.GroupVersionResource, namespaced bool) (*dynamicinformer.InformerHandle, toolscache.SharedIndexInformer, context.CancelFunc) {
	if c.newInformer == nil {
		return c.factory.ForResource(gvr, e.options(namespaced)...), nil, nil
	}
	ns := ""
	if namespaced && len(e.namespaces) == 1 {
		ns = e.namespaces[0] // one namespace per custom informer (groups are split)
	}
	tweak := func(o *metav1.ListOptions) {
		o.LabelSelector, o.FieldSelector = e.oc.label, e.oc.field
	}
	var lw toolscache.ListerWatcher
	var example runtime.Object
	switch e.class {
	case classMetadata:
		r := c.clients.metadata.Resource(gvr).Namespace(ns)
		lw = &toolscache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				tweak(&o)
				return r.List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				tweak(&o)
				return r.Watch(ctx, o)
			},
		}
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(e.gvk)
		example = m
	default:
		r := c.clients.dynamic.Resource(gvr).Namespace(ns)
		lw = &toolscache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				tweak(&o)
				return r.List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				tweak(&o)
				return r.Watch(ctx, o)
			},
		}
		if obj, err := c.scheme.New(e.gvk); err == nil && e.class == classTyped {
			example = obj
		} else {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(e.gvk)
			example = u
		}
	}
	inf := c.newInformer(lw, example, e.oc.resync, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	if e.transform != nil {
		// The typed conversion, metadata's kind, the user's transform; an
		// informer that cannot take one (already running) keeps its own.
		_ = inf.SetTransform(e.transform)
	}
	ctx, stop := context.WithCancel(context.Background())
	c.runCustomLocked(ctx, inf)
	return nil, inf, stop
}

// runCustomLocked runs a custom informer from Start (at once if the
// cache has started) until ctx ends or Start ends. c.mu is held.
func (c *Cache) runCustomLocked(ctx context.Context, inf toolscache.SharedIndexInformer) {
	if c.stopped {
		return
	}
	if !c.started {
		c.customPending = append(c.customPending, customRun{ctx: ctx, inf: inf})
		return
	}
	if c.runCtx.Err() != nil {
		return // Start is ending: its WaitGroup takes no more
	}
	c.startCustomLocked(ctx, inf)
}

type customRun struct {
	ctx context.Context
	inf toolscache.SharedIndexInformer
}

// startCustomLocked runs inf until ctx or the cache's run ends. c.mu is
// held, and the cache has started.
func (c *Cache) startCustomLocked(ctx context.Context, inf toolscache.SharedIndexInformer) {
	runCtx, cancel := context.WithCancel(c.runCtx)
	unlink := context.AfterFunc(ctx, cancel)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer unlink()
		defer cancel()
		inf.RunWithContext(runCtx)
	}()
}

// release gives up an informer makeInformer made.
func release(h *dynamicinformer.InformerHandle, stop context.CancelFunc) {
	if h != nil {
		h.Release()
	}
	if stop != nil {
		stop()
	}
}
