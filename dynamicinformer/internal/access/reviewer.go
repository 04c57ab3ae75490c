package access

import (
	"context"
	"sync"
	"time"
)

// DefaultMaxAge is how old a shared answer may be when an informer's
// check uses it (Reviewer.MaxAge zero).
const DefaultMaxAge = 2 * time.Second

// Reviewer shares the reviews of many informers: a question asked while
// the same one is in flight, or answered at most MaxAge ago, takes that
// answer instead of a request of its own, so informers started together
// ask each question once — one rules review per namespace, one wildcard
// access review per verb for all namespaces. Requests run on the asking
// goroutine (a Reviewer starts none). Safe for concurrent use.
type Reviewer struct {
	client Client
	// MaxAge bounds the age of a shared answer (zero: DefaultMaxAge).
	// Set before first use.
	MaxAge time.Duration
	// ListNamespaces lists the server's namespaces for Permitter (nil:
	// it cannot; an error the server's). Set before first use.
	ListNamespaces func(ctx context.Context) ([]string, error)
	now            func() time.Time

	mu      sync.Mutex // guards flights, swept, user, userAsked
	flights map[question]*flight
	swept   time.Time
	// user is the user's name ("" unknown), asked once, on the first
	// denial.
	user      string
	userAsked bool
}

// userName is the user's name for a denial, asked of the server once
// ("" if it could not be).
func (r *Reviewer) userName(ctx context.Context) string {
	r.mu.Lock()
	if r.userAsked {
		defer r.mu.Unlock()
		return r.user
	}
	r.mu.Unlock()
	name, err := r.client.User(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	if ctx.Err() == nil && !r.userAsked {
		r.userAsked = true
		if err == nil {
			r.user = name
		}
	}
	if err != nil {
		return r.user
	}
	return name
}

// NewReviewer shares client's reviews.
func NewReviewer(client Client) *Reviewer {
	return &Reviewer{client: client, now: time.Now, flights: map[question]*flight{}}
}

// question is an access review (rules false) or a rules review of
// a.Namespace (rules true, the rest empty).
type question struct {
	rules bool
	names bool // a namespace list (the rest empty)
	a     Attributes
}

// flight is one request and, once done is closed, its answer.
type flight struct {
	started time.Time
	done    chan struct{}
	allowed bool
	rules   Rules
	names   []string
	err     error
	// canceled: the asker's context ended; the answer is no one else's.
	canceled bool
}

func (r *Reviewer) maxAge() time.Duration {
	if r.MaxAge > 0 {
		return r.MaxAge
	}
	return DefaultMaxAge
}

// since is the oldest start an answer may have for a check that follows
// one finished at after (zero: a first check).
func (r *Reviewer) since(after time.Time) time.Time {
	s := r.now().Add(-r.maxAge())
	if after.After(s) {
		return after
	}
	return s
}

// ask answers q from a request started at or after since (joining one in
// flight), or makes one. With peek it only joins: nil if there is none.
func (r *Reviewer) ask(ctx context.Context, q question, since time.Time, peek bool) (*flight, error) {
	for {
		r.mu.Lock()
		f := r.flights[q]
		if f != nil && !f.started.Before(since) {
			r.mu.Unlock()
			select {
			case <-f.done:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			if f.canceled && ctx.Err() == nil {
				continue // the asker left; ask again
			}
			return f, nil
		}
		if peek {
			r.mu.Unlock()
			return nil, nil
		}
		now := r.now()
		f = &flight{started: now, done: make(chan struct{})}
		r.flights[q] = f
		r.sweepLocked(now)
		r.mu.Unlock()

		switch {
		case q.names:
			f.names, f.err = r.ListNamespaces(ctx)
		case q.rules:
			f.rules, f.err = r.client.RulesReview(ctx, q.a.Namespace)
		default:
			f.allowed, f.err = r.client.AccessReview(ctx, q.a)
		}
		if ctx.Err() != nil {
			f.canceled = true
			r.mu.Lock()
			if r.flights[q] == f {
				delete(r.flights, q)
			}
			r.mu.Unlock()
		}
		close(f.done)
		return f, nil
	}
}

// sweepLocked drops answers too old for any check, at most once per
// MaxAge.
func (r *Reviewer) sweepLocked(now time.Time) {
	age := r.maxAge()
	if now.Sub(r.swept) < age {
		return
	}
	r.swept = now
	for q, f := range r.flights {
		select {
		case <-f.done:
			if now.Sub(f.started) > age {
				delete(r.flights, q)
			}
		default:
		}
	}
}

// access answers one access review.
func (r *Reviewer) access(ctx context.Context, a Attributes, since time.Time) (bool, error) {
	f, err := r.ask(ctx, question{a: a}, since, false)
	if err != nil {
		return false, err
	}
	return f.allowed, f.err
}

// wildcard reports whether verb is allowed on every resource of every
// group in all namespaces. With peek it uses only an answer being or
// already shared (no request; false without one, and a shared error is
// no answer).
func (r *Reviewer) wildcard(ctx context.Context, verb string, since time.Time, peek bool) (bool, error) {
	f, err := r.ask(ctx, question{a: Attributes{Verb: verb, Group: "*", Resource: "*"}}, since, peek)
	switch {
	case err != nil:
		return false, err
	case f == nil || (peek && f.err != nil):
		return false, nil
	}
	return f.allowed, f.err
}

// rules answers a rules review of namespace.
func (r *Reviewer) rulesFor(ctx context.Context, namespace string, since time.Time) (Rules, error) {
	f, err := r.ask(ctx, question{rules: true, a: Attributes{Namespace: namespace}}, since, false)
	if err != nil {
		return Rules{}, err
	}
	return f.rules, f.err
}

// namespaces answers a namespace list (shared like a review).
func (r *Reviewer) namespaces(ctx context.Context, since time.Time) ([]string, error) {
	f, err := r.ask(ctx, question{names: true}, since, false)
	if err != nil {
		return nil, err
	}
	return f.names, f.err
}
