package access

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func permitter(f *fakeClient, list func(context.Context) ([]string, error), candidates ...string) *Permitter {
	r := NewReviewer(f)
	r.ListNamespaces = list
	return &Permitter{Reviewer: r, Group: "example.com", Resource: func() string { return "widgets" }, Namespaces: candidates, Discover: true}
}

// The permitted namespaces: all at once when the user may list and watch
// cluster-wide; else the server's namespaces by their rules reviews, or
// the candidates when namespaces cannot be listed; nothing to check is
// ErrNoNamespaces wrapping the server's 403.
func TestPermitterResolve(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "", errors.New("no"))
	listed := func(context.Context) ([]string, error) { return []string{"a", "b", "c"}, nil }
	refused := func(context.Context) ([]string, error) { return nil, forbidden }

	// Cluster-wide: answered by the one rules review of ClusterScope, or
	// (no rules reviews) by access reviews.
	wide := newFake()
	wide.setRules(ClusterScope, Rules{Resource: []Rule{grant("list", "watch")}})
	if s, err := permitter(wide, listed).Resolve(context.Background()); err != nil || !s.All {
		t.Fatalf("cluster-wide user: %+v, %v; want All", s, err)
	}
	if access, rules := wide.counts(); access != 0 || rules != 1 {
		t.Fatalf("%d access and %d rules reviews for a cluster-wide user, want 0 and 1", access, rules)
	}
	wideByAccess := newFake("/list/widgets", "/watch/widgets")
	if s, err := permitter(wideByAccess, listed).Resolve(context.Background()); err != nil || !s.All {
		t.Fatalf("cluster-wide user, no rules reviews: %+v, %v; want All", s, err)
	}
	if _, rules := wideByAccess.counts(); rules != 1 {
		t.Fatalf("%d rules reviews for a cluster-wide user without rules reviews, want the one of ClusterScope", rules)
	}

	f := newFake()
	f.setRules("a", Rules{Resource: []Rule{grant("list", "watch")}})
	f.setRules("b", Rules{Resource: []Rule{grant("list")}})
	f.setRules("c", Rules{})
	s, err := permitter(f, listed).Resolve(context.Background())
	if err != nil || s.All || !slices.Equal(s.Namespaces, []string{"a"}) || len(s.Denied) != 2 {
		t.Fatalf("from the server's namespaces: %+v, %v; want a permitted, b and c denied", s, err)
	}
	if got := s.Denied["b"].Error(); !strings.HasSuffix(got, "may not watch widgets.example.com in namespace b") {
		t.Fatalf("b denied: %q", got)
	}
	if _, rules := f.counts(); rules != 1+3 {
		t.Fatalf("%d rules reviews, want the one of ClusterScope and one per namespace", rules)
	}
	// A re-check asks again (answers from before it finished are not
	// used), and sees a grant.
	pm := permitter(f, listed)
	if _, err := pm.Resolve(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.setRules("b", Rules{Resource: []Rule{grant("list", "watch")}})
	if s, err := pm.Resolve(context.Background()); err != nil || !slices.Equal(s.Namespaces, []string{"a", "b"}) {
		t.Fatalf("re-check after a grant: %+v, %v", s, err)
	}
	if _, rules := f.counts(); rules != 3*(1+3) {
		t.Fatalf("%d rules reviews after two more resolves, want 12 (fresh answers each time)", rules)
	}
	f.setRules("b", Rules{Resource: []Rule{grant("list")}})

	s, err = permitter(f, refused, "a", "b").Resolve(context.Background())
	if err != nil || !slices.Equal(s.Namespaces, []string{"a"}) || len(s.Denied) != 1 {
		t.Fatalf("from candidates: %+v, %v", s, err)
	}
	_, err = permitter(f, refused).Resolve(context.Background())
	if !errors.Is(err, ErrNoNamespaces) || !apierrors.IsForbidden(err) {
		t.Fatalf("no candidates, namespaces refused: %v; want ErrNoNamespaces wrapping the 403", err)
	}
}

// Partial: an informer over several namespaces is granted once one of
// them is allowed.
func TestCheckerPartial(t *testing.T) {
	f := newFake()
	f.setRules("a", Rules{Resource: []Rule{grant("list", "watch")}})
	f.setRules("b", Rules{})
	granted := false
	c := &Checker{Reviewer: NewReviewer(f), Group: "example.com", Resource: func() string { return "widgets" },
		Namespaces: []string{"a", "b"}, Partial: true,
		Hooks: Hooks{Granted: func() { granted = true }, Denied: func(*DeniedError) { t.Error("Denied") }}}
	if err := c.Wait(context.Background()); err != nil || !granted {
		t.Fatalf("Wait: %v, granted %v", err, granted)
	}
	f.setRules("a", Rules{})
	denials := 0
	c.Hooks = Hooks{Denied: func(*DeniedError) { denials++ }}
	c.after = func(time.Duration) (<-chan time.Time, func() bool) { return nil, func() bool { return true } }
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	c.Reviewer = NewReviewer(f)
	if err := c.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) || denials != 1 {
		t.Fatalf("all denied: Wait %v after %d denials; want it to wait", err, denials)
	}
}
