package decode

import (
	"reflect"
	"testing"

	"github.com/informerkit/informerkit/internal/decode/decodetest"
)

// watchEvents are whole watch events: ordinary ones, which the one pass
// must decode, and odd ones, which it may leave to WatchEvent and Object.
var watchEvents = []struct {
	data       string
	mustDecode bool
}{
	{`{"type":"ADDED","object":{"kind":"Widget","apiVersion":"x/v1","metadata":{"name":"a","managedFields":[{"manager":"m"}]},"n":1,"f":1.5}}`, true},
	{` {"object":{"kind":"Widget","apiVersion":"x/v1"} , "type" : "DELETED" } `, true},
	{`{"type":"BOOKMARK","object":{"kind":"Widget","apiVersion":"x/v1","metadata":{"resourceVersion":"5","annotations":{"k8s.io/initial-events-end":"true"}}}}`, true},
	{`{"type":"ADDED","object":null}`, true},
	{`{"type":"ADDED"}`, true},
	{`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","code":410,"reason":"Expired"}}`, true},
	{`{}`, false},
	{`{"type":"ADDED","object":{"n":1e400}}`, false},
	{`{"type":"ADDED","object":{"a":tru}}`, false},
	{`{"type":"ADDED","object":[1]}`, false},
	{`{"type":"ADDED","object":"s"}`, false},
	{`{"type":"ADDED","type":"MODIFIED","object":{}}`, false},
	{`{"type":"ADDED","object":{},"object":{"a":1}}`, false},
	{`{"typ\u0065":"ADDED","object":{}}`, false},
	{`{"type":"ADD\u0045D","object":{}}`, false},
	{`{"type":5,"object":{}}`, false},
	{`{"type":"ADDED","object":{},"extra":1}`, false},
	{`{"type":"ADDED","object":{}} x`, false},
	{`{"type":"ADDED","object":{}`, false},
	{`[1]`, false},
	{``, false},
}

// TestWatchEventObject: when the one pass decodes an event, its result is
// WatchEvent's and Object's; ordinary events are decoded in the one pass.
func TestWatchEventObject(t *testing.T) {
	server := append(append([]byte(`{"type":"MODIFIED","object":`), decodetest.ServerObject(3)...), '}')
	for _, opts := range allOptions {
		checkWatchEventObject(t, server, opts, true)
		for _, ev := range watchEvents {
			checkWatchEventObject(t, []byte(ev.data), opts, ev.mustDecode)
		}
	}
}

func checkWatchEventObject(t *testing.T, data []byte, opts Options, mustDecode bool) {
	t.Helper()
	typ, object, obj, decoded := WatchEventObject(data, opts)
	if !decoded {
		if mustDecode {
			t.Errorf("%.80q (%+v): not decoded in one pass", data, opts)
		}
		return
	}
	wantTyp, wantObject, ok, err := WatchEvent(data)
	if err != nil || !ok {
		t.Fatalf("%.80q: decoded in one pass, but WatchEvent says ok=%v err=%v", data, ok, err)
	}
	if typ != wantTyp || string(object) != string(wantObject) {
		t.Fatalf("%.80q: type %q object %.40q, WatchEvent %q %.40q", data, typ, object, wantTyp, wantObject)
	}
	var want map[string]interface{}
	if wantObject != nil {
		if want, err = Object(wantObject, opts); err != nil {
			t.Fatalf("%.80q: decoded in one pass, but Object fails: %v", data, err)
		}
	}
	if !reflect.DeepEqual(obj, want) {
		t.Fatalf("%.80q (%+v): object\n got %#v\nwant %#v", data, opts, obj, want)
	}
}

// FuzzWatchEventObject: whatever the input, a one-pass decode agrees with
// WatchEvent and Object, and nothing panics.
func FuzzWatchEventObject(f *testing.F) {
	for _, ev := range watchEvents {
		f.Add([]byte(ev.data), false)
	}
	f.Add(append(append([]byte(`{"type":"ADDED","object":`), decodetest.ServerObject(1)...), '}'), true)
	f.Fuzz(func(t *testing.T, data []byte, skip bool) {
		checkWatchEventObject(t, data, Options{SkipManagedFields: skip, SkipLastApplied: skip}, false)
	})
}
