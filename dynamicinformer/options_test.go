package dynamicinformer

import (
	"reflect"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"k8s.io/klog/v2"
)

// quiet is a logger that drops everything (logr.Discard() is the zero
// Logger, which Options reads as klog's).
var quiet = funcr.New(func(string, string) {}, funcr.Options{})

// Options{} is the documented default factory: every zero value becomes
// its default in defaults, negative values turn bounds off.
func TestOptionsZeroValueDefaults(t *testing.T) {
	c := defaults(Options{})
	if reflect.TypeOf(c.logger.GetSink()) != reflect.TypeOf(klog.Background().GetSink()) {
		t.Errorf("logger %v, want klog.Background()", c.logger)
	}
	if c.rediscovery != 30*time.Second {
		t.Errorf("rediscovery %v, want 30s", c.rediscovery)
	}
	if c.watchIdle != 3*time.Minute {
		t.Errorf("watch idle timeout %v, want 3m", c.watchIdle)
	}
	if c.maxInitial != 50 {
		t.Errorf("max concurrent initial lists %d, want 50", c.maxInitial)
	}
	if !c.followCRDs || c.metrics != nil || c.resolver != nil || c.metadataClient != nil || c.apimachineryDecoding {
		t.Errorf("zero Options: followCRDs %v, metrics %v, resolver %v, metadata client %v, apimachinery decoding %v; want CRDs followed and nothing else",
			c.followCRDs, c.metrics, c.resolver, c.metadataClient, c.apimachineryDecoding)
	}
	if d := c.resource.resyncPeriod(); d != 0 {
		t.Errorf("default resync %v, want none", d)
	}

	off := defaults(Options{RediscoveryInterval: -1, WatchIdleTimeout: -1, MaxConcurrentInitialLists: -1, DisableCRDTracking: true, Logger: quiet,
		Defaults: []ResourceOption{WithResyncPeriod(time.Minute)}})
	if off.rediscovery > 0 || off.watchIdle > 0 || off.maxInitial > 0 || off.followCRDs {
		t.Errorf("negative values: rediscovery %v, watch idle %v, max initial %d, followCRDs %v; want all off", off.rediscovery, off.watchIdle, off.maxInitial, off.followCRDs)
	}
	if off.logger.GetSink() != quiet.GetSink() {
		t.Error("a given logger was replaced")
	}
	if d := off.resource.resyncPeriod(); d != time.Minute {
		t.Errorf("Defaults' WithResyncPeriod: %v, want 1m", d)
	}
	f := NewSharedInformerFactory(fakeClient(), Options{MaxConcurrentInitialLists: -1, RediscoveryInterval: 7 * time.Second})
	defer f.Shutdown()
	if f.initialLists.Cap() > 0 || f.cfg.rediscovery != 7*time.Second {
		t.Errorf("factory: initial-list cap %d, rediscovery %v; want no cap, 7s", f.initialLists.Cap(), f.cfg.rediscovery)
	}
}
