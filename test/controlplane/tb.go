package controlplane

import (
	"fmt"
	"os"
	"sync"
)

// processTB implements the small testing.TB-like interface that
// k8s.io/kubernetes' StartTestServer (ktesting.TB) expects, for use outside a
// test function (TestMain, or a main package). Fatal calls panic with
// fatalError, which Start recovers into an error.
type processTB struct {
	name string
	logf func(format string, args ...any)

	mu       sync.Mutex // guards cleanups and failed
	cleanups []func()
	failed   bool
	tempDirs []string
}

type fatalError struct{ msg string }

func (tb *processTB) Attr(key, value string) {}
func (tb *processTB) Chdir(dir string)       { panic("controlplane: Chdir is not supported") }
func (tb *processTB) Cleanup(f func()) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.cleanups = append(tb.cleanups, f)
}
func (tb *processTB) Error(args ...any) { tb.markFailed(); tb.Log(args...) }
func (tb *processTB) Errorf(format string, args ...any) {
	tb.markFailed()
	tb.Logf(format, args...)
}
func (tb *processTB) Fail()    { tb.markFailed() }
func (tb *processTB) FailNow() { tb.markFailed(); panic(fatalError{msg: "FailNow"}) }
func (tb *processTB) Failed() bool {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return tb.failed
}
func (tb *processTB) Fatal(args ...any) {
	tb.markFailed()
	panic(fatalError{msg: fmt.Sprint(args...)})
}
func (tb *processTB) Fatalf(format string, args ...any) {
	tb.markFailed()
	panic(fatalError{msg: fmt.Sprintf(format, args...)})
}
func (tb *processTB) Helper()                 {}
func (tb *processTB) Log(args ...any)         { tb.logf("%s", fmt.Sprint(args...)) }
func (tb *processTB) Logf(f string, a ...any) { tb.logf(f, a...) }
func (tb *processTB) Name() string            { return tb.name }
func (tb *processTB) Setenv(k, v string) {
	old, had := os.LookupEnv(k)
	_ = os.Setenv(k, v)
	tb.Cleanup(func() {
		if had {
			_ = os.Setenv(k, old)
		} else {
			_ = os.Unsetenv(k)
		}
	})
}
func (tb *processTB) Skip(args ...any)                 { tb.Fatal(append([]any{"skip: "}, args...)...) }
func (tb *processTB) Skipf(format string, args ...any) { tb.Fatalf("skip: "+format, args...) }
func (tb *processTB) SkipNow()                         { tb.Fatal("skip") }
func (tb *processTB) Skipped() bool                    { return false }
func (tb *processTB) TempDir() string {
	dir, err := os.MkdirTemp("", "controlplane-")
	if err != nil {
		tb.Fatalf("temp dir: %v", err)
	}
	tb.mu.Lock()
	tb.tempDirs = append(tb.tempDirs, dir)
	tb.mu.Unlock()
	return dir
}

func (tb *processTB) markFailed() {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.failed = true
}

// runCleanups runs registered cleanups in reverse order, as testing does.
func (tb *processTB) runCleanups() {
	for {
		tb.mu.Lock()
		n := len(tb.cleanups)
		if n == 0 {
			dirs := tb.tempDirs
			tb.tempDirs = nil
			tb.mu.Unlock()
			for _, d := range dirs {
				_ = os.RemoveAll(d)
			}
			return
		}
		f := tb.cleanups[n-1]
		tb.cleanups = tb.cleanups[:n-1]
		tb.mu.Unlock()
		f()
	}
}
