package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/informerkit/informerkit/internal/leakcheck"
	"github.com/informerkit/informerkit/subscription"
)

var gearsGVR = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gears"}

// fakeTables answers Table requests from objects it holds, the way the
// API server's table convertor does for a CRD with printer columns
// SIZE and (priority 1) OWNER. It counts requests.
type fakeTables struct {
	mu       sync.Mutex                // guards everything below
	objs     map[string]map[string]any // "ns/name" → spec
	columns  []metav1.TableColumnDefinition
	notTable bool // answer with the object, as a server that cannot convert
	fail     error
	gate     chan struct{} // when set, requests wait until it is closed
	started  chan struct{} // receives (without blocking) when a request starts
	gets     int
	lists    int
	pageSize int
}

func newFakeTables() *fakeTables {
	return &fakeTables{
		objs: map[string]map[string]any{},
		columns: []metav1.TableColumnDefinition{
			{Name: "Name", Type: "string", Format: "name"},
			{Name: "Size", Type: "integer"},
			{Name: "Owner", Type: "string", Priority: 1},
			{Name: "Age", Type: "date"},
		},
		pageSize: 2,
		started:  make(chan struct{}, 100),
	}
}

// hold makes requests wait until the returned release is called.
func (f *fakeTables) hold() (release func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := make(chan struct{})
	f.gate = g
	for len(f.started) > 0 {
		<-f.started // only requests from now on count
	}
	return func() { close(g) }
}

// enter waits for the gate, then takes the lock.
func (f *fakeTables) enter() {
	f.mu.Lock()
	g := f.gate
	f.mu.Unlock()
	select {
	case f.started <- struct{}{}:
	default:
	}
	if g != nil {
		<-g
	}
	f.mu.Lock()
}

func (f *fakeTables) set(ns, name string, size int64, owner string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.objs[ns+"/"+name] = map[string]any{"size": size, "owner": owner}
}

func (f *fakeTables) remove(ns, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.objs, ns+"/"+name)
}

func (f *fakeTables) counts() (gets, lists int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gets, f.lists
}

// row renders one object under the current columns (caller holds mu).
func (f *fakeTables) row(key string) map[string]any {
	ns, name, _ := strings.Cut(key, "/")
	spec := f.objs[key]
	var cells []any
	for _, c := range f.columns {
		switch c.Name {
		case "Name":
			cells = append(cells, name)
		case "Age":
			cells = append(cells, "5h")
		default:
			cells = append(cells, spec[strings.ToLower(c.Name)])
		}
	}
	return map[string]any{
		"cells": cells,
		"object": map[string]any{
			"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
			"metadata": map[string]any{"name": name, "namespace": ns, "labels": map[string]any{"a": "b"}},
		},
	}
}

func (f *fakeTables) table(keys []string, cont string) []byte {
	rows := []any{}
	for _, k := range keys {
		rows = append(rows, f.row(k))
	}
	b, err := json.Marshal(map[string]any{
		"kind": "Table", "apiVersion": "meta.k8s.io/v1",
		"metadata":          map[string]any{"continue": cont},
		"columnDefinitions": f.columns, "rows": rows,
	})
	if err != nil {
		panic(err)
	}
	return b
}

func (f *fakeTables) get(_ context.Context, gvr schema.GroupVersionResource, ns, name string) ([]byte, error) {
	f.enter()
	defer f.mu.Unlock()
	f.gets++
	if f.fail != nil {
		return nil, f.fail
	}
	key := ns + "/" + name
	if _, ok := f.objs[key]; !ok {
		return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
	}
	if f.notTable {
		return []byte(fmt.Sprintf(`{"kind":"Gear","apiVersion":"example.com/v1","metadata":{"name":%q,"namespace":%q}}`, name, ns)), nil
	}
	return f.table([]string{key}, ""), nil
}

func (f *fakeTables) list(_ context.Context, _ schema.GroupVersionResource, ns, _, _ string, _ int64, cont string) ([]byte, error) {
	f.enter()
	defer f.mu.Unlock()
	f.lists++
	if f.fail != nil {
		return nil, f.fail
	}
	if f.notTable {
		return []byte(`{"kind":"GearList","apiVersion":"example.com/v1","items":[]}`), nil
	}
	var keys []string
	for k := range f.objs {
		if ns == "" || strings.HasPrefix(k, ns+"/") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	start := 0
	if cont != "" {
		start, _ = strconv.Atoi(cont)
	}
	end, next := start+f.pageSize, ""
	if end < len(keys) {
		next = strconv.Itoa(end)
	} else {
		end = len(keys)
	}
	return f.table(keys[start:end], next), nil
}

// syncBuffer is an io.Writer safe to read while the output writes.
type syncBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type tableHarness struct {
	t    *testing.T
	fake *fakeTables
	out  *syncBuffer
	errs *syncBuffer
	tab  *tableOutput
}

func newTableHarness(t *testing.T, wide, withKind bool) *tableHarness {
	t.Helper()
	check := leakcheck.Snapshot("main.(*tableOutput)")
	h := &tableHarness{t: t, fake: newFakeTables(), out: &syncBuffer{}, errs: &syncBuffer{}}
	p := newPrinter(h.out, h.errs, false, false)
	h.tab = newTableOutput(h.fake, p, wide, withKind, 5*time.Second, nil)
	t.Cleanup(func() {
		h.tab.stop()
		check(t)
	})
	return h
}

func gear(ns, name string, created time.Time) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("example.com/v1")
	u.SetKind("Gear")
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetCreationTimestamp(metav1.NewTime(created))
	return u
}

func (h *tableHarness) send(typ subscription.EventType, u *unstructured.Unstructured, initial bool, namespaces ...string) {
	h.tab.event(subscription.Event{Type: typ, GVR: gearsGVR, Object: u, IsInitialList: initial}, u, namespaces, "", "")
}

// lines waits until stdout holds n lines and returns them, each split into
// fields.
func (h *tableHarness) lines(n int) [][]string {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		out := strings.TrimRight(h.out.String(), "\n")
		var ls []string
		if out != "" {
			ls = strings.Split(out, "\n")
		}
		if len(ls) >= n {
			if len(ls) > n {
				h.t.Fatalf("want %d lines, got %d:\n%s", n, len(ls), out)
			}
			var fs [][]string
			for _, l := range ls {
				fs = append(fs, strings.Fields(l))
			}
			return fs
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("want %d lines, got %d within 10s:\n%s\nstderr:\n%s", n, len(ls), out, h.errs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func wantFields(t *testing.T, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("line %q, want %q", strings.Join(got, " "), strings.Join(want, " "))
	}
}

func TestTableInitialListOneRequestHeaderOnce(t *testing.T) {
	h := newTableHarness(t, false, false)
	created := time.Now().Add(-5 * time.Hour)
	for i := 1; i <= 5; i++ {
		h.fake.set("a", fmt.Sprintf("g%d", i), int64(i), "alice")
	}
	// The first row's request is held while the rest of the initial list
	// arrives: those wait together and come from one LIST.
	release := h.fake.hold()
	h.send(subscription.Added, gear("a", "g1", created), true)
	<-h.fake.started
	for i := 2; i <= 5; i++ {
		h.send(subscription.Added, gear("a", fmt.Sprintf("g%d", i), created), true)
	}
	release()
	ls := h.lines(6)
	// All namespaces watched and the resource is namespaced: NAMESPACE;
	// OWNER has priority 1: not without -o wide.
	wantFields(t, ls[0], "EVENT", "NAMESPACE", "NAME", "SIZE", "AGE")
	for i := 1; i <= 5; i++ {
		wantFields(t, ls[i], "ADDED", "a", fmt.Sprintf("g%d", i), strconv.Itoa(i), "5h")
	}
	gets, lists := h.fake.counts()
	// One GET for g1, then the 4 others from one LIST of 5 objects in
	// pages of 2 (3 requests).
	if gets != 1 || lists != 3 {
		t.Errorf("%d GETs and %d LIST pages for an initial list of 5, want 1 and 3", gets, lists)
	}
}

func TestTableUpdateGetsRowDeleteUsesLastRow(t *testing.T) {
	h := newTableHarness(t, false, false)
	created := time.Now().Add(-5 * time.Hour)
	h.fake.set("a", "g1", 1, "alice")
	h.send(subscription.Added, gear("a", "g1", created), true, "a")
	h.lines(2)
	h.fake.set("a", "g1", 7, "alice")
	h.send(subscription.Updated, gear("a", "g1", created), false, "a")
	ls := h.lines(3)
	// One namespace watched: no NAMESPACE column; kubectl's word for an
	// update is MODIFIED; the header is not repeated.
	wantFields(t, ls[0], "EVENT", "NAME", "SIZE", "AGE")
	wantFields(t, ls[2], "MODIFIED", "g1", "7", "5h")

	h.fake.remove("a", "g1") // the server cannot convert what is gone
	h.send(subscription.Deleted, gear("a", "g1", created), false, "a")
	ls = h.lines(4)
	wantFields(t, ls[3], "DELETED", "g1", "7", "5h")
	if gets, _ := h.fake.counts(); gets != 2 {
		t.Errorf("%d GETs, want 2 (the add and the update; none for the delete)", gets)
	}
}

func TestTableColumnsChangeReprintHeader(t *testing.T) {
	h := newTableHarness(t, true, false)
	created := time.Now().Add(-5 * time.Hour)
	h.fake.set("a", "g1", 1, "alice")
	h.send(subscription.Added, gear("a", "g1", created), false, "a")
	ls := h.lines(2)
	// -o wide: the priority-1 column OWNER too.
	wantFields(t, ls[0], "EVENT", "NAME", "SIZE", "OWNER", "AGE")
	wantFields(t, ls[1], "ADDED", "g1", "1", "alice", "5h")

	// The CRD's printer columns change: a new column, a new header.
	h.fake.mu.Lock()
	h.fake.columns = append(h.fake.columns[:3:3], metav1.TableColumnDefinition{Name: "Shape", Type: "string"}, h.fake.columns[3])
	h.fake.objs["a/g1"]["shape"] = "round"
	h.fake.mu.Unlock()
	h.send(subscription.Updated, gear("a", "g1", created), false, "a")
	ls = h.lines(4)
	wantFields(t, ls[2], "EVENT", "NAME", "SIZE", "OWNER", "SHAPE", "AGE")
	wantFields(t, ls[3], "MODIFIED", "g1", "1", "alice", "round", "5h")
}

func TestTableCoalescesEventsOfOneObject(t *testing.T) {
	h := newTableHarness(t, false, false)
	created := time.Now().Add(-5 * time.Hour)
	h.fake.set("a", "g1", 3, "alice")
	h.fake.set("a", "g2", 1, "alice")
	// While g1's row is being fetched, g2 is added and updated three
	// times: one row for g2, ADDED, with its latest state.
	release := h.fake.hold()
	h.send(subscription.Added, gear("a", "g1", created), false, "a")
	<-h.fake.started
	h.send(subscription.Added, gear("a", "g2", created), false, "a")
	for i := range 3 {
		h.fake.set("a", "g2", int64(i+2), "alice")
		h.send(subscription.Updated, gear("a", "g2", created), false, "a")
	}
	release()
	ls := h.lines(3)
	wantFields(t, ls[1], "ADDED", "g1", "3", "5h")
	wantFields(t, ls[2], "ADDED", "g2", "4", "5h")
	if gets, lists := h.fake.counts(); gets+lists != 2 {
		t.Errorf("%d GETs and %d LISTs for g1 and four events of g2, want two requests", gets, lists)
	}
}

func TestTableBurstBecomesList(t *testing.T) {
	h := newTableHarness(t, false, false)
	created := time.Now().Add(-5 * time.Hour)
	h.fake.set("a", "first", 0, "x")
	h.send(subscription.Added, gear("a", "first", created), false)
	h.lines(2)
	for i := range 30 {
		h.fake.set("a", fmt.Sprintf("b%02d", i), int64(i), "x")
	}
	h.fake.mu.Lock()
	h.fake.pageSize = 500
	h.fake.mu.Unlock()
	release := h.fake.hold()
	h.send(subscription.Added, gear("a", "b00", created), false)
	<-h.fake.started
	for i := 1; i < 30; i++ {
		h.send(subscription.Added, gear("a", fmt.Sprintf("b%02d", i), created), false)
	}
	release()
	ls := h.lines(32)
	for i := range 30 {
		wantFields(t, ls[2+i], "ADDED", "a", fmt.Sprintf("b%02d", i), strconv.Itoa(i), "5h")
	}
	// first, b00: GETs; b01..b29, waiting together: one LIST.
	if gets, lists := h.fake.counts(); gets != 2 || lists != 1 {
		t.Errorf("%d GETs and %d LIST pages for a burst of 30 new objects, want 2 and 1", gets, lists)
	}
}

func TestTableGoneBeforeFetchedPrintsNameAndAge(t *testing.T) {
	h := newTableHarness(t, false, false)
	created := time.Now().Add(-3 * time.Hour)
	h.fake.set("a", "g1", 1, "alice")
	h.send(subscription.Added, gear("a", "g1", created), false, "a")
	h.lines(2)
	// Added and deleted while another row is fetched: an ADDED and a
	// DELETED under the last columns, name and age from the informer's
	// object, the other cells empty.
	release := h.fake.hold()
	h.send(subscription.Updated, gear("a", "g1", created), false, "a")
	<-h.fake.started
	h.send(subscription.Added, gear("a", "ghost", created), false, "a")
	h.send(subscription.Deleted, gear("a", "ghost", created), false, "a")
	release()
	ls := h.lines(5)
	wantFields(t, ls[2], "MODIFIED", "g1", "1", "5h")
	wantFields(t, ls[3], "ADDED", "ghost", "3h") // both events print, from what is known
	wantFields(t, ls[4], "DELETED", "ghost", "3h")
	if gets, _ := h.fake.counts(); gets != 2 {
		t.Errorf("%d GETs, want 2 (g1 twice; none for an object known to be gone)", gets)
	}
	if h.errs.String() != "" {
		t.Errorf("stderr: %s", h.errs.String())
	}
}

func TestTableKindInNameWithSeveralResources(t *testing.T) {
	h := newTableHarness(t, false, true)
	created := time.Now().Add(-5 * time.Hour)
	h.fake.set("a", "g1", 1, "alice")
	h.send(subscription.Added, gear("a", "g1", created), false)
	ls := h.lines(2)
	wantFields(t, ls[1], "ADDED", "a", "gear.example.com/g1", "1", "5h")
}

func TestTableServerRefusesTable(t *testing.T) {
	h := newTableHarness(t, false, false)
	created := time.Now().Add(-4 * time.Hour)
	h.fake.notTable = true
	h.fake.set("a", "g1", 1, "alice")
	h.fake.set("a", "g2", 2, "alice")
	h.send(subscription.Added, gear("a", "g1", created), false, "a")
	h.lines(2)
	h.send(subscription.Updated, gear("a", "g1", created), false, "a")
	h.send(subscription.Added, gear("a", "g2", created), false, "a")
	ls := h.lines(4)
	wantFields(t, ls[0], "EVENT", "NAME", "AGE")
	wantFields(t, ls[1], "ADDED", "g1", "4h")
	wantFields(t, ls[2], "MODIFIED", "g1", "4h")
	wantFields(t, ls[3], "ADDED", "g2", "4h")
	warnings := regexp.MustCompile(`does not serve it as a Table`).FindAllString(h.errs.String(), -1)
	if len(warnings) != 1 {
		t.Errorf("%d warnings, want one:\n%s", len(warnings), h.errs.String())
	}
	if gets, lists := h.fake.counts(); gets+lists != 1 {
		t.Errorf("%d GETs and %d LISTs after the server refused Table, want the one that found out", gets, lists)
	}
}

func TestTableRequestFailureWarnsOnceAndPrintsWhatIsKnown(t *testing.T) {
	h := newTableHarness(t, false, false)
	created := time.Now().Add(-4 * time.Hour)
	h.fake.set("a", "g1", 1, "alice")
	h.send(subscription.Added, gear("a", "g1", created), false, "a")
	h.lines(2)
	h.fake.mu.Lock()
	h.fake.fail = apierrors.NewForbidden(gearsGVR.GroupResource(), "g1", fmt.Errorf("no"))
	h.fake.mu.Unlock()
	h.send(subscription.Updated, gear("a", "g1", created), false, "a")
	h.lines(3)
	h.send(subscription.Updated, gear("a", "g1", created), false, "a")
	ls := h.lines(4)
	// The last row known, its age recomputed.
	wantFields(t, ls[2], "MODIFIED", "g1", "1", "4h")
	wantFields(t, ls[3], "MODIFIED", "g1", "1", "4h")
	if n := strings.Count(h.errs.String(), "cannot fetch table rows"); n != 1 {
		t.Errorf("%d warnings, want one:\n%s", n, h.errs.String())
	}
}

func TestTableStopPrintsWaitingRowsAndEnds(t *testing.T) {
	h := newTableHarness(t, false, false)
	created := time.Now().Add(-4 * time.Hour)
	h.fake.set("a", "g1", 1, "alice")
	release := h.fake.hold()
	h.send(subscription.Added, gear("a", "g1", created), false, "a")
	<-h.fake.started
	go func() {
		time.Sleep(100 * time.Millisecond)
		release()
	}()
	h.tab.stop() // waits for the row being fetched
	wantFields(t, h.lines(2)[1], "ADDED", "g1", "1", "5h")
	h.send(subscription.Added, gear("a", "late", created), false, "a") // after stop: dropped
	time.Sleep(100 * time.Millisecond)
	h.lines(2)
}

func TestDecodeTableKeepsIntegers(t *testing.T) {
	f := newFakeTables()
	f.set("a", "g1", 1234567890123, "alice")
	table, err := decodeTable(f.table([]string{"a/g1"}, ""))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(table.Rows[0].Cells[1]); got != "1234567890123" {
		t.Errorf("integer cell printed as %q", got)
	}
	m, ok := table.Rows[0].Object.Object.(metav1.Object)
	if !ok || m.GetName() != "g1" || m.GetNamespace() != "a" || m.GetLabels() != nil {
		t.Errorf("row object %#v: want the name and namespace only", table.Rows[0].Object.Object)
	}
	if _, err := decodeTable([]byte(`{"kind":"Gear","apiVersion":"example.com/v1"}`)); err == nil {
		t.Error("an object that is not a Table decoded as one")
	}
}

func TestTableInitialListIsOneAlignedBlock(t *testing.T) {
	h := newTableHarness(t, false, false)
	created := time.Now().Add(-5 * time.Hour)
	names := []string{"a", "a-much-longer-name", "mid-name"}
	for i, n := range names {
		h.fake.set("ns", n, int64(i*1000), "x")
	}
	// The informer delivers an initial list in a burst, but the first
	// event's rows may start before the rest arrive: they wait for it.
	h.send(subscription.Added, gear("ns", names[0], created), true, "ns")
	time.Sleep(20 * time.Millisecond) // well within tableInitialWindow
	for _, n := range names[1:] {
		h.send(subscription.Added, gear("ns", n, created), true, "ns")
	}
	h.lines(4)
	out := strings.Split(strings.TrimRight(h.out.String(), "\n"), "\n")
	col := strings.Index(out[0], "SIZE")
	for _, l := range out[1:] {
		// The SIZE cell of every row starts under the header's SIZE.
		if col < 1 || len(l) <= col || l[col-1] != ' ' || l[col] == ' ' {
			t.Errorf("not aligned with the header:\n%s", strings.Join(out, "\n"))
			break
		}
	}
	if gets, lists := h.fake.counts(); gets+lists > 2 {
		t.Errorf("%d GETs and %d LIST pages for an initial list of 3", gets, lists)
	}
}

func TestTableDeletedAndCreatedAgainPrintsTheNewObject(t *testing.T) {
	h := newTableHarness(t, false, false)
	created := time.Now().Add(-5 * time.Hour)
	h.fake.set("a", "g0", 0, "x")
	h.fake.set("a", "g1", 1, "x")
	h.send(subscription.Added, gear("a", "g1", created), false, "a")
	h.lines(2)
	release := h.fake.hold()
	h.send(subscription.Added, gear("a", "g0", created), false, "a")
	<-h.fake.started
	// While g0's row is fetched, g1 is deleted and created again.
	h.send(subscription.Deleted, gear("a", "g1", created), false, "a")
	h.fake.set("a", "g1", 9, "x")
	h.send(subscription.Added, gear("a", "g1", created), false, "a")
	release()
	ls := h.lines(4)
	wantFields(t, ls[2], "ADDED", "g0", "0", "5h")
	wantFields(t, ls[3], "ADDED", "g1", "9", "5h")
}

func TestTableClusterScopedHasNoNamespaceColumn(t *testing.T) {
	h := newTableHarness(t, false, false)
	created := time.Now().Add(-5 * time.Hour)
	h.fake.set("", "node-1", 4, "x")
	h.send(subscription.Added, gear("", "node-1", created), false)
	ls := h.lines(2)
	wantFields(t, ls[0], "EVENT", "NAME", "SIZE", "AGE")
	wantFields(t, ls[1], "ADDED", "node-1", "4", "5h")
}

func TestResourcePath(t *testing.T) {
	for _, tc := range []struct {
		gvr  schema.GroupVersionResource
		ns   string
		want string
	}{
		{schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, "web", "/api/v1/namespaces/web/configmaps"},
		{schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, "", "/api/v1/nodes"},
		{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, "", "/apis/apps/v1/deployments"},
		{gearsGVR, "a", "/apis/example.com/v1/namespaces/a/gears"},
	} {
		if got := path.Join(resourcePath(tc.gvr, tc.ns)...); got != tc.want { // as rest.Request.AbsPath joins them
			t.Errorf("resourcePath(%v, %q) = %q, want %q", tc.gvr, tc.ns, got, tc.want)
		}
	}
}
