package access

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Verbs are what an informer needs, in the order they are asked.
var Verbs = []string{"list", "watch"}

// Default back-off of the re-checks after a denial: 1 s doubling to 30 s
// (the cap of client-go's reflector back-off), so a grant is noticed
// within 30 s and a user left without access costs two reviews per
// namespace every 30 s.
const (
	DefaultMinBackoff = time.Second
	DefaultMaxBackoff = 30 * time.Second
)

// ErrDenied is matched (errors.Is) by every *DeniedError.
var ErrDenied = errors.New("access denied")

// The reviews a DeniedError's answers came from.
const (
	ViaAccessReview = "SelfSubjectAccessReview"
	ViaRulesReview  = "SelfSubjectRulesReview"
)

// DeniedError says which verbs the user lacks in which namespaces.
type DeniedError struct {
	Group, Resource string
	// Missing are the questions answered "no", in namespace then verb
	// order.
	Missing []Attributes
	// Via names the reviews that answered (ViaRulesReview,
	// ViaAccessReview, or both, comma-separated).
	Via string
	// User is the user as the server names it ("" unknown).
	User string
}

// Error names the user and the missing verbs per namespace, e.g.
// `access check (SelfSubjectRulesReview): user "alice" may not list,
// watch widgets.example.com in namespace a; may not watch
// widgets.example.com in namespaces b, c` — namespaces with the same
// missing verbs are grouped.
func (e *DeniedError) Error() string {
	gr := e.Resource
	if e.Group != "" {
		gr += "." + e.Group
	}
	type group struct {
		verbs string
		ns    []string
	}
	var groups []*group
	byNS := map[string][]string{}
	var order []string
	for _, m := range e.Missing {
		if _, ok := byNS[m.Namespace]; !ok {
			order = append(order, m.Namespace)
		}
		byNS[m.Namespace] = append(byNS[m.Namespace], m.Verb)
	}
	for _, ns := range order {
		verbs := strings.Join(byNS[ns], ", ")
		i := slices.IndexFunc(groups, func(g *group) bool { return g.verbs == verbs })
		if i < 0 {
			groups = append(groups, &group{verbs: verbs})
			i = len(groups) - 1
		}
		groups[i].ns = append(groups[i].ns, ns)
	}
	var b strings.Builder
	via := e.Via
	if via == "" {
		via = ViaAccessReview
	}
	b.WriteString("access check (" + via + "): ")
	for i, g := range groups {
		if i > 0 {
			b.WriteString("; ")
		}
		if i == 0 && e.User != "" {
			b.WriteString("user " + strconv.Quote(e.User) + " ")
		}
		b.WriteString("may not " + g.verbs + " " + gr + " ")
		if len(g.ns) == 1 && g.ns[0] == "" {
			b.WriteString("in all namespaces")
			continue
		}
		if len(g.ns) == 1 {
			b.WriteString("in namespace " + g.ns[0])
		} else {
			b.WriteString("in namespaces " + strings.Join(g.ns, ", "))
		}
	}
	return b.String()
}

// Is makes errors.Is(err, ErrDenied) true.
func (e *DeniedError) Is(target error) bool { return target == ErrDenied }

// namespaces counts the namespaces of Missing.
func (e *DeniedError) namespaces() int {
	seen := map[string]bool{}
	for _, m := range e.Missing {
		seen[m.Namespace] = true
	}
	return len(seen)
}

// Verbs are the missing verbs, each once, in Verbs order.
func (e *DeniedError) Verbs() []string {
	var out []string
	for _, v := range Verbs {
		if slices.ContainsFunc(e.Missing, func(a Attributes) bool { return a.Verb == v }) {
			out = append(out, v)
		}
	}
	return out
}

// ClusterScope is the namespace a rules review is asked about to learn
// what the user may do in all namespaces. No namespace can have this name
// (a colon is not allowed in one), so no RoleBinding is in it and the
// review lists exactly the rules of the user's ClusterRoleBindings (and
// of authorizers that grant cluster-wide, such as system:masters) — the
// grants that authorize a list or watch across all namespaces. The API
// server does not validate a rules review's namespace.
const ClusterScope = "informerkit:all-namespaces"

// rulesNamespace is the namespace whose rules review answers for ns ("":
// all namespaces).
func rulesNamespace(ns string) string {
	if ns == "" {
		return ClusterScope
	}
	return ns
}

// check asks r whether the user may list and watch group/resource in
// each of namespaces (none: all namespaces), from answers started at or
// after since. A namespace is answered by its rules review when that is
// complete, else (or when it fails) by an access review per verb; all
// namespaces alike by the rules review of ClusterScope, else by an access
// review per verb, after the wildcard review (every resource of every
// group) when first (a first check; later ones use a shared wildcard
// answer only). It returns a *DeniedError if some
// answer is no, or the first review error (no answer).
func check(ctx context.Context, r *Reviewer, group, resource string, namespaces []string, since time.Time, first bool) error {
	if len(namespaces) == 0 {
		namespaces = []string{""}
	}
	var missing []Attributes
	var byRules, byAccess bool
	for _, ns := range namespaces {
		m, rules, err := checkOne(ctx, r, group, resource, ns, since, first)
		if err != nil {
			return err
		}
		if len(m) > 0 {
			byRules = byRules || rules
			byAccess = byAccess || !rules
		}
		missing = append(missing, m...)
	}
	if len(missing) == 0 {
		return nil
	}
	return denial(ctx, r, group, resource, missing, byRules, byAccess)
}

// denial is the *DeniedError of missing.
func denial(ctx context.Context, r *Reviewer, group, resource string, missing []Attributes, byRules, byAccess bool) *DeniedError {
	var via []string
	if byRules {
		via = append(via, ViaRulesReview)
	}
	if byAccess {
		via = append(via, ViaAccessReview)
	}
	return &DeniedError{Group: group, Resource: resource, Missing: missing, Via: strings.Join(via, ", "), User: r.userName(ctx)}
}

// checkOne answers one namespace ("" all) as check does: the verbs
// missing there, and whether its rules review answered (else access
// reviews did).
func checkOne(ctx context.Context, r *Reviewer, group, resource, ns string, since time.Time, first bool) (missing []Attributes, byRules bool, err error) {
	{
		rules, err := r.rulesFor(ctx, rulesNamespace(ns), since)
		if ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
		if err == nil && !rules.Incomplete {
			for _, verb := range Verbs {
				if !rules.Allows(verb, group, resource) {
					missing = append(missing, Attributes{Namespace: ns, Verb: verb, Group: group, Resource: resource})
				}
			}
			return missing, true, nil
		}
	}
	for _, verb := range Verbs {
		if ns == "" {
			all, err := r.wildcard(ctx, verb, since, !first)
			if err != nil {
				return nil, false, err
			}
			if all {
				continue
			}
		}
		a := Attributes{Namespace: ns, Verb: verb, Group: group, Resource: resource}
		allowed, err := r.access(ctx, a, since)
		if err != nil {
			return nil, false, err
		}
		if !allowed {
			missing = append(missing, a)
		}
	}
	return missing, false, nil
}

// Hooks is what Wait tells its informer. Neither may block.
type Hooks struct {
	// Denied: the user lacks some verbs; Wait re-checks after a back-off.
	// Called after every check that is denied (err may be the same).
	Denied func(err *DeniedError)
	// Unavailable: a review could not be made; Wait returns nil and the
	// informer proceeds as without the check.
	Unavailable func(err error)
	// Granted: the user may list and watch (after being denied or not).
	Granted func()
}

// Checker holds an informer until its user may list and watch its
// resource, asking through Reviewer (shared by the informers of a
// factory). The zero value of MinBackoff and MaxBackoff means the
// defaults. Fields are set before first use and not changed after.
type Checker struct {
	Reviewer   *Reviewer
	Group      string
	Resource   func() string // the resource now (an informer may follow another version; the resource name stays)
	Namespaces []string
	MinBackoff time.Duration
	MaxBackoff time.Duration
	// Partial: with several namespaces, access is granted once one of
	// them is allowed (the informer lists the allowed ones and names the
	// others: Permitter); without it, every namespace must be.
	Partial bool
	Hooks   Hooks

	// after returns a channel that fires after d (nil: time.After's
	// timer; tests record the delays instead).
	after func(d time.Duration) (<-chan time.Time, func() bool)
}

// Wait checks access, and after a denial re-checks with a back-off
// (MinBackoff doubling to MaxBackoff) until access is granted (nil), a
// review cannot be made (nil, after Hooks.Unavailable) or ctx ends
// (ctx.Err()).
func (c *Checker) Wait(ctx context.Context) error {
	lo, hi := c.MinBackoff, c.MaxBackoff
	if lo <= 0 {
		lo = DefaultMinBackoff
	}
	if hi <= 0 {
		hi = DefaultMaxBackoff
	}
	delay := lo
	var last time.Time // when the last check finished (zero: none yet)
	for {
		err := check(ctx, c.Reviewer, c.Group, c.Resource(), c.Namespaces, c.Reviewer.since(last), last.IsZero())
		last = c.Reviewer.now()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var denied *DeniedError
		if errors.As(err, &denied) && c.Partial && denied.namespaces() < len(c.Namespaces) {
			err = nil
		}
		switch {
		case err == nil:
			if c.Hooks.Granted != nil {
				c.Hooks.Granted()
			}
			return nil
		case errors.As(err, &denied):
			if c.Hooks.Denied != nil {
				c.Hooks.Denied(denied)
			}
		default:
			if c.Hooks.Unavailable != nil {
				c.Hooks.Unavailable(err)
			}
			return nil
		}
		after := c.after
		if after == nil {
			after = func(d time.Duration) (<-chan time.Time, func() bool) {
				t := time.NewTimer(d)
				return t.C, t.Stop
			}
		}
		fired, stop := after(delay)
		select {
		case <-ctx.Done():
			stop()
			return ctx.Err()
		case <-fired:
		}
		delay = min(2*delay, hi)
	}
}
