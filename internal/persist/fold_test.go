package persist

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"reflect"
	"testing"
)

// TestFoldMatchesModel runs random histories of puts (written at once or
// held by PutObject), deletes, list
// marks, folds (some made to fail, then retried), restarts that continue
// the files and restarts that create them again, and checks after each
// step that what Load returns is what was written: every object, its
// resourceVersion and its bytes, the state's resourceVersion and its
// list mark. The fold copies records by an index; a wrong offset, a
// stale index after a restart or a failed fold shows here.
func TestFoldMatchesModel(t *testing.T) {
	for seed := int64(1); seed <= 40; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { foldHistory(t, seed) })
	}
}

func foldHistory(t *testing.T, seed int64) {
	rnd := rand.New(rand.NewSource(seed))
	dir := t.TempDir()
	d := open(t, dir)
	type obj struct {
		rv   string
		data []byte
	}
	model := map[string]obj{}
	rv, listing := 100, false
	w, err := d.Create("x", testID, State{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { w.Close() }()
	check := func(step int, what string) {
		t.Helper()
		if err := w.Sync(); err != nil {
			t.Fatalf("step %d (%s): sync: %v", step, what, err)
		}
		st, info, err := d.read("x", testID, ^uint64(0))
		if err != nil || info.JournalErr != nil {
			t.Fatalf("step %d (%s): read: %v %v", step, what, err, info.JournalErr)
		}
		if len(st.Objects) != len(model) {
			t.Fatalf("step %d (%s): %d objects, want %d", step, what, len(st.Objects), len(model))
		}
		for _, o := range st.Objects {
			m, ok := model[o.Key]
			if !ok || m.rv != o.RV || !bytes.Equal(m.data, o.Data) {
				t.Fatalf("step %d (%s): %s at %s (%d bytes), want %v", step, what, o.Key, o.RV, len(o.Data), ok)
			}
		}
		want := fmt.Sprint(rv)
		if rv == 100 {
			want = "" // nothing written yet
		}
		if st.RV != want || st.Listing != listing {
			t.Fatalf("step %d (%s): state at %q listing %v, want %q %v", step, what, st.RV, st.Listing, want, listing)
		}
	}
	for step := 0; step < 300; step++ {
		switch op := rnd.Intn(100); {
		case op < 55:
			rv++
			k := fmt.Sprintf("ns/o%d", rnd.Intn(40))
			data := make([]byte, rnd.Intn(3000))
			rnd.Read(data)
			var err error
			if rnd.Intn(2) == 0 {
				err = w.Put(k, fmt.Sprint(rv), data)
			} else {
				err = w.PutObject(k, fmt.Sprint(rv), data, appendBytes) // held, written later
			}
			if err != nil {
				t.Fatal(err)
			}
			model[k] = obj{fmt.Sprint(rv), data}
		case op < 75:
			rv++
			k := fmt.Sprintf("ns/o%d", rnd.Intn(40))
			if err := w.Delete(k, fmt.Sprint(rv)); err != nil {
				t.Fatal(err)
			}
			delete(model, k)
		case op < 80:
			if !listing {
				if err := w.Listing(); err != nil {
					t.Fatal(err)
				}
			} else {
				rv++
				if err := w.Listed(fmt.Sprint(rv)); err != nil {
					t.Fatal(err)
				}
			}
			listing = !listing
		case op < 88:
			if err := w.Fold(); err != nil {
				t.Fatalf("step %d: fold: %v", step, err)
			}
			check(step, "fold")
		case op < 92:
			// A fold that cannot write its snapshot (a directory where
			// its temporary file goes) leaves the files as they were;
			// the next fold must still hold every change.
			tmp := d.snapPath("x") + ".tmp"
			if err := os.Mkdir(tmp, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := w.Fold(); err == nil {
				t.Fatalf("step %d: fold over a directory succeeded", step)
			}
			if err := os.Remove(tmp); err != nil {
				t.Fatal(err)
			}
			check(step, "failed fold")
		default:
			// Restart: close (a fold), load, continue or create again.
			if err := w.Close(); err != nil {
				t.Fatalf("step %d: close: %v", step, err)
			}
			d.Close()
			d = open(t, dir)
			st, info, err := d.Load("x", testID)
			if err != nil {
				t.Fatalf("step %d: load: %v", step, err)
			}
			if rnd.Intn(2) == 0 {
				w, err = d.Continue("x", testID, st, info)
			} else {
				w, err = d.Create("x", testID, st)
			}
			if err != nil {
				t.Fatal(err)
			}
			check(step, "restart")
		}
	}
	check(300, "end")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	st, _, err := d.Load("x", testID)
	if err != nil || len(st.Objects) != len(model) {
		t.Fatalf("after close: %d objects (%v), want %d", len(st.Objects), err, len(model))
	}
	got := map[string]string{}
	for _, o := range st.Objects {
		got[o.Key] = o.RV
	}
	want := map[string]string{}
	for k, m := range model {
		want[k] = m.rv
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("after close: %v, want %v", got, want)
	}
	d.Close()
}

func appendBytes(dst []byte, obj any) ([]byte, error) { return append(dst, obj.([]byte)...), nil }

// TestPutObjectEncodingError: an object PutObject holds that cannot be
// encoded stops the Writer when it is written (the next Sync), as a
// write error does: what is on disk is the state before it, and nothing
// journaled after it is written.
func TestPutObjectEncodingError(t *testing.T) {
	d := open(t, t.TempDir())
	w, err := d.Create("x", testID, State{})
	if err != nil {
		t.Fatal(err)
	}
	must := mustFor(t)
	must(w.PutObject("ns/a", "11", []byte("a"), appendBytes))
	must(w.Sync())
	bad := errors.New("no encoding")
	must(w.PutObject("ns/b", "12", nil, func([]byte, any) ([]byte, error) { return nil, bad }))
	must(w.PutObject("ns/c", "13", []byte("c"), appendBytes))
	if err := w.Sync(); !errors.Is(err, bad) {
		t.Fatalf("Sync after an object that cannot be encoded: %v, want %v", err, bad)
	}
	if err := w.Delete("ns/a", "14"); !errors.Is(err, bad) {
		t.Fatalf("Delete after: %v, want the encoding error", err)
	}
	w.Close()
	st, _, err := d.Load("x", testID)
	if err != nil || len(st.Objects) != 1 || st.Objects[0].Key != "ns/a" || st.RV != "11" {
		t.Fatalf("loaded %+v (%v), want ns/a alone at 11", st, err)
	}
}
