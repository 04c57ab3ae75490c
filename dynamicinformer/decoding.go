package dynamicinformer

import "k8s.io/client-go/dynamic"

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
