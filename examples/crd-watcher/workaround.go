package main

import (
	"sync"

	clientfeatures "k8s.io/client-go/features"
)

// Workaround for a library bug (see README.md, "Known issues"): in
// client-go's watch-list mode (WatchListClient, on by default since 1.35)
// the reflector applies an informer's transform in its temporary store and
// the FIFO applies it again on Replace. dynamicinformer's CRD tracker
// transform (slimCRD in dynamicinformer/presence.go) is not idempotent: on
// the second pass it finds no status.conditions and records every CRD that
// existed at start as not established, so their informers go Synced →
// Removed a second after starting. Until the library is fixed the watcher
// turns watch-list off for itself: informers list, then watch.
var disableWatchListOnce sync.Once

func disableWatchList() {
	disableWatchListOnce.Do(func() {
		clientfeatures.ReplaceFeatureGates(watchListOff{clientfeatures.FeatureGates()})
	})
}

type watchListOff struct{ clientfeatures.Gates }

func (g watchListOff) Enabled(f clientfeatures.Feature) bool {
	if f == clientfeatures.WatchListClient {
		return false
	}
	return g.Gates.Enabled(f)
}
