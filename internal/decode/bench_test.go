package decode

import (
	"bytes"
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	kjson "sigs.k8s.io/json"

	"github.com/informerkit/informerkit/internal/decode/decodetest"
)

// benchInputs are 64 distinct server-shaped objects (about 7 KB each).
func benchInputs() [][]byte {
	out := make([][]byte, 64)
	for i := range out {
		out[i] = decodetest.ServerObject(i)
	}
	return out
}

// BenchmarkDecode decodes the same server-shaped objects into an
// unstructured object's map by each candidate, side by side:
//
//   - apimachinery: unstructured.UnstructuredJSONScheme into an
//     *unstructured.Unstructured (what client-go's dynamic codec runs
//     for each object, after it has found the object's kind);
//   - sigsjson: sigs.k8s.io/json's UnmarshalCaseSensitivePreserveInts
//     into a map (the core of the above);
//   - encodingjson: encoding/json with UseNumber, then apimachinery's
//     number conversion;
//   - decode, decode-skip: this package, without and with the managedFields
//     and last-applied skips.
func BenchmarkDecode(b *testing.B) {
	inputs := benchInputs()
	size := 0
	for _, in := range inputs {
		size += len(in)
	}
	run := func(name string, fn func([]byte) error) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(size / len(inputs)))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if err := fn(inputs[i%len(inputs)]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	run("apimachinery", func(in []byte) error {
		u := &unstructured.Unstructured{}
		_, _, err := unstructured.UnstructuredJSONScheme.Decode(in, nil, u)
		return err
	})
	run("sigsjson", func(in []byte) error {
		m := map[string]interface{}{}
		return kjson.UnmarshalCaseSensitivePreserveInts(in, &m)
	})
	run("encodingjson", func(in []byte) error {
		var m map[string]interface{}
		dec := json.NewDecoder(bytes.NewReader(in))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			return err
		}
		return utiljson.ConvertMapNumbers(m, 0)
	})
	run("decode", func(in []byte) error {
		_, err := Object(in, Options{})
		return err
	})
	run("decode-skip", func(in []byte) error {
		_, err := Object(in, Options{SkipManagedFields: true, SkipLastApplied: true})
		return err
	})
}
