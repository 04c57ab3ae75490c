package main

import (
	"io"
	"strings"
	"testing"
)

func TestCacheDirFlags(t *testing.T) {
	if _, err := parseArgs([]string{"-r", "secrets", "--cache-secrets"}, io.Discard); err == nil || !strings.Contains(err.Error(), "--cache-secrets needs --cache-dir") {
		t.Errorf("--cache-secrets without --cache-dir: %v", err)
	}
	c, err := parseArgs([]string{"-r", "secrets", "--cache-dir", "/tmp/x", "--cache-secrets"}, io.Discard)
	if err != nil || c.CacheDir != "/tmp/x" || !c.CacheSecrets {
		t.Errorf("parsed %+v, %v", c, err)
	}
}
