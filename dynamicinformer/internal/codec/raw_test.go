package codec

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"
	"testing/iotest"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/informerkit/informerkit/internal/decode"
)

// TestRawObjectsHoldEachEventsJSON: a watch stream read through
// RawNegotiatedSerializer decodes to exactly what NegotiatedSerializer's
// does, and each event's object can be taken, once, as the very JSON the
// stream carried, whether the frame arrived whole or a byte at a time.
func TestRawObjectsHoldEachEventsJSON(t *testing.T) {
	obj := func(i int) string {
		return fmt.Sprintf(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w-%d","namespace":"ns","resourceVersion":"%d"},"spec":{"n":%d,"x":0.5,"s":"a\"}b"}}`, i, 100+i, i)
	}
	stream := events(`{"type":"ADDED","object":`+obj(1)+`}`, `{"object":`+obj(2)+`,"type":"MODIFIED"}`,
		`{"type":"DELETED","object":`+obj(3)+`}`, bookmarkEvent, expiredEvent)
	wantRaw := map[string]string{"w-1": obj(1), "w-2": obj(2), "w-3": obj(3), "": bookmarkEvent[len(`{"type":"BOOKMARK","object":`) : len(bookmarkEvent)-1]}
	for _, oneByte := range []bool{false, true} {
		raw := NewRawObjects()
		_, plain := serializersWith(t, func(b runtime.NegotiatedSerializer) runtime.NegotiatedSerializer {
			return NegotiatedSerializer(b, decode.Options{})
		})
		_, withRaw := serializersWith(t, func(b runtime.NegotiatedSerializer) runtime.NegotiatedSerializer {
			return RawNegotiatedSerializer(b, decode.Options{}, raw)
		})
		want := readWatch(plain, stream)
		var got []decoded
		if oneByte {
			got = readWatchFrom(withRaw, iotest.OneByteReader(bytes.NewReader(stream)))
		} else {
			got = readWatch(withRaw, stream)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("decoded with raw objects:\n got %#v\nwant %#v", got, want)
		}
		if len(got) != 5 {
			t.Fatalf("%d events, want 5: %#v", len(got), got)
		}
		// Four objects (the bookmark's too); the ERROR event's Status is
		// not an object of the resource.
		if n := raw.Len(); n != 4 {
			t.Fatalf("raw holds %d objects, want 4", n)
		}
		for _, ev := range got[:4] {
			u := ev.Obj.(*unstructured.Unstructured)
			b, ok := raw.Take(u)
			if !ok {
				t.Fatalf("no raw JSON for %s", u.GetName())
			}
			if string(b) != wantRaw[u.GetName()] {
				t.Fatalf("raw JSON of %q:\n got %s\nwant %s", u.GetName(), b, wantRaw[u.GetName()])
			}
			m, err := decode.Object(b, decode.Options{})
			if err != nil || !reflect.DeepEqual(m, u.Object) {
				t.Fatalf("raw JSON of %q decodes to %v (%v), not the object %v", u.GetName(), m, err, u.Object)
			}
			if _, again := raw.Take(u); again {
				t.Fatalf("raw JSON of %q taken twice", u.GetName())
			}
		}
		if _, ok := raw.Take(&unstructured.Unstructured{Object: map[string]interface{}{}}); ok || raw.Len() != 0 {
			t.Fatalf("an object never decoded has raw JSON, or some is left (%d)", raw.Len())
		}
	}
}

// TestRawObjectsBounded: bytes nobody takes are dropped a generation
// later, the newest kept; what is held is a copy of the caller's buffer,
// and the dropped generation's buffers, reused by later copies, never
// overwrite bytes still held.
func TestRawObjectsBounded(t *testing.T) {
	raw := NewRawObjects()
	buf := make([]byte, 0, 64)
	content := func(i int) string { return fmt.Sprintf(`{"kind":"Widget","i":%d}`, i) }
	var objs []runtime.Object
	for i := 0; i < 3*rawGeneration+7; i++ {
		o := &unstructured.Unstructured{}
		objs = append(objs, o)
		buf = append(buf[:0], content(i)...)
		raw.Put(o, buf)
		if n := raw.Len(); n > 2*rawGeneration {
			t.Fatalf("after %d puts raw holds %d, more than %d", i+1, n, 2*rawGeneration)
		}
	}
	buf[2] = 'X' // the stream's buffer, reused
	if _, ok := raw.Take(objs[0]); ok {
		t.Fatal("the oldest object's bytes were not dropped")
	}
	// The current and the previous generation are held, each object's
	// own bytes: a taker a little behind finds its object.
	for i := len(objs) - rawGeneration - 7; i < len(objs); i++ {
		b, ok := raw.Take(objs[i])
		if !ok || string(b) != content(i) {
			t.Fatalf("object %d: %q %v, want %q", i, b, ok, content(i))
		}
	}
}
