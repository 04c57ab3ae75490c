package dynamicinformer

import (
	"context"

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
	c := &access.Checker{
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
