package dynamicinformer

import (
	"k8s.io/client-go/dynamic"

	"github.com/informerkit/informerkit/dynamicinformer/internal/codec"
)

// WithAPIMachineryDecoding makes informers decode what the server sends
// with client-go's dynamic client codec, as client-go's own informers do.
//
// By default a factory from NewForConfig decodes list bodies and watch
// events on its own path: each object once, in one pass, straight into
// *unstructured.Unstructured, with interned keys, and without building
// what the informer's projection drops (see Projection). Within one object, identical sets of
// metadata.managedFields[*].fieldsV1 (the {} of every leaf, the same
// {".": {}, "f:name": {}} under each list element) are one map, not one
// each: objects are reflect.DeepEqual to client-go's, DeepCopy separates
// them, and objects are never to be mutated in place anyway (see the
// package documentation). Its results — objects, Status objects of
// error events, bookmarks, resourceVersions, errors — are those of
// client-go's decoding (anything unusual is handed to client-go's codec),
// and requests go through the same REST client machinery (transport,
// authentication, rate limiting, retries); see docs/PERFORMANCE.md for
// what it saves. This option turns it off. Factories from
// NewSharedInformerFactory always decode with the dynamic.Interface they
// are given (there is no rest.Config to build another client from), and
// MetadataOnly projections with the metadata client.
func WithAPIMachineryDecoding() Option {
	return func(c *factoryConfig) { c.apimachineryDecoding = true }
}

// withDecodingClients supplies the fast-path clients (NewForConfig).
func withDecodingClients(c *codec.Clients) Option {
	return func(fc *factoryConfig) { fc.decodingClients = c }
}

// fastDecoding reports whether the factory's informers decode on the
// fast path.
func (f *Factory) fastDecoding() bool {
	return f.cfg.decodingClients != nil && !f.cfg.apimachineryDecoding
}

// listWatchClient is the dynamic client of an informer with plan p
// (not MetadataOnly).
func (f *Factory) listWatchClient(p plan) dynamic.Interface {
	var d dynamic.Interface
	var err error
	switch p.client {
	case fastClient:
		d, err = f.cfg.decodingClients.For(p.decode)
	case compactClient:
		d, err = f.cfg.decodingClients.ForCompact(p.decode)
	default:
		return f.client
	}
	if err != nil { // cannot happen: the same config built a client before
		f.cfg.logger.Error(err, "cannot build a decoding client; using client-go's decoding")
		return f.client
	}
	return d
}
