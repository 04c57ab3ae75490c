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
