package presence

import (
	"context"
	"fmt"
	"sync"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"

	"github.com/informerkit/informerkit/dynamicinformer/internal/listwatch"
)

// CRDResource is the resource presence watches to follow CRDs.
var CRDResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// crdLoop runs an informer on CustomResourceDefinitions until ctx ends.
// If the CRDs cannot be listed (forbidden, a client that cannot serve
// them), that is an answer: presence relies on discovery and 404s, and
// does not wait for this source.
func (p *Presence) crdLoop(ctx context.Context) {
	inf := toolscache.NewSharedIndexInformerWithOptions(
		&listwatch.Single{Funcs: crdFuncs(p.cfg.CRDs), NoWatchList: watchlist.DoesClientNotSupportWatchListSemantics(p.cfg.CRDs)},
		&unstructured.Unstructured{},
		toolscache.SharedIndexInformerOptions{ObjectDescription: "informerkit CRD tracker"})
	_ = inf.SetTransform(slimCRD)
	var once sync.Once
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *toolscache.Reflector, err error) {
		once.Do(func() {
			p.log.V(1).Info("cannot list or watch CustomResourceDefinitions; following resources through discovery and 404 answers", "err", err.Error())
			p.markReady("CRDs unavailable")
		})
	})
	_, _ = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { p.crdChanged(obj, false) },
		UpdateFunc: func(_, obj interface{}) { p.crdChanged(obj, false) },
		DeleteFunc: func(obj interface{}) { p.crdChanged(obj, true) },
	})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			p.mu.Lock()
			p.crdSynced = true
			p.mu.Unlock()
			p.markReady("CRDs listed")
		}
	}()
	inf.RunWithContext(logr.NewContext(ctx, p.log))
	wg.Wait()
}

// crdFuncs lists and watches CRDs, turning a client's panic into an error:
// client-go's fake dynamic client panics on resources it was not told the
// list kind of, and a panic in the reflector's goroutine would end the
// process.
func crdFuncs(client dynamic.Interface) listwatch.Funcs {
	return listwatch.Funcs{
		List: func(ctx context.Context, _ string, o metav1.ListOptions) (obj runtime.Object, err error) {
			defer recoverAsError("list", &err)
			return client.Resource(CRDResource).List(ctx, o)
		},
		Watch: func(ctx context.Context, _ string, o metav1.ListOptions) (w watch.Interface, err error) {
			defer recoverAsError("watch", &err)
			return client.Resource(CRDResource).Watch(ctx, o)
		},
	}
}

func recoverAsError(op string, err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("informerkit: the client panicked on %s of %s: %v", op, CRDResource.Resource, r)
	}
}

// slimCRD keeps only what presence needs of a CRD (schemas can be 800 KB).
func slimCRD(obj interface{}) (interface{}, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	if _, slim := u.Object["established"]; slim {
		return u, nil // already slim: client-go may transform an object twice
	}
	group, _, _ := unstructured.NestedString(u.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(u.Object, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
	var slimVersions []interface{}
	for _, v := range versions {
		vm, ok := v.(map[string]interface{})
		if !ok {
			continue
		}
		slimVersions = append(slimVersions, map[string]interface{}{"name": vm["name"], "served": vm["served"]})
	}
	established := false
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		cm, ok := c.(map[string]interface{})
		if ok && cm["type"] == "Established" && cm["status"] == "True" {
			established = true
		}
	}
	slim := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": u.GetAPIVersion(), "kind": u.GetKind(),
		"metadata":    map[string]interface{}{"name": u.GetName(), "resourceVersion": u.GetResourceVersion(), "uid": string(u.GetUID())},
		"spec":        map[string]interface{}{"group": group, "names": map[string]interface{}{"plural": plural}, "versions": slimVersions},
		"established": established,
	}}
	if ts := u.GetDeletionTimestamp(); ts != nil {
		slim.SetDeletionTimestamp(ts)
	}
	return slim, nil
}

// crdChanged records which versions a CRD serves now, tells discovery
// which group-versions to re-read, re-evaluates the CRD's members and
// calls the OnCRDChange listeners.
func (p *Presence) crdChanged(obj interface{}, deleted bool) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
		deleted = true
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	group, _, _ := unstructured.NestedString(u.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(u.Object, "spec", "names", "plural")
	gr := schema.GroupResource{Group: group, Resource: plural}
	served := map[string]bool{}
	established, _, _ := unstructured.NestedBool(u.Object, "established")
	versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
	var gvs []schema.GroupVersion
	for _, v := range versions {
		vm, _ := v.(map[string]interface{})
		name, _ := vm["name"].(string)
		if name == "" {
			continue
		}
		gvs = append(gvs, schema.GroupVersion{Group: group, Version: name})
		if s, _ := vm["served"].(bool); s && established && !deleted && u.GetDeletionTimestamp() == nil {
			served[name] = true
		}
	}
	p.mu.Lock()
	for v := range p.crdVersions[gr] {
		gvs = append(gvs, schema.GroupVersion{Group: group, Version: v})
	}
	if old, ok := p.crdByName[u.GetName()]; ok && old != gr {
		p.crdVersions[old] = map[string]bool{}
	}
	p.crdByName[u.GetName()] = gr
	p.crdVersions[gr] = served
	listeners := make([]func(), 0, len(p.crdListeners))
	for _, l := range p.crdListeners {
		listeners = append(listeners, l)
	}
	p.mu.Unlock()
	if p.cfg.Resolver != nil {
		// The aggregated discovery document can lag behind CRD changes
		// for minutes; the group-versions' own endpoints do not.
		p.cfg.Resolver.Invalidate(gvs...)
		p.refreshSoon()
	}
	p.reevaluateGR(gr, "CRD "+u.GetName()+" changed")
	for _, l := range listeners {
		l()
	}
}
