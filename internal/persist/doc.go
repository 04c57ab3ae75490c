// Package persist keeps an informer's cache on disk so that a process
// started again can fill its cache from it instead of listing the
// resource (dynamicinformer's Options.CacheDir).
//
// # Files
//
// A Dir is a directory locked by one process (a lock file held with
// flock: a second process opening it gets ErrLocked). An informer's state
// is stored under a name (derived from its spec) as a snapshot,
// NAME.snap, and journals, NAME.jGEN. Every file is mode 0600.
//
// Each file begins with an 8-byte magic ("IKCACHE\n"), a 2-byte format
// version (FormatVersion, little endian), a kind byte ('S' snapshot, 'J'
// journal) and a reserved byte, then records. A record is a 4-byte length,
// a 4-byte CRC-32C of its payload, and the payload. The first record is a
// header (JSON: the generation, the Identity, and for a snapshot its
// resourceVersion and object count, and whether it was folded inside a
// list); the others are objects (a put: key, resourceVersion, the
// object's encoding) or, in journals, deletes and list markers: Listing
// before a list is sent, Listed (with the list's resourceVersion) once
// everything it brought has been journaled.
//
// # Guarantees
//
// A snapshot is written to a temporary file, synced, renamed over the old
// one and the directory synced: it is whole or absent. A journal is
// appended to; Writer.Sync makes what was appended durable. A snapshot of
// generation G holds everything of the journals before G; loading applies
// the journals of generation G and after, in order, and stops at the first
// record that is short or fails its checksum: the state loaded is always
// one the informer held (a prefix of its history), never a mix. A state
// whose last list has no Listed mark loads with State.Listing: it is a
// prefix of the history too, but one taken inside a list, which no
// resourceVersion describes, so it is to be compared with a new list and
// never resumed from (format 3; format 2 had no marks and is not read). A
// snapshot that is short, fails a checksum, or is of another format
// version or Identity is not used (ErrCorrupt, ErrMismatch) and its files
// are removed.
//
// # Writes
//
// Writer.Put, Delete and the list marks append a record to the journal's
// buffer at once; Writer.PutObject holds the object and encodes it with
// the others held, in order, before the next record of any other kind,
// at the next Sync, Fold or Close (or once 256 are held): a batch is
// encoded with the processor's caches warm. Sync makes everything
// journaled durable.
//
// # Folds
//
// A Writer folds its journals into a new snapshot without decoding them:
// a put record is framed the same in both kinds of file, so the new
// snapshot is the byte ranges of the records still current, copied from
// the old snapshot and the journals. The Writer keeps an index for it —
// each object's key and where its record is, about 70 bytes per object
// beside the key — and not the objects. Load checks every record's
// checksum; the fold does not check them again.
//
// What is not guaranteed: what was appended after the last Sync may be
// lost in a crash (the state loaded is then older, and the watch resumes
// from its older resourceVersion); files are not encrypted.
package persist
