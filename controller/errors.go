package controller

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Errors a caller can test with errors.Is.
var (
	// ErrStarted: Run was called twice, or Watch/Subscribe after Run.
	ErrStarted = errors.New("controller already started")
	// ErrNilReconciler: New was given a nil Reconciler.
	ErrNilReconciler = errors.New("nil reconciler")
	// ErrNilFactory: New was given a nil factory.
	ErrNilFactory = errors.New("nil informer factory")
	// ErrNilHandle: Watch was given a nil handle.
	ErrNilHandle = errors.New("nil informer handle")
	// ErrDrainTimeout: in-flight reconciles did not finish within
	// Options.DrainTimeout after Run's context ended.
	ErrDrainTimeout = errors.New("reconciles still running at the drain bound")
	// ErrReconcilePanic: what every *ReconcilePanicError matches.
	ErrReconcilePanic = errors.New("reconciler panicked")
)

// ReconcilePanicError is a panic recovered from Reconcile. It is handled
// as the reconcile's error (the key is retried with back-off) and counted
// in Stats.ReconcilePanics.
type ReconcilePanicError struct {
	Key   Key
	Value any
	Stack []byte
}

func (e *ReconcilePanicError) Error() string {
	return fmt.Sprintf("reconciler panicked on %s: %v", e.Key, e.Value)
}

// Is makes errors.Is(err, ErrReconcilePanic) true.
func (e *ReconcilePanicError) Is(target error) bool { return target == ErrReconcilePanic }

// DrainTimeoutError is Run's error when reconciles were still running at
// the drain bound. Their context has been cancelled; their workers end
// when Reconcile returns.
type DrainTimeoutError struct {
	Timeout  time.Duration
	InFlight []Key
}

func (e *DrainTimeoutError) Error() string {
	keys := make([]string, len(e.InFlight))
	for i, k := range e.InFlight {
		keys[i] = k.String()
	}
	return fmt.Sprintf("%d reconciles still running %s after shutdown began: %s", len(e.InFlight), e.Timeout, strings.Join(keys, ", "))
}

// Is makes errors.Is(err, ErrDrainTimeout) true.
func (e *DrainTimeoutError) Is(target error) bool { return target == ErrDrainTimeout }
