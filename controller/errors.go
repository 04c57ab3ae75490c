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
	// ErrNilArgument: New was given a nil factory or Reconciler, or Watch
	// a nil handle (the error names which).
	ErrNilArgument = errors.New("nil argument")
)

// Errors with details are types, tested with errors.As:
// *ReconcilePanicError and *DrainTimeoutError.

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
