package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/informerkit/informerkit/dynamicinformer"
)

// A removal (CRD deleted) and a wait for a CRD are states, not errors:
// their JSON STATUS records say it in state and reason, with no "error".
// A failure keeps its "error".
func TestJSONStatusRemovalIsNotAnError(t *testing.T) {
	gvr := schema.GroupVersionResource{Group: "stable.example.com", Version: "v1", Resource: "crontabs"}
	notServed := func(reason string) error {
		return &dynamicinformer.InformerError{GVR: gvr, Kind: dynamicinformer.ErrNotServed, Err: errors.New(reason)}
	}
	for _, c := range []struct {
		st        dynamicinformer.Status
		wantError bool
	}{
		{dynamicinformer.Status{GVR: gvr, State: dynamicinformer.Removed, Reason: "the API server answered 404 Not Found", Err: notServed("the API server answered 404 Not Found")}, false},
		{dynamicinformer.Status{GVR: gvr, State: dynamicinformer.Pending, Reason: "no established CustomResourceDefinition serves crontabs.stable.example.com", Err: notServed("no established CustomResourceDefinition serves crontabs.stable.example.com")}, false},
		{dynamicinformer.Status{GVR: gvr, State: dynamicinformer.Failed, Reason: "forbidden", Err: &dynamicinformer.InformerError{GVR: gvr, Kind: dynamicinformer.ErrForbidden, Err: errors.New("may not list")}}, true},
	} {
		var out bytes.Buffer
		p := newPrinter(&out, &out, true, false)
		p.status(c.st, "")
		var rec map[string]any
		if err := json.Unmarshal(out.Bytes(), &rec); err != nil {
			t.Fatalf("%s: %v", out.String(), err)
		}
		if _, has := rec["error"]; has != c.wantError {
			t.Errorf("%s: has error %v, want %v", strings.TrimSpace(out.String()), has, c.wantError)
		}
		if rec["state"] != string(c.st.State) || rec["reason"] == "" || rec["reason"] == nil {
			t.Errorf("%s: want state %s and a reason", strings.TrimSpace(out.String()), c.st.State)
		}
	}
}

// The SYNC clock is the informers': the duration printed is from their
// start to the line, so a line printed 2 s after the start (when a
// Pending informer waiting for its CRD counts as settled) says 2s, not
// the 26 ms at which the other informer synced.
func TestSyncLineClock(t *testing.T) {
	started := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	sts := []dynamicinformer.Status{
		{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, State: dynamicinformer.Synced, Since: started.Add(26 * time.Millisecond), Objects: 3},
		{GVR: schema.GroupVersionResource{Group: "never.example.com", Version: "v1", Resource: "later"}, State: dynamicinformer.Pending,
			Since: started.Add(10 * time.Millisecond), Err: errors.New("not served")},
	}
	line, settled := syncLine(sts, started, started.Add(time.Second))
	if settled || !strings.HasPrefix(line, "SYNC    1/2 synced after 1s: ") {
		t.Errorf("at 1 s: %q settled %v, want 1/2 after 1s, not settled", line, settled)
	}
	line, settled = syncLine(sts, started, started.Add(2*time.Second+10*time.Millisecond))
	if !settled || !strings.HasPrefix(line, "SYNC    1/2 synced after 2s: ") {
		t.Errorf("at 2 s: %q settled %v, want 1/2 after 2s, settled", line, settled)
	}
	if !strings.Contains(line, "… later.v1.never.example.com Pending 0 objects") || !strings.Contains(line, "✓ configmaps.v1 Synced 3 objects") {
		t.Errorf("parts of %q", line)
	}
}
