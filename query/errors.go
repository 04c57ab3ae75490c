package query

import (
	"errors"
	"fmt"
)

// ErrInvalidQuery is wrapped by every error about a malformed query, a
// malformed continue token or a token that belongs to another query: test
// for it, or for one of the finer errors below, with errors.Is; errors.As
// with *Error gives the parameter and the input at fault.
var ErrInvalidQuery = errors.New("invalid query")

// The finer kinds of ErrInvalidQuery.
var (
	// ErrUnknownOperator: a predicate names an operator this package does not have.
	ErrUnknownOperator = fmt.Errorf("%w: unknown operator", ErrInvalidQuery)
	// ErrInvalidPath: a field path does not parse (see ParsePath).
	ErrInvalidPath = fmt.Errorf("%w: invalid field path", ErrInvalidQuery)
	// ErrInvalidValue: a value, a limit, a label selector or a parameter is malformed.
	ErrInvalidValue = fmt.Errorf("%w: invalid value", ErrInvalidQuery)
	// ErrInvalidToken: a continue token that this package did not make.
	ErrInvalidToken = fmt.Errorf("%w: invalid continue token", ErrInvalidQuery)
	// ErrTokenMismatch: a continue token made for a different query (other
	// namespaces, selector, predicates or order). The limit may change
	// between pages, and so may Count; nothing else may.
	ErrTokenMismatch = fmt.Errorf("%w: continue token of another query", ErrInvalidQuery)
)

// Error is the error of a malformed query. Kind is one of the errors above
// (errors.Is(err, ErrUnknownOperator) and so on work through it).
type Error struct {
	Kind   error  // ErrUnknownOperator, ErrInvalidPath, ErrInvalidValue, ErrInvalidToken or ErrTokenMismatch
	Param  string // the parameter at fault: "where", "orderBy", "limit", "continue", ...
	Input  string // the text at fault
	Detail string // what is wrong with it
}

func (e *Error) Error() string {
	msg := e.Kind.Error()
	if e.Param != "" {
		msg += " in " + e.Param
	}
	if e.Input != "" {
		msg += fmt.Sprintf(" %q", e.Input)
	}
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Kind }

func newError(kind error, param, input, detail string) *Error {
	return &Error{Kind: kind, Param: param, Input: input, Detail: detail}
}
