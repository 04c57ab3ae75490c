package codec

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/informerkit/informerkit/internal/decode"
)

// A watch stream is read in three steps: a framer cuts the body into one
// JSON value per event, a serializer decodes the event envelope
// (metav1.WatchEvent: type and raw object), the object decoder decodes the
// object. client-go's framer and envelope each scan the event with
// encoding/json's state machine and copy it; these scan it with a byte
// loop, copy nothing, and hand anything unusual to client-go's, so
// events, objects and errors stay client-go's. The envelope step also
// decodes the object in the same pass and leaves it for the object step
// (see decodedObject), which then does not scan the object again.

// framer is a runtime.Framer whose readers cut frames at the end of each
// top-level JSON object and leave everything else to base's reader.
type framer struct {
	base runtime.Framer
}

func (f framer) NewFrameWriter(w io.Writer) io.Writer { return f.base.NewFrameWriter(w) }

func (f framer) NewFrameReader(r io.ReadCloser) io.ReadCloser {
	return &frameReader{base: f.base, r: r, buf: make([]byte, 0, 16<<10)}
}

// frameReader returns one JSON object per Read, as client-go's JSON frame
// reader does, including its io.ErrShortBuffer contract: a frame larger
// than the caller's buffer is returned over several reads.
type frameReader struct {
	base runtime.Framer
	r    io.ReadCloser
	// buf[start:] is read but not yet returned; scanned: buf[start:scanned]
	// holds no end of frame. depth and inString are the scan's state.
	buf               []byte
	start, scanned    int
	depth             int
	inString, escaped bool
	// remaining is the rest of a frame larger than the caller's buffer.
	remaining []byte
	// fallback, once set, reads everything that follows: a value that is
	// not an object, or a read error, is client-go's reader's to report.
	fallback io.ReadCloser
	readErr  error
}

func (f *frameReader) Close() error { return f.r.Close() }

func (f *frameReader) Read(data []byte) (int, error) {
	if n := len(f.remaining); n > 0 {
		if n <= len(data) {
			copy(data, f.remaining)
			f.remaining = nil
			return n, nil
		}
		copy(data, f.remaining[:len(data)])
		f.remaining = f.remaining[len(data):]
		return len(data), io.ErrShortBuffer
	}
	if f.fallback != nil {
		return f.fallback.Read(data)
	}
	frame, ok := f.next()
	if !ok {
		// Hand what is buffered and the rest of the body to client-go's
		// reader, which reports it exactly as before.
		rest := io.MultiReader(bytes.NewReader(f.buf[f.start:]), f.rest())
		f.fallback = f.base.NewFrameReader(readCloser{rest, f.r})
		return f.fallback.Read(data)
	}
	n := copy(data, frame)
	if n < len(frame) {
		f.remaining = append([]byte(nil), frame[n:]...)
		return n, io.ErrShortBuffer
	}
	return n, nil
}

// rest reads the body after the buffer, then its read error if any.
func (f *frameReader) rest() io.Reader {
	if f.readErr != nil && f.readErr != io.EOF {
		return io.MultiReader(f.r, errReader{f.readErr})
	}
	return f.r
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

type readCloser struct {
	io.Reader
	io.Closer
}

// next returns the next frame (valid until the following call); ok false:
// the next value is not an object, or the body ended or failed first.
func (f *frameReader) next() ([]byte, bool) {
	for {
		if f.scanned == f.start {
			// Skip whitespace between frames; a frame must be an object.
			for f.start < len(f.buf) && isSpace(f.buf[f.start]) {
				f.start++
			}
			f.scanned = f.start
			if f.start < len(f.buf) && f.buf[f.start] != '{' {
				return nil, false
			}
		}
		if end, found := f.scan(); found {
			frame := f.buf[f.start:end]
			f.start, f.scanned = end, end
			return frame, true
		}
		if f.readErr != nil {
			return nil, false
		}
		f.fill()
	}
}

// scan looks for the end of the object at buf[start:], from scanned on.
// The state lives in locals while scanning (fields through f would be
// reloaded on every byte), and the bytes inside a string, most of an
// object, are skipped by stringRun, which only looks for '"' and '\\'.
func (f *frameReader) scan() (end int, found bool) {
	b := f.buf
	i := f.scanned
	depth, inString, escaped := f.depth, f.inString, f.escaped
	for i < len(b) {
		if inString {
			if escaped {
				escaped = false
				i++
			}
			i = stringRun(b, i)
			if i == len(b) {
				break
			}
			if b[i] == '\\' {
				escaped = true
			} else {
				inString = false
			}
			i++
			continue
		}
		c := b[i]
		i++
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				f.scanned, f.depth, f.inString, f.escaped = i, depth, inString, escaped
				return i, true
			}
		}
	}
	f.scanned, f.depth, f.inString, f.escaped = i, depth, inString, escaped
	return 0, false
}

// fill reads more of the body, moving unreturned bytes to the front.
func (f *frameReader) fill() {
	if f.start > 0 {
		n := copy(f.buf, f.buf[f.start:])
		f.scanned -= f.start
		f.buf, f.start = f.buf[:n], 0
	}
	if len(f.buf) == cap(f.buf) {
		f.buf = append(f.buf, make([]byte, cap(f.buf))...)[:len(f.buf)]
	}
	n, err := f.r.Read(f.buf[len(f.buf):cap(f.buf)])
	f.buf = f.buf[:len(f.buf)+n]
	if err != nil {
		f.readErr = err
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// stringRun returns the index of the first '"' or '\\' in b at or after
// i, or len(b): eight bytes at a time while none of them is either (a
// word has a zero byte, exactly, when (w-lo)&^w&hi is not zero), then
// byte by byte.
func stringRun(b []byte, i int) int {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	for ; i+8 <= len(b); i += 8 {
		w := binary.LittleEndian.Uint64(b[i:])
		q, e := w^(lo*'"'), w^(lo*'\\')
		if ((q-lo)&^q|(e-lo)&^e)&hi != 0 {
			break
		}
	}
	for i < len(b) && b[i] != '"' && b[i] != '\\' {
		i++
	}
	return i
}

// watchEventKind is the kind client-go's dynamic scheme gives
// metav1.WatchEvent.
var watchEventKind = schema.GroupVersionKind{Version: "v1", Kind: "WatchEvent"}

// eventSerializer decodes watch event envelopes into *metav1.WatchEvent
// with decode.WatchEvent, leaving every other input to base. With objects
// set (the serializer of the same negotiation, which client-go's watch
// decoder then gives the event's object), it decodes the object in the
// same pass (decode.WatchEventObject) and leaves it with objects, which
// returns it for those bytes instead of decoding them again.
type eventSerializer struct {
	runtime.Serializer
	objects *serializer
}

func (s eventSerializer) Decode(data []byte, gvk *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	ev, isEvent := into.(*metav1.WatchEvent)
	if gvk != nil || !isEvent {
		return s.Serializer.Decode(data, gvk, into)
	}
	if s.objects != nil {
		typ, object, obj, decoded := decode.WatchEventObject(data, s.objects.opts)
		s.objects.decoded.set(object, obj)
		if decoded {
			ev.Type = typ
			ev.Object = runtime.RawExtension{Raw: object}
			return ev, &watchEventKind, nil
		}
	}
	typ, object, ok, err := decode.WatchEvent(data)
	if err != nil {
		// Not JSON: client-go's frame reader would have failed on it
		// with encoding/json's error.
		var raw json.RawMessage
		if jerr := json.NewDecoder(bytes.NewReader(data)).Decode(&raw); jerr != nil {
			return nil, nil, jerr
		}
		return s.Serializer.Decode(data, gvk, into)
	}
	if !ok {
		return s.Serializer.Decode(data, gvk, into)
	}
	ev.Type = typ
	ev.Object = runtime.RawExtension{Raw: object}
	return ev, &watchEventKind, nil
}
