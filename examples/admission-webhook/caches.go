package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/client-go/dynamic"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/discoveryresolver"
	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/genericlister"
)

// caches holds one informer per resource the loaded policies look up,
// keyed by the resource literal the policies wrote. Informers start when
// a policy that reads them loads and are released when no loaded policy
// reads them any more. Its methods are safe for concurrent use; the CEL
// lookup functions read it on the request goroutines.
type caches struct {
	factory *dynamicinformer.Factory
	// live, when set, makes every lookup a GET or LIST to the API server
	// instead of a cache read (the Kyverno-style round trip, kept to
	// measure against; see docs/PERFORMANCE.md). No informer starts.
	live dynamic.Interface

	mu sync.RWMutex // guards byRef
	// byRef maps a resource literal to its cache; several literals may
	// name one GVR (the factory shares the informer).
	byRef map[string]*cacheEntry

	publishedMu sync.RWMutex // guards published
	// published holds the last published state of each GVR's informer, kept
	// by the factory's OnStatusChange: requests read it instead of
	// Status(), which counts the cache's keys (O(objects)) on each call.
	published map[schema.GroupVersionResource]dynamicinformer.Status
	// stopStates ends the OnStatusChange subscription.
	stopStates func()
}

// cacheEntry is one looked-up resource's informer.
type cacheEntry struct {
	ref    string
	gvr    schema.GroupVersionResource
	handle *dynamicinformer.InformerHandle
}

// cacheState is what a request needs to know of a cache it reads.
type cacheState struct {
	Ref     string
	GVR     schema.GroupVersionResource
	State   dynamicinformer.State
	Reason  string
	Objects int
}

func (s cacheState) ready() bool { return s.State == dynamicinformer.Synced }

// gvrName is the kubectl form of a GVR: resource.version.group.
func gvrName(gvr schema.GroupVersionResource) string {
	s := gvr.Resource + "." + gvr.Version
	if gvr.Group != "" {
		s += "." + gvr.Group
	}
	return s
}

func (s cacheState) String() string {
	gvr := gvrName(s.GVR)
	if s.Reason != "" {
		return fmt.Sprintf("cache %s is %s (%s)", gvr, s.State, s.Reason)
	}
	return fmt.Sprintf("cache %s is %s", gvr, s.State)
}

func newCaches(f *dynamicinformer.Factory) *caches {
	c := &caches{factory: f, byRef: map[string]*cacheEntry{}, published: map[schema.GroupVersionResource]dynamicinformer.Status{}}
	c.stopStates = f.OnStatusChange(c.record)
	return c
}

// record keeps st if it is not older than the state held for its GVR.
func (c *caches) record(st dynamicinformer.Status) {
	c.publishedMu.Lock()
	defer c.publishedMu.Unlock()
	if cur, ok := c.published[st.GVR]; ok && st.Since.Before(cur.Since) {
		return
	}
	st.Objects, st.Denied = 0, nil // not kept current here
	c.published[st.GVR] = st
}

// quickState is the state of ref's cache as last published, without
// Objects: cheap enough for every request.
func (c *caches) quickState(ref string) cacheState {
	c.mu.RLock()
	e := c.byRef[ref]
	c.mu.RUnlock()
	if e == nil {
		return cacheState{Ref: ref, State: "Unknown", Reason: "no cache for this resource"}
	}
	if e.handle == nil {
		return cacheState{Ref: ref, GVR: e.gvr, State: dynamicinformer.Synced, Reason: "live lookups"}
	}
	c.publishedMu.RLock()
	st, ok := c.published[e.gvr]
	c.publishedMu.RUnlock()
	if !ok {
		return c.state(ref)
	}
	s := cacheState{Ref: ref, GVR: e.gvr, State: st.State}
	if st.State != dynamicinformer.Synced {
		s.Reason = st.Reason
		if s.Reason == "" && st.Err != nil {
			s.Reason = st.Err.Error()
		}
	}
	return s
}

// resolve turns a resource name into a GVR: a kubectl name through
// discovery, or, for a resource not served now, the full
// resource.version.group form read as it is (the informer then waits for
// the resource to be served).
func resolveRef(ctx context.Context, r *discoveryresolver.Resolver, ref string) (schema.GroupVersionResource, error) {
	res, err := r.Resolve(ctx, ref)
	if err == nil {
		return res.GVR, nil
	}
	if !errors.Is(err, discoveryresolver.ErrNotFound) {
		return schema.GroupVersionResource{}, err
	}
	if gvr, ok := fullName(ref); ok {
		return gvr, nil
	}
	return schema.GroupVersionResource{}, fmt.Errorf("%w (a resource that is not served yet must be named resource.version.group, as widgets.v1.example.com)", err)
}

// fullName parses resource.version.group ("widgets.v1.example.com") or
// resource.version for the core group ("pods.v1").
func fullName(ref string) (schema.GroupVersionResource, bool) {
	parts := strings.SplitN(ref, ".", 3)
	if len(parts) < 2 || !looksLikeVersion(parts[1]) || parts[0] == "" {
		return schema.GroupVersionResource{}, false
	}
	gvr := schema.GroupVersionResource{Resource: parts[0], Version: parts[1]}
	if len(parts) == 3 {
		gvr.Group = parts[2]
	}
	return gvr, true
}

// looksLikeVersion accepts v1, v2beta1, v1alpha3.
func looksLikeVersion(s string) bool {
	if len(s) < 2 || s[0] != 'v' || s[1] < '1' || s[1] > '9' {
		return false
	}
	rest := strings.TrimLeft(s[1:], "0123456789")
	for _, pre := range []string{"alpha", "beta"} {
		if strings.HasPrefix(rest, pre) {
			n := strings.TrimPrefix(rest, pre)
			return n != "" && strings.Trim(n, "0123456789") == ""
		}
	}
	return rest == ""
}

// set makes the caches exactly those of refs (literal → GVR): informers
// for new literals start, those no policy reads any more are released.
func (c *caches) set(refs map[string]schema.GroupVersionResource) {
	c.mu.Lock()
	defer c.mu.Unlock()
	next := make(map[string]*cacheEntry, len(refs))
	for ref, gvr := range refs {
		if e, ok := c.byRef[ref]; ok && e.gvr == gvr {
			next[ref] = e
			continue
		}
		e := &cacheEntry{ref: ref, gvr: gvr}
		if c.live == nil {
			e.handle = c.factory.ForResource(gvr)
			c.record(e.handle.Status())
		}
		next[ref] = e
	}
	for ref, e := range c.byRef {
		if next[ref] != e && e.handle != nil {
			e.handle.Release()
		}
	}
	c.byRef = next
}

// releaseAll releases every informer and ends the status subscription
// (shutdown).
func (c *caches) releaseAll() {
	c.set(nil)
	c.stopStates()
}

// state returns the state of the cache of ref.
func (c *caches) state(ref string) cacheState {
	c.mu.RLock()
	e := c.byRef[ref]
	c.mu.RUnlock()
	if e == nil {
		return cacheState{Ref: ref, State: "Unknown", Reason: "no cache for this resource"}
	}
	if e.handle == nil {
		return cacheState{Ref: ref, GVR: e.gvr, State: dynamicinformer.Synced, Reason: "live lookups"}
	}
	st := e.handle.Status()
	s := cacheState{Ref: ref, GVR: e.gvr, State: st.State, Objects: st.Objects}
	if st.State != dynamicinformer.Synced {
		s.Reason = st.Reason
		if s.Reason == "" && st.Err != nil {
			s.Reason = st.Err.Error()
		}
	}
	return s
}

// states returns the state of every cache, sorted by literal.
func (c *caches) states() []cacheState {
	c.mu.RLock()
	refs := make([]string, 0, len(c.byRef))
	for r := range c.byRef {
		refs = append(refs, r)
	}
	c.mu.RUnlock()
	sort.Strings(refs)
	out := make([]cacheState, len(refs))
	for i, r := range refs {
		out[i] = c.state(r)
	}
	return out
}

// indexer returns the synced cache of ref, or an error naming its state.
func (c *caches) indexer(ref string) (toolscache.Indexer, error) {
	c.mu.RLock()
	e := c.byRef[ref]
	c.mu.RUnlock()
	if e == nil {
		return nil, fmt.Errorf("no cache for %q", ref)
	}
	if st := c.quickState(ref); !st.ready() {
		return nil, errors.New(st.String())
	}
	if e.handle == nil {
		return nil, fmt.Errorf("%s has no cache (live lookups)", ref)
	}
	return e.handle.Informer().GetIndexer(), nil
}

// celFunctions declares lookup.get, lookup.list and lookup.count, bound
// to c.
func (c *caches) celFunctions() []cel.EnvOption {
	str := cel.StringType
	return []cel.EnvOption{
		cel.Function("lookup.get", cel.Overload("lookup_get_string_string_string",
			[]*cel.Type{str, str, str}, cel.DynType,
			cel.FunctionBinding(func(args ...ref.Val) ref.Val {
				return c.celGet(args[0], args[1], args[2])
			}))),
		cel.Function("lookup.list", cel.Overload("lookup_list_string_string_string",
			[]*cel.Type{str, str, str}, cel.ListType(cel.DynType),
			cel.FunctionBinding(func(args ...ref.Val) ref.Val {
				objs, err := c.list(args[0], args[1], args[2])
				if err != nil {
					return types.NewErr("%v", err)
				}
				items := make([]any, len(objs))
				for i, o := range objs {
					items[i] = o.Object
				}
				return types.DefaultTypeAdapter.NativeToValue(items)
			}))),
		cel.Function("lookup.count", cel.Overload("lookup_count_string_string_string",
			[]*cel.Type{str, str, str}, cel.IntType,
			cel.FunctionBinding(func(args ...ref.Val) ref.Val {
				objs, err := c.list(args[0], args[1], args[2])
				if err != nil {
					return types.NewErr("%v", err)
				}
				return types.Int(len(objs))
			}))),
	}
}

func (c *caches) celGet(resource, namespace, name ref.Val) ref.Val {
	if c.live != nil {
		return c.liveGet(string(resource.(types.String)), string(namespace.(types.String)), string(name.(types.String)))
	}
	idx, err := c.indexer(string(resource.(types.String)))
	if err != nil {
		return types.NewErr("%v", err)
	}
	key := string(name.(types.String))
	if ns := string(namespace.(types.String)); ns != "" {
		key = ns + "/" + key
	}
	obj, ok, err := idx.GetByKey(key)
	if err != nil {
		return types.NewErr("%v", err)
	}
	if !ok {
		return types.NullValue
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return types.NewErr("cached object %s is a %T", key, obj)
	}
	return types.DefaultTypeAdapter.NativeToValue(u.Object)
}

// list returns the cached objects of resource in namespace ("" all)
// matching a label selector ("" everything). The objects are the cache's:
// they must not be modified.
func (c *caches) list(resource, namespace, selector ref.Val) ([]*unstructured.Unstructured, error) {
	if c.live != nil {
		return c.liveList(string(resource.(types.String)), string(namespace.(types.String)), string(selector.(types.String)))
	}
	ref := string(resource.(types.String))
	idx, err := c.indexer(ref)
	if err != nil {
		return nil, err
	}
	sel, err := labels.Parse(string(selector.(types.String)))
	if err != nil {
		return nil, fmt.Errorf("label selector: %w", err)
	}
	e, err := c.entry(ref)
	if err != nil {
		return nil, err
	}
	// genericlister answers from the namespace index and per-key label
	// indexes (added on first use by the factory's default), in time
	// proportional to the matching objects, not to the cache.
	l := genericlister.New(idx, e.gvr.GroupResource())
	if ns := string(namespace.(types.String)); ns != "" {
		return l.Namespace(ns).List(sel)
	}
	return l.List(sel)
}

// entry returns the entry of ref.
func (c *caches) entry(ref string) (*cacheEntry, error) {
	c.mu.RLock()
	e := c.byRef[ref]
	c.mu.RUnlock()
	if e == nil {
		return nil, fmt.Errorf("no cache for %q", ref)
	}
	return e, nil
}

// liveGet is lookup.get as one GET to the API server.
func (c *caches) liveGet(ref, namespace, name string) ref.Val {
	e, err := c.entry(ref)
	if err != nil {
		return types.NewErr("%v", err)
	}
	u, err := c.live.Resource(e.gvr).Namespace(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return types.NullValue
	}
	if err != nil {
		return types.NewErr("%v", err)
	}
	return types.DefaultTypeAdapter.NativeToValue(u.Object)
}

// liveList is lookup.list as one LIST to the API server.
func (c *caches) liveList(ref, namespace, selector string) ([]*unstructured.Unstructured, error) {
	e, err := c.entry(ref)
	if err != nil {
		return nil, err
	}
	l, err := c.live.Resource(e.gvr).Namespace(namespace).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	out := make([]*unstructured.Unstructured, len(l.Items))
	for i := range l.Items {
		out[i] = &l.Items[i]
	}
	return out, nil
}

// namespace returns the cached Namespace name as namespaceObject shows it
// (ValidatingAdmissionPolicy's fields), or nil if it is not cached.
func (c *caches) namespace(name string) (*corev1.Namespace, error) {
	var u *unstructured.Unstructured
	if c.live != nil {
		got, err := c.live.Resource(corev1.SchemeGroupVersion.WithResource("namespaces")).Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		u = got
	} else {
		idx, err := c.indexer(namespacesRef)
		if err != nil {
			return nil, err
		}
		obj, ok, err := idx.GetByKey(name)
		if err != nil || !ok {
			return nil, err
		}
		if u, ok = obj.(*unstructured.Unstructured); !ok {
			return nil, fmt.Errorf("cached namespace %s is a %T", name, obj)
		}
	}
	ns := &corev1.Namespace{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ns); err != nil {
		return nil, err
	}
	return plugincel.CreateNamespaceObject(ns), nil
}
