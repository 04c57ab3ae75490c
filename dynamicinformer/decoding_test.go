package dynamicinformer

import (
	"reflect"
	"testing"

	"k8s.io/client-go/rest"

	ikcache "github.com/informerkit/informerkit/cache"
	"github.com/informerkit/informerkit/dynamicinformer/internal/codec"
	"github.com/informerkit/informerkit/internal/decode"
)

// TestNewSharedInformerFactoryKeepsItsClient: without a rest.Config the
// factory lists and watches through the client it was given, whatever
// the projection.
func TestNewSharedInformerFactoryKeepsItsClient(t *testing.T) {
	client := fakeClient()
	f := NewSharedInformerFactory(client, Options{DisableCRDTracking: true})
	cfg := f.cfg.merge([]ResourceOption{WithProjection(Projection{StripManagedFields: true, Compact: true})})
	p := resolve(cfg, f.fastDecoding())
	if p.client != factoryClient || p.decode != (decode.Options{}) {
		t.Fatalf("plan %+v, want the factory's client", p)
	}
	if got := f.listWatchClient(p); got != client {
		t.Fatalf("listWatchClient = %T, want the factory's client", got)
	}
}

// TestPlanFollowsTheProjection: the client and decoding of an informer
// follow from its Projection value alone: managed fields and last-applied
// are skipped while decoding when the projection drops them, a compact
// projection decodes straight to envelopes unless a transform of the
// caller's runs before the Compactor, and Options.APIMachineryDecoding or
// MetadataOnly use the ordinary clients. An option built by a closure
// around WithProjection (or in Options.Defaults) is the same value and gets the
// same decoder: nothing looks at functions.
func TestPlanFollowsTheProjection(t *testing.T) {
	clients, err := codec.NewClients(&rest.Config{Host: "https://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	f := NewSharedInformerFactory(fakeClient(), Options{DisableCRDTracking: true, decodingClients: clients})
	opaque := WithTransform("opaque", ikcache.InternKeys)
	strip := Projection{StripManagedFields: true}
	wrapped := func(p Projection) ResourceOption {
		return func(c *resourceConfig) { WithProjection(p)(c) }
	}
	for _, c := range []struct {
		name   string
		opts   []ResourceOption
		client clientKind
		decode decode.Options
		steps  int // transforms in the plan
	}{
		{"full objects", nil, fastClient, decode.Options{}, 0},
		{"stripped", []ResourceOption{WithProjection(strip)}, fastClient, decode.Options{SkipManagedFields: true}, 1},
		{"stripped, through a closure", []ResourceOption{wrapped(strip)}, fastClient, decode.Options{SkipManagedFields: true}, 1},
		{"stripped, with an opaque transform", []ResourceOption{WithProjection(strip), opaque}, fastClient, decode.Options{SkipManagedFields: true}, 2},
		{"both dropped", []ResourceOption{WithProjection(Projection{StripManagedFields: true, DropLastApplied: true})}, fastClient,
			decode.Options{SkipManagedFields: true, SkipLastApplied: true}, 2},
		{"fields", []ResourceOption{WithProjection(Projection{Fields: "spec.size"})}, fastClient, decode.Options{SkipManagedFields: true}, 1},
		{"fields keeping managedFields", []ResourceOption{WithProjection(Projection{Fields: "spec.size,metadata.managedFields"})}, fastClient, decode.Options{}, 1},
		{"compact", []ResourceOption{WithProjection(Projection{Compact: true})}, compactClient, decode.Options{}, 1},
		{"compact, stripped", []ResourceOption{WithProjection(Projection{Compact: true, StripManagedFields: true})}, compactClient, decode.Options{SkipManagedFields: true}, 2},
		{"compact, stripped, through a closure", []ResourceOption{wrapped(Projection{Compact: true, StripManagedFields: true})}, compactClient, decode.Options{SkipManagedFields: true}, 2},
		{"compact, with an opaque transform", []ResourceOption{WithProjection(Projection{Compact: true, StripManagedFields: true}), opaque}, fastClient,
			decode.Options{SkipManagedFields: true}, 3},
		{"compact of fields", []ResourceOption{WithProjection(Projection{Compact: true, Fields: "spec"})}, fastClient, decode.Options{SkipManagedFields: true}, 2},
		{"metadata only", []ResourceOption{WithProjection(Projection{MetadataOnly: true, StripManagedFields: true})}, metadataClient, decode.Options{}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := f.cfg.merge(c.opts)
			if err := cfg.validate(); err != nil {
				t.Fatal(err)
			}
			p := resolve(cfg, f.fastDecoding())
			if p.client != c.client || p.decode != c.decode || len(p.transforms) != c.steps {
				t.Fatalf("plan: client %d, decode %+v, %d transforms; want %d, %+v, %d", p.client, p.decode, len(p.transforms), c.client, c.decode, c.steps)
			}
			if (p.compactor != nil) != cfg.projection.Compact {
				t.Fatalf("compactor %v for Compact=%v", p.compactor, cfg.projection.Compact)
			}
			if p.client == metadataClient {
				return
			}
			want, err := clients.For(c.decode)
			if c.client == compactClient {
				want, err = clients.ForCompact(c.decode)
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := f.listWatchClient(p); got != want {
				t.Fatalf("listWatchClient is not the %+v client (compact %v)", c.decode, c.client == compactClient)
			}
		})
	}
	slow := NewSharedInformerFactory(fakeClient(), Options{DisableCRDTracking: true, decodingClients: clients, APIMachineryDecoding: true})
	p := resolve(slow.cfg.merge([]ResourceOption{WithProjection(Projection{Compact: true})}), slow.fastDecoding())
	if got := slow.listWatchClient(p); got != slow.client || p.compactor == nil {
		t.Error("APIMachineryDecoding: a compact informer does not use the factory's client and a Compactor")
	}
	// Each compact informer has a Compactor of its own.
	cfg := f.cfg.merge([]ResourceOption{WithProjection(Projection{Compact: true})})
	if a, b := resolve(cfg, true), resolve(cfg, true); a.compactor == b.compactor {
		t.Error("two plans share a Compactor")
	}
}

// TestProjectionValidation: projections that cannot be built are
// ErrInvalid; Fields are canonical (order and repeats do not
// matter) and split at commas outside brackets.
func TestProjectionValidation(t *testing.T) {
	for _, p := range []Projection{
		{MetadataOnly: true, Compact: true},
		{CompactOptions: ikcache.CompactorOptions{MaxDecoded: 3}},
		{Fields: "spec..a"},
		{Fields: "spec.a,,spec.b"},
		{Fields: "spec.items[0]"},
	} {
		if err := p.validate(); err == nil {
			t.Errorf("%+v: no error", p)
		}
	}
	if err := (Projection{Fields: "spec.a, metadata.labels['x,y']"}).validate(); err != nil {
		t.Error(err)
	}
	got := fieldPaths("spec.a, metadata.labels['x,y'],status")
	if want := []string{"spec.a", "metadata.labels['x,y']", "status"}; !reflect.DeepEqual(got, want) {
		t.Errorf("fieldPaths = %q, want %q", got, want)
	}
	if a, b := canonicalProjection(Projection{Fields: "b,a,b"}), canonicalProjection(Projection{Fields: "a, b"}); a != b {
		t.Errorf("%+v != %+v", a, b)
	}
}
