package codec

import (
	"bytes"
	"testing"
)

// TestStringRun: stringRun finds the first '"' or '\\' at every offset
// from its start (inside and across eight-byte words), and the end of the
// input when there is none; bytes next to '"' and '\\' ('!', ']', '[',
// '\x22'±1, high bytes) are never taken for them.
func TestStringRun(t *testing.T) {
	fill := []byte("a!#[]\x7f\xff\xdc\x5b\x5d\x21\x23")
	for n := 0; n < 40; n++ {
		b := make([]byte, n)
		for i := range b {
			b[i] = fill[i%len(fill)]
		}
		for start := 0; start <= n && start < 3; start++ {
			if got := stringRun(b, start); got != n {
				t.Fatalf("no '\"' or '\\\\' in %q from %d: got %d, want %d", b, start, got, n)
			}
			for at := start; at < n; at++ {
				for _, c := range []byte{'"', '\\'} {
					bb := bytes.Clone(b)
					bb[at] = c
					if at+1 < n {
						bb[at+1] = '"' // a later one must not be taken
					}
					if got := stringRun(bb, start); got != at {
						t.Fatalf("%q from %d: got %d, want %d", bb, start, got, at)
					}
				}
			}
		}
	}
}
