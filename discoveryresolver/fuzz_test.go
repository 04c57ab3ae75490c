package discoveryresolver

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// FuzzResolve feeds arbitrary references to the parser and resolver. It
// checks that nothing panics, that answers do not depend on case (kubectl
// lower-cases resources; kinds are matched ignoring case), that the
// precomputed table agrees with the general rules, and that every error is
// one of the documented kinds.
func FuzzResolve(f *testing.F) {
	for _, seed := range []string{
		"pods", "po", "Pod", "pods.v1.", "deployments.v1.apps", "Deployment.apps", "deploy.apps", "events",
		"ev.events.k8s.io", "ct", "CronTab.v1beta1.stable.example.com", "pods/status", "", ".", "..", "...",
		"a.b.c.d.e", "pods..", ".v1.apps", "Ω", "PODS", "hpa.v1.autoscaling", "x/y/z", "\x00",
	} {
		f.Add(seed)
	}
	fd := newFake(cluster()...)
	r := New(fd, WithMinRefreshInterval(0)) // a miss runs a round at once
	if err := r.Refresh(context.Background()); err != nil {
		f.Fatal(err)
	}
	s := r.snap.Load()
	f.Fuzz(func(t *testing.T, ref string) {
		got := s.resolve(ref)
		if got.found() && got.idx >= len(s.entries) {
			t.Fatalf("index %d out of range", got.idx)
		}
		for _, c := range got.cands {
			if c < 0 || c >= len(s.entries) {
				t.Fatalf("candidate %d out of range", c)
			}
		}
		lower := strings.ToLower(ref)
		if slow := s.resolveSlow(lower); slow.idx != got.idx || len(slow.cands) != len(got.cands) {
			t.Fatalf("table says %+v, rules say %+v for %q", got, slow, ref)
		}
		if other := s.resolve(strings.ToUpper(ref)); strings.ToLower(strings.ToUpper(ref)) == lower && other.idx != got.idx {
			t.Fatalf("%q and its upper case resolve differently: %+v vs %+v", ref, got, other)
		}
		res, err := r.Resolve(context.Background(), ref)
		var ae *AmbiguousError
		switch {
		case err == nil:
			if !res.Watchable() {
				t.Fatalf("Resolve(%q) returned an unwatchable resource without error", ref)
			}
		case errors.Is(err, ErrNotFound), errors.Is(err, ErrSubresource), errors.Is(err, ErrNotWatchable), errors.As(err, &ae):
		default:
			t.Fatalf("Resolve(%q): undocumented error %v", ref, err)
		}
	})
}
