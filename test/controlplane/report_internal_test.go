package controlplane

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeReport keeps the file's rows of scenarios not run and the sections
// after the table.
func TestReportKeepsRowsAndSections(t *testing.T) {
	path := filepath.Join(t.TempDir(), "RELIABILITY.md")
	old := reportHeader + "| `TestOld` | x | y | PASS | 1s |\n\n## Soak\n\nkept | as is\n"
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(ReportEnv, path)
	if err := writeReport(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), "| `TestOld` | x | y | PASS | 1s |\n") || !strings.HasSuffix(string(got), "\n## Soak\n\nkept | as is\n") {
		t.Fatalf("report lost a row or the trailing section:\n%s", got)
	}
}
