package dynamicinformer

import (
	"fmt"
	"testing"

	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	ikcache "github.com/informerkit/informerkit/cache"
	"github.com/informerkit/informerkit/dynamicinformer/internal/codec"
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

// TestCompactInformersDecodeToEnvelopes: a WithCompact informer of a
// NewForConfig factory lists and watches through the client that decodes
// straight to the compact encoding when its transform (if any) is made
// only of transforms the decoding applies; otherwise, or when metadata-only
// or with WithAPIMachineryDecoding, through the ordinary one.
func TestCompactInformersDecodeToEnvelopes(t *testing.T) {
	clients, err := codec.NewClients(&rest.Config{Host: "https://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	f := NewSharedInformerFactory(fakeClient(), 0, WithoutCRDTracking(), withDecodingClients(clients))
	compact := &ikcache.CompactorOptions{}
	own := ikcache.NewCompactor(ikcache.CompactorOptions{}).Transform
	for _, c := range []struct {
		name    string
		cfg     resourceConfig
		compact bool
		opts    decode.Options
	}{
		{"compact", resourceConfig{compact: compact}, true, decode.Options{}},
		{"compact, stripped", resourceConfig{compact: compact, transform: ikcache.StripManagedFields}, true, decode.Options{SkipManagedFields: true}},
		{"compact, chain of both", resourceConfig{compact: compact, transform: ikcache.Chain(ikcache.StripManagedFields, ikcache.DropLastAppliedConfiguration)}, true,
			decode.Options{SkipManagedFields: true, SkipLastApplied: true}},
		{"compact, opaque transform", resourceConfig{compact: compact, transform: ikcache.InternKeys}, false, decode.Options{}},
		{"compact, chain with an opaque transform", resourceConfig{compact: compact, transform: ikcache.Chain(ikcache.StripManagedFields, ikcache.InternKeys)}, false,
			decode.Options{SkipManagedFields: true}},
		{"not compact", resourceConfig{}, false, decode.Options{}},
		{"not compact, stripped", resourceConfig{transform: ikcache.StripManagedFields}, false, decode.Options{SkipManagedFields: true}},
		{"a Compactor's Transform", resourceConfig{transform: own}, true, decode.Options{}},
		{"CompactTransform", resourceConfig{transform: ikcache.CompactTransform}, true, decode.Options{}},
		{"stripped, then a Compactor", resourceConfig{transform: ikcache.Chain(ikcache.StripManagedFields, own)}, true, decode.Options{SkipManagedFields: true}},
		{"a Compactor, then an opaque transform", resourceConfig{transform: ikcache.Chain(own, ikcache.InternKeys)}, true, decode.Options{}},
		{"an opaque transform, then a Compactor", resourceConfig{transform: ikcache.Chain(ikcache.InternKeys, own)}, false, decode.Options{}},
		{"another method value", resourceConfig{transform: (&methodHolder{}).Transform}, false, decode.Options{}},
	} {
		want, err := clients.For(c.opts)
		if c.compact {
			want, err = clients.ForCompact(c.opts)
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := f.listWatchClient(c.cfg); got != want {
			t.Errorf("%s: listWatchClient is not the %s client (compact %v)", c.name, fmt.Sprintf("%+v", c.opts), c.compact)
		}
	}
	slow := NewSharedInformerFactory(fakeClient(), 0, WithoutCRDTracking(), withDecodingClients(clients), WithAPIMachineryDecoding())
	if got := slow.listWatchClient(resourceConfig{compact: compact}); got != slow.client {
		t.Error("WithAPIMachineryDecoding: a compact informer does not use the factory's client")
	}
}

// methodHolder has a Transform method whose method values must not pass
// for a Compactor's.
type methodHolder struct{}

func (*methodHolder) Transform(obj interface{}) (interface{}, error) { return obj, nil }
