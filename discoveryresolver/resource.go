package discoveryresolver

import (
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Resource describes one served resource at one version, as discovery
// reports it. Subresources are never Resources.
//
// Every Resource the resolver returns is a copy: the caller may keep and
// modify it, including its slices.
type Resource struct {
	GVR        schema.GroupVersionResource
	GVK        schema.GroupVersionKind
	Namespaced bool
	Verbs      []string // as discovery lists them: "get", "list", "watch", ...
	ShortNames []string
	Categories []string
}

// Watchable reports whether the resource supports both list and watch, the
// verbs an informer needs.
func (r Resource) Watchable() bool {
	return slices.Contains(r.Verbs, "list") && slices.Contains(r.Verbs, "watch")
}

// clone returns a copy whose slices share one fresh backing array (one
// allocation), each capped so that an append by the caller cannot spill into
// the next.
func (r Resource) clone() Resource {
	nv, ns, nc := len(r.Verbs), len(r.ShortNames), len(r.Categories)
	if nv+ns+nc == 0 {
		r.Verbs, r.ShortNames, r.Categories = nil, nil, nil
		return r
	}
	buf := make([]string, nv+ns+nc)
	copy(buf, r.Verbs)
	copy(buf[nv:], r.ShortNames)
	copy(buf[nv+ns:], r.Categories)
	r.Verbs, r.ShortNames, r.Categories = nilIfEmpty(buf[:nv:nv]), nilIfEmpty(buf[nv:nv+ns:nv+ns]), nilIfEmpty(buf[nv+ns:])
	return r
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

// Change lists the group-version-resources that appeared (Added) and
// disappeared (Removed) between two consecutive discovery refreshes, each
// sorted by group, version and resource. Every version of a resource counts
// on its own: a CRD that starts serving v2 adds one Resource.
type Change struct {
	Added, Removed []Resource
}

// Filter selects resources. The zero Filter matches everything. Fields are
// combined with AND.
type Filter struct {
	// Groups matches resources in any of these API groups ("" is the core
	// group). Empty matches every group.
	Groups []string
	// Categories matches resources that belong to at least one of these
	// categories ("all", "gateway-api"). Empty matches every resource,
	// including those without categories.
	Categories []string
	// Verbs matches resources that support every one of these verbs
	// ("list", "watch" for informer targets). Empty matches every resource.
	Verbs []string
	// Namespaced, when set, matches only namespaced (true) or only
	// cluster-scoped (false) resources.
	Namespaced *bool
}

// matches reports whether r passes every condition of f.
func (f Filter) matches(r Resource) bool {
	if len(f.Groups) > 0 && !slices.Contains(f.Groups, r.GVR.Group) {
		return false
	}
	if len(f.Categories) > 0 && !slices.ContainsFunc(f.Categories, func(c string) bool { return slices.Contains(r.Categories, c) }) {
		return false
	}
	for _, v := range f.Verbs {
		if !slices.Contains(r.Verbs, v) {
			return false
		}
	}
	if f.Namespaced != nil && *f.Namespaced != r.Namespaced {
		return false
	}
	return true
}
