package codec

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	ikcache "github.com/informerkit/informerkit/cache"
	"github.com/informerkit/informerkit/internal/decode"
	"github.com/informerkit/informerkit/internal/decode/decodetest"
)

// compactObjects are objects and lists with a metadata.uid, which the
// compact serializer decodes to envelopes, beside the inputs of the other
// tests (with a uid added to their metadata).
func compactObjects() []string {
	out := []string{
		string(decodetest.ServerObject(1)),
		`{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"12"},"items":[` + string(decodetest.ServerObject(2)) +
			`,{"metadata":{"name":"a","namespace":"n","uid":"u1","labels":{"x":"y"}},"data":{"k":"v"}},{"kind":"","metadata":{"uid":"u2"}},{"apiVersion":"v2","metadata":{"uid":"u3"}}]}`,
	}
	for _, s := range objects {
		out = append(out, s)
		if strings.Contains(s, `"metadata":{`) {
			out = append(out, strings.ReplaceAll(s, `"metadata":{`, `"metadata":{"uid":"u",`))
		}
	}
	return out
}

// compacted turns what a serializer returned into what a compact
// informer's cache would hold and readers would see: each Unstructured
// through a Compactor, then decoded.
func compacted(t testing.TB, obj runtime.Object, c *ikcache.Compactor) (runtime.Object, int) {
	t.Helper()
	envelopes := 0
	one := func(u *unstructured.Unstructured) map[string]interface{} {
		if _, ok := u.Object[decode.TreeKey]; ok {
			envelopes++
		}
		cp, err := c.Transform(u)
		if err != nil {
			t.Fatalf("Transform: %v", err)
		}
		d, err := cp.(*ikcache.Compact).Decode()
		if err != nil {
			t.Fatalf("Decode: %v", err)
		}
		return d.Object
	}
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		return &unstructured.Unstructured{Object: one(o)}, envelopes
	case *unstructured.UnstructuredList:
		out := &unstructured.UnstructuredList{Object: o.Object}
		for i := range o.Items {
			out.Items = append(out.Items, unstructured.Unstructured{Object: one(&o.Items[i])})
		}
		return out, envelopes
	}
	return obj, 0
}

// checkCompactSame decodes data with client-go's serializer and the
// compact one, as an object and as a list body: errors, kinds and typed
// objects agree, and Unstructured objects hold the same content once
// compacted.
func checkCompactSame(t testing.TB, data []byte, opts decode.Options) int {
	t.Helper()
	base, fast := compactSerializers(t, opts)
	c := ikcache.NewCompactor(ikcache.CompactorOptions{})
	envelopes := 0
	compareDecodes(t, data, opts, base, fast, func(want, got runtime.Object) (runtime.Object, runtime.Object) {
		want, _ = compacted(t, transformed(want, opts), c)
		got, n := compacted(t, got, c)
		envelopes += n
		return want, got
	})
	return envelopes
}

// compactSerializers returns the JSON SerializerInfo of client-go's dynamic
// negotiated serializer and of the compact one around it.
func compactSerializers(t testing.TB, opts decode.Options) (base, fast runtime.SerializerInfo) {
	return serializersWith(t, func(b runtime.NegotiatedSerializer) runtime.NegotiatedSerializer {
		return CompactNegotiatedSerializer(b, opts)
	})
}

func TestCompactSerializerSameAsClientGo(t *testing.T) {
	envelopes := 0
	for _, in := range compactObjects() {
		for _, opts := range allOptions {
			envelopes += checkCompactSame(t, []byte(in), opts)
		}
	}
	if envelopes < 40 {
		t.Errorf("only %d objects decoded to envelopes", envelopes)
	}
}

// TestCompactWatchStream: watch events through the compact serializer —
// objects as envelopes, bookmarks and Status objects as without compact
// mode.
func TestCompactWatchStream(t *testing.T) {
	obj := func(i int) string {
		return fmt.Sprintf(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w-%d","namespace":"ns","uid":"u-%d","resourceVersion":"%d"},"spec":{"n":%d,"x":0.5}}`, i, i, 100+i, i)
	}
	stream := events(`{"type":"ADDED","object":`+obj(1)+`}`, `{"type":"MODIFIED","object":`+obj(2)+`}`, `{"type":"DELETED","object":`+obj(3)+`}`,
		bookmarkEvent, expiredEvent)
	base, fast := compactSerializers(t, decode.Options{})
	want, got := readWatch(base, stream), readWatch(fast, stream)
	if len(got) != len(want) || len(got) != 5 {
		t.Fatalf("%d events, want %d (5)", len(got), len(want))
	}
	c := ikcache.NewCompactor(ikcache.CompactorOptions{})
	for i := range got {
		isEnvelope := false
		if u, ok := got[i].Obj.(*unstructured.Unstructured); ok {
			_, isEnvelope = u.Object[decode.TreeKey]
		}
		if isEnvelope != (i < 3) {
			t.Errorf("event %d (%s): envelope %v", i, got[i].Type, isEnvelope)
		}
		got[i].Obj, _ = compacted(t, got[i].Obj, c)
		want[i].Obj, _ = compacted(t, want[i].Obj, c)
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("event %d: %#v, want %#v", i, got[i], want[i])
		}
	}
}

// FuzzCompactSerializer compares the compact serializer with client-go's
// on arbitrary input.
func FuzzCompactSerializer(f *testing.F) {
	for _, in := range compactObjects() {
		f.Add([]byte(in), uint8(0))
		f.Add([]byte(in), uint8(3))
	}
	f.Fuzz(func(t *testing.T, data []byte, o uint8) {
		checkCompactSame(t, data, allOptions[o%4])
	})
}
