package persist

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
)

// FormatVersion is the version of the file format this package writes
// and reads. A file of another version is not read (ErrMismatch).
const FormatVersion = 3

const (
	magic         = "IKCACHE\n"
	fileHeaderLen = len(magic) + 4
	kindSnapshot  = 'S'
	kindJournal   = 'J'
	// maxRecord bounds a record's payload: a length above it is
	// corruption, not an allocation to make.
	maxRecord = 64 << 20
	opPut     = 'P'
	opDelete  = 'D'
	// opListing and opListed mark a list's start and its end: the records
	// between them are the list's (and those of events around it), so
	// the state they leave is no state at one resourceVersion. They carry
	// no key; opListed carries the list's resourceVersion.
	opListing = 'L'
	opListed  = 'E'
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Errors of Load. They wrap the cause; the text says it for a log.
var (
	// ErrCorrupt: a snapshot is short, fails a checksum or cannot be
	// parsed.
	ErrCorrupt = errors.New("persist: stored cache corrupt")
	// ErrMismatch: the stored state is of another format version or
	// another Identity (cluster, CRD, spec).
	ErrMismatch = errors.New("persist: stored cache does not match")
	// ErrLocked: another process holds the directory's lock.
	ErrLocked = errors.New("persist: cache directory locked by another process")
)

// Why a stored state is not used: Reason's answers.
const (
	ReasonNone    = "none stored"
	ReasonFormat  = "another format version"
	ReasonCluster = "another cluster"
	ReasonCRD     = "another CustomResourceDefinition"
	ReasonSpec    = "another informer spec"
	ReasonCorrupt = "corrupt"
	ReasonOther   = "unreadable"
)

// The causes ErrMismatch is given with.
var (
	errFormat  = errors.New("format version")
	errCluster = errors.New("another cluster")
	errCRD     = errors.New("another CustomResourceDefinition (deleted and created again?)")
	errSpec    = errors.New("another informer spec")
)

// Reason names, for a log or a metric label, why Load did not return a
// state: one of the Reason constants.
func Reason(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, fs.ErrNotExist):
		return ReasonNone
	case errors.Is(err, errFormat):
		return ReasonFormat
	case errors.Is(err, errCluster):
		return ReasonCluster
	case errors.Is(err, errCRD):
		return ReasonCRD
	case errors.Is(err, errSpec):
		return ReasonSpec
	case errors.Is(err, ErrCorrupt):
		return ReasonCorrupt
	}
	return ReasonOther
}

// header is a file's first record.
type header struct {
	Gen      uint64   `json:"gen"`
	Identity Identity `json:"identity"`
	RV       string   `json:"rv,omitempty"`    // snapshot: the state's resourceVersion
	Count    int      `json:"count,omitempty"` // snapshot: its objects
	// Listing (snapshot): the state was folded while a list was under
	// way (see State.Listing).
	Listing bool `json:"listing,omitempty"`
}

// record is a decoded object record.
type record struct {
	op   byte
	key  string
	rv   string
	data []byte
}

func writeFileHeader(w io.Writer, kind byte) error {
	b := make([]byte, fileHeaderLen)
	copy(b, magic)
	binary.LittleEndian.PutUint16(b[len(magic):], FormatVersion)
	b[len(magic)+2] = kind
	_, err := w.Write(b)
	return err
}

// readFileHeader checks the magic, the version and the kind.
func readFileHeader(r io.Reader, kind byte) error {
	b := make([]byte, fileHeaderLen)
	if _, err := io.ReadFull(r, b); err != nil {
		return fmt.Errorf("%w: file header: %v", ErrCorrupt, err)
	}
	if string(b[:len(magic)]) != magic {
		return fmt.Errorf("%w: not a cache file", ErrCorrupt)
	}
	if v := binary.LittleEndian.Uint16(b[len(magic):]); v != FormatVersion {
		return fmt.Errorf("%w: %w %d, this program reads %d", ErrMismatch, errFormat, v, FormatVersion)
	}
	if b[len(magic)+2] != kind {
		return fmt.Errorf("%w: file kind %q, want %q", ErrCorrupt, b[len(magic)+2], kind)
	}
	return nil
}

// writeRecord frames payload; it returns the bytes written.
func writeRecord(w io.Writer, payload []byte) (int, error) {
	var h [8]byte
	binary.LittleEndian.PutUint32(h[:4], uint32(len(payload)))
	binary.LittleEndian.PutUint32(h[4:], crc32.Checksum(payload, crcTable))
	if _, err := w.Write(h[:]); err != nil {
		return 0, err
	}
	if _, err := w.Write(payload); err != nil {
		return 0, err
	}
	return len(h) + len(payload), nil
}

// errEnd: no more records (a clean end of file).
var errEnd = errors.New("end of records")

// readRecord reads one framed payload: errEnd at a clean end of file,
// ErrCorrupt for a short or failing record.
func readRecord(r *bufio.Reader) ([]byte, error) {
	var h [8]byte
	n, err := io.ReadFull(r, h[:])
	if n == 0 && err == io.EOF {
		return nil, errEnd
	}
	if err != nil {
		return nil, fmt.Errorf("%w: short record header", ErrCorrupt)
	}
	size := binary.LittleEndian.Uint32(h[:4])
	if size > maxRecord {
		return nil, fmt.Errorf("%w: record of %d bytes", ErrCorrupt, size)
	}
	p := make([]byte, size)
	if _, err := io.ReadFull(r, p); err != nil {
		return nil, fmt.Errorf("%w: short record", ErrCorrupt)
	}
	if crc32.Checksum(p, crcTable) != binary.LittleEndian.Uint32(h[4:]) {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
	}
	return p, nil
}

func encodeHeader(h header) []byte {
	b, _ := json.Marshal(h) // plain fields: cannot fail
	return b
}

func decodeHeader(p []byte) (header, error) {
	var h header
	if err := json.Unmarshal(p, &h); err != nil {
		return h, fmt.Errorf("%w: header: %v", ErrCorrupt, err)
	}
	return h, nil
}

// appendRecord appends an object record's payload to b.
func appendRecord(b []byte, op byte, key, rv string, data []byte) []byte {
	b = append(b, op)
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	b = binary.AppendUvarint(b, uint64(len(rv)))
	b = append(b, rv...)
	return append(b, data...)
}

func decodeRecord(p []byte) (record, error) {
	bad := fmt.Errorf("%w: malformed record", ErrCorrupt)
	if len(p) == 0 || (p[0] != opPut && p[0] != opDelete && p[0] != opListing && p[0] != opListed) {
		return record{}, bad
	}
	marker := p[0] == opListing || p[0] == opListed
	r := record{op: p[0]}
	p = p[1:]
	str := func() (string, bool) {
		n, k := binary.Uvarint(p)
		if k <= 0 || n > uint64(len(p)-k) {
			return "", false
		}
		s := string(p[k : k+int(n)])
		p = p[k+int(n):]
		return s, true
	}
	var ok bool
	if r.key, ok = str(); !ok || (r.key == "") != marker {
		return record{}, bad
	}
	if r.rv, ok = str(); !ok {
		return record{}, bad
	}
	if r.op != opPut && len(p) != 0 {
		return record{}, bad
	}
	if r.op == opPut {
		r.data = p
	}
	return r, nil
}
