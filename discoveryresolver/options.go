package discoveryresolver

import (
	"time"

	"github.com/go-logr/logr"
)

// Option configures a Resolver. See New for the defaults.
type Option func(*options)

type options struct {
	logger             logr.Logger
	minRefreshInterval time.Duration
	serverGroupOrder   bool
	now                func() time.Time                                        // for tests
	newTimer           func(d time.Duration) (c <-chan time.Time, stop func()) // for tests
}

// defaultMinRefreshInterval is the default of WithMinRefreshInterval.
const defaultMinRefreshInterval = time.Second

// defaultOptions is the one place where defaults are set.
func defaultOptions() options {
	return options{
		logger:             logr.Discard(),
		minRefreshInterval: defaultMinRefreshInterval,
		now:                time.Now,
		newTimer: func(d time.Duration) (<-chan time.Time, func()) {
			t := time.NewTimer(d)
			return t.C, func() { t.Stop() }
		},
	}
}

// WithLogger sets the logger. The default discards. The resolver logs at
// V(0) only when the set of group-versions failing discovery changes; refresh
// rounds are logged at V(1), waits for the minimum refresh interval at V(2).
func WithLogger(l logr.Logger) Option {
	return func(o *options) { o.logger = l }
}

// WithMinRefreshInterval sets the minimum time between the start of a
// discovery round and the start of the next one triggered by a miss
// (default one second). A miss within the interval waits for its end
// (bounded by its ctx) and shares the round that starts then, so that a
// typo resolved in a loop cannot hammer the API server. Refresh, and the
// first round after the factory marks the resolver outdated, are not
// rate-limited. Zero or negative disables the limit (concurrent misses
// still share one round).
func WithMinRefreshInterval(d time.Duration) Option {
	return func(o *options) { o.minRefreshInterval = d }
}

// WithServerGroupOrder makes the resolver choose, when a name is served by
// several API groups none of which is the core group, the group that the
// server lists first — which is what kubectl does for plural, singular and
// kind names (for CRD groups the server's order is alphabetical; for short
// names kubectl's pick depends on map order, see the package
// documentation). By default the resolver returns an
// *AmbiguousError naming the candidates instead, because silently watching
// the wrong group's resource is worse for a controller than a clear error.
func WithServerGroupOrder() Option {
	return func(o *options) { o.serverGroupOrder = true }
}
