package shardtest

import (
	"net/http"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
)

// listLog records the query of every LIST request (a GET without
// watch=true) whose path ends with /<resource>, as the transport sends it.
// Safe for concurrent use.
type listLog struct {
	mu      sync.Mutex // guards queries
	queries []string
}

// logLists returns a copy of cfg whose LISTs of resource are recorded.
func logLists(cfg *rest.Config, resource string) (*rest.Config, *listLog) {
	l := &listLog{}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			q := req.URL.Query()
			if req.Method == http.MethodGet && q.Get("watch") != "true" && q.Get("watch") != "1" &&
				strings.HasSuffix(req.URL.Path, "/"+resource) {
				l.mu.Lock()
				l.queries = append(l.queries, req.URL.RawQuery)
				l.mu.Unlock()
			}
			return rt.RoundTrip(req)
		})
	})
	return cfg, l
}

// since returns the queries recorded after the first n.
func (l *listLog) since(n int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.queries[n:]...)
}

func (l *listLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.queries)
}
