package dynamicinformer

import (
	"k8s.io/client-go/dynamic"

	"github.com/informerkit/informerkit/dynamicinformer/internal/codec"
	"github.com/informerkit/informerkit/internal/decode"
)

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

// rawJournal returns the client that leaves each watch event's JSON for
// the informer's disk journal, and where it leaves it, when the informer
// of key and plan p keeps its cache on disk and decodes objects whole
// (the fast path, nothing skipped): the object the journal is handed
// (before any transform, diskJournal) is then what the JSON says, so the
// journal writes the server's JSON instead of encoding the object
// (appendRawForDisk). ok false: it encodes them.
func (f *Factory) rawJournal(key spec, p plan) (d dynamic.Interface, raw *codec.RawObjects, ok bool) {
	if f.disk == nil || p.client != fastClient || p.decode != (decode.Options{}) {
		return nil, nil, false
	}
	if _, eligible := diskEligible(key, f.disk.secrets); !eligible {
		return nil, nil, false
	}
	d, err := f.cfg.decodingClients.ForRaw(p.decode)
	if err != nil { // cannot happen: the same config built a client before
		return nil, nil, false
	}
	return d, f.cfg.decodingClients.Raw(), true
}
