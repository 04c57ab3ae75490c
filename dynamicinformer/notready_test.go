package dynamicinformer

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
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
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	_, _ = dyn.Resource(widgets).List(ctx, metav1.ListOptions{})
	if lists.Load() < 2 {
		t.Fatalf("a refused list was sent %d times within 1.5 s, want client-go's retry after Retry-After", lists.Load())
	}
}
