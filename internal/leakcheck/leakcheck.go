// Package leakcheck finds goroutines a test left running. It is for the
// module's own tests.
package leakcheck

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// Snapshot records the goroutines alive now. The returned function fails
// the test if goroutines started since, whose stack mentions match (a
// package path such as "informerkit/dynamicinformer."), are still alive
// after a bounded wait (5 s). Goroutines other tests left behind do not
// count.
func Snapshot(match string) func(t testing.TB) {
	before := stacks()
	return func(t testing.TB) {
		t.Helper()
		var left []string
		for i := 0; i < 200; i++ {
			left = left[:0]
			for id, g := range stacks() {
				if _, ok := before[id]; ok || strings.Contains(g, "leakcheck.") || strings.Contains(g, "testing.tRunner") {
					continue
				}
				if strings.Contains(g, match) {
					left = append(left, g)
				}
			}
			if len(left) == 0 {
				return
			}
			time.Sleep(25 * time.Millisecond)
		}
		t.Fatalf("%d goroutines leaked:\n%s", len(left), strings.Join(left, "\n\n"))
	}
}

func stacks() map[string]string {
	buf := make([]byte, 4<<20)
	n := runtime.Stack(buf, true)
	out := map[string]string{}
	for _, g := range strings.Split(string(buf[:n]), "\n\n") {
		id, _, _ := strings.Cut(g, " [")
		out[id] = g
	}
	return out
}
