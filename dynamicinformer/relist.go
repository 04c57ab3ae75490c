package dynamicinformer

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// relistJitter is the jitter of WithRelistPeriod: each wait is d to
// d*(1+relistJitter), so informers started together spread their lists.
const relistJitter = 0.1

// relistPeriod is an informer's WithRelistPeriod: the shortest any of its
// handles asked for (<= 0: none). Safe for concurrent use.
type relistPeriod struct {
	mu      sync.Mutex
	d       time.Duration
	changed chan struct{} // capacity 1: a shorter period was set
}

func newRelistPeriod(d time.Duration) *relistPeriod {
	return &relistPeriod{d: max(d, 0), changed: make(chan struct{}, 1)}
}

// lower makes d the period if it is shorter (d <= 0 asks for none).
func (r *relistPeriod) lower(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if d <= 0 || (r.d > 0 && r.d <= d) {
		return
	}
	r.d = d
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

func (r *relistPeriod) get() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.d
}

// relistEvery asks the gate for a relist about every period until ctx
// ends; a shorter period set meanwhile restarts the wait. The gate acts
// only while the informer is serving a list it took (phase Serving): a
// relist asked for while the informer waits, lists or refills is skipped,
// and the next comes a period later.
func (e *entry) relistEvery(ctx context.Context) {
	t := time.NewTimer(0)
	t.Stop()
	defer t.Stop()
	arm := func() {
		t.Stop()
		if d := e.relist.get(); d > 0 {
			t.Reset(wait.Jitter(d, relistJitter))
		}
	}
	arm()
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.relist.changed:
			arm()
			continue
		case <-t.C:
		}
		e.logger.V(4).Info("periodic relist")
		e.lw.Relist()
		arm()
	}
}
