package codec

import (
	"hash/maphash"
	"sync"
	"unsafe"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// decodedObject hands a watch event's object, decoded together with the
// event, from the event's decoder to the object's: client-go's watch
// decoder (rest/watch.Decoder) decodes the event envelope, then passes the
// envelope's object bytes to the object decoder. It holds one object: the
// last event's. take returns it only for the very bytes it was decoded
// from — the same memory, length and content hash — so bytes that merely
// reuse a buffer's address are decoded afresh.
type decodedObject struct {
	mu   sync.Mutex // guards the fields below
	ptr  *byte
	n    int
	sum  uint64
	obj  runtime.Object
	kind schema.GroupVersionKind
	// taken counts the objects handed over (for tests).
	taken int
}

var decodedSeed = maphash.MakeSeed()

// set records obj, decoded from raw, or forgets what it held when obj is
// nil or not of a kind client-go's dynamic codec decodes to Unstructured.
func (d *decodedObject) set(raw []byte, obj map[string]interface{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ptr, d.n, d.obj = nil, 0, nil
	if len(raw) == 0 || obj == nil {
		return
	}
	kind, ok := plainKind(obj)
	if !ok {
		return
	}
	d.ptr, d.n, d.sum = unsafe.SliceData(raw), len(raw), maphash.Bytes(decodedSeed, raw)
	d.obj, d.kind = &unstructured.Unstructured{Object: obj}, kind
}

// take returns the object decoded from data, once.
func (d *decodedObject) take(data []byte) (runtime.Object, *schema.GroupVersionKind, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.obj == nil || len(data) != d.n || unsafe.SliceData(data) != d.ptr || maphash.Bytes(decodedSeed, data) != d.sum {
		return nil, nil, false
	}
	obj, kind := d.obj, d.kind
	d.ptr, d.n, d.obj = nil, 0, nil
	d.taken++
	return obj, &kind, true
}
