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

// A restart from --cache-dir that resumes within the grace prints one
// line, Synced, as a cold start does: Restored is a state it passes
// through. One that stays Restored (the server does not answer) is
// reported after the grace.
func TestTransitionsRestoredIsTransient(t *testing.T) {
	var p printed
	tr := newTransitions(200*time.Millisecond, func(dynamicinformer.Status) bool { return true }, p.print)
	defer tr.stop()
	tr.observe(status("pods", dynamicinformer.Pending, 0, nil))
	tr.observe(status("pods", dynamicinformer.Restored, 5000, nil))
	tr.observe(status("pods", dynamicinformer.Synced, 5000, nil))
	tr.observe(status("nodes", dynamicinformer.Restored, 3, nil))
	time.Sleep(400 * time.Millisecond)
	if got, want := p.get(), "pods →Synced 5000\nnodes →Restored 3"; got != want {
		t.Fatalf("lines:\n%s\nwant:\n%s", got, want)
	}
}

// STATUS lines say how many objects were restored from disk and why the
// cache directory is not used: text after the state, JSON in "restored"
// and "cacheError" (omitted when there is nothing to say).
func TestStatusSaysRestoredAndCacheErr(t *testing.T) {
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	cacheErr := &dynamicinformer.InformerError{GVR: gvr, Kind: dynamicinformer.ErrCache, Err: errors.New("directory locked by another process")}
	for _, c := range []struct {
		st       dynamicinformer.Status
		text     string
		restored float64
		cacheErr string
	}{
		{dynamicinformer.Status{GVR: gvr, State: dynamicinformer.Synced, Objects: 5002, Restored: 5000}, "Synced (5002 objects); 5000 restored from disk", 5000, ""},
		{dynamicinformer.Status{GVR: gvr, State: dynamicinformer.Synced, Objects: 7, CacheErr: cacheErr}, "Synced (7 objects); " + cacheErr.Error(), 0, cacheErr.Error()},
		{dynamicinformer.Status{GVR: gvr, State: dynamicinformer.Synced, Objects: 7}, "Synced (7 objects)", 0, ""},
	} {
		var text bytes.Buffer
		newPrinter(&text, &text, false, false).status(c.st, "")
		if line := strings.TrimSpace(text.String()); !strings.HasSuffix(line, "STATUS  configmaps.v1 "+c.text) {
			t.Errorf("text %q, want it to end in %q", line, c.text)
		}
		var js bytes.Buffer
		newPrinter(&js, &js, true, false).status(c.st, "")
		var rec map[string]any
		if err := json.Unmarshal(js.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		if r, _ := rec["restored"].(float64); r != c.restored {
			t.Errorf("%s: restored %v, want %v", js.String(), rec["restored"], c.restored)
		}
		if e, _ := rec["cacheError"].(string); e != c.cacheErr {
			t.Errorf("%s: cacheError %q, want %q", js.String(), e, c.cacheErr)
		}
	}
}

func TestCacheSecretsNeedsCacheDir(t *testing.T) {
	if _, err := parseArgs([]string{"--resource", "secrets", "--cache-secrets"}, nil); err == nil || !strings.Contains(err.Error(), "--cache-secrets needs --cache-dir") {
		t.Errorf("--cache-secrets without --cache-dir: %v", err)
	}
	c, err := parseArgs([]string{"--resource", "secrets", "--cache-dir", "/tmp/x", "--cache-secrets"}, nil)
	if err != nil || c.CacheDir != "/tmp/x" || !c.CacheSecrets {
		t.Errorf("parsed %+v, %v", c, err)
	}
}
