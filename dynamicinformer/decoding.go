package dynamicinformer

import (
	"reflect"

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
// cache.Chain). Within one object, identical sets of
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
	opts := decodeOptions(cfg.transform)
	var d dynamic.Interface
	var err error
	if compactsDirectly(cfg.transform, cfg.compact != nil) {
		// Every envelope reaches a Compactor's Transform before the store
		// and handlers, after only transforms the decoding applied (which
		// find nothing to remove in an envelope).
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
// such informers decode every field, then transform.
func decodeOptions(t toolscache.TransformFunc) decode.Options {
	var o decode.Options
	var visit func(t toolscache.TransformFunc, depth int)
	visit = func(t toolscache.TransformFunc, depth int) {
		switch funcPtr(t) {
		case 0:
		case stripManagedFields:
			o.SkipManagedFields = true
		case dropLastApplied:
			o.SkipLastApplied = true
		default:
			if depth < 8 {
				for _, m := range ikcache.ChainMembers(t) {
					visit(m, depth+1)
				}
			}
		}
	}
	visit(t, 0)
	return o
}

var (
	stripManagedFields = funcPtr(toolscache.TransformFunc(ikcache.StripManagedFields))
	dropLastApplied    = funcPtr(toolscache.TransformFunc(ikcache.DropLastAppliedConfiguration))
)

// compactsDirectly reports whether every object of an informer with
// transform t (followed by a Compactor of its own when factoryCompacts:
// WithCompact) reaches a Compactor's Transform — any Compactor's
// (recognised by the code of its method value) or CompactTransform —
// after only transforms the decoding applies (StripManagedFields,
// DropLastAppliedConfiguration, in Chains). Such informers may decode
// straight to compact envelopes (codec.Clients.ForCompact): no other
// function ever sees one. Transforms after the Compactor see *Compact
// objects, as they would anyway.
func compactsDirectly(t toolscache.TransformFunc, factoryCompacts bool) bool {
	type reach int
	const (
		pushed    reach = iota // only transforms the decoding applies so far
		compactor              // a Compactor's Transform comes first
		opaque                 // another function comes first
	)
	var visit func(t toolscache.TransformFunc, depth int) reach
	visit = func(t toolscache.TransformFunc, depth int) reach {
		switch funcPtr(t) {
		case 0, stripManagedFields, dropLastApplied:
			return pushed
		case compactTransform:
			return compactor
		}
		if reflect.ValueOf(t).Pointer() == compactorTransformCode {
			return compactor
		}
		members := ikcache.ChainMembers(t)
		if members == nil || depth >= 8 {
			return opaque
		}
		for _, m := range members {
			if r := visit(m, depth+1); r != pushed {
				return r
			}
		}
		return pushed
	}
	switch visit(t, 0) {
	case compactor:
		return true
	case pushed:
		return factoryCompacts
	}
	return false
}

var (
	compactTransform = funcPtr(toolscache.TransformFunc(ikcache.CompactTransform))
	// compactorTransformCode is the code of every Compactor's Transform
	// method value (the receiver is in the closure, not the code).
	compactorTransformCode = reflect.ValueOf(toolscache.TransformFunc(ikcache.DefaultCompactor().Transform)).Pointer()
)
