package persist

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Identity is what a stored state must match to be used: the informer's
// spec, the cluster, the CRD (all opaque strings, compared exactly).
type Identity struct {
	// Spec is the informer's canonical spec (resource, namespaces,
	// selectors, projection, shard).
	Spec string `json:"spec"`
	// Cluster identifies the cluster (the kube-system namespace's UID).
	Cluster string `json:"cluster"`
	// CRD is the UID of the resource's CustomResourceDefinition ("" for a
	// resource that is not a custom resource).
	CRD string `json:"crd,omitempty"`
}

// mismatch says which part of two identities differs (nil if none).
func (id Identity) mismatch(stored Identity) error {
	switch {
	case id.Cluster != stored.Cluster:
		return errCluster
	case id.CRD != stored.CRD:
		return errCRD
	case id.Spec != stored.Spec:
		return errSpec
	}
	return nil
}

// Object is one stored object: its cache key, its resourceVersion and
// its encoding (opaque to this package).
type Object struct {
	Key  string
	RV   string
	Data []byte
	at   loc // where Load read it (zero for an Object made by a caller)
}

// State is a stored informer state: its objects (sorted by key) and the
// resourceVersion the state is at (the highest of its records).
//
// Listing says that a list was under way when the state was last written
// (Writer.Listing without its Writer.Listed): its objects are then a mix
// of what the cache held before the list and part of what the list
// brought, deletes of objects the list lacked perhaps not yet written, so
// RV does not say what the state holds. A watch resumed from RV would
// never deliver the changes older than RV that the list had not yet
// brought; such a state must be compared with a new list, not resumed.
type State struct {
	RV      string
	Objects []Object
	Listing bool
	gen     uint64 // the highest generation of the files it came from
}

// LoadInfo says how a state was loaded.
type LoadInfo struct {
	// Journaled counts the journal records applied on the snapshot.
	Journaled int
	// JournalErr is why a journal was read only in part (a short or
	// corrupt record: the end of what a crash left), nil if none was.
	JournalErr error
	// Written is when the state loaded was last written (the newest
	// modification time of the files it came from).
	Written time.Time
}

// Dir is a cache directory held by this process. Its methods are safe
// for concurrent use; each name must have at most one Writer at a time.
type Dir struct {
	path string
	lock *os.File
}

// Open creates the directory (mode 0700) if it is missing and takes its
// lock (a file named "lock" held with flock). If another process holds
// it, Open returns an error wrapping ErrLocked. Close releases it.
func Open(path string) (*Dir, error) {
	if err := os.MkdirAll(path, 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(path, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := lockFile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &Dir{path: path, lock: f}, nil
}

// Path is the directory's path.
func (d *Dir) Path() string { return d.path }

// Close releases the lock.
func (d *Dir) Close() error {
	unlockFile(d.lock)
	return d.lock.Close()
}

func (d *Dir) snapPath(name string) string { return filepath.Join(d.path, name+".snap") }
func (d *Dir) journalPath(name string, gen uint64) string {
	return filepath.Join(d.path, name+".j"+strconv.FormatUint(gen, 10))
}

// journals lists the generations of name's journals, ascending.
func (d *Dir) journals(name string) []uint64 {
	matches, _ := filepath.Glob(filepath.Join(d.path, name+".j*"))
	var gens []uint64
	for _, m := range matches {
		g, err := strconv.ParseUint(strings.TrimPrefix(filepath.Base(m), name+".j"), 10, 64)
		if err == nil {
			gens = append(gens, g)
		}
	}
	sort.Slice(gens, func(i, j int) bool { return gens[i] < gens[j] })
	return gens
}

// Remove deletes every file stored under name.
func (d *Dir) Remove(name string) {
	os.Remove(d.snapPath(name))
	os.Remove(d.snapPath(name) + ".tmp")
	for _, g := range d.journals(name) {
		os.Remove(d.journalPath(name, g))
	}
}

// Load reads the state stored under name for id. With nothing stored it
// returns an error satisfying errors.Is(err, fs.ErrNotExist). A snapshot
// of another format version or Identity (ErrMismatch) or a corrupt one
// (ErrCorrupt) is removed with its journals, and the error says why. A
// journal read in part is not an error: LoadInfo.JournalErr says it.
//
// One mismatch returns the state too: a state stored for a
// CustomResourceDefinition (Identity.CRD not "") that id names otherwise
// (the CRD was deleted, id.CRD "", or deleted and created again) is
// returned whole, with an error for which Reason says ReasonCRD, and its
// files are removed: its objects are gone from the server, and the caller
// may tell its handlers so.
func (d *Dir) Load(name string, id Identity) (State, LoadInfo, error) {
	st, info, err := d.read(name, id, ^uint64(0))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			for _, g := range d.journals(name) {
				os.Remove(d.journalPath(name, g)) // journals without their snapshot
			}
		} else {
			d.Remove(name)
		}
	}
	return st, info, err
}

// Stored returns the Identity name's snapshot was written for, without
// loading or removing anything (for tools and tests that inspect a
// cache directory).
func (d *Dir) Stored(name string) (Identity, error) {
	f, err := os.Open(d.snapPath(name))
	if err != nil {
		return Identity{}, err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	if err := readFileHeader(r, kindSnapshot); err != nil {
		return Identity{}, err
	}
	p, err := readRecord(r)
	if err == errEnd {
		err = fmt.Errorf("%w: no header", ErrCorrupt)
	}
	if err != nil {
		return Identity{}, err
	}
	h, err := decodeHeader(p)
	return h.Identity, err
}

// read loads the snapshot and the journals of generations up to last.
func (d *Dir) read(name string, id Identity, last uint64) (State, LoadInfo, error) {
	var info LoadInfo
	f, err := os.Open(d.snapPath(name))
	if err != nil {
		return State{}, info, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	if err := readFileHeader(r, kindSnapshot); err != nil {
		return State{}, info, err
	}
	p, err := readRecord(r)
	if err == errEnd {
		err = fmt.Errorf("%w: no header", ErrCorrupt)
	}
	if err != nil {
		return State{}, info, err
	}
	h, err := decodeHeader(p)
	if err != nil {
		return State{}, info, err
	}
	var otherCRD error
	if why := id.mismatch(h.Identity); why != nil {
		if why != errCRD || h.Identity.CRD == "" {
			return State{}, info, fmt.Errorf("%w: %w", ErrMismatch, why)
		}
		// A CRD deleted (or deleted and created again) since: the state
		// is read, for its objects to be deleted, and not used.
		otherCRD = fmt.Errorf("%w: %w", ErrMismatch, why)
		id = h.Identity // the journals were written with it
	}
	if fi, err := f.Stat(); err == nil {
		info.Written = fi.ModTime()
	}
	objs := make(map[string]Object, h.Count)
	pos := int64(fileHeaderLen + frameLen(len(p)))
	for i := 0; i < h.Count; i++ {
		p, err := readRecord(r)
		if err == errEnd {
			err = fmt.Errorf("%w: %d of %d objects", ErrCorrupt, i, h.Count)
		}
		if err != nil {
			return State{}, info, err
		}
		rec, err := decodeRecord(p)
		if err != nil || rec.op != opPut {
			return State{}, info, fmt.Errorf("%w: malformed object record", ErrCorrupt)
		}
		n := int64(frameLen(len(p)))
		objs[rec.key] = Object{Key: rec.key, RV: rec.rv, Data: rec.data, at: loc{off: pos, n: n}}
		pos += n
	}
	if _, err := readRecord(r); err != errEnd {
		return State{}, info, fmt.Errorf("%w: data after the last object", ErrCorrupt)
	}
	st := State{RV: h.RV, Listing: h.Listing, gen: h.Gen}
	for _, g := range d.journals(name) {
		if g < h.Gen {
			continue // folded into the snapshot
		}
		if g > last || g != st.gen && g != st.gen+1 {
			break
		}
		n, err := d.readJournal(name, g, id, objs, &st.RV, &st.Listing)
		info.Journaled += n
		if fi, e := os.Stat(d.journalPath(name, g)); e == nil && n > 0 && fi.ModTime().After(info.Written) {
			info.Written = fi.ModTime()
		}
		st.gen = g
		if err != nil {
			info.JournalErr = fmt.Errorf("journal %d: %w", g, err)
			break // what follows a lost record cannot be applied
		}
	}
	st.Objects = make([]Object, 0, len(objs))
	for _, o := range objs {
		st.Objects = append(st.Objects, o)
	}
	sort.Slice(st.Objects, func(i, j int) bool { return st.Objects[i].Key < st.Objects[j].Key })
	return st, info, otherCRD
}

// readJournal applies journal gen's records to objs, rv and listing, in
// order, until its end or the first bad record.
func (d *Dir) readJournal(name string, gen uint64, id Identity, objs map[string]Object, rv *string, listing *bool) (int, error) {
	f, err := os.Open(d.journalPath(name, gen))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	if err := readFileHeader(r, kindJournal); err != nil {
		return 0, err
	}
	p, err := readRecord(r)
	if err == errEnd {
		return 0, nil // created, nothing written yet
	}
	if err != nil {
		return 0, err
	}
	h, err := decodeHeader(p)
	if err != nil {
		return 0, err
	}
	if h.Gen != gen || id.mismatch(h.Identity) != nil {
		return 0, fmt.Errorf("%w: journal header", ErrMismatch)
	}
	n := 0
	pos := int64(fileHeaderLen + frameLen(len(p)))
	for {
		p, err := readRecord(r)
		if err == errEnd {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		rec, err := decodeRecord(p)
		if err != nil {
			return n, err
		}
		at := loc{journal: true, gen: gen, off: pos, n: int64(frameLen(len(p)))}
		pos += at.n
		switch rec.op {
		case opPut:
			objs[rec.key] = Object{Key: rec.key, RV: rec.rv, Data: rec.data, at: at}
		case opDelete:
			delete(objs, rec.key)
		case opListing:
			*listing = true
		case opListed:
			*listing = false
		}
		*rv = laterRV(*rv, rec.rv)
		n++
	}
}

// laterRV returns the later of two resourceVersions: they compare as
// integers (KEP-5504); one that does not parse is taken as later.
func laterRV(a, b string) string {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	if errA == nil && errB == nil && x >= y {
		return a
	}
	if b == "" {
		return a
	}
	return b
}

// writeSnapshot writes name's snapshot, headed by h: to a temporary
// file, synced, renamed over the old one, the directory synced. body
// writes the records after the header, the first at offset pos, and
// returns the offset after the last. It returns the snapshot's size.
func (d *Dir) writeSnapshot(name string, h header, body func(w io.Writer, pos int64) (int64, error)) (int64, error) {
	tmp := d.snapPath(name) + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, err
	}
	fail := func(err error) (int64, error) {
		f.Close()
		os.Remove(tmp)
		return 0, err
	}
	w := bufio.NewWriterSize(f, 256<<10)
	if err := writeFileHeader(w, kindSnapshot); err != nil {
		return fail(err)
	}
	n, err := writeRecord(w, encodeHeader(h))
	if err != nil {
		return fail(err)
	}
	size, err := body(w, int64(fileHeaderLen+n))
	if err != nil {
		return fail(err)
	}
	if err := w.Flush(); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return 0, err
	}
	if err := os.Rename(tmp, d.snapPath(name)); err != nil {
		os.Remove(tmp)
		return 0, err
	}
	return size, syncDir(d.path)
}

// writeObjects writes objs as name's snapshot of generation gen and
// returns its size and its index.
func (d *Dir) writeObjects(name string, id Identity, gen uint64, rv string, listing bool, objs []Object) (int64, []indexed, error) {
	idx := make([]indexed, 0, len(objs))
	size, err := d.writeSnapshot(name, header{Gen: gen, Identity: id, RV: rv, Count: len(objs), Listing: listing}, func(w io.Writer, pos int64) (int64, error) {
		var buf []byte
		for _, o := range objs {
			buf = appendRecord(buf[:0], opPut, o.Key, o.RV, o.Data)
			n, err := writeRecord(w, buf)
			if err != nil {
				return 0, err
			}
			idx = append(idx, indexed{key: o.Key, at: loc{off: pos, n: int64(n)}})
			pos += int64(n)
		}
		return pos, nil
	})
	if err != nil {
		return 0, nil, err
	}
	sortIndex(idx)
	return size, idx, nil
}

func syncDir(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return err
	}
	return nil
}

// Create stores st (a loaded State, or the zero State) as name's new
// snapshot, removes name's older files and returns a Writer that
// journals the changes after st.
func (d *Dir) Create(name string, id Identity, st State) (*Writer, error) {
	gen := st.gen + 1
	for _, g := range d.journals(name) {
		gen = max(gen, g+1)
	}
	size, idx, err := d.writeObjects(name, id, gen, st.RV, st.Listing, st.Objects)
	if err != nil {
		return nil, err
	}
	for _, g := range d.journals(name) {
		os.Remove(d.journalPath(name, g))
	}
	w := &Writer{dir: d, name: name, id: id, gen: gen, rv: st.RV, listing: st.Listing, snapBytes: size, base: idx}
	w.written.Store(size)
	if err := w.openJournal(); err != nil {
		return nil, err
	}
	return w, nil
}

// Continue returns a Writer that journals the changes after st, which
// Load returned for id whole (info.JournalErr nil): the files stay as
// they are and a journal of the next generation is opened, so that a
// start that restores does not write its whole state again. If the
// files are not exactly those st was read from (a journal read in part,
// or one beyond it), it is Create.
func (d *Dir) Continue(name string, id Identity, st State, info LoadInfo) (*Writer, error) {
	if info.JournalErr != nil || st.gen == 0 {
		return d.Create(name, id, st)
	}
	for _, g := range d.journals(name) {
		if g > st.gen {
			return d.Create(name, id, st)
		}
	}
	fi, err := os.Stat(d.snapPath(name))
	if err != nil {
		return d.Create(name, id, st)
	}
	idx := make([]indexed, len(st.Objects))
	for i, o := range st.Objects {
		if o.at.n == 0 {
			return d.Create(name, id, st) // not as Load returned it
		}
		idx[i] = indexed{key: o.Key, at: o.at}
	}
	sortIndex(idx)
	w := &Writer{dir: d, name: name, id: id, gen: st.gen + 1, rv: st.RV, listing: st.Listing, snapBytes: fi.Size(), base: idx}
	if err := w.openJournal(); err != nil {
		return nil, err
	}
	return w, nil
}

// Writer appends an informer's changes to its journal and folds them
// into its snapshot. Its methods are safe for concurrent use. After a
// write fails, every method returns that error and nothing more is
// written (what is on disk stays a state the informer held).
type Writer struct {
	dir  *Dir
	name string
	id   Identity

	foldMu sync.Mutex // serializes Sync, Fold and Close; guards base and layers
	// base indexes the state of the files as they were before the
	// current journal, sorted by key; layers (older first) are the
	// current journal's changes of earlier generations that a failed
	// fold left (see fold).
	base   []indexed
	layers []map[string]loc

	// written counts the bytes written in all, snapshots included; read
	// without mu (Written), so that a write stuck on a stalled disk,
	// which holds mu, does not stop readers of the figure.
	written atomic.Int64

	mu           sync.Mutex // guards the fields below
	gen          uint64
	f            *os.File
	buf          *bufio.Writer
	rv           string
	listing      bool  // a Listing not yet followed by Listed
	journalBytes int64 // in the current journal
	snapBytes    int64 // the last snapshot's size
	records      int64
	changes      map[string]loc // the current journal's, by key (a delete: loc.n 0)
	queue        []queued       // PutObject's, not yet written
	rec          []byte
	err          error
	closed       bool
}

func (w *Writer) openJournal() error {
	f, err := os.OpenFile(w.dir.journalPath(w.name, w.gen), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	buf := bufio.NewWriterSize(f, 64<<10)
	if err := writeFileHeader(buf, kindJournal); err != nil {
		f.Close()
		return err
	}
	n, err := writeRecord(buf, encodeHeader(header{Gen: w.gen, Identity: w.id}))
	if err != nil {
		f.Close()
		return err
	}
	w.f, w.buf = f, buf
	w.changes = make(map[string]loc)
	w.journalBytes = int64(fileHeaderLen + n)
	w.written.Add(w.journalBytes)
	return nil
}

// Put journals that the object at key is now data, at resourceVersion rv.
// data is copied.
func (w *Writer) Put(key, rv string, data []byte) error { return w.append(opPut, key, rv, data) }

// Encoder appends the stored form of obj to dst (PutObject).
type Encoder func(dst []byte, obj any) ([]byte, error)

// maxQueued bounds the objects PutObject holds before it writes them.
const maxQueued = 256

// queued is an object PutObject has journaled and not yet written.
type queued struct {
	key, rv string
	obj     any
	enc     Encoder
}

// PutObject journals that the object at key is now obj, at
// resourceVersion rv, encoded by enc — later: the object is held (it
// must not be changed meanwhile) and encoded and written with the
// others held, in order, before any other record, at the next Sync,
// Fold or Close, or once maxQueued are held. An informer's events come
// one at a time, each finding the processor's caches cold; encoding the
// held ones in a row costs less (dynamicinformer's
// BenchmarkDiskJournalPaced). Durability is unchanged: nothing appended
// is durable before a Sync. An encoding error stops the Writer as a
// write error does, when the object is written. Safe for concurrent
// use, like every Writer method; obj is only read, by enc, under the
// Writer's lock.
func (w *Writer) PutObject(key, rv string, obj any, enc Encoder) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		return err
	}
	w.queue = append(w.queue, queued{key: key, rv: rv, obj: obj, enc: enc})
	w.noted(opPut, rv)
	if len(w.queue) >= maxQueued {
		return w.drainLocked()
	}
	return nil
}

// Delete journals that the object at key is gone, at resourceVersion rv.
func (w *Writer) Delete(key, rv string) error { return w.append(opDelete, key, rv, nil) }

// Listing journals that a list is about to be sent: until Listed, the
// state is loaded with State.Listing set.
func (w *Writer) Listing() error { return w.append(opListing, "", "", nil) }

// Listed journals that everything the list Listing announced brought,
// and the deletes of what it lacked, has been journaled; rv is the
// list's resourceVersion ("" if unknown: the state's stays the highest of
// its records).
func (w *Writer) Listed(rv string) error { return w.append(opListed, "", rv, nil) }

// Progress journals that what was journaled is the state at rv, a
// resourceVersion later than its records' (a bookmark the informer's
// cache applied, nothing changed since): the state loads at rv, so a
// watch resumes from there. It is the record Listed writes; outside a
// list only (a writer inside one writes nothing and returns nil).
func (w *Writer) Progress(rv string) error {
	w.mu.Lock()
	listing := w.listing
	w.mu.Unlock()
	if listing {
		return nil
	}
	return w.append(opListed, "", rv, nil)
}

func (w *Writer) append(op byte, key, rv string, data []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		return err
	}
	if err := w.drainLocked(); err != nil {
		return err
	}
	w.rec = appendRecord(w.rec[:0], op, key, rv, data)
	if err := w.writeLocked(op, key); err != nil {
		return err
	}
	w.noted(op, rv)
	return nil
}

func (w *Writer) usable() error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return ErrClosed
	}
	return nil
}

// noted counts a record journaled (written or held) and what it says of
// the state: its resourceVersion, a list's start or end.
func (w *Writer) noted(op byte, rv string) {
	w.records++
	w.rv = laterRV(w.rv, rv)
	switch op {
	case opListing:
		w.listing = true
	case opListed:
		w.listing = false
	}
}

// writeLocked appends w.rec, the record of op at key, to the journal.
func (w *Writer) writeLocked(op byte, key string) error {
	n, err := writeRecord(w.buf, w.rec)
	if err != nil {
		w.err = err
		return err
	}
	switch op {
	case opPut:
		w.changes[key] = loc{journal: true, gen: w.gen, off: w.journalBytes, n: int64(n)}
	case opDelete:
		w.changes[key] = loc{}
	}
	w.journalBytes += int64(n)
	w.written.Add(int64(n))
	return nil
}

// drainLocked encodes and writes the objects PutObject holds, in order.
func (w *Writer) drainLocked() error {
	defer func() {
		clear(w.queue) // the objects are not held longer
		w.queue = w.queue[:0]
	}()
	for i := range w.queue {
		q := &w.queue[i]
		rec, err := q.enc(appendRecord(w.rec[:0], opPut, q.key, q.rv, nil), q.obj)
		if err != nil {
			// Not written, so what is on disk would lack it: nothing
			// more is written.
			w.err = fmt.Errorf("encoding %s: %w", q.key, err)
			return w.err
		}
		w.rec = rec
		if err := w.writeLocked(opPut, q.key); err != nil {
			return err
		}
	}
	return nil
}

// ErrClosed is what a Writer's methods return once it is closed.
var ErrClosed = errors.New("persist: writer closed")

// Sync makes what was journaled durable (encode what PutObject holds,
// flush, fsync). The fsync runs without the lock the appends take: an
// informer's journal is written on its watch stream's goroutine, which a
// slow disk's fsync would otherwise hold up; what is appended meanwhile
// is made durable by the next Sync.
func (w *Writer) Sync() error {
	w.foldMu.Lock() // no fold or close replaces the file meanwhile
	defer w.foldMu.Unlock()
	w.mu.Lock()
	if w.err != nil || w.closed {
		err := w.err
		w.mu.Unlock()
		return err
	}
	if err := w.drainLocked(); err != nil {
		w.mu.Unlock()
		return err
	}
	if err := w.buf.Flush(); err != nil {
		w.err = err
		w.mu.Unlock()
		return err
	}
	f := w.f
	w.mu.Unlock()
	if err := f.Sync(); err != nil {
		w.mu.Lock()
		if w.err == nil {
			w.err = err
		}
		w.mu.Unlock()
		return err
	}
	return nil
}

func (w *Writer) syncLocked() error {
	if w.err != nil || w.closed {
		return w.err
	}
	if err := w.drainLocked(); err != nil {
		return err
	}
	if err := w.buf.Flush(); err != nil {
		w.err = err
		return err
	}
	if err := w.f.Sync(); err != nil {
		w.err = err
		return err
	}
	return nil
}

// FoldDue reports whether the journal has outgrown the snapshot (and
// 1 MiB), so that a Fold would shorten the next start's reading.
func (w *Writer) FoldDue() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err == nil && !w.closed && w.journalBytes > max(w.snapBytes, 1<<20)
}

// Stats is what a Writer has done.
type Stats struct {
	// RV is the resourceVersion of the state written.
	RV string
	// Listing: a list is under way in what was written (State.Listing).
	Listing bool
	// Records counts the journal records appended (those PutObject
	// holds included); Written the bytes written (journals and
	// snapshots; held objects count once written).
	Records, Written int64
	// Err is the write error that stopped the writer, if any.
	Err error
}

// Stats returns what the writer has done so far. It waits for a write
// under way (on a stalled disk, as long as the disk): a caller that must
// not wait reads Written.
func (w *Writer) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return Stats{RV: w.rv, Listing: w.listing, Records: w.records, Written: w.written.Load(), Err: w.err}
}

// Written is Stats().Written without waiting for a write under way.
func (w *Writer) Written() int64 { return w.written.Load() }

// Fold writes a new snapshot holding the journals written so far, and
// removes them. Appends go on meanwhile, into a new journal.
func (w *Writer) Fold() error {
	w.foldMu.Lock()
	defer w.foldMu.Unlock()
	return w.fold()
}

func (w *Writer) fold() error {
	w.mu.Lock()
	if err := w.syncLocked(); err != nil || w.closed {
		w.mu.Unlock()
		return err
	}
	w.f.Close()
	last := w.gen
	w.layers = append(w.layers, w.changes)
	h := header{Gen: last + 1, Identity: w.id, RV: w.rv, Listing: w.listing}
	w.gen++
	if err := w.openJournal(); err != nil {
		w.err = err
		w.mu.Unlock()
		return err
	}
	w.mu.Unlock()
	idx, size, err := w.dir.merge(w.name, h, w.base, w.layers)
	if err != nil {
		// The files stay as they are; the changes stay in layers, for
		// the next fold.
		return fmt.Errorf("persist: fold: %w", err)
	}
	w.base, w.layers = idx, nil
	for _, g := range w.dir.journals(w.name) {
		if g <= last {
			os.Remove(w.dir.journalPath(w.name, g))
		}
	}
	w.mu.Lock()
	w.snapBytes = size
	w.written.Add(size)
	w.mu.Unlock()
	return nil
}

// Close syncs the journal, folds it into the snapshot (so the next start
// reads one file) and closes it. The Writer must not be used after.
func (w *Writer) Close() error {
	w.foldMu.Lock()
	defer w.foldMu.Unlock()
	err := w.fold()
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.closed = true
		w.queue = nil // (held only if a write failed)
		if w.f != nil {
			if e := w.buf.Flush(); err == nil && w.err == nil {
				err = e
			}
			w.f.Close()
		}
	}
	return err
}
