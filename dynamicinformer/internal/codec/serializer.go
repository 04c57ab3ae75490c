package codec

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/informerkit/informerkit/internal/decode"
)

// typedKinds are the kinds client-go's dynamic client decodes to typed
// objects rather than Unstructured: every kind of its scheme (metav1's
// types in version v1, among them Status), whatever the apiVersion,
// because some are unversioned. Objects of these kinds go to the wrapped
// decoder.
var typedKinds = func() map[string]bool {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	kinds := map[string]bool{}
	for gvk := range s.AllKnownTypes() {
		kinds[gvk.Kind] = true
	}
	return kinds
}()

// NegotiatedSerializer wraps base (client-go's dynamic serializer,
// dynamic.ConfigFor(cfg).NegotiatedSerializer): its JSON decoder takes the
// fast path for Unstructured objects and lists, everything else is base's.
func NegotiatedSerializer(base runtime.NegotiatedSerializer, opts decode.Options) runtime.NegotiatedSerializer {
	return &negotiated{base: base, opts: opts}
}

// CompactNegotiatedSerializer is NegotiatedSerializer for informers whose
// transform ends in a cache.Compactor: objects with a metadata.uid (never
// Status objects, bookmarks or typed kinds) decode to compact envelopes
// (decode.TreeObject), which only that Compactor may see — it turns each
// into a *cache.Compact before the informer's store or handlers.
func CompactNegotiatedSerializer(base runtime.NegotiatedSerializer, opts decode.Options) runtime.NegotiatedSerializer {
	return &negotiated{base: base, opts: opts, compact: true}
}

// RawNegotiatedSerializer is NegotiatedSerializer that also leaves the
// JSON of each watch event's object it decodes in raw, for whoever
// receives the object (RawObjects.Take).
func RawNegotiatedSerializer(base runtime.NegotiatedSerializer, opts decode.Options, raw *RawObjects) runtime.NegotiatedSerializer {
	return &negotiated{base: base, opts: opts, raw: raw}
}

type negotiated struct {
	base    runtime.NegotiatedSerializer
	opts    decode.Options
	compact bool
	raw     *RawObjects
}

func (n *negotiated) SupportedMediaTypes() []runtime.SerializerInfo {
	infos := n.base.SupportedMediaTypes()
	out := make([]runtime.SerializerInfo, len(infos))
	for i, info := range infos {
		if info.MediaType == runtime.ContentTypeJSON && info.Serializer != nil {
			objects := &serializer{Serializer: info.Serializer, opts: n.opts, compact: n.compact, raw: n.raw}
			info.Serializer = objects
			if ss := info.StreamSerializer; ss != nil && ss.Serializer != nil && ss.Framer != nil {
				events := eventSerializer{Serializer: ss.Serializer}
				if !n.compact {
					events.objects = objects
				}
				info.StreamSerializer = &runtime.StreamSerializerInfo{
					EncodesAsText: ss.EncodesAsText,
					Serializer:    events,
					Framer:        framer{ss.Framer},
				}
			}
		}
		out[i] = info
	}
	return out
}

func (n *negotiated) EncoderForVersion(e runtime.Encoder, gv runtime.GroupVersioner) runtime.Encoder {
	return n.base.EncoderForVersion(e, gv)
}

func (n *negotiated) DecoderToVersion(d runtime.Decoder, gv runtime.GroupVersioner) runtime.Decoder {
	return n.base.DecoderToVersion(d, gv)
}

// serializer is base's JSON serializer with a fast Decode.
type serializer struct {
	runtime.Serializer
	opts    decode.Options
	compact bool // decode objects to compact envelopes where possible
	// decoded is a watch event's object that its eventSerializer decoded
	// in the same pass as the event: client-go's watch decoder asks for
	// the object next, with the event's object bytes.
	decoded decodedObject
	// raw, if set, receives each watch event object's JSON.
	raw *RawObjects
}

// Decode decodes a watch event's object (into nil) or a list body (into an
// empty *unstructured.UnstructuredList) on the fast path, and everything
// else with the wrapped serializer.
func (s *serializer) Decode(data []byte, gvk *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if gvk == nil {
		switch into := into.(type) {
		case nil:
			obj, kind, ok := s.decoded.take(data)
			if !ok {
				obj, kind, ok = s.object(data)
			}
			if ok {
				if s.raw != nil {
					s.raw.Put(obj, data)
				}
				return obj, kind, nil
			}
		case *unstructured.UnstructuredList:
			if into.Object == nil && len(into.Items) == 0 {
				if kind, ok := s.list(data, into); ok {
					return into, kind, nil
				}
				into.Object, into.Items = nil, nil
			}
		}
	}
	return s.Serializer.Decode(data, gvk, into)
}

// object decodes one object as the wrapped serializer would with into
// nil; ok false: leave it to the wrapped serializer.
func (s *serializer) object(data []byte) (runtime.Object, *schema.GroupVersionKind, bool) {
	if s.compact {
		if env, err := decode.TreeObject(data, s.opts); err == nil {
			if kind, ok := plainKind(env); ok {
				return &unstructured.Unstructured{Object: env}, &kind, true
			}
		}
		// Anything else is decoded as without compact mode.
	}
	m, err := decode.Object(data, s.opts)
	if err != nil || m == nil {
		return nil, nil, false
	}
	kind, ok := plainKind(m)
	if !ok {
		return nil, nil, false
	}
	return &unstructured.Unstructured{Object: m}, &kind, true
}

// plainKind returns the kind of a decoded object when client-go's dynamic
// codec would decode it to Unstructured: kind a non-empty string not of
// its scheme, apiVersion a string with a version.
func plainKind(m map[string]interface{}) (schema.GroupVersionKind, bool) {
	gvk, ok := stringKind(m)
	if !ok || typedKinds[gvk.Kind] || gvk.Version == "" {
		return schema.GroupVersionKind{}, false
	}
	return gvk, true
}

// stringKind returns the kind of a decoded object whose kind is a
// non-empty string and whose apiVersion is absent or a string that parses
// (what the wrapped serializer needs to accept the object at all).
func stringKind(m map[string]interface{}) (schema.GroupVersionKind, bool) {
	// client-go finds the kind with encoding/json, which matches keys
	// case-insensitively ("Kind", "APIVERSION"): leave such objects to it.
	for k := range m {
		if k != "kind" && k != "apiVersion" && (strings.EqualFold(k, "kind") || strings.EqualFold(k, "apiVersion")) {
			return schema.GroupVersionKind{}, false
		}
	}
	kind, ok := m["kind"].(string)
	if !ok || kind == "" {
		return schema.GroupVersionKind{}, false
	}
	av, present := m["apiVersion"]
	apiVersion, isString := av.(string)
	if present && !isString {
		return schema.GroupVersionKind{}, false
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return schema.GroupVersionKind{}, false
	}
	return gv.WithKind(kind), true
}

// list decodes a list body into list (empty) as the wrapped serializer
// would (apimachinery's decodeToList): the list's fields without items in
// list.Object, each item an Unstructured, items without kind and
// apiVersion given the list's kind less "List" and its apiVersion.
func (s *serializer) list(data []byte, list *unstructured.UnstructuredList) (*schema.GroupVersionKind, bool) {
	if s.compact {
		if m, err := decode.TreeList(data, s.opts); err == nil {
			if kind, ok := s.fillList(m, list); ok {
				return kind, true
			}
			list.Object, list.Items = nil, nil
		}
	}
	m, err := decode.List(data, s.opts)
	if err != nil || m == nil {
		return nil, false
	}
	return s.fillList(m, list)
}

// fillList fills list from m, a list decoded by decode.List or
// decode.TreeList (whose items are envelopes).
func (s *serializer) fillList(m map[string]interface{}, list *unstructured.UnstructuredList) (*schema.GroupVersionKind, bool) {
	kind, ok := stringKind(m)
	if !ok {
		return nil, false
	}
	raw, present := m["items"]
	var items []interface{}
	if present && raw != nil {
		if items, ok = raw.([]interface{}); !ok {
			return nil, false
		}
	}
	delete(m, "items")
	list.Object = m
	listAPIVersion := list.GetAPIVersion()
	itemKind := kind.Kind
	if len(itemKind) >= 4 && itemKind[len(itemKind)-4:] == "List" {
		itemKind = itemKind[:len(itemKind)-4]
	}
	list.Items = make([]unstructured.Unstructured, len(items))
	for i, it := range items {
		obj, ok := it.(map[string]interface{})
		if !ok || obj == nil {
			return nil, false
		}
		u := unstructured.Unstructured{Object: obj}
		if len(u.GetKind()) == 0 && len(u.GetAPIVersion()) == 0 {
			if !decode.SetTreeMembers(obj, "kind", itemKind, "apiVersion", listAPIVersion) {
				u.SetKind(itemKind)
				u.SetAPIVersion(listAPIVersion)
			}
		}
		list.Items[i] = u
	}
	return &kind, true
}
