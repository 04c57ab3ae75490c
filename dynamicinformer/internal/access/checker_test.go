package access

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/informerkit/informerkit/internal/leakcheck"
)

// fakeReview answers from a set of allowed "ns/verb" pairs and counts the
// questions.
type fakeReview struct {
	mu      sync.Mutex // guards allowed, err, asked
	allowed map[string]bool
	err     error
	asked   []Attributes
}

func (f *fakeReview) review(_ context.Context, a Attributes) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, a)
	if f.err != nil {
		return false, f.err
	}
	return f.allowed[a.Namespace+"/"+a.Verb], nil
}

func (f *fakeReview) allow(keys ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range keys {
		f.allowed[k] = true
	}
}

func (f *fakeReview) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.asked)
}

func TestCheckNamesMissingVerbsAndNamespaces(t *testing.T) {
	for _, tc := range []struct {
		name       string
		namespaces []string
		allowed    []string
		want       string // "" : allowed
		verbs      []string
	}{
		{"all allowed cluster-wide", nil, []string{"/list", "/watch"}, "", nil},
		{"nothing cluster-wide", nil, nil, "may not list, watch widgets.example.com in all namespaces", []string{"list", "watch"}},
		{"list only", nil, []string{"/list"}, "may not watch widgets.example.com in all namespaces", []string{"watch"}},
		{"namespaces grouped", []string{"a", "b", "c"}, []string{"b/list", "b/watch", "c/list"},
			"may not list, watch widgets.example.com in namespace a; may not watch widgets.example.com in namespace c", []string{"list", "watch"}},
		{"same verbs grouped", []string{"a", "b"}, []string{"a/list", "b/list"},
			"may not watch widgets.example.com in namespaces a, b", []string{"watch"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeReview{allowed: map[string]bool{}}
			f.allow(tc.allowed...)
			err := Check(context.Background(), f.review, "example.com", "widgets", tc.namespaces)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Check: %v, want nil", err)
				}
				return
			}
			var d *DeniedError
			if !errors.As(err, &d) || !errors.Is(err, ErrDenied) {
				t.Fatalf("Check: %v, want a *DeniedError", err)
			}
			if !strings.HasSuffix(err.Error(), tc.want) {
				t.Fatalf("error %q, want it to end with %q", err, tc.want)
			}
			if got := strings.Join(d.Verbs(), ","); got != strings.Join(tc.verbs, ",") {
				t.Fatalf("Verbs() = %s, want %v", got, tc.verbs)
			}
			ns := max(len(tc.namespaces), 1)
			if f.count() != 2*ns {
				t.Fatalf("%d reviews, want %d (list and watch per namespace)", f.count(), 2*ns)
			}
		})
	}
}

// Denied, re-checked on the back-off, granted: Wait returns nil; Denied
// was reported on each denial and Granted once.
func TestWaitRechecksUntilGranted(t *testing.T) {
	defer leakcheck.Snapshot("informerkit/dynamicinformer/internal/access")(t)
	f := &fakeReview{allowed: map[string]bool{}}
	var mu sync.Mutex
	var denials []string
	granted := 0
	c := &Checker{Review: f.review, Group: "example.com", Resource: func() string { return "widgets" },
		Namespaces: []string{"a"}, MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
		Hooks: Hooks{
			Denied: func(err *DeniedError) {
				mu.Lock()
				denials = append(denials, err.Error())
				n := len(denials)
				mu.Unlock()
				if n == 3 {
					f.allow("a/list", "a/watch")
				}
			},
			Granted:     func() { mu.Lock(); granted++; mu.Unlock() },
			Unavailable: func(err error) { t.Errorf("Unavailable(%v)", err) },
		}}
	if err := c.Wait(context.Background()); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(denials) != 3 || granted != 1 {
		t.Fatalf("%d denials, %d grants; want 3 and 1", len(denials), granted)
	}
	if !strings.Contains(denials[0], "may not list, watch widgets.example.com in namespace a") {
		t.Fatalf("denial %q", denials[0])
	}
	if f.count() != 8 {
		t.Fatalf("%d reviews, want 8 (4 checks of 2)", f.count())
	}
}

// The back-off doubles from MinBackoff to MaxBackoff and stays there;
// the defaults are 1 s and 30 s.
func TestWaitBacksOff(t *testing.T) {
	for _, tc := range []struct {
		name   string
		lo, hi time.Duration
		want   []time.Duration
	}{
		{"set", 10 * time.Millisecond, 40 * time.Millisecond,
			[]time.Duration{10, 20, 40, 40, 40}},
		{"defaults", 0, 0,
			[]time.Duration{1000, 2000, 4000, 8000, 16000, 30000, 30000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeReview{allowed: map[string]bool{}}
			var delays []time.Duration
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			c := &Checker{Review: f.review, Resource: func() string { return "secrets" }, MinBackoff: tc.lo, MaxBackoff: tc.hi,
				after: func(d time.Duration) (<-chan time.Time, func() bool) {
					delays = append(delays, d)
					if len(delays) == len(tc.want) {
						cancel()
						return nil, func() bool { return true } // never fires: Wait ends with ctx
					}
					fired := make(chan time.Time, 1)
					fired <- time.Time{}
					return fired, func() bool { return false }
				}}
			if err := c.Wait(ctx); !errors.Is(err, context.Canceled) {
				t.Fatalf("Wait: %v, want the context's error", err)
			}
			for i := range tc.want {
				tc.want[i] *= time.Millisecond
			}
			if !slices.Equal(delays, tc.want) {
				t.Fatalf("delays %v, want %v", delays, tc.want)
			}
			if checks := f.count() / 2; checks != len(tc.want) {
				t.Fatalf("%d checks, want one before each delay (%d)", checks, len(tc.want))
			}
		})
	}
}

// A review that fails is no answer: Wait reports it and returns nil at
// once (the informer lists as without the check).
func TestWaitProceedsWhenReviewFails(t *testing.T) {
	f := &fakeReview{allowed: map[string]bool{}, err: errors.New("the server could not find the requested resource")}
	var got error
	c := &Checker{Review: f.review, Resource: func() string { return "widgets" },
		Hooks: Hooks{Unavailable: func(err error) { got = err }, Denied: func(*DeniedError) { t.Error("Denied") }}}
	if err := c.Wait(context.Background()); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if got == nil || f.count() != 1 {
		t.Fatalf("Unavailable(%v) after %d reviews; want the error after 1", got, f.count())
	}
}
