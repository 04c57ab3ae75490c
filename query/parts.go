package query

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
)

// Part is one part of a partitioned cache, such as one cluster's cache in
// a fleet: its name and its candidates.
type Part struct {
	Name       string
	Candidates Candidates
}

// PartItem is an object of a partitioned cache with the part it comes from.
type PartItem struct {
	Part   string
	Object runtime.Object
}

// ScanParts answers q over the parts of a partitioned cache as one cache:
// the field path partField (one field name, such as "cluster") reads an
// object's part, in predicates and in OrderBy, and ties are broken by
// part, then key. Parts are read by Scan's method (filter and sort).
//
// Each part keeps its own resourceVersions, so the walk's version is one
// per part, carried in the continue token (Page.ResourceVersion is ""),
// and the paging guarantee of the package documentation holds per part.
// A part that was not there when the walk began is read without that
// bound. A token of ScanParts belongs to its partField and is
// ErrTokenMismatch elsewhere.
func ScanParts(partField string, parts []Part, q Query) (*Page[PartItem], error) {
	if partField == "" || strings.ContainsAny(partField, ".[]'\"") {
		return nil, newError(ErrInvalidPath, "partField", partField, "must be one field name")
	}
	p, err := compileWith(q, partField)
	if err != nil {
		return nil, err
	}
	seen := map[string]uint64{}
	var page []*entry
	total := 0
	for _, part := range parts {
		name := part.Name
		visit := func(obj interface{}) {
			if !p.matchesIn(obj, name) {
				return
			}
			total++
			e, ok := newPartEntry(p.orders, obj, partField, name)
			if !ok {
				return
			}
			if rv, ok := seen[name]; e.hasRV && (!ok || e.rv > rv) {
				seen[name] = e.rv
			}
			if p.admits(e) {
				page = append(page, e)
			}
		}
		if err := eachNamespace(p, part.Candidates, visit); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(page, func(a, b *entry) int { return compareEntries(p.orders, a, b) })
	more := p.limit > 0 && len(page) > p.limit
	if more {
		page = page[:p.limit]
	}
	rvs := seen
	if p.cursor != nil {
		rvs = p.cursor.rvs
	}
	out := &Page[PartItem]{Items: make([]PartItem, 0, len(page))}
	for _, e := range page {
		if o, ok := e.obj.(runtime.Object); ok {
			out.Items = append(out.Items, PartItem{Part: e.part, Object: o})
		}
	}
	if more && len(page) > 0 {
		out.Continue = encodeToken(p, page[len(page)-1], 0, false, rvs)
	}
	if p.count {
		out.Total = &total
	}
	return out, nil
}

// eachNamespace calls candidates once per namespace of p (once for all
// when p names none).
func eachNamespace(p *plan, candidates Candidates, visit func(interface{})) error {
	if len(p.namespaces) == 0 {
		return candidates("", p.selector, visit)
	}
	for _, ns := range p.namespaces {
		if err := candidates(ns, p.selector, visit); err != nil {
			return err
		}
	}
	return nil
}
