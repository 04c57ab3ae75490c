package codec

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	restclientwatch "k8s.io/client-go/rest/watch"

	"github.com/informerkit/informerkit/internal/decode"
	"github.com/informerkit/informerkit/internal/decode/decodetest"
)

// BenchmarkWatchStream decodes a watch stream of 256 ADDED events of
// server-shaped objects (about 7 KB each) as client-go's rest client does
// (framer, WatchEvent, object decoder), with client-go's dynamic
// serializer and with this package's (default options, and skipping
// managedFields). ns/op, B/op and allocs/op are per event.
func BenchmarkWatchStream(b *testing.B) {
	const n = 256
	data := addedStream(n)
	for _, c := range []struct {
		name string
		fast bool
		opts decode.Options
	}{{"client-go", false, decode.Options{}}, {"informerkit", true, decode.Options{}}, {"informerkit-skip-managedFields", true, decode.Options{SkipManagedFields: true}}} {
		b.Run(c.name, func(b *testing.B) {
			base, fast := serializers(b, c.opts)
			info := base
			if c.fast {
				info = fast
			}
			b.SetBytes(int64(len(data) / n))
			b.ReportAllocs()
			events := 0
			for b.Loop() {
				if events%n == 0 {
					fr := info.StreamSerializer.Framer.NewFrameReader(io.NopCloser(bytes.NewReader(data)))
					dec := restclientwatch.NewDecoder(streaming.NewDecoder(fr, info.StreamSerializer.Serializer), info.Serializer)
					b.StopTimer()
					cur = dec
					b.StartTimer()
				}
				if _, _, err := cur.Decode(); err != nil {
					b.Fatal(err)
				}
				events++
			}
		})
	}
}

var cur *restclientwatch.Decoder

// BenchmarkListBody decodes a list body of 500 server-shaped objects into
// an *unstructured.UnstructuredList as client-go's Result.Into does, with
// client-go's dynamic serializer and with this package's. ns/op, B/op and
// allocs/op are per item.
func BenchmarkListBody(b *testing.B) {
	const n = 500
	var body bytes.Buffer
	body.WriteString(`{"apiVersion":"example.com/v1","kind":"WidgetList","metadata":{"resourceVersion":"12345"},"items":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			body.WriteByte(',')
		}
		body.Write(decodetest.ServerObject(i))
	}
	body.WriteString("]}")
	data := body.Bytes()
	for _, c := range []struct {
		name string
		fast bool
	}{{"client-go", false}, {"informerkit", true}} {
		b.Run(c.name, func(b *testing.B) {
			base, fast := serializers(b, decode.Options{})
			info := base
			if c.fast {
				info = fast
			}
			b.ReportAllocs()
			for b.Loop() {
				var l unstructured.UnstructuredList
				if _, _, err := info.Serializer.Decode(data, nil, &l); err != nil || len(l.Items) != n {
					b.Fatal(err, len(l.Items))
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/item")
		})
	}
}

// BenchmarkObjectCBOR measures the object step of a watch event (the
// embedded object decoder, into nil) for the same server-shaped objects
// in client-go's dynamic client: JSON and CBOR (which servers can send when
// client-go's CBOR feature gates are on), beside informerkit's JSON path.
// It answers whether CBOR through client-go's decoder would beat
// informerkit's JSON decoder. client-go offers CBOR only with its
// ClientsAllowCBOR feature gate: run with KUBE_FEATURE_ClientsAllowCBOR=true
// (it skips otherwise).
func BenchmarkObjectCBOR(b *testing.B) {
	const n = 64
	base, fast := serializers(b, decode.Options{})
	var cborInfo runtime.SerializerInfo
	for _, info := range dynamic.ConfigFor(&rest.Config{}).NegotiatedSerializer.SupportedMediaTypes() {
		if info.MediaType == "application/cbor" {
			cborInfo = info
		}
	}
	if cborInfo.Serializer == nil {
		b.Skip("client-go's dynamic serializer has no CBOR entry: set KUBE_FEATURE_ClientsAllowCBOR=true")
	}
	jsonObjs, cborObjs := make([][]byte, n), make([][]byte, n)
	for i := range jsonObjs {
		jsonObjs[i] = decodetest.ServerObject(i)
		m, err := decode.Object(jsonObjs[i], decode.Options{})
		if err != nil {
			b.Fatal(err)
		}
		var buf bytes.Buffer
		if err := cborInfo.Serializer.Encode(&unstructured.Unstructured{Object: m}, &buf); err != nil {
			b.Fatal(err)
		}
		cborObjs[i] = buf.Bytes()
	}
	for _, c := range []struct {
		name string
		dec  runtime.Decoder
		objs [][]byte
	}{{"client-go-json", base.Serializer, jsonObjs}, {"client-go-cbor", cborInfo.Serializer, cborObjs}, {"informerkit-json", fast.Serializer, jsonObjs}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if _, _, err := c.dec.Decode(c.objs[i%n], nil, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFrameReader cuts a watch stream of 256 events of server-shaped
// objects (about 7 KB each) into frames, as client-go's streaming decoder
// reads them (a Read per frame into a buffer that fits it), with
// client-go's JSON framer and with this package's. ns/op is per event.
func BenchmarkFrameReader(b *testing.B) {
	const n = 256
	data := addedStream(n)
	base, fast := serializers(b, decode.Options{})
	for _, c := range []struct {
		name   string
		framer runtime.Framer
	}{{"client-go", base.StreamSerializer.Framer}, {"informerkit", fast.StreamSerializer.Framer}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(data) / n))
			buf := make([]byte, 64<<10)
			var fr io.ReadCloser
			events := 0
			for b.Loop() {
				if events%n == 0 {
					fr = c.framer.NewFrameReader(io.NopCloser(bytes.NewReader(data)))
				}
				if _, err := fr.Read(buf); err != nil {
					b.Fatal(err)
				}
				events++
			}
		})
	}
}

// addedStream is a watch stream of n ADDED events of server-shaped
// objects, one per line as the API server writes them.
func addedStream(n int) []byte {
	var stream bytes.Buffer
	for i := 0; i < n; i++ {
		fmt.Fprintf(&stream, `{"type":"ADDED","object":%s}`+"\n", decodetest.ServerObject(i))
	}
	return stream.Bytes()
}
