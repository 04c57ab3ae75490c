// Package codec is the informer decode path: a runtime.NegotiatedSerializer
// that wraps client-go's dynamic client's own and decodes list bodies and
// watch event objects once, straight into *unstructured.Unstructured, with
// internal/decode (one pass, interned keys, fields an informer's transform
// would drop never built). Everything it does not recognise as a plain
// object or list — Status objects, the kinds client-go's dynamic scheme
// decodes to typed objects, malformed input, objects without kind or
// apiVersion — goes to the wrapped serializer, so results and errors are
// those of client-go's dynamic client by construction.
//
// RawNegotiatedSerializer also leaves each watch event object's JSON in a
// RawObjects, keyed by the decoded object, for a disk journal that writes
// the server's bytes instead of encoding the object again.
//
// Clients builds dynamic clients that use it on the same REST transport,
// authentication, rate limiting and retries as client-go's dynamic client:
// only the bytes-to-object step differs.
package codec
