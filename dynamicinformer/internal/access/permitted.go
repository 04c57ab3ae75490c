package access

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// ErrNoNamespaces: a Permitter that may not list the server's namespaces
// was given no candidates, so it has nothing to check.
var ErrNoNamespaces = errors.New("the namespaces cannot be listed and no candidate namespaces were given")

// Scope is the namespaces an informer may list and watch its resource in.
type Scope struct {
	// All: the user may list and watch in all namespaces (one
	// cluster-wide stream; Namespaces and Denied are empty).
	All bool
	// Namespaces are the permitted namespaces, in the order asked.
	Namespaces []string
	// Denied names, per namespace not permitted, the missing verbs.
	Denied map[string]*DeniedError
}

// Equal reports whether s and o hold the same namespaces (the reasons of
// the denials are not compared).
func (s Scope) Equal(o Scope) bool {
	return s.All == o.All && slices.Equal(s.Namespaces, o.Namespaces)
}

// Permitter finds the namespaces where the user may list and watch a
// resource, with the shared answers of Reviewer. Fields are set before
// first use and not changed after.
type Permitter struct {
	Reviewer *Reviewer
	Group    string
	Resource func() string
	// Namespaces are the namespaces to check (Discover false), or the
	// candidates used when the server's namespaces cannot be listed.
	Namespaces []string
	// Discover: the user's permitted namespaces of the whole cluster:
	// All when it may list and watch in all namespaces (two access
	// reviews, after the shared wildcard ones), else each of the
	// server's namespaces (Reviewer.ListNamespaces, shared) or, if it
	// may not list them, of Namespaces, by its rules review.
	Discover bool

	mu   sync.Mutex // guards last, scope, seen
	last time.Time  // when the last Resolve finished
	// scope is the last answer (of Resolve or ResolveNamespaces; nil:
	// none yet).
	scope *Scope
	// seen: when each namespace of scope was first seen by
	// ResolveNamespaces (the zero time: by Resolve, not young).
	seen map[string]time.Time
}

// YoungFor is how long a namespace first seen by ResolveNamespaces (one
// created while running) is checked again at each ResolveNamespaces while
// denied: its RoleBindings are often created just after it.
const YoungFor = 30 * time.Second

// ResolveNamespaces answers after the server's namespaces changed (a
// namespace created or deleted), cheaply: from the last answer, with the
// namespaces gone dropped and a rules review only for the namespaces new
// since it and for young ones (first seen less than YoungFor ago) still
// denied. Without a last answer, or without Discover, it is Resolve; when
// the user may read all namespaces, the last answer (one cluster-wide
// stream sees new namespaces by itself).
func (p *Permitter) ResolveNamespaces(ctx context.Context) (Scope, error) {
	r := p.Reviewer
	p.mu.Lock()
	last := p.scope
	p.mu.Unlock()
	if last == nil || !p.Discover || r.ListNamespaces == nil {
		return p.Resolve(ctx)
	}
	if last.All {
		return *last, nil
	}
	now := r.now()
	// Answers of the last half second are shared (informers are woken
	// together); wakes are at least a second apart.
	since := now.Add(-time.Second / 2)
	names, err := r.namespaces(ctx, since)
	if err != nil {
		return Scope{}, err
	}
	p.mu.Lock()
	seen := make(map[string]time.Time, len(names))
	for _, ns := range names {
		first, ok := p.seen[ns]
		if !ok {
			first = now
		}
		seen[ns] = first
	}
	p.mu.Unlock()
	group, resource := p.Group, p.Resource()
	s := Scope{Denied: map[string]*DeniedError{}}
	for _, ns := range names {
		if slices.Contains(last.Namespaces, ns) {
			s.Namespaces = append(s.Namespaces, ns)
			continue
		}
		if d, ok := last.Denied[ns]; ok && now.Sub(seen[ns]) >= YoungFor {
			s.Denied[ns] = d
			continue
		}
		if err := s.check(ctx, r, group, resource, ns, since); err != nil {
			return Scope{}, err
		}
	}
	p.mu.Lock()
	p.scope, p.seen = &s, seen
	p.mu.Unlock()
	return s, nil
}

// remember records s, the answer of a Resolve: its namespaces are not
// young.
func (p *Permitter) remember(s Scope) {
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := make(map[string]time.Time, len(s.Namespaces)+len(s.Denied))
	for _, ns := range s.Namespaces {
		seen[ns] = p.seen[ns]
	}
	for ns := range s.Denied {
		seen[ns] = p.seen[ns]
	}
	p.scope, p.seen = &s, seen
}

// Resolve answers from answers at most Reviewer.MaxAge old and started
// after its previous Resolve finished (so a re-check sees what changed
// since; other informers' answers of the same instant are shared). An
// error is no answer (a review or the namespace list failed;
// ErrNoNamespaces, wrapping the server's 403, when there is nothing to
// check).
func (p *Permitter) Resolve(ctx context.Context) (Scope, error) {
	r := p.Reviewer
	p.mu.Lock()
	since := r.since(p.last)
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.last = r.now()
		p.mu.Unlock()
	}()
	group, resource := p.Group, p.Resource()
	candidates := p.Namespaces
	if p.Discover {
		missing, _, err := checkOne(ctx, r, group, resource, "", since, true)
		if err != nil {
			return Scope{}, err
		}
		if len(missing) == 0 {
			p.remember(Scope{All: true})
			return Scope{All: true}, nil
		}
		if r.ListNamespaces != nil {
			names, err := r.namespaces(ctx, since)
			switch {
			case err == nil:
				candidates = names
			case apierrors.IsForbidden(err) && len(candidates) > 0:
			case apierrors.IsForbidden(err):
				return Scope{}, fmt.Errorf("%w: %w", ErrNoNamespaces, err)
			default:
				return Scope{}, err
			}
		} else if len(candidates) == 0 {
			return Scope{}, ErrNoNamespaces
		}
	}
	s := Scope{Denied: map[string]*DeniedError{}}
	for _, ns := range candidates {
		if err := s.check(ctx, r, group, resource, ns, since); err != nil {
			return Scope{}, err
		}
	}
	p.remember(s)
	return s, nil
}

// check asks whether the user may list and watch resource in ns and adds
// ns to s's Namespaces or Denied accordingly.
func (s *Scope) check(ctx context.Context, r *Reviewer, group, resource, ns string, since time.Time) error {
	missing, byRules, err := checkOne(ctx, r, group, resource, ns, since, true)
	if err != nil {
		return err
	}
	if len(missing) == 0 {
		s.Namespaces = append(s.Namespaces, ns)
		return nil
	}
	s.Denied[ns] = denial(ctx, r, group, resource, missing, byRules, !byRules)
	return nil
}
