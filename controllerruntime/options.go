package controllerruntime

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// objConfig is what the informers of one kind are made with.
type objConfig struct {
	namespaces []string // nil: all
	label      string
	field      string
	transform  toolscache.TransformFunc
	noDeepCopy bool
	resync     time.Duration
}

// defaultConfig folds the Default* options and SyncPeriod, refusing the
// options the cache does not implement.
func defaultConfig(opts cache.Options) (objConfig, error) {
	if opts.NewInformer != nil {
		return objConfig{}, unsupported("Options.NewInformer", "informers are informerkit's (dynamicinformer factory)")
	}
	if opts.DefaultWatchErrorHandler != nil {
		return objConfig{}, unsupported("Options.DefaultWatchErrorHandler", "watch errors are in each informer's Status (Cache.Factory().Statuses, OnStatusChange)")
	}
	if opts.DefaultEnableWatchBookmarks != nil && !*opts.DefaultEnableWatchBookmarks {
		return objConfig{}, unsupported("Options.DefaultEnableWatchBookmarks=false", "informerkit's watches always ask for bookmarks")
	}
	oc := objConfig{resync: defaultSyncPeriod, transform: opts.DefaultTransform}
	if opts.SyncPeriod != nil {
		oc.resync = *opts.SyncPeriod
	}
	if opts.DefaultLabelSelector != nil {
		oc.label = opts.DefaultLabelSelector.String()
	}
	if opts.DefaultFieldSelector != nil {
		oc.field = opts.DefaultFieldSelector.String()
	}
	if opts.DefaultUnsafeDisableDeepCopy != nil {
		oc.noDeepCopy = *opts.DefaultUnsafeDisableDeepCopy
	}
	ns, err := namespaces(opts.DefaultNamespaces, "Options.DefaultNamespaces")
	if err != nil {
		return objConfig{}, err
	}
	oc.namespaces = ns
	return oc, nil
}

// byObjectConfig is defaults overridden by bo's set fields.
func byObjectConfig(defaults objConfig, bo cache.ByObject, name string) (objConfig, error) {
	if bo.EnableWatchBookmarks != nil && !*bo.EnableWatchBookmarks {
		return objConfig{}, unsupported(name+".EnableWatchBookmarks=false", "informerkit's watches always ask for bookmarks")
	}
	oc := defaults
	if bo.Namespaces != nil {
		ns, err := namespaces(bo.Namespaces, name+".Namespaces")
		if err != nil {
			return objConfig{}, err
		}
		oc.namespaces = ns
	}
	if bo.Label != nil {
		oc.label = bo.Label.String()
	}
	if bo.Field != nil {
		oc.field = bo.Field.String()
	}
	if bo.Transform != nil {
		oc.transform = bo.Transform
	}
	if bo.UnsafeDisableDeepCopy != nil {
		oc.noDeepCopy = *bo.UnsafeDisableDeepCopy
	}
	if bo.SyncPeriod != nil {
		oc.resync = *bo.SyncPeriod
	}
	return oc, nil
}

// namespaces is the namespace set of a Namespaces map (nil: all). A
// namespace with a Config of its own (selectors, transform, ... differing
// per namespace) is not supported: one informer covers all namespaces of
// a kind, with one set of options.
func namespaces(m map[string]cache.Config, name string) ([]string, error) {
	var out []string
	for ns, cfg := range m {
		if cfg.LabelSelector != nil || cfg.FieldSelector != nil || cfg.Transform != nil ||
			cfg.UnsafeDisableDeepCopy != nil || cfg.EnableWatchBookmarks != nil || cfg.SyncPeriod != nil {
			return nil, unsupported(fmt.Sprintf("%s[%q]", name, ns),
				"a per-namespace Config: one informer serves all namespaces of a kind with one set of options (set Default* or ByObject fields instead)")
		}
		if ns == v1.NamespaceAll {
			return nil, nil
		}
		out = append(out, ns)
	}
	slices.Sort(out)
	return out, nil
}
