// Package resolverhooks gives informerkit's own packages the maintenance
// calls of a discoveryresolver.Resolver that are not part of its public
// face: the factory's presence tracking invalidates the resolver on CRD
// events, asks it for a rate-limited refresh, and reads which
// group-versions failed. discoveryresolver registers them at init, so
// this package imports nothing of it.
package resolverhooks

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Maintenance is one resolver's maintenance calls.
type Maintenance interface {
	// Invalidate marks the cached discovery as outdated: the next
	// Resolve*, Resources, Match or RefreshIfStale call runs a round first
	// (or joins the one in flight), without waiting for the minimum
	// refresh interval. With gvs, the next rounds also read those
	// group-versions from their own discovery endpoints, not only from
	// the aggregated document, until the document agrees (it can lag
	// behind a resource added to an existing group-version).
	Invalidate(gvs ...schema.GroupVersion)
	// RefreshIfStale makes sure the snapshot comes from a round that
	// started at most maxAge before the call (at least the minimum refresh
	// interval), running one only if needed; concurrent callers share it.
	RefreshIfStale(ctx context.Context, maxAge time.Duration) error
	// FailedGroups returns the group-versions whose discovery failed in
	// the latest round, with their errors; the map is the caller's.
	FailedGroups() map[schema.GroupVersion]error
}

var of func(resolver any) Maintenance

// Register sets how Of reaches a resolver. discoveryresolver calls it
// from its init; nothing else may.
func Register(f func(resolver any) Maintenance) { of = f }

// Of returns the maintenance calls of resolver, a
// *discoveryresolver.Resolver (it panics on anything else).
func Of(resolver any) Maintenance { return of(resolver) }
