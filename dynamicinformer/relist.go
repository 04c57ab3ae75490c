package dynamicinformer

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// relistJitter is the jitter of WithRelistPeriod: each wait is d to
// d*(1+relistJitter), so informers started together spread their lists.
const relistJitter = 0.1

// relistEvery asks the gate for a relist about every d until ctx ends
// (WithRelistPeriod). The gate acts only while the informer is serving a
// list it took (phase Serving): a relist asked for while the informer
// waits, lists or refills is skipped, and the next comes d later.
func (e *entry) relistEvery(ctx context.Context, d time.Duration) {
	t := time.NewTimer(wait.Jitter(d, relistJitter))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		e.logger.V(4).Info("periodic relist")
		e.lw.Relist()
		t.Reset(wait.Jitter(d, relistJitter))
	}
}
