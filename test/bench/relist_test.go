package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/informerkit/informerkit/test/controlplane"
)

// TestRelistShort runs the relist scenario at N=300, once (10,000, 3
// runs, with INFORMERKIT_LONG), against a real API server of its own (no
// watch cache, so a compaction makes the watch answer 410). It asserts
// what the numbers rest on, never timings: RunRelist's sanity checks
// (informerkit's handler is given exactly the 10 changes; client-go's
// and WithUnchangedRelistUpdates' at least N calls) and every cell
// recorded.
func TestRelistShort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	leaks := controlplane.Parallel(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Options{Logf: t.Logf, ExtraFlags: RestartServerFlags})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	px := cp.NewProxy(t)
	n := controlplane.Sized(300, 10000)
	if v, err := strconv.Atoi(os.Getenv("INFORMERKIT_RELIST_N")); err == nil {
		n = v
	}
	res, err := RunRelist(ctx, cp.Config(), RelistConfig{
		N: n, Runs: controlplane.Sized(1, 3), Informers: px.Config(),
		Stall:   px.SetStalled,
		Cut:     func() { px.CutAll() },
		Compact: func(ctx context.Context) error { _, err := cp.Compact(ctx); return err },
		Logf:    t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	cs := fmt.Sprintf("N=%d, %d changed", n, relistChanges)
	for _, im := range RelistImpls() {
		for _, m := range []string{"handler calls", "first change", "all changes", "relist done"} {
			if v, ok := res.Median(RowRelist, cs, m, im.Name); !ok || !(v > 0) {
				t.Errorf("%s %s = %v (%v), want > 0", im.Name, m, v, ok)
			}
		}
	}
	md := res.Markdown()
	if !strings.Contains(md, RowRelist) {
		t.Errorf("table lacks %q", RowRelist)
	}
	t.Log("\n" + md)
	cp.Stop()
	leaks.VerifyNoLeaks(t)
}
