package codec

import (
	"bytes"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	restclientwatch "k8s.io/client-go/rest/watch"

	"github.com/informerkit/informerkit/internal/decode"
)

// TestEventObjectDecodedOnce: a watch event's object is decoded with the
// event, and the object decoder of the same negotiation returns that
// object for the event's object bytes — for those very bytes only.
func TestEventObjectDecodedOnce(t *testing.T) {
	_, fast := serializers(t, decode.Options{})
	events, objects := fast.StreamSerializer.Serializer.(eventSerializer), fast.Serializer.(*serializer)
	if events.objects != objects {
		t.Fatal("the event serializer is not linked to the object serializer of its negotiation")
	}
	data := []byte(`{"type":"ADDED","object":{"kind":"Widget","apiVersion":"x/v1","metadata":{"name":"a"},"n":1}}`)
	var ev metav1.WatchEvent
	if _, _, err := events.Decode(data, nil, &ev); err != nil {
		t.Fatal(err)
	}
	kept := objects.decoded.obj
	if kept == nil {
		t.Fatal("the event's object was not decoded with the event")
	}
	raw := ev.Object.Raw
	copied := bytes.Clone(raw)
	got, kind, err := objects.Decode(raw, nil, nil)
	if err != nil || got != kept || kind.Kind != "Widget" {
		t.Fatalf("object decoder returned %p (%v, %v), want the object decoded with the event %p", got, kind, err, kept)
	}
	// Taken once: the same bytes again are decoded afresh, to an equal object.
	again, _, err := objects.Decode(raw, nil, nil)
	if err != nil || again == kept || !reflect.DeepEqual(again, kept) {
		t.Fatalf("second decode: %p %v, want a fresh object equal to %#v", again, err, kept)
	}

	// Equal bytes elsewhere, or other bytes at the same address, are not
	// the event's object.
	if _, _, err := events.Decode(data, nil, &ev); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := objects.Decode(copied, nil, nil); got == objects.decoded.obj || objects.decoded.obj == nil {
		t.Fatal("bytes at another address were taken for the event's object")
	}
	kept = objects.decoded.obj
	copy(ev.Object.Raw, bytes.Replace(ev.Object.Raw, []byte(`"n":1`), []byte(`"n":2`), 1))
	got, _, err = objects.Decode(ev.Object.Raw, nil, nil)
	if err != nil || got == kept || got.(runtime.Unstructured).UnstructuredContent()["n"] != int64(2) {
		t.Fatalf("changed bytes at the same address: got %#v (%v), want a fresh decode with n=2", got, err)
	}
}

// TestWatchDecoderTakesEventObjects: through client-go's watch decoder, as
// a watch request reads a stream, every ADDED/MODIFIED/DELETED object is
// the one decoded with its event (no second decode).
func TestWatchDecoderTakesEventObjects(t *testing.T) {
	info := jsonInfo(t, NegotiatedSerializer(dynamic.ConfigFor(&rest.Config{}).NegotiatedSerializer, decode.Options{}))
	objects := info.Serializer.(*serializer)
	var stream []byte
	for i := 0; i < 20; i++ {
		stream = append(stream, `{"type":"ADDED","object":{"kind":"Widget","apiVersion":"x/v1","metadata":{"name":"a"}}}`+"\n"...)
	}
	fr := info.StreamSerializer.Framer.NewFrameReader(nopCloser{bytes.NewReader(stream)})
	dec := restclientwatch.NewDecoder(streaming.NewDecoder(fr, info.StreamSerializer.Serializer), info.Serializer)
	for i := 0; i < 20; i++ {
		_, _, err := dec.Decode()
		if err != nil {
			t.Fatal(err)
		}
		if objects.decoded.taken != i+1 {
			t.Fatalf("event %d: %d objects taken from their events, want %d (the object was decoded twice)", i, objects.decoded.taken, i+1)
		}
	}
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }
