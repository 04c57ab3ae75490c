package dynamicinformer

import (
	"k8s.io/client-go/dynamic"
	toolscache "k8s.io/client-go/tools/cache"

	ikcache "github.com/informerkit/informerkit/cache"
	"github.com/informerkit/informerkit/dynamicinformer/internal/codec"
	"github.com/informerkit/informerkit/internal/decode"
)

// WithAPIMachineryDecoding makes informers decode what the server sends
// with client-go's dynamic client codec, as client-go's own informers do.
//
// By default a factory from NewForConfig decodes list bodies and watch
// events on its own path: each object once, in one pass, straight into
// *unstructured.Unstructured, with interned keys, and without building
// what the informer's transform removes anyway (metadata.managedFields
// when the transform is cache.StripManagedFields, the last-applied
// annotation when it is cache.DropLastAppliedConfiguration, alone or in a
// cache.Chain). Its results — objects, Status objects of
// error events, bookmarks, resourceVersions, errors — are those of
// client-go's decoding (anything unusual is handed to client-go's codec),
// and requests go through the same REST client machinery (transport,
// authentication, rate limiting, retries); see docs/PERFORMANCE.md for
// what it saves. This option turns it off. Factories from
// NewSharedInformerFactory always decode with the dynamic.Interface they
// are given (there is no rest.Config to build another client from), and
// MetadataOnly informers with the metadata client.
func WithAPIMachineryDecoding() Option {
	return func(c *factoryConfig) { c.apimachineryDecoding = true }
}

// withDecodingClients supplies the fast-path clients (NewForConfig).
func withDecodingClients(c *codec.Clients) Option {
	return func(fc *factoryConfig) { fc.decodingClients = c }
}

// listWatchClient is the dynamic client an informer with cfg lists and
// watches through.
func (f *Factory) listWatchClient(cfg resourceConfig) dynamic.Interface {
	if f.cfg.decodingClients == nil || f.cfg.apimachineryDecoding {
		return f.client
	}
	opts, pushed := decodeOptions(cfg.transform)
	var d dynamic.Interface
	var err error
	if cfg.compact != nil && !cfg.metadataOnly && pushed {
		// Every envelope reaches the informer's Compactor: its transform
		// is the Compactor after transforms the decoding already applied
		// (cacheTransform), which find nothing to remove in an envelope.
		d, err = f.cfg.decodingClients.ForCompact(opts)
	} else {
		d, err = f.cfg.decodingClients.For(opts)
	}
	if err != nil { // cannot happen: the same config built a client before
		f.cfg.logger.Error(err, "cannot build a decoding client; using client-go's decoding")
		return f.client
	}
	return d
}

// decodeOptions says which fields transform t removes from every object,
// so that decoding need not build them (the transform still runs, and
// finds nothing to remove). Func values cannot be compared, so this knows
// transforms by identity (funcPtr): the cache package's
// StripManagedFields and DropLastAppliedConfiguration, given directly or
// inside a cache.Chain (cache.ChainMembers). Other closures are opaque:
// such informers decode every field, then transform. pushed: t is nil or
// made only of transforms the decoding applies (a compact informer's
// objects may then be decoded straight to the compact encoding).
func decodeOptions(t toolscache.TransformFunc) (o decode.Options, pushed bool) {
	pushed = true
	var visit func(t toolscache.TransformFunc, depth int)
	visit = func(t toolscache.TransformFunc, depth int) {
		switch funcPtr(t) {
		case 0:
		case stripManagedFields:
			o.SkipManagedFields = true
		case dropLastApplied:
			o.SkipLastApplied = true
		default:
			members := ikcache.ChainMembers(t)
			if depth >= 8 || members == nil {
				pushed = false
				return
			}
			for _, m := range members {
				visit(m, depth+1)
			}
		}
	}
	visit(t, 0)
	return o, pushed
}

var (
	stripManagedFields = funcPtr(toolscache.TransformFunc(ikcache.StripManagedFields))
	dropLastApplied    = funcPtr(toolscache.TransformFunc(ikcache.DropLastAppliedConfiguration))
)
