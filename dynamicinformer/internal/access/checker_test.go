package access

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/informerkit/informerkit/internal/leakcheck"
)

// fakeClient answers access reviews from a set of allowed
// "namespace/verb/resource" keys and rules reviews from rules per
// namespace (none: the review fails), and counts both.
type fakeClient struct {
	mu       sync.Mutex // guards the rest
	allowed  map[string]bool
	rules    map[string]Rules
	err      error         // every access review fails with it
	hold     chan struct{} // if set, reviews wait for it to close
	asked    []Attributes  // access reviews
	rulesFor []string      // rules reviews
	user     string        // "" : the user review fails
	users    int           // user reviews
}

func (f *fakeClient) User(context.Context) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.users++
	if f.user == "" {
		return "", errors.New("the server could not find the requested resource")
	}
	return f.user, nil
}

func newFake(allowed ...string) *fakeClient {
	f := &fakeClient{allowed: map[string]bool{}, rules: map[string]Rules{}}
	f.allow(allowed...)
	return f
}

func (f *fakeClient) AccessReview(ctx context.Context, a Attributes) (bool, error) {
	f.mu.Lock()
	hold := f.hold
	f.asked = append(f.asked, a)
	f.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return false, f.err
	}
	return f.allowed[a.Namespace+"/"+a.Verb+"/"+a.Resource], nil
}

func (f *fakeClient) RulesReview(_ context.Context, ns string) (Rules, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rulesFor = append(f.rulesFor, ns)
	r, ok := f.rules[ns]
	if !ok {
		return Rules{}, errors.New("the server could not find the requested resource")
	}
	return r, nil
}

func (f *fakeClient) allow(keys ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range keys {
		f.allowed[k] = true
	}
}

func (f *fakeClient) setRules(ns string, r Rules) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules[ns] = r
}

func (f *fakeClient) counts() (access, rules int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.asked), len(f.rulesFor)
}

func grant(verbs ...string) Rule {
	return Rule{Verbs: verbs, APIGroups: []string{"example.com"}, Resources: []string{"widgets"}}
}

func TestRulesAllows(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rules []Rule
		want  bool
	}{
		{"exact", []Rule{grant("list")}, true},
		{"other verb", []Rule{grant("get", "watch")}, false},
		{"all verbs", []Rule{grant("*")}, true},
		{"all groups and resources", []Rule{{Verbs: []string{"list"}, APIGroups: []string{"*"}, Resources: []string{"*"}}}, true},
		{"other group", []Rule{{Verbs: []string{"list"}, APIGroups: []string{"other.com"}, Resources: []string{"widgets"}}}, false},
		{"subresource only", []Rule{{Verbs: []string{"list"}, APIGroups: []string{"example.com"}, Resources: []string{"widgets/status"}}}, false},
		{"named objects only", []Rule{{Verbs: []string{"list"}, APIGroups: []string{"example.com"}, Resources: []string{"widgets"}, ResourceNames: []string{"w1"}}}, false},
		{"second rule", []Rule{grant("get"), grant("list")}, true},
		{"none", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := (Rules{Resource: tc.rules}).Allows("list", "example.com", "widgets"); got != tc.want {
				t.Fatalf("Allows(list) = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestParseRules(t *testing.T) {
	obj := map[string]interface{}{"status": map[string]interface{}{
		"incomplete": false,
		"resourceRules": []interface{}{
			map[string]interface{}{"verbs": []interface{}{"list", "watch"}, "apiGroups": []interface{}{"example.com"}, "resources": []interface{}{"widgets"}},
		},
	}}
	r, err := parseRules(obj)
	if err != nil || r.Incomplete || !r.Allows("watch", "example.com", "widgets") {
		t.Fatalf("parseRules = %+v, %v; want complete rules allowing watch", r, err)
	}
	obj["status"].(map[string]interface{})["evaluationError"] = "webhook: no rules"
	if r, err := parseRules(obj); err != nil || !r.Incomplete {
		t.Fatalf("with an evaluationError: %+v, %v; want incomplete", r, err)
	}
	if _, err := parseRules(map[string]interface{}{}); err == nil {
		t.Fatal("an answer without status parsed")
	}
}

func TestCheckNamesMissingVerbsAndNamespaces(t *testing.T) {
	for _, tc := range []struct {
		name       string
		namespaces []string
		allowed    []string        // access reviews
		rules      map[string]Rule // complete rules per namespace
		want       string          // "" : allowed
		verbs      []string
		access     int // access reviews made
	}{
		{"all allowed cluster-wide", nil, []string{"/list/widgets", "/watch/widgets"}, nil, "", nil, 4},
		{"wildcard", nil, []string{"/list/*", "/watch/*"}, nil, "", nil, 2},
		{"nothing cluster-wide", nil, nil, nil, "(SelfSubjectAccessReview): may not list, watch widgets.example.com in all namespaces", []string{"list", "watch"}, 4},
		{"list only", nil, []string{"/list/widgets"}, nil, "may not watch widgets.example.com in all namespaces", []string{"watch"}, 4},
		{"cluster-wide by rules", nil, nil, map[string]Rule{ClusterScope: grant("list", "watch")}, "", nil, 0},
		{"cluster-wide denied by rules", nil, nil, map[string]Rule{ClusterScope: grant("list"), "a": grant("watch")},
			"(SelfSubjectRulesReview): may not watch widgets.example.com in all namespaces", []string{"watch"}, 0},
		{"namespaces grouped, by rules", []string{"a", "b", "c"}, nil,
			map[string]Rule{"a": grant("get"), "b": grant("list", "watch"), "c": grant("list")},
			"(SelfSubjectRulesReview): may not list, watch widgets.example.com in namespace a; may not watch widgets.example.com in namespace c", []string{"list", "watch"}, 0},
		{"same verbs grouped, by access reviews (no rules)", []string{"a", "b"}, []string{"a/list/widgets", "b/list/widgets"}, nil,
			"(SelfSubjectAccessReview): may not watch widgets.example.com in namespaces a, b", []string{"watch"}, 4},
		{"both reviews", []string{"a", "b"}, []string{"b/list/widgets"}, map[string]Rule{"a": grant("list")},
			"(SelfSubjectRulesReview, SelfSubjectAccessReview): may not watch widgets.example.com in namespaces a, b", []string{"watch"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(tc.allowed...)
			for ns, r := range tc.rules {
				f.setRules(ns, Rules{Resource: []Rule{r}})
			}
			r := NewReviewer(f)
			err := check(context.Background(), r, "example.com", "widgets", tc.namespaces, r.since(time.Time{}), true)
			if access, _ := f.counts(); access != tc.access {
				t.Errorf("%d access reviews, want %d: %v", access, tc.access, f.asked)
			}
			if tc.want == "" {
				if err != nil {
					t.Fatalf("check: %v, want nil", err)
				}
				return
			}
			var d *DeniedError
			if !errors.As(err, &d) || !errors.Is(err, ErrDenied) {
				t.Fatalf("check: %v, want a *DeniedError", err)
			}
			if !strings.HasSuffix(err.Error(), tc.want) {
				t.Fatalf("error %q, want it to end with %q", err, tc.want)
			}
			if got := strings.Join(d.Verbs(), ","); got != strings.Join(tc.verbs, ",") {
				t.Fatalf("Verbs() = %s, want %v", got, tc.verbs)
			}
		})
	}
}

// Incomplete rules (an authorizer that cannot list its rules) neither
// grant nor deny: access reviews answer, even where the rules grant.
func TestIncompleteRulesAskAccessReviews(t *testing.T) {
	f := newFake("a/list/widgets")
	f.setRules("a", Rules{Resource: []Rule{grant("list", "watch")}, Incomplete: true})
	r := NewReviewer(f)
	err := check(context.Background(), r, "example.com", "widgets", []string{"a"}, r.since(time.Time{}), true)
	var d *DeniedError
	if !errors.As(err, &d) || !strings.HasSuffix(err.Error(), "(SelfSubjectAccessReview): may not watch widgets.example.com in namespace a") {
		t.Fatalf("check: %v, want watch denied by an access review", err)
	}
	if access, rules := f.counts(); access != 2 || rules != 1 {
		t.Fatalf("%d access and %d rules reviews, want 2 and 1", access, rules)
	}
}

// Informers checked together share the reviews: 50 resources in three
// namespaces cost three rules reviews; 50 resources in all namespaces
// cost the one rules review of ClusterScope, or, where rules reviews
// fail, the two wildcard access reviews for an admin.
func TestCheckersShareReviews(t *testing.T) {
	defer leakcheck.Snapshot("informerkit/dynamicinformer/internal/access")(t)
	for _, tc := range []struct {
		name           string
		namespaces     []string
		access, rules  int
		allowedByRules bool
	}{
		{"namespaced", []string{"a", "b", "c"}, 0, 3, true},
		{"all namespaces, a ClusterRole, by rules", nil, 0, 1, true},
		{"all namespaces, admin, no rules reviews", nil, 2, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake("/list/*", "/watch/*")
			all := Rules{Resource: []Rule{{Verbs: []string{"list", "watch"}, APIGroups: []string{"example.com"}, Resources: []string{"*"}}}}
			for _, ns := range tc.namespaces {
				f.setRules(ns, all)
			}
			if tc.namespaces == nil && tc.allowedByRules {
				f.setRules(ClusterScope, all)
			}
			f.hold = make(chan struct{})
			r := NewReviewer(f)
			var wg sync.WaitGroup
			errs := make(chan error, 50)
			for i := range 50 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c := &Checker{Reviewer: r, Group: "example.com", Resource: func() string { return fmt.Sprintf("r%d", i) }, Namespaces: tc.namespaces,
						Hooks: Hooks{Denied: func(err *DeniedError) { errs <- err }, Unavailable: func(err error) { errs <- err }}}
					if err := c.Wait(context.Background()); err != nil {
						errs <- err
					}
				}()
			}
			time.Sleep(20 * time.Millisecond)
			close(f.hold)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			if access, rules := f.counts(); access != tc.access || rules != tc.rules {
				t.Fatalf("%d access and %d rules reviews for 50 resources, want %d and %d", access, rules, tc.access, tc.rules)
			}
		})
	}
}

// A check whose asker leaves (its context ends) does not fail the others
// that joined it: they ask again.
func TestJoinedReviewOutlivesItsAsker(t *testing.T) {
	f := newFake("/list/widgets", "/watch/widgets")
	f.hold = make(chan struct{})
	r := NewReviewer(f)
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() { first <- check(ctx, r, "example.com", "widgets", nil, r.since(time.Time{}), false) }()
	for { // the first asker's review is in flight
		if a, _ := f.counts(); a == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	second := make(chan error, 1)
	go func() {
		second <- check(context.Background(), r, "example.com", "widgets", nil, r.since(time.Time{}), false)
	}()
	time.Sleep(10 * time.Millisecond) // the second joins
	f.mu.Lock()
	f.hold = nil // the first review still waits for the old hold
	f.mu.Unlock()
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("first check: %v, want its context's error", err)
	}
	if err := <-second; err != nil {
		t.Fatalf("second check: %v, want it allowed", err)
	}
	if a, _ := f.counts(); a != 3 {
		t.Fatalf("%d access reviews, want 3 (the first asker's list, then the second's own list and watch)", a)
	}
}

// Denied, re-checked on the back-off, granted: Wait returns nil; Denied
// was reported on each denial and Granted once. Each re-check asks
// anew, though the denial's answers are younger than MaxAge.
func TestWaitRechecksUntilGranted(t *testing.T) {
	defer leakcheck.Snapshot("informerkit/dynamicinformer/internal/access")(t)
	f := newFake()
	f.setRules("a", Rules{})
	var mu sync.Mutex
	var denials []string
	granted := 0
	r := NewReviewer(f)
	r.MaxAge = time.Hour
	c := &Checker{Reviewer: r, Group: "example.com", Resource: func() string { return "widgets" },
		Namespaces: []string{"a"}, MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
		Hooks: Hooks{
			Denied: func(err *DeniedError) {
				mu.Lock()
				denials = append(denials, err.Error())
				n := len(denials)
				mu.Unlock()
				if n == 3 {
					f.setRules("a", Rules{Resource: []Rule{grant("list", "watch")}})
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
	if access, rules := f.counts(); access != 0 || rules != 4 {
		t.Fatalf("%d access and %d rules reviews, want 0 and 4 (one per check)", access, rules)
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
			f := newFake()
			var delays []time.Duration
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			c := &Checker{Reviewer: NewReviewer(f), Resource: func() string { return "secrets" }, MinBackoff: tc.lo, MaxBackoff: tc.hi,
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
			// The first check asks the wildcard reviews too.
			if access, _ := f.counts(); access != 2*len(tc.want)+2 {
				t.Fatalf("%d access reviews, want two per check (%d) and the wildcard's two", access, len(tc.want))
			}
		})
	}
}

// A review that fails is no answer: Wait reports it and returns nil at
// once (the informer lists as without the check).
func TestWaitProceedsWhenReviewFails(t *testing.T) {
	f := newFake()
	f.err = errors.New("the server could not find the requested resource")
	var got error
	c := &Checker{Reviewer: NewReviewer(f), Resource: func() string { return "widgets" },
		Hooks: Hooks{Unavailable: func(err error) { got = err }, Denied: func(*DeniedError) { t.Error("Denied") }}}
	if err := c.Wait(context.Background()); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if access, _ := f.counts(); got == nil || access != 1 {
		t.Fatalf("Unavailable(%v) after %d reviews; want the error after 1", got, access)
	}
}

// A denial names the user as the server does, asked once for all
// denials; a server that cannot say leaves the name out.
func TestDenialNamesTheUser(t *testing.T) {
	f := newFake()
	f.user = "alice"
	r := NewReviewer(f)
	for _, res := range []string{"widgets", "gadgets"} {
		err := check(context.Background(), r, "example.com", res, nil, r.since(time.Time{}), true)
		want := `access check (SelfSubjectAccessReview): user "alice" may not list, watch ` + res + ".example.com in all namespaces"
		if err == nil || err.Error() != want {
			t.Fatalf("check: %v, want %q", err, want)
		}
	}
	if f.users != 1 {
		t.Fatalf("%d user reviews, want 1", f.users)
	}
	anon := newFake()
	r = NewReviewer(anon)
	err := check(context.Background(), r, "example.com", "widgets", nil, r.since(time.Time{}), true)
	if want := "access check (SelfSubjectAccessReview): may not list, watch widgets.example.com in all namespaces"; err == nil || err.Error() != want {
		t.Fatalf("check without a user review: %v, want %q", err, want)
	}
}
