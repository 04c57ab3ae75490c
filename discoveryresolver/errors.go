package discoveryresolver

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Sentinel errors. Test for them with errors.Is; the resolver returns them
// wrapped in a *ResolveError that names the reference.
var (
	// ErrNotFound means no served resource matches the reference in a
	// discovery round that started after the call. When some group-versions
	// failed discovery, the error also wraps a *GroupDiscoveryError: the
	// resource may be served by one of them. When no such round could answer
	// (the caller's ctx ended while waiting for it, or discovery failed as a
	// whole), the error wraps that error too, and the answer comes from an
	// older snapshot.
	ErrNotFound = errors.New("no served resource matches")

	// ErrNotWatchable means the resource exists but does not support both the
	// list and watch verbs, so no informer can be built for it (for example
	// "bindings" or "tokenreviews"). The Resource is returned alongside.
	ErrNotWatchable = errors.New("resource does not support list and watch")

	// ErrSubresource means the reference names a subresource ("pods/status",
	// "deployments/scale"). Subresources are not informer targets.
	ErrSubresource = errors.New("subresources cannot be watched by an informer")
)

// ResolveError reports why a reference could not be resolved. Err is one of
// ErrNotFound, ErrNotWatchable, ErrSubresource, a *GroupDiscoveryError, a
// discovery (network) error, or a join of several of them; use errors.Is and
// errors.As rather than comparing Err.
type ResolveError struct {
	// Ref is the reference as the caller gave it: the string passed to
	// Resolve, or the String() of the GroupVersionResource passed to
	// ResolveGVR.
	Ref string
	// Err is the cause.
	Err error
}

func (e *ResolveError) Error() string {
	return fmt.Sprintf("discoveryresolver: resolve %q: %v", e.Ref, e.Err)
}

// Unwrap returns the cause.
func (e *ResolveError) Unwrap() error { return e.Err }

// AmbiguousError means several resources match a reference and the resolver
// will not choose among them (see the package documentation for the rules).
// Qualify the reference with a group ("gateways.gateway.networking.k8s.io")
// to choose. Candidates is the caller's to keep and modify.
type AmbiguousError struct {
	Ref        string
	Candidates []Resource // the preferred version of each candidate, in discovery order
}

func (e *AmbiguousError) Error() string {
	names := make([]string, len(e.Candidates))
	for i, c := range e.Candidates {
		names[i] = c.GVR.Resource + "." + c.GVR.Version + "." + c.GVR.Group
		if c.GVR.Group == "" {
			names[i] = c.GVR.Resource + "." + c.GVR.Version + "."
		}
	}
	return fmt.Sprintf("discoveryresolver: %q is ambiguous: it matches %s", e.Ref, strings.Join(names, ", "))
}

// GroupDiscoveryError reports the group-versions whose discovery failed in a
// refresh that otherwise succeeded (an aggregated API server that is down,
// say). Resources of other group-versions were refreshed; a failed
// group-version keeps the resources it had in the previous successful
// refresh, if any. Groups is the caller's to keep and modify.
type GroupDiscoveryError struct {
	Groups map[schema.GroupVersion]error
}

func (e *GroupDiscoveryError) Error() string {
	parts := make([]string, 0, len(e.Groups))
	for gv, err := range e.Groups {
		parts = append(parts, fmt.Sprintf("%s: %v", gv, err))
	}
	sort.Strings(parts)
	return "discoveryresolver: discovery failed for " + strings.Join(parts, "; ")
}

func copyGroupErrors(m map[schema.GroupVersion]error) map[schema.GroupVersion]error {
	if len(m) == 0 {
		return nil
	}
	out := make(map[schema.GroupVersion]error, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
