package dynamicinformer

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// A watch-list request refused 429 with Retry-After (a watch cache still
// initializing) returns the 429 at once — one request, no 1 s wait in
// client-go's REST client — so the informer can list instead; a plain
// request refused so keeps client-go's retry after Retry-After.
func TestWatchListRefused429ReturnsAtOnce(t *testing.T) {
	var watchLists, lists atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("sendInitialEvents") == "true" {
			watchLists.Add(1)
		} else {
			lists.Add(1)
		}
		st := apierrors.NewTooManyRequests("storage is (re)initializing", 1).Status()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		_ = json.NewEncoder(w).Encode(st)
	}))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL}
	cfg.Wrap(notReadyNoWait)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	widgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	send := true
	start := time.Now()
	_, err = dyn.Resource(widgets).Watch(context.Background(), metav1.ListOptions{SendInitialEvents: &send, AllowWatchBookmarks: true,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if took := time.Since(start); !apierrors.IsTooManyRequests(err) || took > 500*time.Millisecond || watchLists.Load() != 1 {
		t.Fatalf("watch-list: %v after %s, %d requests; want 429 at once, one request", err, took, watchLists.Load())
	}
	// The body read to classify the 429 is given back whole.
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/apis/example.com/v1/widgets?watch=1&sendInitialEvents=true", nil)
	resp, err := notReadyNoWait(http.DefaultTransport).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"message":"storage is (re)initializing"`) || resp.Header.Get("Retry-After") != "" {
		t.Fatalf("round trip: body %q, Retry-After %q; want the Status whole and no Retry-After", body, resp.Header.Get("Retry-After"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	_, _ = dyn.Resource(widgets).List(ctx, metav1.ListOptions{})
	if lists.Load() < 2 {
		t.Fatalf("a refused list was sent %d times within 1.5 s, want client-go's retry after Retry-After", lists.Load())
	}
}

// A watch-list request refused 429 by throttling (API Priority and
// Fairness or max-in-flight: a text/plain body, no Status) keeps its
// Retry-After: client-go waits and sends it again, it is not turned into
// a list that costs the server more.
func TestWatchListThrottled429KeepsRetryAfter(t *testing.T) {
	var watchLists atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		watchLists.Add(1)
		// What k8s.io/apiserver/pkg/server/filters' tooManyRequests writes.
		w.Header().Set("Retry-After", "1")
		http.Error(w, "Too many requests, please try again later.", http.StatusTooManyRequests)
	}))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL}
	cfg.Wrap(notReadyNoWait)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	widgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	send := true
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = dyn.Resource(widgets).Watch(ctx, metav1.ListOptions{SendInitialEvents: &send, AllowWatchBookmarks: true,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if err == nil {
		t.Fatal("a throttled watch-list succeeded")
	}
	if n, took := watchLists.Load(), time.Since(start); n < 2 || took < 900*time.Millisecond {
		t.Fatalf("throttled watch-list: %d requests in %s (%v); want client-go's retry after the 1 s Retry-After", n, took, err)
	}
}
