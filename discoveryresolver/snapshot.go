package discoveryresolver

import (
	"cmp"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// snapshot is one immutable view of discovery. Nothing in it changes after
// buildSnapshot returns, so readers use it without locks.
type snapshot struct {
	entries   []entry                             // every served GVR, in discovery order (group, version, resource)
	byGVR     map[schema.GroupVersionResource]int // → entries index
	preferred map[schema.GroupResource]int        // → entries index of the version kubectl would pick
	order     []int                               // preferred entries, in discovery order
	byGVK     map[schema.GroupVersionKind][]int   // exact kind
	byGK      map[schema.GroupKind][]int          // exact kind, every version
	names     map[string][]nameHit                // lower-case name → entries
	table     map[string]result                   // precomputed answers for the references kubectl users type
	failed    map[schema.GroupVersion]error       // group-versions whose discovery failed in the round that built this
	groupInfo map[string]metav1.APIGroup          // kept so that failed group-versions can be carried over
	serverOrd bool                                // WithServerGroupOrder
}

type entry struct {
	res         Resource
	singular    string
	gr          schema.GroupResource
	groupRank   int // position of the group in discovery
	versionRank int // 0 for the group's preferred version, then 1+ position in the group's version list
	watchable   bool
}

type nameClass uint8

const (
	className  nameClass = iota // plural or singular
	classShort                  // short name
	classKind                   // kind, lower-cased
)

type nameHit struct {
	idx   int
	class nameClass
}

// result is the answer for one reference in one snapshot.
type result struct {
	idx   int   // entries index when found, -1 otherwise
	cands []int // entries indices when ambiguous
}

func (r result) found() bool     { return r.idx >= 0 }
func (r result) ambiguous() bool { return len(r.cands) > 0 }
func (r result) answered() bool  { return r.found() || r.ambiguous() }

var notFound = result{idx: -1}

// discoveryData is what one discovery round returned.
type discoveryData struct {
	groups []*metav1.APIGroup
	lists  []*metav1.APIResourceList
	failed map[schema.GroupVersion]error
}

// buildSnapshot indexes data. Group-versions that failed keep the entries
// prev had for them (an aggregated API that is briefly down must not look
// like a removed resource).
func buildSnapshot(data discoveryData, prev *snapshot, serverOrder bool) *snapshot {
	s := &snapshot{
		byGVR:     map[schema.GroupVersionResource]int{},
		preferred: map[schema.GroupResource]int{},
		byGVK:     map[schema.GroupVersionKind][]int{},
		byGK:      map[schema.GroupKind][]int{},
		names:     map[string][]nameHit{},
		failed:    copyGroupErrors(data.failed),
		groupInfo: map[string]metav1.APIGroup{},
		serverOrd: serverOrder,
	}
	lists := make(map[schema.GroupVersion]*metav1.APIResourceList, len(data.lists))
	for _, l := range data.lists {
		if l == nil {
			continue
		}
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		lists[gv] = l
	}
	groups := make([]metav1.APIGroup, 0, len(data.groups))
	seen := map[string]bool{}
	for _, g := range data.groups {
		if g == nil || seen[g.Name] {
			continue
		}
		seen[g.Name] = true
		groups = append(groups, *g)
	}
	// A failed group that discovery no longer lists at all keeps its place
	// from the previous snapshot, at the end.
	if prev != nil {
		for gv := range data.failed {
			if g, ok := prev.groupInfo[gv.Group]; ok && !seen[gv.Group] {
				seen[gv.Group] = true
				groups = append(groups, g)
			}
		}
	}
	for rank, g := range groups {
		s.groupInfo[g.Name] = g
		versions := make([]string, 0, len(g.Versions)+1)
		if g.PreferredVersion.Version != "" {
			versions = append(versions, g.PreferredVersion.Version)
		}
		for _, v := range g.Versions {
			if !slices.Contains(versions, v.Version) {
				versions = append(versions, v.Version)
			}
		}
		for vrank, v := range versions {
			gv := schema.GroupVersion{Group: g.Name, Version: v}
			if l, ok := lists[gv]; ok {
				for _, ar := range l.APIResources {
					s.add(gv, ar, rank, vrank)
				}
				continue
			}
			if _, failed := data.failed[gv]; failed && prev != nil {
				for _, e := range prev.entries {
					if e.res.GVR.GroupVersion() == gv {
						e.groupRank, e.versionRank = rank, vrank
						s.addEntry(e)
					}
				}
			}
		}
	}
	// Preferred version of every group-resource: the lowest version rank.
	for i, e := range s.entries {
		if j, ok := s.preferred[e.gr]; !ok || e.versionRank < s.entries[j].versionRank {
			s.preferred[e.gr] = i
		}
	}
	for i, e := range s.entries {
		if s.preferred[e.gr] == i {
			s.order = append(s.order, i)
		}
	}
	s.buildTable()
	return s
}

// servesGroupVersion reports whether s has a resource of gv.
func (s *snapshot) servesGroupVersion(gv schema.GroupVersion) bool {
	for _, e := range s.entries {
		if e.res.GVR.GroupVersion() == gv {
			return true
		}
	}
	return false
}

func (s *snapshot) add(gv schema.GroupVersion, ar metav1.APIResource, groupRank, versionRank int) {
	if ar.Name == "" || strings.Contains(ar.Name, "/") {
		return // subresources are not informer targets
	}
	singular := ar.SingularName
	if singular == "" {
		singular = strings.ToLower(ar.Kind) // what kubectl guesses for servers that omit it
	}
	res := Resource{
		GVR:        gv.WithResource(ar.Name),
		GVK:        gv.WithKind(ar.Kind),
		Namespaced: ar.Namespaced,
		Verbs:      slices.Clone([]string(ar.Verbs)),
		ShortNames: slices.Clone(ar.ShortNames),
		Categories: slices.Clone(ar.Categories),
	}
	s.addEntry(entry{
		res:         res,
		singular:    strings.ToLower(singular),
		gr:          res.GVR.GroupResource(),
		groupRank:   groupRank,
		versionRank: versionRank,
		watchable:   res.Watchable(),
	})
}

func (s *snapshot) addEntry(e entry) {
	if _, dup := s.byGVR[e.res.GVR]; dup {
		return
	}
	s.entries = append(s.entries, e)
	idx := len(s.entries) - 1
	s.byGVR[e.res.GVR] = idx
	s.byGVK[e.res.GVK] = append(s.byGVK[e.res.GVK], idx)
	gk := e.res.GVK.GroupKind()
	s.byGK[gk] = append(s.byGK[gk], idx)
	s.addName(e.res.GVR.Resource, idx, className)
	if e.singular != "" {
		s.addName(e.singular, idx, className)
	}
	for _, sn := range e.res.ShortNames {
		s.addName(sn, idx, classShort)
	}
	if e.res.GVK.Kind != "" {
		s.addName(e.res.GVK.Kind, idx, classKind)
	}
}

func (s *snapshot) addName(name string, idx int, c nameClass) {
	name = strings.ToLower(name)
	for _, h := range s.names[name] {
		if h.idx == idx && h.class == c {
			return
		}
	}
	s.names[name] = append(s.names[name], nameHit{idx: idx, class: c})
}

// resolve answers a reference from the precomputed table when it can (a map
// lookup, no allocation for references typed as discovery spells them) and
// by the general rules otherwise.
func (s *snapshot) resolve(ref string) result {
	if r, ok := s.table[ref]; ok {
		return r
	}
	lower := strings.ToLower(ref)
	if lower != ref {
		if r, ok := s.table[lower]; ok {
			return r
		}
	}
	return s.resolveSlow(lower)
}

// resolveSlow applies kubectl's rules to a lower-case reference, in kubectl's
// order (k8s.io/cli-runtime's Builder.mappingFor over a ShortcutExpander and
// a PriorityRESTMapper):
//
//  1. resource.version.group, then resource.group or resource, matching
//     plural or singular names first and short names only if none matched;
//  2. Kind.version.group, then Kind.group or Kind.
//
// Within one step, candidates are reduced to the preferred served version of
// each group-resource; several group-resources left are settled by choose.
func (s *snapshot) resolveSlow(ref string) result {
	if ref == "" || strings.Contains(ref, "/") {
		return notFound
	}
	full, gr := schema.ParseResourceArg(ref)
	if full != nil {
		if r := s.match(full.Resource, full.Group, full.Version, false, className, classShort); r.answered() {
			return r
		}
	}
	if r := s.match(gr.Resource, gr.Group, "", gr.Group == "", className, classShort); r.answered() {
		return r
	}
	fullK, gk := schema.ParseKindArg(ref)
	if fullK != nil {
		if r := s.match(fullK.Kind, fullK.Group, fullK.Version, false, classKind); r.answered() {
			return r
		}
	}
	return s.match(gk.Kind, gk.Group, "", gk.Group == "", classKind)
}

// match finds the entries whose name of one of classes (tried in order, the
// first class with a hit wins) is name, in group (any group when anyGroup)
// and version (any when "").
func (s *snapshot) match(name, group, version string, anyGroup bool, classes ...nameClass) result {
	hits := s.names[name]
	if len(hits) == 0 {
		return notFound
	}
	var idxs []int
	for _, c := range classes {
		idxs = idxs[:0]
		for _, h := range hits {
			e := &s.entries[h.idx]
			if h.class != c || (!anyGroup && e.res.GVR.Group != group) || (version != "" && e.res.GVR.Version != version) {
				continue
			}
			if !slices.Contains(idxs, h.idx) {
				idxs = append(idxs, h.idx)
			}
		}
		if len(idxs) > 0 {
			return s.choose(idxs)
		}
	}
	return notFound
}

// choose keeps the best version of each group-resource among idxs and, if
// several group-resources remain, applies kubectl's group priority: the core
// group wins over every other group; among other groups, the server's group
// order decides only with WithServerGroupOrder, otherwise the answer is
// ambiguous.
func (s *snapshot) choose(idxs []int) result {
	best := make([]int, 0, len(idxs))
	for _, i := range idxs {
		e := &s.entries[i]
		replaced := false
		for k, j := range best {
			if s.entries[j].gr == e.gr {
				if e.versionRank < s.entries[j].versionRank {
					best[k] = i
				}
				replaced = true
				break
			}
		}
		if !replaced {
			best = append(best, i)
		}
	}
	if len(best) == 1 {
		return result{idx: best[0]}
	}
	slices.SortFunc(best, func(a, b int) int { return cmp.Compare(a, b) }) // discovery order
	var core []int
	for _, i := range best {
		if s.entries[i].gr.Group == "" {
			core = append(core, i)
		}
	}
	if len(core) == 1 {
		return result{idx: core[0]}
	}
	if len(core) == 0 && s.serverOrd {
		first := s.entries[best[0]].groupRank
		var same []int
		for _, i := range best {
			if s.entries[i].groupRank == first {
				same = append(same, i)
			}
		}
		if len(same) == 1 {
			return result{idx: same[0]}
		}
		best = same
	}
	if len(core) > 1 {
		best = core
	}
	return result{idx: -1, cands: best}
}

// buildTable precomputes the answer for every spelling a kubectl user is
// likely to type, so that resolving them is one map lookup: for each name
// (plural, singular, short names, kind in its own case and lower case) of
// each served version, "name", "name.group" and "name.version.group".
func (s *snapshot) buildTable() {
	s.table = make(map[string]result, len(s.entries)*12)
	tried := make(map[string]bool, len(s.entries)*12)
	try := func(key string) {
		if tried[key] {
			return
		}
		tried[key] = true
		if r := s.resolveSlow(strings.ToLower(key)); r.answered() {
			s.table[key] = r
		}
	}
	for _, e := range s.entries {
		gvr := e.res.GVR
		names := make([]string, 0, 4+len(e.res.ShortNames))
		names = append(names, gvr.Resource, e.singular)
		names = append(names, e.res.ShortNames...)
		if e.res.GVK.Kind != "" {
			names = append(names, e.res.GVK.Kind, strings.ToLower(e.res.GVK.Kind))
		}
		for _, n := range names {
			try(n)
			if gvr.Group != "" {
				try(n + "." + gvr.Group)
			}
			try(n + "." + gvr.Version + "." + gvr.Group)
		}
	}
}
