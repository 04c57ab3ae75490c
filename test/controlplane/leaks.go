package controlplane

import (
	"runtime"
	"strings"
	"time"
)

// GoroutineSnapshot records the goroutines alive at one moment, to check
// later that everything informerkit started since has ended.
//
// Only goroutines running informerkit code count: the API server in the
// test process starts and ends goroutines of its own (reflectors, context
// watchers) that cannot be told apart from client-go goroutines by their
// stacks; client-go's own informer goroutines are joined by
// SharedIndexInformer.RunWithContext, which runs on an informerkit
// goroutine, so counting informerkit goroutines covers them.
type GoroutineSnapshot map[string]bool

// SnapshotGoroutines records the goroutines alive now.
func SnapshotGoroutines() GoroutineSnapshot {
	s := GoroutineSnapshot{}
	for id := range goroutines() {
		s[id] = true
	}
	return s
}

func goroutines() map[string]string {
	buf := make([]byte, 32<<20)
	n := runtime.Stack(buf, true)
	for n == len(buf) { // truncated
		buf = make([]byte, 2*len(buf))
		n = runtime.Stack(buf, true)
	}
	out := map[string]string{}
	for _, g := range strings.Split(string(buf[:n]), "\n\n") {
		header, _, _ := strings.Cut(g, " [")
		out[header] = g
	}
	return out
}

// Leaked returns the stacks of goroutines started since the snapshot that
// are still alive and run informerkit code.
func (s GoroutineSnapshot) Leaked() []string {
	var out []string
	for id, stack := range goroutines() {
		if s[id] || strings.Contains(stack, "GoroutineSnapshot") || strings.Contains(stack, "testing.tRunner") {
			continue
		}
		// The harness's own goroutines (the proxy serving the test's pooled
		// keep-alive connections) outlive any one factory.
		if strings.Contains(stack, "github.com/informerkit/informerkit/") && !strings.Contains(stack, "informerkit/test/controlplane.") {
			out = append(out, stack)
		}
	}
	return out
}

// VerifyNoLeaks waits (up to 5 s) for the goroutines started since s to
// end, and reports those left as an error of t.
func (s GoroutineSnapshot) VerifyNoLeaks(t interface {
	Helper()
	Errorf(format string, args ...any)
}) {
	t.Helper()
	var left []string
	for i := 0; i < 100; i++ {
		if left = s.Leaked(); len(left) == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("%d goroutines leaked after Shutdown:\n%s", len(left), strings.Join(left, "\n\n"))
}
