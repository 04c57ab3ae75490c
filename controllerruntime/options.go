package controllerruntime

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// objConfig is what one informer of a kind is made with.
type objConfig struct {
	label     string
	field     string
	transform toolscache.TransformFunc
	// transformFrom names the option transform was set by: two
	// namespaces of a kind share an informer only if their transforms
	// come from the same option (functions cannot be compared).
	transformFrom string
	noDeepCopy    bool
	resync        time.Duration
}

// group is one informer of a namespaced kind held per namespace config:
// the namespaces whose configs are the same, or the NamespaceAll config.
type group struct {
	key string // the informer's key among the kind's (entryKey.group)
	// namespaces are the named namespaces it holds; nil for the
	// NamespaceAll config (all namespaces; its field selector leaves out
	// the named ones, as controller-runtime's).
	namespaces []string
	oc         objConfig
}

// kindPlan is how the cache holds the objects of a kind: the defaults'
// plan, or a ByObject's. It is made once, by newPlans.
type kindPlan struct {
	// cluster is the config of a cluster-scoped kind, and of a namespaced
	// kind when perNamespace is false (one informer, all namespaces).
	cluster objConfig
	// perNamespace: a namespaced kind is held per namespace config
	// (DefaultNamespaces, or ByObject.Namespaces, is not empty), by one
	// informer per group, and read as controller-runtime's
	// multi-namespace cache reads.
	perNamespace bool
	// namespacesSet: ByObject.Namespaces is not nil, which
	// controller-runtime refuses for a cluster-scoped kind.
	namespacesSet bool
	name          string // the option, for errors
	groups        []group
}

// config is a cache.Config with where its transform came from.
type config struct {
	cache.Config
	transformFrom string
}

func named(c cache.Config, option string) config {
	out := config{Config: c}
	if c.Transform != nil {
		out.transformFrom = option
	}
	return out
}

// defaultFrom is controller-runtime's defaultConfig: each unset field of
// to is from's.
func defaultFrom(to, from config) config {
	if to.LabelSelector == nil {
		to.LabelSelector = from.LabelSelector
	}
	if to.FieldSelector == nil {
		to.FieldSelector = from.FieldSelector
	}
	if to.Transform == nil {
		to.Transform, to.transformFrom = from.Transform, from.transformFrom
	}
	if to.UnsafeDisableDeepCopy == nil {
		to.UnsafeDisableDeepCopy = from.UnsafeDisableDeepCopy
	}
	if to.EnableWatchBookmarks == nil {
		to.EnableWatchBookmarks = from.EnableWatchBookmarks
	}
	if to.SyncPeriod == nil {
		to.SyncPeriod = from.SyncPeriod
	}
	return to
}

// objConfigOf folds a defaulted config, refusing what informerkit does
// not do; bookmarks names the config's EnableWatchBookmarks option.
func objConfigOf(c config, bookmarks string) (objConfig, error) {
	if c.EnableWatchBookmarks != nil && !*c.EnableWatchBookmarks {
		return objConfig{}, unsupported(bookmarks+"=false", "informerkit's watches always ask for bookmarks")
	}
	oc := objConfig{resync: defaultSyncPeriod, transform: c.Transform, transformFrom: c.transformFrom}
	if c.LabelSelector != nil {
		oc.label = c.LabelSelector.String()
	}
	if c.FieldSelector != nil {
		oc.field = c.FieldSelector.String()
	}
	if c.UnsafeDisableDeepCopy != nil {
		oc.noDeepCopy = *c.UnsafeDisableDeepCopy
	}
	if c.SyncPeriod != nil {
		oc.resync = *c.SyncPeriod
	}
	return oc, nil
}

// newPlans folds cache.Options into the plan of the kinds without a
// ByObject and the plan of each ByObject, following controller-runtime
// v0.25's defaulting (cache.go, defaultOpts) field by field: a
// namespace's Config is defaulted from the ByObject's settings, then
// from DefaultNamespaces[namespace], then from the Default* options; a
// ByObject without Namespaces takes DefaultNamespaces; the NamespaceAll
// config holds every namespace not named beside it (its field selector
// gains metadata.namespace!=<name> for each). splitGroups makes one
// informer per namespace (custom informers: Options.NewInformer).
func newPlans(opts cache.Options, splitGroups bool) (kindPlan, map[schema.GroupVersionKind]kindPlan, error) {
	if opts.DefaultWatchErrorHandler != nil {
		return kindPlan{}, nil, unsupported("Options.DefaultWatchErrorHandler", "watch errors are in each informer's Status (Cache.Factory().Statuses, OnStatusChange)")
	}
	global := config{Config: cache.Config{
		LabelSelector:         opts.DefaultLabelSelector,
		FieldSelector:         opts.DefaultFieldSelector,
		Transform:             opts.DefaultTransform,
		UnsafeDisableDeepCopy: opts.DefaultUnsafeDisableDeepCopy,
		EnableWatchBookmarks:  opts.DefaultEnableWatchBookmarks,
		SyncPeriod:            opts.SyncPeriod,
	}}
	if opts.DefaultTransform != nil {
		global.transformFrom = "Options.DefaultTransform"
	}
	defaults := kindPlan{name: "Options", perNamespace: len(opts.DefaultNamespaces) > 0}
	var err error
	if defaults.cluster, err = objConfigOf(global, "Options.DefaultEnableWatchBookmarks"); err != nil {
		return kindPlan{}, nil, err
	}
	nsConfigs := map[string]config{}
	for ns, c := range opts.DefaultNamespaces {
		option := fmt.Sprintf("Options.DefaultNamespaces[%q]", ns)
		nsConfigs[ns] = defaultFrom(named(c, option), global)
	}
	if defaults.groups, err = groupsOf(nsConfigs, "Options.DefaultNamespaces", splitGroups); err != nil {
		return kindPlan{}, nil, err
	}

	plans := map[schema.GroupVersionKind]kindPlan{}
	for obj, bo := range opts.ByObject {
		gvk, err := apiutil.GVKForObject(obj, opts.Scheme)
		if err != nil {
			return kindPlan{}, nil, fmt.Errorf("failed to get GVK for type %T: %w", obj, err)
		}
		name := fmt.Sprintf("ByObject[%T]", obj)
		boConfig := config{Config: cache.Config{
			LabelSelector:         bo.Label,
			FieldSelector:         bo.Field,
			Transform:             bo.Transform,
			UnsafeDisableDeepCopy: bo.UnsafeDisableDeepCopy,
			EnableWatchBookmarks:  bo.EnableWatchBookmarks,
			SyncPeriod:            bo.SyncPeriod,
		}}
		if bo.Transform != nil {
			boConfig.transformFrom = name + ".Transform"
		}
		p := kindPlan{name: name, namespacesSet: bo.Namespaces != nil}
		if p.cluster, err = objConfigOf(defaultFrom(boConfig, global), name+".EnableWatchBookmarks"); err != nil {
			return kindPlan{}, nil, err
		}
		namespaces := bo.Namespaces
		if namespaces == nil {
			namespaces = opts.DefaultNamespaces
		}
		p.perNamespace = len(namespaces) > 0
		nsConfigs := map[string]config{}
		for ns, c := range namespaces {
			option := fmt.Sprintf("%s.Namespaces[%q]", name, ns)
			if bo.Namespaces == nil {
				option = fmt.Sprintf("Options.DefaultNamespaces[%q]", ns)
			}
			cfg := defaultFrom(named(c, option), boConfig)
			if dc, ok := opts.DefaultNamespaces[ns]; ok {
				cfg = defaultFrom(cfg, named(dc, fmt.Sprintf("Options.DefaultNamespaces[%q]", ns)))
			}
			nsConfigs[ns] = defaultFrom(cfg, global)
		}
		if p.groups, err = groupsOf(nsConfigs, name+".Namespaces", splitGroups); err != nil {
			return kindPlan{}, nil, err
		}
		plans[gvk] = p
	}
	return defaults, plans, nil
}

// groupsOf makes the informers of a namespaced kind held per namespace
// config: the named namespaces whose defaulted configs are equal share
// one (unless split), and the NamespaceAll config has its own, whose
// field selector leaves out the named namespaces.
func groupsOf(nsConfigs map[string]config, option string, split bool) ([]group, error) {
	named := slices.Sorted(maps.Keys(nsConfigs))
	type settings struct {
		label, field, transformFrom string
		noDeepCopy                  bool
		resync                      time.Duration
	}
	byKey := map[settings]int{}
	var groups []group
	for _, ns := range named {
		cfg := nsConfigs[ns]
		if ns == metav1.NamespaceAll {
			var sels []fields.Selector
			for _, other := range named {
				if other != metav1.NamespaceAll {
					sels = append(sels, fields.OneTermNotEqualSelector("metadata.namespace", other))
				}
			}
			if cfg.FieldSelector != nil {
				sels = append(sels, cfg.FieldSelector)
			}
			cfg.FieldSelector = fields.AndSelectors(sels...)
		}
		oc, err := objConfigOf(cfg, fmt.Sprintf("%s[%q].EnableWatchBookmarks", option, ns))
		if err != nil {
			return nil, err
		}
		if ns == metav1.NamespaceAll {
			groups = append(groups, group{key: "all", oc: oc})
			continue
		}
		// The key compares the settings; a transform by the option it
		// came from.
		cmp := settings{oc.label, oc.field, oc.transformFrom, oc.noDeepCopy, oc.resync}
		if i, ok := byKey[cmp]; ok && !split {
			groups[i].namespaces = append(groups[i].namespaces, ns)
			continue
		}
		byKey[cmp] = len(groups)
		groups = append(groups, group{namespaces: []string{ns}, oc: oc})
	}
	for i := range groups {
		if groups[i].namespaces != nil {
			groups[i].key = "ns:" + strings.Join(groups[i].namespaces, ",")
		}
	}
	return groups, nil
}
