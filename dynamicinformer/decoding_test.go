package dynamicinformer

import (
	"testing"

	toolscache "k8s.io/client-go/tools/cache"

	ikcache "github.com/informerkit/informerkit/cache"
	"github.com/informerkit/informerkit/internal/decode"
)

func TestDecodeOptions(t *testing.T) {
	for _, c := range []struct {
		name   string
		t      toolscache.TransformFunc
		want   decode.Options
		pushed bool // every member is applied by the decoding
	}{
		{"none", nil, decode.Options{}, true},
		{"StripManagedFields", ikcache.StripManagedFields, decode.Options{SkipManagedFields: true}, true},
		{"DropLastAppliedConfiguration", ikcache.DropLastAppliedConfiguration, decode.Options{SkipLastApplied: true}, true},
		{"other", ikcache.InternKeys, decode.Options{}, false},
		{"chain", ikcache.Chain(ikcache.InternKeys, ikcache.StripManagedFields), decode.Options{SkipManagedFields: true}, false},
		{"chain of both", ikcache.Chain(ikcache.DropLastAppliedConfiguration, nil, ikcache.StripManagedFields), decode.Options{SkipManagedFields: true, SkipLastApplied: true}, true},
		{"nested chain", ikcache.Chain(ikcache.InternKeys, ikcache.Chain(ikcache.DropLastAppliedConfiguration)), decode.Options{SkipLastApplied: true}, false},
		{"nested pushed chain", ikcache.Chain(ikcache.Chain(ikcache.DropLastAppliedConfiguration), ikcache.StripManagedFields), decode.Options{SkipManagedFields: true, SkipLastApplied: true}, true},
		{"chain without", ikcache.Chain(ikcache.InternKeys), decode.Options{}, false},
		{"closure", func(o interface{}) (interface{}, error) { return ikcache.StripManagedFields(o) }, decode.Options{}, false},
	} {
		if got, pushed := decodeOptions(c.t); got != c.want || pushed != c.pushed {
			t.Errorf("%s: %+v %v, want %+v %v", c.name, got, pushed, c.want, c.pushed)
		}
	}
}

// TestNewSharedInformerFactoryKeepsItsClient: without a rest.Config the
// factory lists and watches through the client it was given.
func TestNewSharedInformerFactoryKeepsItsClient(t *testing.T) {
	client := fakeClient()
	f := NewSharedInformerFactory(client, 0, WithoutCRDTracking())
	if got := f.listWatchClient(resourceConfig{transform: ikcache.StripManagedFields}); got != client {
		t.Fatalf("listWatchClient = %T, want the factory's client", got)
	}
}
