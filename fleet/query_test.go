package fleet

import (
	"context"
	"errors"
	"testing"

	"github.com/informerkit/informerkit/query"
)

// TestQueryWiring: a fleet's Lister.Query checks the query (typed errors)
// and answers over the clusters it holds (none here; the per-cluster
// behaviour is query.ScanParts', tested against a model there).
func TestQueryWiring(t *testing.T) {
	src := make(sourceFunc, 1)
	f := New(src, Options{})
	f.Start(context.Background())
	defer f.Shutdown()
	l := f.ForResource(configmaps).Lister()
	if _, err := l.Query(query.New().Where("data..x", query.Eq, query.String("1"))); !errors.Is(err, query.ErrInvalidPath) {
		t.Fatalf("bad path: %v", err)
	}
	q, err := query.Parse("where=cluster+in+(east,west)&orderBy=cluster,-metadata.name&limit=5&count=true")
	if err != nil {
		t.Fatal(err)
	}
	p, err := l.Query(q)
	if err != nil || len(p.Items) != 0 || p.Continue != "" || p.Total == nil || *p.Total != 0 {
		t.Fatalf("empty fleet: %+v, %v", p, err)
	}
}
