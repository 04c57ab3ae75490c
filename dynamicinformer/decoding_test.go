package dynamicinformer

import (
	"testing"

	toolscache "k8s.io/client-go/tools/cache"

	ikcache "github.com/informerkit/informerkit/cache"
	"github.com/informerkit/informerkit/internal/decode"
)

func TestDecodeOptions(t *testing.T) {
	for _, c := range []struct {
		name string
		t    toolscache.TransformFunc
		want decode.Options
	}{
		{"none", nil, decode.Options{}},
		{"StripManagedFields", ikcache.StripManagedFields, decode.Options{SkipManagedFields: true}},
		{"DropLastAppliedConfiguration", ikcache.DropLastAppliedConfiguration, decode.Options{SkipLastApplied: true}},
		{"other", ikcache.InternKeys, decode.Options{}},
		{"chain", ikcache.Chain(ikcache.InternKeys, ikcache.StripManagedFields), decode.Options{SkipManagedFields: true}},
		{"chain of both", ikcache.Chain(ikcache.DropLastAppliedConfiguration, nil, ikcache.StripManagedFields), decode.Options{SkipManagedFields: true, SkipLastApplied: true}},
		{"nested chain", ikcache.Chain(ikcache.InternKeys, ikcache.Chain(ikcache.DropLastAppliedConfiguration)), decode.Options{SkipLastApplied: true}},
		{"chain without", ikcache.Chain(ikcache.InternKeys), decode.Options{}},
		{"closure", func(o interface{}) (interface{}, error) { return ikcache.StripManagedFields(o) }, decode.Options{}},
	} {
		if got := decodeOptions(c.t); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
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
