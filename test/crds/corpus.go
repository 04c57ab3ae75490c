package crds

import (
	"os"
	"path/filepath"
	"testing"
)

// CorpusEnv is the environment variable that names the directory of the
// optional third-party corpus (laid out as testdata/README.md describes).
const CorpusEnv = "INFORMERKIT_TESTDATA"

// CorpusDir returns the directory of the third-party corpus. Without
// INFORMERKIT_TESTDATA it skips the test with a message saying how to enable
// it; a value that is not an absolute path to a directory fails the test
// (go test runs each package in its own directory, so a relative path
// would name a different place for each).
func CorpusDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv(CorpusEnv)
	if dir == "" {
		t.Skipf("third-party CRD corpus not configured: set %s to the absolute path of a directory laid out as test/crds/testdata/README.md describes (crds/gateway-api/..., crds/prometheus-operator/...) to run this test", CorpusEnv)
	}
	if !filepath.IsAbs(dir) {
		t.Fatalf("%s=%q: want an absolute path", CorpusEnv, dir)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("%s=%q does not name a directory (%v)", CorpusEnv, dir, err)
	}
	return dir
}

// ReadCorpus returns the contents of a file of the third-party corpus, by
// its path relative to the corpus directory (slash-separated). It skips
// like CorpusDir; a missing file fails the test.
func ReadCorpus(t testing.TB, rel string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(CorpusDir(t), filepath.FromSlash(rel)))
	if err != nil {
		t.Fatalf("read the third-party corpus: %v", err)
	}
	return data
}
