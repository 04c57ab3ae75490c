package factorytest

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/client-go/rest"
)

// watchListOff is client-go's feature gates with WatchListClient off.
type watchListOff struct{ clientfeatures.Gates }

func (g watchListOff) Enabled(f clientfeatures.Feature) bool {
	return f != clientfeatures.WatchListClient && g.Gates.Enabled(f)
}

// A LIST sync (client-go's WatchListClient off) is paginated: the
// reflector's first list asks for any resourceVersion ("0") with its page
// size, which the API server would answer whole from its watch cache;
// informerkit sends it as a consistent list, which the server pages, so
// the client never holds the whole list's body. Every object arrives, in
// pages of the reflector's size, the later ones by continue token.
func TestListSyncIsPaged(t *testing.T) {
	// Not parallel: it replaces client-go's process-wide feature gates.
	ctx := ctxT(t, 5*time.Minute)
	gvr, _ := installCRD(t, ctx)
	ns := unique("paged")
	if err := cp.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	const n = 1100 // three pages of 500
	dyn := cp.Dynamic()
	if err := parallel(n, 16, func(i int) error {
		o := obj(gvr.GroupVersion().String(), "Widget", ns, fmt.Sprintf("w-%d", i), nil)
		_, err := dyn.Resource(gvr).Namespace(ns).Create(ctx, o, metav1.CreateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}

	base := clientfeatures.FeatureGates()
	clientfeatures.ReplaceFeatureGates(watchListOff{base})
	defer clientfeatures.ReplaceFeatureGates(base)

	path := "/apis/" + gvr.Group + "/" + gvr.Version + "/" + gvr.Resource
	var mu sync.Mutex
	var lists []string // each list request's resourceVersion, limit and whether it continued
	cfg := rest.CopyConfig(cp.Config())
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTrip(func(req *http.Request) (*http.Response, error) {
			q := req.URL.Query()
			if req.Method == http.MethodGet && req.URL.Path == path && q.Get("watch") != "true" {
				mu.Lock()
				lists = append(lists, fmt.Sprintf("rv=%q limit=%s continued=%v", q.Get("resourceVersion"), q.Get("limit"), q.Get("continue") != ""))
				mu.Unlock()
			}
			return rt.RoundTrip(req)
		})
	})
	f := newFactory(t, cfg)
	defer f.Shutdown()
	inf := f.ForResource(gvr)
	f.Start(ctx)
	if synced := f.WaitForCacheSync(ctx); !synced[gvr] {
		t.Fatalf("not synced: %v", synced)
	}
	got, err := inf.Lister().ByNamespace(ns).List(labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("lister has %d objects, want %d", len(got), n)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{`rv="" limit=500 continued=false`, `rv="" limit=500 continued=true`, `rv="" limit=500 continued=true`}
	if strings.Join(lists, "; ") != strings.Join(want, "; ") {
		t.Fatalf("list requests:\n%s\nwant:\n%s", strings.Join(lists, "\n"), strings.Join(want, "\n"))
	}
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
