package persist

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var testID = Identity{Spec: "configmaps.v1", Cluster: "c1"}

func open(t *testing.T, dir string) *Dir {
	t.Helper()
	d, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// states returns the states a small history passes through, written to
// dir: a snapshot of two objects, then a journal of three changes.
func writeHistory(t *testing.T, d *Dir) []map[string]string {
	t.Helper()
	st := State{RV: "10", Objects: []Object{{Key: "ns/a", RV: "5", Data: []byte(`{"a":1}`)}, {Key: "ns/b", RV: "10", Data: []byte(`{"b":1}`)}}}
	w, err := d.Create("cm", testID, st)
	if err != nil {
		t.Fatal(err)
	}
	states := []map[string]string{{"ns/a": `{"a":1}`, "ns/b": `{"b":1}`}}
	must := mustFor(t)
	must(w.Put("ns/c", "11", []byte(`{"c":1}`)))
	states = append(states, map[string]string{"ns/a": `{"a":1}`, "ns/b": `{"b":1}`, "ns/c": `{"c":1}`})
	must(w.Put("ns/a", "12", []byte(`{"a":2}`)))
	states = append(states, map[string]string{"ns/a": `{"a":2}`, "ns/b": `{"b":1}`, "ns/c": `{"c":1}`})
	must(w.Delete("ns/b", "13"))
	states = append(states, map[string]string{"ns/a": `{"a":2}`, "ns/c": `{"c":1}`})
	must(w.Sync())
	return states
}

func asMap(st State) map[string]string {
	m := map[string]string{}
	for _, o := range st.Objects {
		m[o.Key] = string(o.Data)
	}
	return m
}

func TestRoundTrip(t *testing.T) {
	d := open(t, t.TempDir())
	states := writeHistory(t, d)
	st, info, err := d.Load("cm", testID)
	if err != nil {
		t.Fatal(err)
	}
	if want := states[len(states)-1]; !reflect.DeepEqual(asMap(st), want) || st.RV != "13" || info.Journaled != 3 || info.JournalErr != nil {
		t.Fatalf("loaded %v at %s (%+v), want %v at 13", asMap(st), st.RV, info, want)
	}
	// Starting again from it, then folding on close: one snapshot, same state.
	w, err := d.Create("cm", testID, st)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Put("ns/d", "20", []byte(`{"d":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	st, info, err = d.Load("cm", testID)
	if err != nil || st.RV != "20" || len(st.Objects) != 3 || info.Journaled != 0 {
		t.Fatalf("after close: %v at %s (%+v), err %v", asMap(st), st.RV, info, err)
	}
}

func TestFilesAreOwnerOnly(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	d := open(t, dir)
	writeHistory(t, d)
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("directory mode %v (%v), want 0700", fi.Mode().Perm(), err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(files) < 3 {
		t.Fatalf("files %v", files)
	}
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s mode %v (%v), want 0600", f, fi.Mode().Perm(), err)
		}
	}
}

func TestNothingStored(t *testing.T) {
	d := open(t, t.TempDir())
	if _, _, err := d.Load("cm", testID); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err %v, want fs.ErrNotExist", err)
	}
}

func TestMismatchRemoves(t *testing.T) {
	for other, reason := range map[Identity]string{
		{Spec: testID.Spec, Cluster: "c2"}:                        ReasonCluster,
		{Spec: testID.Spec, Cluster: testID.Cluster, CRD: "uid2"}: ReasonCRD,
		{Spec: "other", Cluster: testID.Cluster}:                  ReasonSpec,
	} {
		d := open(t, t.TempDir())
		writeHistory(t, d)
		_, _, err := d.Load("cm", other)
		if !errors.Is(err, ErrMismatch) || Reason(err) != reason {
			t.Fatalf("%+v: err %v (reason %q), want ErrMismatch, %q", other, err, Reason(err), reason)
		}
		_, _, err = d.Load("cm", testID)
		if !errors.Is(err, fs.ErrNotExist) || Reason(err) != ReasonNone {
			t.Fatalf("%+v: after a mismatch the files stay (%v)", other, err)
		}
	}
}

// TestOtherFormatVersion: files of format version 2 (no list marks, so a
// state stored inside a list cannot be told) are not read by this
// version: the load says why and removes them, snapshot and journals.
func TestOtherFormatVersion(t *testing.T) {
	d := open(t, t.TempDir())
	writeHistory(t, d)
	files, _ := filepath.Glob(filepath.Join(d.Path(), "cm.*"))
	if len(files) < 2 {
		t.Fatalf("files %v, want a snapshot and a journal", files)
	}
	for _, p := range files {
		b, _ := os.ReadFile(p)
		// Version 2 had no list markers: its states cannot say whether
		// they were written inside a list.
		binary.LittleEndian.PutUint16(b[len(magic):], 2)
		os.WriteFile(p, b, 0o600)
	}
	_, _, err := d.Load("cm", testID)
	if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), fmt.Sprintf("format version 2, this program reads %d", FormatVersion)) || Reason(err) != ReasonFormat {
		t.Fatalf("err %v, want ErrMismatch naming version 2", err)
	}
	if left, _ := filepath.Glob(filepath.Join(d.Path(), "cm.*")); len(left) != 0 {
		t.Fatalf("version-2 files left: %v", left)
	}
}

func TestLock(t *testing.T) {
	dir := t.TempDir()
	d := open(t, dir)
	if _, err := Open(dir); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	d.Close()
	d2, err := Open(dir)
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	d2.Close()
}

// damaged loads a copy of the files of src in which file was changed by
// f: the state must be one of states, or the load fail with ErrCorrupt
// or ErrMismatch (snapshot damage) and remove the files. It never panics.
func damaged(t *testing.T, src, scratch, file string, states []map[string]string, f func([]byte) []byte, what string) (state int) {
	t.Helper()
	entries, _ := os.ReadDir(src)
	for _, e := range entries {
		if e.Name() == "lock" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == file {
			b = f(b)
		}
		if err := os.WriteFile(filepath.Join(scratch, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	d := &Dir{path: scratch}
	st, _, err := d.Load("cm", testID)
	if err != nil {
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrMismatch) {
			t.Fatalf("%s: err %v", what, err)
		}
		if _, _, err := d.Load("cm", testID); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s: a corrupt snapshot was not removed (%v)", what, err)
		}
		return -1
	}
	got := asMap(st)
	for i, s := range states {
		if reflect.DeepEqual(got, s) {
			return i
		}
	}
	t.Fatalf("%s: loaded %v, not a state the informer held", what, got)
	return -1
}

func TestTruncatedOrCorruptAtEveryOffset(t *testing.T) {
	dir := t.TempDir()
	d := open(t, dir)
	states := writeHistory(t, d)
	scratch := t.TempDir()
	reached := map[int]bool{}
	for _, file := range []string{"cm.snap", "cm.j1"} {
		orig, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i <= len(orig); i++ {
			i := i
			s := damaged(t, dir, scratch, file, states, func(b []byte) []byte { return b[:i] }, fmt.Sprintf("%s truncated at %d", file, i))
			if file == "cm.j1" {
				reached[s] = true
			}
			if i < len(orig) {
				damaged(t, dir, scratch, file, states, func(b []byte) []byte { b[i] ^= 0x5a; return b }, fmt.Sprintf("%s flipped at %d", file, i))
			}
		}
	}
	// A journal cut at a record boundary loads the state after that
	// record: every state of the history is reached, and no other.
	for i := range states {
		if !reached[i] {
			t.Fatalf("state %d never loaded from a truncated journal (reached %v)", i, reached)
		}
	}
	st, _, err := (&Dir{path: dir}).Load("cm", testID)
	if err != nil || !reflect.DeepEqual(asMap(st), states[len(states)-1]) {
		t.Fatalf("undamaged: %v, %v", asMap(st), err)
	}
}

// A fold interrupted after the new journal was opened and before the
// new snapshot was renamed leaves the old snapshot and both journals:
// loading applies them in order.
func TestInterruptedFold(t *testing.T) {
	d := open(t, t.TempDir())
	states := writeHistory(t, d)
	d2 := d
	// Simulate: journal 2 begun (as fold does), with one more record.
	w2 := &Writer{dir: d2, name: "cm", id: testID, gen: 2}
	if err := w2.openJournal(); err != nil {
		t.Fatal(err)
	}
	if err := w2.Put("ns/e", "14", []byte(`{"e":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := w2.Sync(); err != nil {
		t.Fatal(err)
	}
	st, info, err := d2.Load("cm", testID)
	want := states[len(states)-1]
	want["ns/e"] = `{"e":1}`
	if err != nil || !reflect.DeepEqual(asMap(st), want) || st.RV != "14" || info.Journaled != 4 {
		t.Fatalf("loaded %v at %s (%+v, %v), want %v at 14", asMap(st), st.RV, info, err, want)
	}
}

func TestWriteErrorStops(t *testing.T) {
	d := open(t, t.TempDir())
	w, err := d.Create("cm", testID, State{})
	if err != nil {
		t.Fatal(err)
	}
	w.f.Close() // the next flush fails, as on a full disk
	big := make([]byte, 128<<10)
	if err := w.Put("ns/a", "1", big); err == nil {
		err = w.Sync()
		if err == nil {
			t.Fatal("no error writing to a closed file")
		}
	}
	if err := w.Put("ns/b", "2", nil); err == nil {
		t.Fatal("the writer wrote after an error")
	}
	if w.Stats().Err == nil {
		t.Fatal("Stats.Err nil")
	}
}

func TestLaterRV(t *testing.T) {
	for _, c := range [][3]string{{"9", "10", "10"}, {"10", "9", "10"}, {"", "5", "5"}, {"5", "", "5"}, {"x", "5", "5"}} {
		if got := laterRV(c[0], c[1]); got != c[2] {
			t.Errorf("laterRV(%q, %q) = %q, want %q", c[0], c[1], got, c[2])
		}
	}
}

// TestOtherCRDReturnsState: a state stored for a CRD since deleted (or
// deleted and created again) is returned with ReasonCRD, for its objects
// to be deleted, and its files are removed.
func TestOtherCRDReturnsState(t *testing.T) {
	for _, now := range []string{"", "uid2"} {
		d := open(t, t.TempDir())
		id := Identity{Spec: testID.Spec, Cluster: testID.Cluster, CRD: "uid1"}
		w, err := d.Create("cr", id, State{})
		if err != nil {
			t.Fatal(err)
		}
		w.Put("ns/a", "5", []byte("a"))
		w.Put("ns/b", "6", []byte("b"))
		w.Sync() // in the journal, not folded
		st, _, err := d.Load("cr", Identity{Spec: id.Spec, Cluster: id.Cluster, CRD: now})
		w.Close()
		if Reason(err) != ReasonCRD || len(st.Objects) != 2 || st.RV != "6" {
			t.Fatalf("CRD %q: %d objects at %q, err %v; want 2 at 6, ReasonCRD", now, len(st.Objects), st.RV, err)
		}
	}
	d := open(t, t.TempDir())
	writeHistory(t, d) // stored without a CRD
	if st, _, err := d.Load("cm", Identity{Spec: testID.Spec, Cluster: testID.Cluster, CRD: "uid"}); Reason(err) != ReasonCRD || len(st.Objects) != 0 {
		t.Fatalf("a state of no CRD: %d objects, %v; want none", len(st.Objects), err)
	}
}

// TestListingMarkers: a state written between Listing and Listed loads
// with Listing set — after a crash (the journal as synced), after a fold
// and after Create from it — and Listed clears it and sets the list's
// resourceVersion; a truncated Listed record leaves Listing set.
func TestListingMarkers(t *testing.T) {
	dir := t.TempDir()
	d := open(t, dir)
	writeHistory(t, d)
	st, _, err := d.Load("cm", testID)
	if err != nil || st.Listing {
		t.Fatalf("before any list: listing %v, err %v", st.Listing, err)
	}
	w, err := d.Create("cm", testID, st)
	if err != nil {
		t.Fatal(err)
	}
	must := mustFor(t)
	must(w.Listing())
	// The list's first object came in at a resourceVersion later than
	// changes it has not brought yet.
	must(w.Put("ns/z", "40", []byte(`{"z":1}`)))
	must(w.Sync())
	if !w.Stats().Listing {
		t.Fatal("Stats.Listing false after Listing")
	}
	// A crash now: what a new process loads.
	crashed := t.TempDir()
	copyDir(t, dir, crashed)
	d2, err := Open(crashed)
	if err != nil {
		t.Fatal(err)
	}
	st2, _, err := d2.Load("cm", testID)
	d2.Close()
	if err != nil || !st2.Listing || st2.RV != "40" {
		t.Fatalf("crash inside a list: listing %v rv %q err %v; want true, 40", st2.Listing, st2.RV, err)
	}
	// A fold inside the list keeps the mark in the snapshot.
	must(w.Fold())
	st3, _, err := d.read("cm", testID, ^uint64(0))
	if err != nil || !st3.Listing {
		t.Fatalf("after a fold inside a list: listing %v err %v", st3.Listing, err)
	}
	must(w.Delete("ns/a", "12"))
	must(w.Listed("45"))
	must(w.Sync())
	st4, _, err := d.read("cm", testID, ^uint64(0))
	if err != nil || st4.Listing || st4.RV != "45" {
		t.Fatalf("after Listed: listing %v rv %q err %v; want false, 45", st4.Listing, st4.RV, err)
	}
	if got := asMap(st4); !reflect.DeepEqual(got, map[string]string{"ns/c": `{"c":1}`, "ns/z": `{"z":1}`}) {
		t.Fatalf("objects after the list: %v", got)
	}
	must(w.Close())

	// Create from a state inside a list keeps the mark until Listed.
	in := State{RV: "40", Listing: true, Objects: []Object{{Key: "ns/z", RV: "40", Data: []byte(`{"z":1}`)}}}
	w2, err := d.Create("cm2", testID, in)
	if err != nil {
		t.Fatal(err)
	}
	must(w2.Close())
	st5, _, err := d.Load("cm2", testID)
	if err != nil || !st5.Listing {
		t.Fatalf("Create from a listing state: listing %v err %v", st5.Listing, err)
	}

	// The Listed record cut short (the crash came while it was written):
	// the state is still inside the list.
	w3, err := d.Create("cm3", testID, State{})
	if err != nil {
		t.Fatal(err)
	}
	must(w3.Listing())
	must(w3.Put("ns/y", "50", []byte(`{"y":1}`)))
	must(w3.Listed("50"))
	must(w3.Sync())
	j := d.journalPath("cm3", w3.gen)
	b, err := os.ReadFile(j)
	if err != nil {
		t.Fatal(err)
	}
	must(os.WriteFile(j, b[:len(b)-1], 0o600))
	st6, info, err := d.read("cm3", testID, ^uint64(0))
	if err != nil || !st6.Listing || info.JournalErr == nil {
		t.Fatalf("Listed cut short: listing %v journal err %v err %v; want true, an error, nil", st6.Listing, info.JournalErr, err)
	}
}

// TestMarkerRecordsValidated: a marker with a key, or an object record
// without one, is corrupt.
func TestMarkerRecordsValidated(t *testing.T) {
	for _, c := range []struct {
		op       byte
		key      string
		data     string
		wantGood bool
	}{
		{opListing, "", "", true},
		{opListed, "", "", true},
		{opListing, "ns/a", "", false},
		{opListed, "", "x", false},
		{opPut, "", "x", false},
		{opDelete, "ns/a", "x", false},
	} {
		_, err := decodeRecord(appendRecord(nil, c.op, c.key, "7", []byte(c.data)))
		if (err == nil) != c.wantGood {
			t.Errorf("op %c key %q data %q: err %v, want good %v", c.op, c.key, c.data, err, c.wantGood)
		}
	}
}

func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() || e.Name() == "lock" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestContinue: a state loaded whole is continued in a new journal, its
// snapshot not written again; the next load (and a fold) has the old
// state and the new changes. A state whose journal was read in part is
// written again (Create): appending after a lost record would be lost.
func TestContinue(t *testing.T) {
	d := open(t, t.TempDir())
	states := writeHistory(t, d)
	st, info, err := d.Load("cm", testID)
	if err != nil || info.JournalErr != nil {
		t.Fatal(err, info.JournalErr)
	}
	snap := d.snapPath("cm")
	before, err := os.Stat(snap)
	if err != nil {
		t.Fatal(err)
	}
	w, err := d.Continue("cm", testID, st, info)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Put("ns/d", "14", []byte(`{"d":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	if after, err := os.Stat(snap); err != nil || !after.ModTime().Equal(before.ModTime()) || after.Size() != before.Size() {
		t.Fatalf("snapshot written again by Continue (%v)", err)
	}
	want := map[string]string{}
	for k, v := range states[len(states)-1] {
		want[k] = v
	}
	want["ns/d"] = `{"d":1}`
	got, _, err := d.read("cm", testID, ^uint64(0))
	if err != nil || !reflect.DeepEqual(asMap(got), want) || got.RV != "14" {
		t.Fatalf("after Continue: %v rv %q (%v), want %v at 14", asMap(got), got.RV, err, want)
	}
	if err := w.Close(); err != nil { // folds
		t.Fatal(err)
	}
	got, _, err = d.Load("cm", testID)
	if err != nil || !reflect.DeepEqual(asMap(got), want) {
		t.Fatalf("after the fold: %v (%v)", asMap(got), err)
	}

	// A journal cut short: Continue writes the state again.
	w2, err := d.Continue("cm", testID, got, LoadInfo{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w2.Put("ns/e", "15", []byte(`{"e":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := w2.Sync(); err != nil {
		t.Fatal(err)
	}
	j := d.journalPath("cm", w2.gen)
	b, _ := os.ReadFile(j)
	if err := os.WriteFile(j, b[:len(b)-2], 0o600); err != nil {
		t.Fatal(err)
	}
	st3, info3, err := d.Load("cm", testID)
	if err != nil || info3.JournalErr == nil {
		t.Fatalf("cut journal: %v %v", err, info3.JournalErr)
	}
	w3, err := d.Continue("cm", testID, st3, info3)
	if err != nil {
		t.Fatal(err)
	}
	if err := w3.Put("ns/f", "16", []byte(`{"f":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := w3.Sync(); err != nil {
		t.Fatal(err)
	}
	got, info4, err := d.Load("cm", testID)
	if err != nil || info4.JournalErr != nil || asMap(got)["ns/f"] != `{"f":1}` || asMap(got)["ns/e"] != "" {
		t.Fatalf("after a cut journal and Continue: %v (%v, %v); want ns/f, not the lost ns/e", asMap(got), err, info4.JournalErr)
	}
	w3.Close()
}

// TestProgress: outside a list, Progress makes the state load at its
// resourceVersion (later than every record's); inside one it writes
// nothing, so it cannot end the list's mark.
func TestProgress(t *testing.T) {
	dir := t.TempDir()
	d := open(t, dir)
	w, err := d.Create("cm", testID, State{})
	if err != nil {
		t.Fatal(err)
	}
	must := mustFor(t)
	must(w.Put("ns/a", "7", []byte(`{"a":1}`)))
	must(w.Progress("50"))
	if got := w.Stats().RV; got != "50" {
		t.Fatalf("writer at %q after Progress(50)", got)
	}
	must(w.Listing())
	records := w.Stats().Records
	must(w.Progress("60"))
	if st := w.Stats(); st.Records != records || !st.Listing || st.RV != "50" {
		t.Fatalf("Progress inside a list: %d records (had %d), listing %v, rv %q; want nothing written", st.Records, records, st.Listing, st.RV)
	}
	must(w.Listed("55"))
	must(w.Close())
	d.Close()
	d = open(t, dir)
	defer d.Close()
	st, _, err := d.Load("cm", testID)
	if err != nil || st.Listing || st.RV != "55" || len(st.Objects) != 1 {
		t.Fatalf("loaded: rv %q, listing %v, %d objects, err %v; want 55, false, 1", st.RV, st.Listing, len(st.Objects), err)
	}
}

// mustFor returns a check that fails t on an error.
func mustFor(t *testing.T) func(error) {
	return func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
}
