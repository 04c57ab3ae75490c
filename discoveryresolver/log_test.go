package discoveryresolver

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestLogsLittleAtV0: at V(0) the resolver logs only when the set of
// failing group-versions changes, with the group-versions as a key.
func TestLogsLittleAtV0(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	logger := funcr.New(func(prefix, args string) {
		mu.Lock()
		lines = append(lines, prefix+" "+args)
		mu.Unlock()
	}, funcr.Options{Verbosity: 0})
	f := newFake(cluster()...)
	r := New(f, WithLogger(logger), WithMinRefreshInterval(0))
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if err := r.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		_, _ = r.Resolve(ctx, "nosuch")
		_, _ = r.Resolve(ctx, "pods")
	}
	mu.Lock()
	if len(lines) != 0 {
		t.Fatalf("healthy rounds logged at V(0): %q", lines)
	}
	mu.Unlock()
	f.fail(schema.GroupVersion{Group: "apps", Version: "v1"}, errors.New("boom"))
	for i := 0; i < 3; i++ {
		_ = r.Refresh(ctx)
	}
	f.heal()
	_ = r.Refresh(ctx)
	mu.Lock()
	defer mu.Unlock()
	if len(lines) != 2 || !strings.Contains(lines[0], `"groupVersions"=["apps/v1"]`) || !strings.Contains(lines[1], "recovered") {
		t.Fatalf("want one line for the failure and one for the recovery, got %q", lines)
	}
}
