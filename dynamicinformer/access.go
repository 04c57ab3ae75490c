package dynamicinformer

import (
	"context"

	"github.com/informerkit/informerkit/dynamicinformer/internal/listwatch"

	"github.com/informerkit/informerkit/dynamicinformer/internal/access"
	"github.com/informerkit/informerkit/dynamicinformer/internal/lifecycle"
)

// accessCheck returns the gate's Access func for WithAccessCheck (nil:
// no check). It blocks the informer's first list until its user may list
// and watch its resource in its namespaces.
func (e *entry) accessCheck() func(context.Context) error {
	if !e.cfg.accessCheck {
		return nil
	}
	if e.deps.review == nil {
		e.logger.Info("access check skipped: the factory has no dynamic client to ask the server with")
		return nil
	}
	if e.cfg.permitted {
		return nil // the namespaces are checked at each list
	}
	if len(e.cfg.namespaces) > 1 {
		e.permit.Store(&access.Permitter{Reviewer: e.deps.review, Group: e.currentGVR().Group,
			Resource: func() string { return e.currentGVR().Resource }, Namespaces: e.cfg.namespaces})
	}
	c := &access.Checker{
		Partial:    len(e.cfg.namespaces) > 1,
		Reviewer:   e.deps.review,
		Group:      e.currentGVR().Group,
		Resource:   func() string { return e.currentGVR().Resource },
		Namespaces: e.cfg.namespaces,
		MinBackoff: e.deps.accessBackoff.min,
		MaxBackoff: e.deps.accessBackoff.max,
		Hooks: access.Hooks{
			Denied:      e.accessDenied,
			Unavailable: e.accessUnavailable,
			Granted:     e.accessGranted,
		},
	}
	return c.Wait
}

// accessDenied: the user lacks some verbs. The informer is Failed with
// ErrForbidden naming them; the first denial, and each different one, is
// logged.
func (e *entry) accessDenied(err *access.DeniedError) {
	ie := &InformerError{GVR: e.currentGVR(), Kind: ErrForbidden, Err: err}
	e.apply(lifecycle.Event{Kind: lifecycle.AccessDenied, Err: ie, Reason: ErrForbidden.Error() + ": " + err.Error(), Detail: err.Error()})
}

// accessGranted: the informer may list now; a denial recorded before is
// lifted (Pending until the list starts).
func (e *entry) accessGranted() { e.apply(lifecycle.Event{Kind: lifecycle.AccessGranted}) }

// accessUnavailable: the review itself failed; the informer lists without
// the check. Logged once per informer.
func (e *entry) accessUnavailable(err error) {
	e.logger.Info("access check could not be made; listing without it", "err", err.Error())
	e.accessGranted()
}

// resolveChecked answers the namespaces of a several-namespace informer:
// with the access check, those its user may list and watch (the others
// denied, named in Status.Denied); without it, or when the check cannot
// be made, all of them (the server's 403 decides).
func (e *entry) resolveChecked(ctx context.Context) (listwatch.NamespaceSet, error) {
	all := listwatch.NamespaceSet{Names: e.cfg.namespaces}
	p := e.permit.Load()
	if p == nil {
		return all, nil
	}
	set, err := namespaceSet(p.Resolve(ctx))
	if err != nil {
		if ctx.Err() != nil {
			return set, err
		}
		return all, nil
	}
	return set, nil
}

// namespaceSet is an access.Scope for listwatch.
func namespaceSet(s access.Scope, err error) (listwatch.NamespaceSet, error) {
	if err != nil {
		return listwatch.NamespaceSet{}, err
	}
	set := listwatch.NamespaceSet{All: s.All, Names: s.Namespaces}
	if len(s.Denied) > 0 {
		set.Denied = make(map[string]error, len(s.Denied))
		for ns, d := range s.Denied {
			set.Denied[ns] = d
		}
	}
	return set, nil
}
