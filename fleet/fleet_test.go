package fleet

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/internal/leakcheck"
)

// sourceFunc is a Source that reports sets the test sends.
type sourceFunc chan []Cluster

func (s sourceFunc) Run(ctx context.Context, update func([]Cluster)) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case set := <-s:
			update(set)
		}
	}
}

var configmaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// Clusters that cannot sync (no usable configuration; a server refusing
// connections) say why, do not hold a wait for the reachable clusters, and
// make the fleet-wide wait end with a *SyncError naming them.
func TestClustersThatCannotSyncSayWhy(t *testing.T) {
	verify := leakcheck.Snapshot("informerkit/")
	src := make(sourceFunc, 1)
	f := New(src, Options{})
	f.Start(context.Background())
	r := f.ForResource(configmaps)

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, err := r.WaitForSync(ctx, ReachableClusters)
	cancel()
	var se *SyncError
	if !errors.As(err, &se) || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrNotSynced) {
		t.Fatalf("wait before the source's first set: %v, want a *SyncError", err)
	}

	refused := &rest.Config{Host: "https://127.0.0.1:1", TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	src <- []Cluster{{Name: "bad", Err: fmt.Errorf("%w: test", ErrClusterConfig)}, {Name: "refused", Config: refused}}
	ctx, cancel = context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := r.WaitForSync(ctx, ReachableClusters)
	if err != nil {
		t.Fatalf("wait for the reachable clusters: %v", err)
	}
	bad, _ := st.Cluster("bad")
	if bad.State != dynamicinformer.Failed || !errors.Is(bad.Err, ErrClusterConfig) || bad.HasSynced {
		t.Errorf("bad: %+v, want Failed with ErrClusterConfig", bad)
	}
	var ce *ClusterError
	if !errors.As(bad.Err, &ce) || ce.Cluster != "bad" {
		t.Errorf("bad's error %v is not a *ClusterError naming it", bad.Err)
	}
	if ref, _ := st.Cluster("refused"); !errors.Is(ref.ContactErr, dynamicinformer.ErrNoContact) || ref.HasSynced {
		t.Errorf("refused: %+v, want a ContactErr", ref)
	}
	if st.Synced() || f.Status().Synced() {
		t.Error("Synced with no cluster synced")
	}
	short, cancelShort := context.WithTimeout(context.Background(), 100*time.Millisecond)
	_, err = r.WaitForSync(short, AllClusters)
	cancelShort()
	if !errors.As(err, &se) || len(se.NotSynced) != 2 || !errors.Is(err, ErrNotSynced) {
		t.Errorf("fleet-wide wait: %v, want a *SyncError naming bad and refused", err)
	}
	for _, c := range f.Status().Clusters {
		if c.Reachable() {
			t.Errorf("cluster %s reachable", c.Name)
		}
	}
	if items, err := r.Lister().List(nil); len(items) != 0 || err != nil {
		t.Errorf("List: %v, %v", items, err)
	}
	if _, err := r.Lister().Get("nowhere", "", "x"); !errors.Is(err, ErrUnknownCluster) {
		t.Errorf("Get of an unknown cluster: %v", err)
	}

	// Both leave: a fleet without clusters has synced.
	src <- nil
	if _, err := r.WaitForSync(ctx, AllClusters); err != nil {
		t.Errorf("wait with no cluster: %v", err)
	}
	r.Release()
	if _, err := r.AddEventHandler(HandlerFuncs{}); !errors.Is(err, ErrStopped) {
		t.Errorf("AddEventHandler after Release: %v", err)
	}
	f.Shutdown()
	if _, err := f.ForResource(configmaps).WaitForSync(ctx, AllClusters); !errors.Is(err, ErrStopped) {
		t.Errorf("wait after Shutdown: %v", err)
	}
	verify(t)
}
