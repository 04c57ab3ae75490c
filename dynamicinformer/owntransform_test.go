package dynamicinformer

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	ikcache "github.com/informerkit/informerkit/cache"
	"github.com/informerkit/informerkit/dynamicinformer/internal/codec"
	"github.com/informerkit/informerkit/internal/decode"
)

// TestOwnTransformsOnePath: each of package cache's transforms given to
// WithTransform has one path. StripManagedFields and
// DropLastAppliedConfiguration become the Projection's flags — the same
// spec, plan and informer as WithProjection, fast decode path included,
// whatever the key and whichever option comes first; cache.Project and a
// Compactor's Transform are refused with a *ProjectionTransformError
// naming WithProjection; InternKeys (no projection), a Chain and a
// func of the caller's stay opaque transforms.
func TestOwnTransformsOnePath(t *testing.T) {
	clients, err := codec.NewClients(&rest.Config{Host: "https://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	f := NewSharedInformerFactory(fakeClient(), Options{DisableCRDTracking: true, decodingClients: clients})
	defer f.Shutdown()
	projected, _ := ikcache.Project("spec.size")
	mine := func(o interface{}) (interface{}, error) { return ikcache.StripManagedFields(o) }
	for _, c := range []struct {
		name   string
		opts   []ResourceOption
		same   []ResourceOption // the options it is equivalent to (nil: stays a transform)
		decode decode.Options
	}{
		{"strip, keyed", []ResourceOption{WithTransform("k", ikcache.StripManagedFields)},
			[]ResourceOption{WithProjection(Projection{StripManagedFields: true})}, decode.Options{SkipManagedFields: true}},
		{"strip, unkeyed", []ResourceOption{WithTransform("", ikcache.StripManagedFields)},
			[]ResourceOption{WithProjection(Projection{StripManagedFields: true})}, decode.Options{SkipManagedFields: true}},
		{"last-applied", []ResourceOption{WithTransform("k", ikcache.DropLastAppliedConfiguration)},
			[]ResourceOption{WithProjection(Projection{DropLastApplied: true})}, decode.Options{SkipLastApplied: true}},
		{"strip, then a projection", []ResourceOption{WithTransform("k", ikcache.StripManagedFields), WithProjection(Projection{Compact: true})},
			[]ResourceOption{WithProjection(Projection{Compact: true, StripManagedFields: true})}, decode.Options{SkipManagedFields: true}},
		{"a projection, then strip", []ResourceOption{WithProjection(Projection{DropLastApplied: true}), WithTransform("k", ikcache.StripManagedFields)},
			[]ResourceOption{WithProjection(Projection{DropLastApplied: true, StripManagedFields: true})}, decode.Options{SkipManagedFields: true, SkipLastApplied: true}},
		{"intern keys", []ResourceOption{WithTransform("k", ikcache.InternKeys)}, nil, decode.Options{}},
		{"a chain", []ResourceOption{WithTransform("k", ikcache.Chain(ikcache.StripManagedFields))}, nil, decode.Options{}},
		{"a func of the caller's", []ResourceOption{WithTransform("k", mine)}, nil, decode.Options{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := f.cfg.merge(c.opts)
			if err := cfg.validate(); err != nil {
				t.Fatal(err)
			}
			p := resolve(cfg, f.fastDecoding())
			if c.same == nil {
				if cfg.transform.f == nil || p.client != fastClient || p.decode != c.decode {
					t.Fatalf("an opaque transform: transform kept %v, client %d, decode %+v", cfg.transform.f != nil, p.client, p.decode)
				}
				return
			}
			want := f.cfg.merge(c.same)
			if cfg.transform.f != nil || cfg.own != 0 || cfg.spec(widgets, false) != want.spec(widgets, false) {
				t.Fatalf("spec %+v, want %+v (the transform kept: %v)", cfg.spec(widgets, false), want.spec(widgets, false), cfg.transform.f != nil)
			}
			wp := resolve(want, f.fastDecoding())
			if p.client != wp.client || p.decode != c.decode || p.decode != wp.decode || len(p.transforms) != len(wp.transforms) {
				t.Fatalf("plan: client %d, decode %+v, %d transforms; want %d, %+v, %d", p.client, p.decode, len(p.transforms), wp.client, wp.decode, len(wp.transforms))
			}
			h1, h2 := f.ForResource(widgets, c.opts...), f.ForResource(widgets, c.same...)
			defer h1.Release()
			defer h2.Release()
			if h1.Informer().GetIndexer() != h2.Informer().GetIndexer() {
				t.Fatal("not the informer WithProjection gives")
			}
		})
	}
	t.Run("a factory default", func(t *testing.T) {
		fd := NewSharedInformerFactory(fakeClient(), Options{DisableCRDTracking: true, decodingClients: clients,
			Defaults: []ResourceOption{WithTransform("k", ikcache.StripManagedFields)}})
		defer fd.Shutdown()
		cfg := fd.cfg.merge(nil)
		if cfg.transform.f != nil || !cfg.projection.StripManagedFields || resolve(cfg, fd.fastDecoding()).decode != (decode.Options{SkipManagedFields: true}) {
			t.Fatalf("a factory-wide WithTransform(cache.StripManagedFields): %+v", cfg.spec(widgets, false))
		}
	})

	for _, c := range []struct {
		name string
		f    toolscache.TransformFunc
		use  string
	}{
		{"project", projected, "Fields"},
		{"project of nothing", must(ikcache.Project()), "Fields"},
		{"a compactor of the caller's", ikcache.NewCompactor(ikcache.CompactorOptions{MaxDecoded: 3}).Transform, "Compact"},
	} {
		t.Run("refused: "+c.name, func(t *testing.T) {
			err := f.cfg.merge([]ResourceOption{WithTransform("k", c.f)}).validate()
			var pe *ProjectionTransformError
			if !errors.As(err, &pe) || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "WithProjection(Projection{"+c.use) {
				t.Fatalf("validate: %v; want a *ProjectionTransformError (ErrInvalid) naming WithProjection with %s", err, c.use)
			}
			h := f.ForResource(widgets, WithTransform("k", c.f))
			defer h.Release()
			if st := h.Status(); st.State != Failed || !errors.As(st.Err, &pe) {
				t.Fatalf("ForResource: %+v; want Failed with the *ProjectionTransformError", st)
			}
		})
	}
}
