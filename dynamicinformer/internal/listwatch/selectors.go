package listwatch

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// Funcs are one resource's list and watch requests for a namespace
// (namespace "" = all namespaces). They must be safe for concurrent use.
type Funcs struct {
	List  func(ctx context.Context, ns string, opts metav1.ListOptions) (runtime.Object, error)
	Watch func(ctx context.Context, ns string, opts metav1.ListOptions) (watch.Interface, error)
}

// Selectors are what every request of an informer carries: label and
// field selectors, then the caller's tweak function (which may override
// them). The shard selector is set below them (ShardFilter).
type Selectors struct {
	Label string
	Field string
	Tweak func(*metav1.ListOptions)
}

// Apply sets the selectors on o, then runs the tweak.
func (s Selectors) Apply(o *metav1.ListOptions) {
	if s.Label != "" {
		o.LabelSelector = s.Label
	}
	if s.Field != "" {
		o.FieldSelector = s.Field
	}
	if s.Tweak != nil {
		s.Tweak(o)
	}
}

// Single lists and watches one namespace (or all) with selectors.
type Single struct {
	Funcs     Funcs
	Namespace string
	Selectors Selectors
	// NoWatchList is true when the client cannot stream lists (client-go's
	// fake clients); the reflector then lists and watches.
	NoWatchList bool
}

var _ toolscache.ListerWatcherWithContext = (*Single)(nil)

// ListWithContext implements toolscache.ListerWatcherWithContext.
func (lw *Single) ListWithContext(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
	lw.Selectors.Apply(&o)
	return lw.Funcs.List(ctx, lw.Namespace, o)
}

// WatchWithContext implements toolscache.ListerWatcherWithContext.
func (lw *Single) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	lw.Selectors.Apply(&o)
	return lw.Funcs.Watch(ctx, lw.Namespace, o)
}

// List implements the deprecated toolscache.Lister.
func (lw *Single) List(o metav1.ListOptions) (runtime.Object, error) {
	return lw.ListWithContext(context.Background(), o)
}

// Watch implements the deprecated toolscache.Watcher.
func (lw *Single) Watch(o metav1.ListOptions) (watch.Interface, error) {
	return lw.WatchWithContext(context.Background(), o)
}

// IsWatchListSemanticsUnSupported tells the reflector whether the client
// can stream lists (client-go's watchlist contract).
func (lw *Single) IsWatchListSemanticsUnSupported() bool { return lw.NoWatchList }
