package controlplane

import (
	"net/http"
	"sort"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
)

// RequestCounter counts HTTP requests by verb ("list", "watch", "get",
// "discovery", or the HTTP method otherwise) and URL path. It is an exact,
// cheap witness for "one watch per resource" and "no requests for a removed
// CRD". Safe for concurrent use.
type RequestCounter struct {
	mu     sync.Mutex // guards counts
	counts map[string]int
}

// Request is one counted kind of request.
type Request struct {
	Verb string // "list", "watch", "discovery" or the lower-case HTTP method
	Path string // URL path without the query
}

// CountRequests returns a copy of cfg whose requests are counted by the
// returned counter.
func CountRequests(cfg *rest.Config) (*rest.Config, *RequestCounter) {
	c := &RequestCounter{counts: map[string]int{}}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			c.add(classify(req), req.URL.Path)
			return rt.RoundTrip(req)
		})
	})
	return cfg, c
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func classify(req *http.Request) string {
	p := req.URL.Path
	if req.Method == http.MethodGet {
		if req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1" {
			return "watch"
		}
		if p == "/api" || p == "/apis" || strings.Count(strings.Trim(p, "/"), "/") <= 2 && (strings.HasPrefix(p, "/apis/") || strings.HasPrefix(p, "/api/")) && isGroupVersionPath(p) {
			return "discovery"
		}
		return "list" // GET of a collection or an object; Count filters by path
	}
	return strings.ToLower(req.Method)
}

// isGroupVersionPath reports whether p is /api/v1, /apis/g or /apis/g/v.
func isGroupVersionPath(p string) bool {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	switch parts[0] {
	case "api":
		return len(parts) <= 2
	case "apis":
		return len(parts) <= 3
	}
	return false
}

func (c *RequestCounter) add(verb, path string) {
	c.mu.Lock()
	c.counts[verb+" "+path]++
	c.mu.Unlock()
}

// Count returns the number of requests with verb whose path contains
// pathSubstring ("" matches all).
func (c *RequestCounter) Count(verb, pathSubstring string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for k, v := range c.counts {
		kv, kp, _ := strings.Cut(k, " ")
		if kv == verb && strings.Contains(kp, pathSubstring) {
			n += v
		}
	}
	return n
}

// Snapshot lists every counted request kind with its count, sorted.
func (c *RequestCounter) Snapshot() map[Request]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[Request]int, len(c.counts))
	for k, v := range c.counts {
		verb, path, _ := strings.Cut(k, " ")
		out[Request{Verb: verb, Path: path}] = v
	}
	return out
}

// Reset forgets all counts.
func (c *RequestCounter) Reset() {
	c.mu.Lock()
	c.counts = map[string]int{}
	c.mu.Unlock()
}

// Keys returns the counted "verb path" strings, sorted (for test messages).
func (c *RequestCounter) Keys() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.counts))
	for k := range c.counts {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
