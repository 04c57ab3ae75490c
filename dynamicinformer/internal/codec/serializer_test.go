package codec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	restclientwatch "k8s.io/client-go/rest/watch"

	"github.com/informerkit/informerkit/internal/decode"
)

// jsonInfo returns the JSON SerializerInfo of n.
func jsonInfo(t testing.TB, n runtime.NegotiatedSerializer) runtime.SerializerInfo {
	t.Helper()
	for _, info := range n.SupportedMediaTypes() {
		if info.MediaType == runtime.ContentTypeJSON {
			return info
		}
	}
	t.Fatal("no JSON serializer")
	return runtime.SerializerInfo{}
}

// serializersWith returns the JSON SerializerInfo of client-go's dynamic
// negotiated serializer (base) and of wrap around it (fast).
func serializersWith(t testing.TB, wrap func(runtime.NegotiatedSerializer) runtime.NegotiatedSerializer) (base, fast runtime.SerializerInfo) {
	b := dynamic.ConfigFor(&rest.Config{}).NegotiatedSerializer
	return jsonInfo(t, b), jsonInfo(t, wrap(b))
}

func serializers(t testing.TB, opts decode.Options) (base, fast runtime.SerializerInfo) {
	return serializersWith(t, func(b runtime.NegotiatedSerializer) runtime.NegotiatedSerializer {
		return NegotiatedSerializer(b, opts)
	})
}

// objects are inputs of a watch event's object or a list body: plain
// objects, the kinds client-go's dynamic scheme types, odd kinds and
// apiVersions, lists with odd items, malformed input.
var objects = []string{
	`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"a","resourceVersion":"7"},"spec":{"n":1,"f":1.5}}`,
	`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"v"}}`,
	`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (5)","reason":"Expired","code":410}`,
	`{"kind":"Status","apiVersion":"example.com/v1","status":"Failure"}`,
	`{"kind":"Status","apiVersion":"meta.k8s.io/v1","status":"Failure","code":403,"reason":"Forbidden"}`,
	`{"kind":"WatchEvent","apiVersion":"v1","type":"ADDED"}`, `{"kind":"ListOptions","apiVersion":"v1"}`,
	`{"kind":"APIGroup","apiVersion":"v2","name":"x"}`,
	`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"resourceVersion":"9","annotations":{"k8s.io/initial-events-end":"true"}}}`,
	`{"apiVersion":"example.com/v1","kind":""}`, `{"apiVersion":"example.com/v1"}`, `{"kind":"Widget"}`, `{"kind":"Widget","apiVersion":""}`,
	`{"kind":"Widget","apiVersion":"a/b/c"}`, `{"kind":"Widget","apiVersion":"/v1"}`, `{"kind":5,"apiVersion":"v1"}`, `{"kind":"Widget","apiVersion":1}`,
	`{"kind":"Widget","apiVersion":null}`, `{"kind":null,"apiVersion":"v1"}`, `{"kind":"Widget","kind":"Gadget","apiVersion":"x/v1"}`,
	`{"kind":"WidgetList","apiVersion":"example.com/v1","metadata":{"resourceVersion":"12"},"items":[{"metadata":{"name":"a"}},{"kind":"Other","metadata":{"name":"b"}},{"apiVersion":"x/v2"},{"kind":5}]}`,
	`{"kind":"WidgetList","apiVersion":"example.com/v1","items":null}`, `{"kind":"WidgetList","apiVersion":"example.com/v1"}`,
	`{"kind":"WidgetList","apiVersion":"example.com/v1","items":[]}`, `{"kind":"WidgetList","apiVersion":"example.com/v1","items":5}`,
	`{"kind":"WidgetList","apiVersion":"example.com/v1","items":[1]}`, `{"kind":"WidgetList","apiVersion":"example.com/v1","items":[null]}`,
	`{"kind":"WidgetList","apiVersion":"example.com/v1","items":[{}],"items":[{"a":1}]}`, `{"kind":"List","apiVersion":"v1","items":[{}]}`,
	`{"kind":"WidgetList","items":[{"metadata":{"managedFields":[{"manager":"m"}],"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{}"}}}]}`,
	`{"kind":"WidgetList","apiVersion":"example.com/v1","items":[{"kind":"Widget","metadata":{"managedFields":[],"annotations":{"a":"b"}}}]}`,
	`{"kind":"Widget","apiVersion":"example.com/v1","metadata":{"managedFields":[{"manager":"m"}],"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{}"}}}`,
	`{"kind":"Widget","apiVersion":"example.com/v1","items":[1]}`,
	`null`, `[]`, `"x"`, ``, `{`, `{"kind":"Widget","apiVersion":"v1","n":1e400}`, `{"kind":"Widget","apiVersion":"v1",}`,
	"{\"kind\":\"Widget\",\"apiVersion\":\"v1\",\"s\":\"\xff\\ud800\"}",
}

var allOptions = []decode.Options{{}, {SkipManagedFields: true}, {SkipLastApplied: true}, {SkipManagedFields: true, SkipLastApplied: true}}

// transformed applies what the transforms equivalent to opts do to
// Unstructured objects (the informer applies them after decoding).
func transformed(obj runtime.Object, opts decode.Options) runtime.Object {
	strip := func(m map[string]interface{}) {
		md, _ := m["metadata"].(map[string]interface{})
		if opts.SkipManagedFields {
			delete(md, "managedFields")
		}
		if opts.SkipLastApplied {
			ann, _ := md["annotations"].(map[string]interface{})
			if _, ok := ann[decode.LastAppliedAnnotation]; ok {
				delete(ann, decode.LastAppliedAnnotation)
				if len(ann) == 0 {
					delete(md, "annotations")
				}
			}
		}
	}
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		strip(o.Object)
	case *unstructured.UnstructuredList:
		for i := range o.Items {
			strip(o.Items[i].Object)
		}
	}
	return obj
}

// compareDecodes decodes data with base (client-go's) and fast, as a
// watch event's object (into nil) and as a list body, and fails unless the
// errors agree; where both decoded, it fails unless the objects, as
// normalize makes them, and the kinds agree.
func compareDecodes(t testing.TB, data []byte, opts decode.Options, base, fast runtime.SerializerInfo,
	normalize func(want, got runtime.Object) (runtime.Object, runtime.Object)) {
	t.Helper()
	for _, asList := range []bool{false, true} {
		var wantInto, gotInto runtime.Object
		if asList {
			wantInto, gotInto = &unstructured.UnstructuredList{}, &unstructured.UnstructuredList{}
		}
		want, wantKind, wantErr := base.Serializer.Decode(data, nil, wantInto)
		got, gotKind, gotErr := fast.Serializer.Decode(data, nil, gotInto)
		if (wantErr == nil) != (gotErr == nil) || (wantErr != nil && wantErr.Error() != gotErr.Error()) {
			t.Fatalf("%q (list %v): error %v, client-go's %v", clip(data), asList, gotErr, wantErr)
		}
		if wantErr != nil {
			continue
		}
		want, got = normalize(want, got)
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotKind, wantKind) {
			t.Fatalf("%q (list %v, %+v):\n got %T %#v (%v)\nwant %T %#v (%v)", clip(data), asList, opts, got, got, gotKind, want, want, wantKind)
		}
	}
}

// checkSame decodes data with the fast and client-go's serializer, as a
// watch event's object (into nil) and as a list body, and fails unless
// objects, kinds and errors agree.
func checkSame(t testing.TB, data []byte, opts decode.Options) {
	t.Helper()
	base, fast := serializers(t, opts)
	compareDecodes(t, data, opts, base, fast, func(want, got runtime.Object) (runtime.Object, runtime.Object) {
		// The informer runs the transforms after decoding: the fast path
		// has skipped what they remove, the fallback has not.
		return transformed(want, opts), transformed(got, opts)
	})
}

func clip(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}

func TestSerializerSameAsClientGo(t *testing.T) {
	for _, in := range objects {
		for _, opts := range allOptions {
			checkSame(t, []byte(in), opts)
		}
	}
}

// FuzzSerializer compares the fast serializer with client-go's dynamic
// serializer on arbitrary input. The seed corpus runs in every go test.
func FuzzSerializer(f *testing.F) {
	for _, in := range objects {
		f.Add([]byte(in), uint8(0))
		f.Add([]byte(in), uint8(3))
	}
	f.Fuzz(func(t *testing.T, data []byte, o uint8) {
		checkSame(t, data, allOptions[o%4])
	})
}

// bookmarkEvent ends a watch-list stream's initial events; expiredEvent
// is the error a watch from a compacted resourceVersion gets.
const (
	bookmarkEvent = `{"type":"BOOKMARK","object":{"kind":"Widget","apiVersion":"example.com/v1","metadata":{"resourceVersion":"200","creationTimestamp":null,"annotations":{"k8s.io/initial-events-end":"true"}}}}`
	expiredEvent  = `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (5)","reason":"Expired","code":410}}`
)

// events renders a watch stream as the server writes it.
func events(evs ...string) []byte {
	var b bytes.Buffer
	for _, e := range evs {
		b.WriteString(e)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

type decoded struct {
	Type watch.EventType
	Obj  runtime.Object
	Err  string
}

// readWatch decodes a watch stream as client-go's rest client does
// (framer, WatchEvent, then the object) with info.
func readWatch(info runtime.SerializerInfo, stream []byte) []decoded {
	return readWatchFrom(info, bytes.NewReader(stream))
}

func readWatchFrom(info runtime.SerializerInfo, body io.Reader) []decoded {
	fr := info.StreamSerializer.Framer.NewFrameReader(io.NopCloser(body))
	dec := restclientwatch.NewDecoder(streaming.NewDecoder(fr, info.StreamSerializer.Serializer), info.Serializer)
	var out []decoded
	for {
		typ, obj, err := dec.Decode()
		if err == io.EOF {
			return out
		}
		d := decoded{Type: typ, Obj: obj}
		if err != nil {
			d.Err = err.Error()
			out = append(out, d)
			return out
		}
		out = append(out, d)
	}
}

// TestWatchStreamSameAsClientGo: a watch stream with every kind of event
// decodes to the same events with the same objects (a Status in an ERROR
// event is the same *metav1.Status).
func TestWatchStreamSameAsClientGo(t *testing.T) {
	obj := func(i int) string {
		return fmt.Sprintf(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w-%d","namespace":"ns","resourceVersion":"%d","managedFields":[{"manager":"m","operation":"Apply","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{}}}]},"spec":{"n":%d,"x":0.5}}`, i, 100+i, i)
	}
	streams := [][]byte{
		events(`{"type":"ADDED","object":`+obj(1)+`}`, `{"type":"MODIFIED","object":`+obj(2)+`}`, `{"type":"DELETED","object":`+obj(3)+`}`,
			bookmarkEvent, expiredEvent),
		events(`{"object":`+obj(4)+`,"type":"ADDED"}`, `{"type":"ADDED","type":"MODIFIED","object":`+obj(5)+`}`),
		events(`{"type":"ADDED","object":null}`),
		events(`{"type":"UPSERTED","object":` + obj(6) + `}`),
		events(`{"type":"ADDED","object":{"apiVersion":"example.com/v1","metadata":{}}}`),
		events(`{"type":"ADDED","object":`+obj(7)+`}`, `{"type":"ADDED","object":{"kind":"Widget","apiVersion":"example.com/v1","x":tru}}`),
		events(`{"type":"ADDED","object":` + strings.TrimSuffix(obj(8), "}")),
		events(`{"type":"ADDED","object":`+obj(9)+`}`, `x`, `{"type":"ADDED","object":`+obj(10)+`}`),
		events(`{"type":"ADDED","object":`+obj(9)+`}`, `[1]`),
		events(`{"type":"ADDED","object":` + obj(9) + `,}`),
		events(`{"type":"ADDED","object":` + obj(9) + `]`),
		events(`{"type":"ADDED","object":` + obj(9) + `, "extra": 1}`),
		events(`{"typ\u0065":"ADDED","object":` + obj(9) + `}`),
		events(`{"type":"ADD\u0045D","object":` + obj(9) + `}`),
		events(`{"type":5,"object":` + obj(9) + `}`),
		events(`{"Type":"ADDED","object":` + obj(9) + `}`),
		events(`{"type":"ADDED","kind":"x","object":` + obj(9) + `}`),
		events(`{"type":"ADDED","object":"a string"}`),
		events(`{"type":"ADDED","object":`+obj(9)+`}`, `{}`),
		events(`{"type":"ADDED","object":{"kind":"Widget","apiVersion":"example.com/v1","s":"}{]["}}`),
		events(`{"type":"ADDED","object":{"kind":"Widget","apiVersion":"example.com/v1","s":"\"}\\"}}`),
		events(`{"type":"ADDED","object":{"kind":"Widget","apiVersion":"example.com/v1","big":"` + strings.Repeat("x", 100000) + `"}}`),
		[]byte(`{"type":"ADDED","object":` + obj(11) + `}{"type":"MODIFIED","object":` + obj(12) + `}  ` + "\t\r\n"),
		[]byte(`{"type":"ADDED","object":` + obj(11) + `}` + "\x00"),
		[]byte(""), []byte("   "), []byte(`{"type":"ADDED"`),
	}
	for i, s := range streams {
		for _, opts := range allOptions {
			base, fast := serializers(t, opts)
			want, got := readWatch(base, s), readWatch(fast, s)
			if slow := readWatchFrom(fast, iotest.OneByteReader(bytes.NewReader(s))); !reflect.DeepEqual(slow, got) {
				t.Fatalf("stream %d read one byte at a time:\n got %#v\nwant %#v", i, slow, got)
			}
			failing := io.MultiReader(bytes.NewReader(s[:len(s)/2]), iotest.ErrReader(errors.New("connection reset")))
			wantFail, gotFail := readWatchFrom(base, failing), readWatchFrom(fast, io.MultiReader(bytes.NewReader(s[:len(s)/2]), iotest.ErrReader(errors.New("connection reset"))))
			for _, evs := range [][]decoded{wantFail, gotFail} {
				for j := range evs {
					evs[j].Obj = transformed(evs[j].Obj, opts)
				}
			}
			if !reflect.DeepEqual(gotFail, wantFail) {
				t.Fatalf("stream %d cut in the middle:\n got %#v\nwant %#v", i, gotFail, wantFail)
			}
			for j := range want {
				want[j].Obj = transformed(want[j].Obj, opts)
			}
			for j := range got {
				got[j].Obj = transformed(got[j].Obj, opts)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("stream %d (%+v):\n got %#v\nwant %#v", i, opts, got, want)
			}
		}
	}
}

// FuzzWatchStream compares a watch stream read with the fast path and
// with client-go's: events, objects and errors. The seed corpus runs in
// every go test.
func FuzzWatchStream(f *testing.F) {
	f.Add([]byte(`{"type":"ADDED","object":{"kind":"Widget","apiVersion":"x/v1","metadata":{"name":"a"}}}` + "\n" + `{"type":"DELETED","object":{"kind":"Widget","apiVersion":"x/v1"}}`))
	f.Add([]byte(`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","code":410,"reason":"Expired"}}`))
	f.Add([]byte(`{"type":"BOOKMARK","object":{"kind":"Widget","apiVersion":"x/v1","metadata":{"resourceVersion":"5","annotations":{"k8s.io/initial-events-end":"true"}}}}{"type":"ADDED","object":null}`))
	f.Add([]byte(`{"type":"ADDED","object":{"kind":"W","apiVersion":"x/v1","a":"\\\"}"}} x`))
	f.Fuzz(func(t *testing.T, stream []byte) {
		base, fast := serializers(t, decode.Options{})
		want, got := readWatch(base, stream), readWatch(fast, stream)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\n got %#v\nwant %#v", clip(stream), got, want)
		}
	})
}
