package cache

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/informerkit/informerkit/internal/decode"
)

// BenchmarkCompactFromJSON measures the whole write side of compact mode
// per object, from the JSON of the performance suite's shape
// (workloadJSON, 7 KB, managedFields kept): "direct" decodes straight to
// the compact encoding (decode.TreeObject) and builds the Compact from the
// envelope; "decode+transform" decodes to maps (decode.Object) and runs
// Compactor.Transform over them, what a compact informer did before;
// "client-go" is apimachinery's decode alone, what every client-go
// informer pays per object before any transform.
func BenchmarkCompactFromJSON(b *testing.B) {
	const n = 1000
	raws := make([][]byte, n)
	for i := range raws {
		raws[i] = workloadJSON(i)
	}
	c := NewCompactor(CompactorOptions{})
	b.Run("workload-7KB/direct", func(b *testing.B) {
		b.ReportAllocs()
		done := reportCPU(b)
		for it := 0; it < b.N; it++ {
			env, err := decode.TreeObject(raws[it%n], decode.Options{})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := c.Transform(&unstructured.Unstructured{Object: env}); err != nil {
				b.Fatal(err)
			}
		}
		done()
	})
	b.Run("workload-7KB/decode+transform", func(b *testing.B) {
		b.ReportAllocs()
		done := reportCPU(b)
		for it := 0; it < b.N; it++ {
			m, err := decode.Object(raws[it%n], decode.Options{})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := c.Transform(&unstructured.Unstructured{Object: m}); err != nil {
				b.Fatal(err)
			}
		}
		done()
	})
	b.Run("workload-7KB/client-go", func(b *testing.B) {
		b.ReportAllocs()
		done := reportCPU(b)
		for it := 0; it < b.N; it++ {
			decodeUnstructured(raws[it%n])
		}
		done()
	})
}
