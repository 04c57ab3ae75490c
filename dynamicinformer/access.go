package dynamicinformer

import (
	"context"
	"errors"

	"github.com/informerkit/informerkit/dynamicinformer/internal/access"
)

// WaitingForSlotReason is Status.Reason of a Pending informer whose first
// list waits for one of the factory's initial-list slots
// (WithMaxConcurrentInitialLists).
const WaitingForSlotReason = "waiting for an initial-list slot"

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
		Review:     e.deps.review,
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
	e.update(func() bool {
		if e.configErr != nil {
			return false
		}
		if e.accessErr == nil || e.accessErr.Error() != err.Error() {
			e.logger.Info("access check denied; no list or watch until it is granted (re-checked with back-off)", "err", err.Error())
		}
		e.accessErr = err
		if e.state == Failed && e.err != nil && e.err.Error() == ie.Error() {
			return false // the same denial again: keep the status, and its Since
		}
		return e.setLocked(Failed, ie, ErrForbidden.Error()+": "+err.Error())
	})
}

// accessGranted: the informer may list now; a denial recorded before is
// lifted (Pending until the list starts).
func (e *entry) accessGranted() {
	e.update(func() bool {
		was := e.accessErr
		e.accessErr = nil
		if was == nil {
			return false
		}
		e.logger.Info("access granted; listing")
		if e.state == Failed && errors.Is(e.err, ErrForbidden) {
			return e.setLocked(Pending, nil, "access granted; listing")
		}
		return false
	})
}

// accessUnavailable: the review itself failed; the informer lists without
// the check. Logged once per informer.
func (e *entry) accessUnavailable(err error) {
	e.logger.Info("access check could not be made; listing without it", "err", err.Error())
	e.accessGranted()
}
