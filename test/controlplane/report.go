package controlplane

import (
	"bufio"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// ReportEnv names the file the reliability report is written to. With it
// set, every scenario that calls Scenario adds a row; rows of scenarios
// not run this time are kept from the existing file, so the report can be
// produced by several runs (e.g. the long load tests on their own).
const ReportEnv = "INFORMERKIT_RELIABILITY_REPORT"

// reportRow is one scenario's line in docs/RELIABILITY.md.
type reportRow struct {
	Scenario string // the test name
	Injected string // what the test did to the system
	Held     string // what it checked, with counts
	Result   string // PASS or FAIL
	Took     time.Duration
}

var reliabilityReport struct {
	sync.Mutex
	rows map[string]reportRow
}

// ScenarioRecord collects one scenario's row; fill Injected and Held as
// the test goes (Held is usually set last, with the counts).
type ScenarioRecord struct {
	mu       sync.Mutex
	injected string
	held     []string
}

// Injected sets what was injected.
func (s *ScenarioRecord) Injected(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.injected = fmt.Sprintf(format, args...)
}

// Held adds a fact that held (with its numbers).
func (s *ScenarioRecord) Held(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held = append(s.held, fmt.Sprintf(format, args...))
}

// Scenario starts the report row of the running test; the row is recorded
// when the test ends, marked FAIL if it failed. RunTests writes the report
// (when ReportEnv is set) after the package's tests.
func Scenario(t *testing.T) *ScenarioRecord {
	s := &ScenarioRecord{}
	start := time.Now()
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		result := "PASS"
		if t.Failed() {
			result = "FAIL"
		}
		reliabilityReport.Lock()
		defer reliabilityReport.Unlock()
		if reliabilityReport.rows == nil {
			reliabilityReport.rows = map[string]reportRow{}
		}
		reliabilityReport.rows[t.Name()] = reportRow{
			Scenario: t.Name(), Injected: s.injected, Held: strings.Join(s.held, "; "),
			Result: result, Took: time.Since(start).Round(time.Second),
		}
	})
	return s
}

const reportHeader = `# Reliability

Produced by the reliability scenarios in ` + "`test/factorytest`" + ` and
` + "`test/cachetest`" + ` against a real kube-apiserver + etcd in the test
process, under ` + "`-race`" + `:

    INFORMERKIT_RELIABILITY_REPORT=$PWD/docs/RELIABILITY.md \
      go test -race -count=1 -p 1 -timeout 60m \
      -run 'Test(Converges|Relist|PeriodicRelist|SlowAndPanicking|CoalescingUnderBurst|RBAC|BadInput|ManyCRDs|ManyObjects|StorageVersion|CRD|ForName|CorruptObjectInStorage)' \
      ./test/factorytest/ ./test/cachetest/

Each row is one test; every fault scenario ends with the convergence check
(the cache holds exactly the server's objects at the server's
resourceVersions, and the handler's last-seen state per object equals the
server's). Rows of tests not run in the last run are kept from the previous
file. Numbers are from one run on the CI machine (2 cores, shared) and vary.

Scaled down by environment variable: CRDs watched at once
` + "`INFORMERKIT_LOAD_CRDS`" + ` (CI default 40: installing a CRD takes ~0.5 s
under -race, 200 take ~2 min; the row below is from a run with 200);
objects and update rate ` + "`INFORMERKIT_LOAD_OBJECTS`" + ` (default 2000) and
` + "`INFORMERKIT_LOAD_SECONDS`" + ` (default 20; the row below is from a run with
30000 and 60): the in-process API server under -race takes 70–140
updates/s from 8 writers on this machine, not 1k/s, creates ~225 objects/s
(100k would take ~8 min before the test starts), and 100k objects do not
fit the CI budget. The load tests are skipped with ` + "`-short`" + `. Heap
figures are the whole test process (API server and etcd included).

| scenario | injected | what held | result | took |
|---|---|---|---|---|
`

// writeReport writes the rows (merged with the existing file's rows) when
// ReportEnv is set.
func writeReport() error {
	path := os.Getenv(ReportEnv)
	if path == "" {
		return nil
	}
	reliabilityReport.Lock()
	defer reliabilityReport.Unlock()
	rows := map[string]string{}
	// Sections after the table ("## ..." to the end: the soak's, written
	// by hand from its own report) are kept as they are.
	var trailer []string
	if f, err := os.Open(path); err == nil {
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if trailer != nil || strings.HasPrefix(line, "## ") {
				trailer = append(trailer, line)
				continue
			}
			if strings.HasPrefix(line, "| `Test") {
				name := strings.TrimPrefix(strings.SplitN(line, "|", 3)[1], " `")
				name = strings.TrimSuffix(strings.TrimSpace(name), "`")
				rows[name] = line
			}
		}
		f.Close()
	}
	esc := func(s string) string { return strings.ReplaceAll(s, "|", "\\|") }
	for name, r := range reliabilityReport.rows {
		rows[name] = fmt.Sprintf("| `%s` | %s | %s | %s | %s |", r.Scenario, esc(r.Injected), esc(r.Held), r.Result, r.Took)
	}
	names := make([]string, 0, len(rows))
	for n := range rows {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString(reportHeader)
	for _, n := range names {
		b.WriteString(rows[n])
		b.WriteString("\n")
	}
	if len(trailer) > 0 {
		b.WriteString("\n" + strings.Join(trailer, "\n") + "\n")
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
