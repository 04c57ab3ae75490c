package dynamicinformer

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"

	ikcache "github.com/informerkit/informerkit/cache"
	"github.com/informerkit/informerkit/internal/decode"
)

// Projection is what an informer's cache holds of each object. It is a
// comparable value: informers share only with equal projections, and the
// factory derives the decode path and the transforms from it (no
// function is ever inspected). The zero value holds full objects.
// Transforms run in the order of the fields; a WithTransform transform
// runs after them and before the Compactor.
type Projection struct {
	// MetadataOnly holds *metav1.PartialObjectMetadata, listed and
	// watched through the factory's metadata client; without one,
	// through its dynamic client, each object reduced to its metadata
	// before the cache (the same cache, at the cost of sending and
	// decoding whole objects).
	MetadataOnly bool
	// StripManagedFields drops metadata.managedFields
	// (cache.StripManagedFields); the fast decoder never builds them.
	StripManagedFields bool
	// DropLastApplied drops kubectl's last-applied annotation
	// (cache.DropLastAppliedConfiguration); the fast decoder never
	// builds it.
	DropLastApplied bool
	// Fields, when not empty, keeps only these field paths besides what
	// cache.Project always keeps: cache.Project's syntax, separated by
	// commas ("spec.nodeName,status.phase"). Order and repeats do not
	// matter.
	Fields string
	// Compact keeps each object as a *cache.Compact through a Compactor
	// of the informer's own, made with CompactOptions (see WithProjection).
	// Not with MetadataOnly.
	Compact        bool
	CompactOptions ikcache.CompactorOptions
}

// WithProjection sets what the informer's cache holds (see Projection).
// Informers with different projections are different informers.
//
// With Compact, listers (Lister, genericlister.New) return decoded
// *unstructured.Unstructured objects, kept and shared by the informer's
// Compactor for the objects being read; event handlers receive
// *cache.Compact unless wrapped in cache.DecodingHandler. On the fast
// decode path (NewForConfig, no Options.APIMachineryDecoding) a compact
// informer without Fields or a WithTransform transform decodes each
// object straight to the compact encoding, never building its maps.
func WithProjection(p Projection) ResourceOption {
	return func(c *resourceConfig) { c.projection = p }
}

// spec is what makes an informer distinct: two handles share an informer
// exactly when their specs are equal (it is the factory's map key). It is
// built once per ForResource or ForName call from the folded options.
type spec struct {
	gvr           schema.GroupVersionResource // Version "" when following (ForName without a version)
	follow        bool
	namespaces    string // sorted, comma-separated ("" all)
	permitted     bool   // WithPermittedNamespaces
	candidates    string // its candidates, sorted, comma-separated
	labelSelector string
	fieldSelector string
	projection    Projection // canonical (Fields sorted)
	shard         string     // WithShard's selector
	shardSource   any        // WithShardSource's source, or an own token if it is not comparable
	transformKey  string
	tweakKey      string
	sharingKey    string
	own           uint64 // nonzero: an informer of its own (an unkeyed transform or tweak)
}

// ownInformers hands out the own tokens of spec.
var ownInformers atomic.Uint64

// spec returns c's sharing identity for gvr.
func (c resourceConfig) spec(gvr schema.GroupVersionResource, follow bool) spec {
	s := spec{
		gvr: gvr, follow: follow,
		namespaces: strings.Join(c.namespaces, ","),
		permitted:  c.permitted, candidates: strings.Join(c.candidates, ","),
		labelSelector: c.labelSelector, fieldSelector: c.fieldSelector,
		projection:   canonicalProjection(c.projection),
		transformKey: c.transform.key, tweakKey: c.tweak.key,
		sharingKey: c.sharingKey,
		own:        c.own,
	}
	if follow {
		s.gvr.Version = ""
	}
	if !c.shard.IsZero() {
		s.shard = c.shard.Selector()
	}
	if c.shardSource != nil {
		s.shardSource = c.shardSource
		if !reflect.TypeOf(c.shardSource).Comparable() {
			s.shardSource = ownInformers.Add(1)
		}
	}
	return s
}

// fieldPaths splits Projection.Fields at the commas outside brackets.
func fieldPaths(fields string) []string {
	var out []string
	depth, start := 0, 0
	var quote byte
	for i := 0; i < len(fields); i++ {
		switch ch := fields[i]; {
		case quote != 0:
			if ch == quote {
				quote = 0
			}
		case depth > 0 && (ch == '\'' || ch == '"'):
			quote = ch
		case ch == '[':
			depth++
		case ch == ']':
			depth--
		case ch == ',' && depth == 0:
			out = append(out, strings.TrimSpace(fields[start:i]))
			start = i + 1
		}
	}
	if last := strings.TrimSpace(fields[start:]); last != "" || len(out) > 0 {
		out = append(out, last)
	}
	return out
}

func canonicalProjection(p Projection) Projection {
	paths := fieldPaths(p.Fields)
	slices.Sort(paths)
	p.Fields = strings.Join(slices.Compact(paths), ",")
	return p
}

// validate reports what no retry cures in a projection.
func (p Projection) validate() error {
	if p.MetadataOnly && p.Compact {
		return fmt.Errorf("%w: Compact and MetadataOnly exclude each other", ErrInvalid)
	}
	if !p.Compact && p.CompactOptions != (ikcache.CompactorOptions{}) {
		return fmt.Errorf("%w: CompactOptions without Compact", ErrInvalid)
	}
	if p.Fields != "" {
		paths := fieldPaths(p.Fields)
		if slices.Contains(paths, "") {
			return fmt.Errorf("%w: empty field path in %q", ErrInvalid, p.Fields)
		}
		if _, err := ikcache.Project(paths...); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalid, err)
		}
	}
	return nil
}

// keepsManagedFields reports whether a Fields projection may keep
// metadata.managedFields (a path may name it or all of metadata).
func keepsManagedFields(paths []string) bool {
	for _, p := range paths {
		p = strings.TrimPrefix(p, ".")
		if p == "metadata" || strings.HasPrefix(p, "[") || strings.Contains(p, "managedFields") {
			return true
		}
	}
	return false
}

// clientKind is the client an informer lists and watches through.
type clientKind int

const (
	factoryClient  clientKind = iota // the factory's dynamic client (client-go's decoding)
	metadataClient                   // the metadata client (MetadataOnly)
	fastClient                       // codec.Clients.For(decode)
	compactClient                    // codec.Clients.ForCompact(decode): objects arrive as compact envelopes
)

// plan is how an informer is built, resolved once from its folded
// options: the client and decoding, the transforms in order, the indexers
// and the default handler resync period.
type plan struct {
	client     clientKind
	decode     decode.Options // for fastClient and compactClient
	transforms []toolscache.TransformFunc
	compactor  *ikcache.Compactor // Projection.Compact
	indexers   toolscache.Indexers
	resync     time.Duration
}

// transform is the plan's transforms as one (nil: none).
func (p plan) transform() toolscache.TransformFunc {
	switch len(p.transforms) {
	case 0:
		return nil
	case 1:
		return p.transforms[0]
	}
	return ikcache.Chain(p.transforms...)
}

// resolve makes the plan of a valid c. fast says whether the factory has
// the fast decode path.
func resolve(c resourceConfig, fast bool) plan {
	pr := c.projection
	p := plan{indexers: c.allIndexers(), resync: c.resyncPeriod()}
	paths := fieldPaths(pr.Fields)
	switch {
	case pr.MetadataOnly:
		p.client = metadataClient
	case fast:
		p.client = fastClient
		p.decode.SkipManagedFields = pr.StripManagedFields || (len(paths) > 0 && !keepsManagedFields(paths))
		p.decode.SkipLastApplied = pr.DropLastApplied
		// Nothing of the caller's runs before the Compactor, and the
		// transforms before it find nothing to remove in an envelope.
		if pr.Compact && len(paths) == 0 && c.transform.f == nil {
			p.client = compactClient
		}
	}
	// The transforms run on every path: objects the fast decoder hands to
	// client-go's codec are decoded whole.
	if pr.StripManagedFields {
		p.transforms = append(p.transforms, ikcache.StripManagedFields)
	}
	if pr.DropLastApplied {
		p.transforms = append(p.transforms, ikcache.DropLastAppliedConfiguration)
	}
	if len(paths) > 0 {
		project, _ := ikcache.Project(paths...) // validated
		p.transforms = append(p.transforms, project)
	}
	if c.transform.f != nil {
		p.transforms = append(p.transforms, c.transform.f)
	}
	if pr.Compact {
		p.compactor = ikcache.NewCompactor(pr.CompactOptions)
		p.transforms = append(p.transforms, p.compactor.Transform)
	}
	return p
}
