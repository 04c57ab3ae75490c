package dynamicinformer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/dynamicinformer/internal/codec"
	"github.com/informerkit/informerkit/dynamicinformer/internal/gate"
	"github.com/informerkit/informerkit/dynamicinformer/internal/lifecycle"
	"github.com/informerkit/informerkit/dynamicinformer/internal/reflectorseam"
	"github.com/informerkit/informerkit/internal/decode"
	"github.com/informerkit/informerkit/internal/diskcost"
	"github.com/informerkit/informerkit/internal/persist"
	"github.com/informerkit/informerkit/internal/treecodec"
)

// ErrCache is the kind of Status.CacheErr: the disk cache
// (Options.CacheDir) is not used, or no longer written, for the informer;
// the informer works from the server as without it.
var ErrCache = errors.New("disk cache not used")

// diskResumeConfirm is how long after a watch from the stored
// resourceVersion opened a start counts as resumed: a 410 inside that
// stream makes the reflector list after its backoff (0.8 to 1.6 s).
const diskResumeConfirm = 3 * time.Second

// diskSyncPeriod is how often journaled changes are made durable (and a
// fold is considered): a crash loses at most about this much, and the
// next start resumes from an older resourceVersion.
const diskSyncPeriod = time.Second

var crdsGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// factoryDisk is a factory's cache directory, opened (and locked) on the
// first informer that uses it, closed at Shutdown.
type factoryDisk struct {
	path    string
	secrets bool
	client  dynamic.Interface

	mu      sync.Mutex            // guards dir, err, opened, cluster, claims
	claims  map[string]*diskClaim // the names informers write, by name
	dir     *persist.Dir
	err     error // why the directory cannot be used (sticky)
	opened  bool
	cluster string // the kube-system namespace's UID, once known
	// serverRV is the server's resourceVersion when the factory first
	// identified the cluster (a list of one namespace): a stored state
	// written before this process started cannot be later, unless the
	// server went back in time (etcd restored). "" if unknown.
	serverRV string
}

// currentRV is the server's resourceVersion now (a list of one
// namespace; a consistent read), "" if it cannot be read.
func (d *factoryDisk) currentRV(ctx context.Context) string {
	l, err := d.client.Resource(namespacesGVR).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return ""
	}
	return l.GetResourceVersion()
}

// serverRVNow returns the server's resourceVersion as first read ("" if
// it could not be read).
func (d *factoryDisk) serverRVNow() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.serverRV
}

// open returns the locked directory, or why it cannot be used.
func (d *factoryDisk) open() (*persist.Dir, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.opened {
		d.opened = true
		d.dir, d.err = persist.Open(d.path)
	}
	return d.dir, d.err
}

func (d *factoryDisk) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dir != nil {
		d.dir.Close()
		d.dir = nil
	}
}

// diskClaim: an informer writes a name (claim).
type diskClaim struct {
	stopping <-chan struct{} // closed when the claiming informer stops
	released chan struct{}   // closed when it has closed its files
}

// claimWait is how long a claim waits for an informer holding the name
// to be told to stop (a released informer is, just after it leaves the
// factory) before it gives up.
const claimWait = time.Second

// errClaimed: another informer of the factory writes the same name.
var errClaimed = errors.New("another informer of this factory keeps the same stored cache (two informers that differ only by their shard source?)")

// claim makes the calling informer (running until ctx ends) the only one
// writing name, until release is called. An informer that holds it and
// is stopping (released, and one with an equal spec created since) is
// waited for; one that runs on is errClaimed.
func (d *factoryDisk) claim(ctx context.Context, name string) (release func(), err error) {
	for {
		d.mu.Lock()
		c, held := d.claims[name]
		if !held {
			if d.claims == nil {
				d.claims = map[string]*diskClaim{}
			}
			c = &diskClaim{stopping: ctx.Done(), released: make(chan struct{})}
			d.claims[name] = c
			d.mu.Unlock()
			return func() {
				d.mu.Lock()
				delete(d.claims, name)
				d.mu.Unlock()
				close(c.released)
			}, nil
		}
		d.mu.Unlock()
		t := time.NewTimer(claimWait)
		select {
		case <-c.stopping:
			t.Stop()
		case <-t.C:
			return nil, errClaimed
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
		select {
		case <-c.released:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// identity returns what a stored state of gvr must match: the cluster
// (kube-system's UID, asked once per factory) and gvr's CRD UID ("" when
// no CRD serves it).
func (d *factoryDisk) identity(ctx context.Context, gvr schema.GroupVersionResource) (cluster, crd string, err error) {
	d.mu.Lock()
	cluster = d.cluster
	d.mu.Unlock()
	if cluster == "" {
		ns, err := d.client.Resource(namespacesGVR).Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
		if err != nil {
			return "", "", fmt.Errorf("identifying the cluster (get namespace %s): %w", metav1.NamespaceSystem, err)
		}
		cluster = string(ns.GetUID())
		rv := d.currentRV(ctx)
		d.mu.Lock()
		d.cluster, d.serverRV = cluster, rv
		d.mu.Unlock()
	}
	if gvr.Group == "" {
		return cluster, "", nil
	}
	c, err := d.client.Resource(crdsGVR).Get(ctx, gvr.Resource+"."+gvr.Group, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return cluster, "", nil
	case err != nil:
		return "", "", fmt.Errorf("identifying the CustomResourceDefinition: %w", err)
	}
	return cluster, string(c.GetUID()), nil
}

// diskEligible says whether an informer of key may be kept on disk, and
// why not. Informers whose identity is not a value (an unkeyed transform
// or tweak) are not kept. One that follows the preferred version is,
// under the version it follows (specAt); one over several namespaces
// given, whose namespaces are chosen while it runs
// (WithPermittedNamespaces) or whose shard is (WithShardSource) is, and
// is always diffed (diskDiffedWhy).
func diskEligible(key spec, secrets bool) (string, bool) {
	switch {
	case key.own != 0:
		return "a transform or tweak without a sharing key", false
	case key.gvr.Group == "" && key.gvr.Resource == "secrets" && !secrets:
		return "Secrets are kept on disk only with Options.CacheSecrets", false
	}
	return "", true
}

// diskDiffedWhy is why an informer of key always compares its restored
// state with a new list (DiskDiffed with that reason; "" if it resumes
// when it can): handlers see only what changed, at the cost of a list.
//
//   - Over several namespaces: it merges one watch per namespace, each
//     resumed from its own resourceVersion (listwatch.MultiNamespace),
//     and the stored state holds only one; a list per namespace.
//   - Namespaces chosen while it runs (WithPermittedNamespaces): those
//     permitted now may not be those stored.
//   - A shard source: its shard now may not be the shard stored.
func diskDiffedWhy(key spec) string {
	switch {
	case key.permitted:
		return reasonPermitted
	case strings.Contains(key.namespaces, ","):
		return reasonSeveral
	case key.shardSource != nil:
		return reasonShardSource
	}
	return ""
}

// DiskStatus.Reason of a Diffed start, by diskDiffedWhy.
const (
	reasonSeveral     = "several namespaces resume by relisting"
	reasonPermitted   = "the permitted namespaces are decided at start"
	reasonShardSource = "the shard source's shard is decided at start"
)

// reasonNewer: a stored state's resourceVersion is later than the
// server's current one.
const reasonNewer = "newer than the server"

// newerRV reports whether resourceVersion a is later than b (false if
// they do not compare: apimachinery's resourceversion rules, KEP-5504).
func newerRV(a, b string) bool {
	c, err := resourceversion.CompareResourceVersion(a, b)
	return err == nil && c > 0
}

// specAt is the spec a stored state must match when the informer reads
// gvr: the spec, and for an informer that follows the preferred version
// (its spec names none) the version it follows now — a state stored at
// another version holds objects of that version.
func (d *entryDisk) specAt(gvr schema.GroupVersionResource) string {
	if !d.follow {
		return d.spec
	}
	return d.spec + diskSpecVersionAt(gvr.Version)
}

// legacyAt is the name and the spec of key's state as informerkit wrote
// them before the versioned encoding (legacyDiskSpec) when the informer
// reads gvr; "" if those versions could not have stored it.
func (d *entryDisk) legacyAt(key spec, gvr schema.GroupVersionResource) (name, text string) {
	text = legacyDiskSpec(key)
	if text == "" {
		return "", ""
	}
	name = diskName(key, text)
	if d.follow {
		text += legacyVersionAt(gvr.Version)
	}
	return name, text
}

// diskName is the file name of key's state: readable, and unique per
// spec.
func diskName(key spec, text string) string {
	sum := sha256.Sum256([]byte(text))
	g, v := key.gvr.Group, key.gvr.Version
	if g == "" {
		g = "core"
	}
	if key.follow {
		v = "preferred" // the version it follows is in the stored identity
	}
	return key.gvr.Resource + "." + g + "." + v + "-" + hex.EncodeToString(sum[:8])
}

// entryDisk keeps one informer's cache on disk: it restores it at start
// and journals what the informer's reflector is handed (diskJournal).
type entryDisk struct {
	factory *factoryDisk
	name    string
	spec    string
	follow  bool   // the informer follows the preferred version (specAt)
	diffed  string // why it is always diffed (diskDiffedWhy); "" if not
	// raw holds the server's JSON of the watch events' objects
	// (Factory.rawJournal); nil: objects are encoded.
	raw *codec.RawObjects
	// held: objects may be held until written (Writer.PutObject): the
	// informer has no transform, so nothing changes an object once
	// handed. Otherwise what is not written raw is encoded at once.
	held bool

	mu       sync.Mutex // guards w, release, rvs, err, restored, logged, start, reason, age, written, reported, id, before, the re-identification counts, the list and catch-up fields
	w        *persist.Writer
	release  func()            // releases the claim of name (nil: none held)
	rvs      map[string]string // key -> resourceVersion written
	err      error             // *InformerError of kind ErrCache, nil while all is well
	restored int
	logged   bool
	start    DiskStart     // how the informer started ("" until known)
	reason   string        // why a stored state was not used, or deleted
	age      time.Duration // of the stored state restored
	written  int64         // bytes written, once the writer is closed
	reported int64         // bytes written already reported to metrics
	// Re-identification. After the cache was emptied (the resource
	// stopped being served) or moved (another version), what comes next
	// may be of another CRD instance or version, so the identity is read
	// again before each list (diskListing) until a list begun after such
	// a read has ended: a list that fails (the 404 of a resource not
	// served yet) refills nothing, and the identity it read (no CRD yet)
	// may not be the one of the list that will. emptied counts the
	// emptyings; identified is emptied as of the last identity read;
	// listFor is identified as of the list begun last (journalListBegun);
	// refilled is listFor of the last list that ended (journalListEnded).
	// Due while refilled != emptied.
	emptied, identified, listFor, refilled uint64

	id     persist.Identity // the identity written under
	before int64            // bytes written by writers replaced
	// tentative: start is DiskResumed, not yet reported (a 410 may
	// follow in the stream); tentativeAt is when it was set.
	tentative   bool
	tentativeAt time.Time

	// listing: a list was journaled as begun (Writer.Listing) and not
	// yet as complete. seen: the keys of the list begun, as it is handed
	// (nil: none under way); at its end the keys it lacks are deleted.
	// listedOnce: the cache was filled before (a list ended, or a
	// restore).
	listing    bool
	seen       map[string]struct{}
	listedOnce bool
	// queue: what the reflector was handed, for diskApply (qmu); spare
	// is a drained queue's array, reused (amu). kick wakes the disk
	// goroutine; behind: the queue overflowed, nothing more is queued.
	qmu    sync.Mutex
	queue  []diskOp
	queued int // bytes copied into queue
	behind bool
	amu    sync.Mutex // serializes diskApply
	spare  []diskOp
	kick   chan struct{}
	// catchUpRV: after a restore, the server's resourceVersion as the
	// informer started ("" if unknown or nothing restored); caughtUp:
	// the cache reached it (DiskStatus.CaughtUp).
	catchUpRV string
	caughtUp  bool
}

// cacheErr records why the disk cache is not used, logging it once.
func (e *entry) cacheErr(err error) {
	ie := &InformerError{GVR: e.currentGVR(), Kind: ErrCache, Err: err}
	d := e.disk
	d.mu.Lock()
	d.err = ie
	first := !d.logged
	d.logged = true
	d.mu.Unlock()
	if first {
		e.logger.Info("disk cache not used", "dir", d.factory.path, "err", err.Error())
	}
}

// status is what Status shows of the disk cache.
func (d *entryDisk) status() (DiskStatus, error) {
	if d == nil {
		return DiskStatus{}, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	ds := DiskStatus{Start: d.start, Reason: d.reason, Restored: d.restored, Age: d.age, Written: d.before + d.written, CaughtUp: d.caughtUp}
	if d.w != nil {
		ds.Written = d.before + d.w.Written() // (not Stats: it waits for a write under way)
	}
	return ds, d.err
}

// diskStarted records (once) how the informer started, and reports it.
// A tentative DiskResumed (see diskRequest) may still become DiskDiffed.
func (e *entry) diskStarted(start DiskStart, reason string) {
	d := e.disk
	d.mu.Lock()
	if d.start != "" && !(d.tentative && start == DiskDiffed) {
		d.mu.Unlock()
		return
	}
	d.start, d.reason, d.tentative = start, reason, false
	restored, age := d.restored, d.age
	d.mu.Unlock()
	e.logger.V(2).Info("started from the disk cache", "start", start, "reason", reason, "restored", restored, "age", age.String())
	e.metrics.diskStart(start, reason, restored, age)
}

// diskRequest: the informer's first request to the server after a
// restore decides how it started: a list (or a 410 Expired, list true)
// means the server could not resume (diffed); a watch opened means it
// resumed — tentatively, since the 410 can come inside the stream it
// opened: a list within diskResumeConfirm (and before the informer's
// end) still makes it diffed.
func (e *entry) diskRequest(list bool) {
	d := e.disk
	if d == nil {
		return
	}
	d.mu.Lock()
	restored := d.restored > 0 && d.w != nil
	undecided := restored && d.start == ""
	tentative := d.tentative
	if undecided && !list {
		d.start, d.tentative, d.tentativeAt = DiskResumed, true, time.Now()
	}
	d.mu.Unlock()
	if list && (undecided || tentative) {
		e.diskStarted(DiskDiffed, "")
	}
}

// diskConfirm reports a tentative DiskResumed once no list followed it
// for a while (or at the end).
func (e *entry) diskConfirm(final bool) {
	d := e.disk
	d.mu.Lock()
	ok := d.tentative && (final || time.Since(d.tentativeAt) >= diskResumeConfirm)
	if ok {
		d.tentative = false
	}
	restored, age := d.restored, d.age
	d.mu.Unlock()
	if ok {
		e.logger.V(2).Info("started from the disk cache", "start", DiskResumed, "restored", restored, "age", age.String())
		e.metrics.diskStart(DiskResumed, "", restored, age)
	}
}

// diskReport reports the bytes written since the last report.
func (e *entry) diskReport(st persist.Stats) {
	d := e.disk
	d.mu.Lock()
	n := st.Written - d.reported
	d.reported = st.Written
	d.mu.Unlock()
	e.metrics.diskWritten(n)
}

// restore runs before the informer: it loads the stored state (handing
// it to the gate as the first list), writes it as the new snapshot and
// starts journaling. Any failure leaves the informer to the server.
func (e *entry) restore(ctx context.Context) {
	d := e.disk
	dir, err := d.factory.open()
	if err != nil {
		e.cacheErr(err)
		return
	}
	release, err := d.factory.claim(ctx, d.name)
	if err != nil {
		if ctx.Err() == nil { // (else the informer is stopping)
			e.cacheErr(err)
		}
		return
	}
	kept := false
	defer func() {
		if kept {
			d.mu.Lock()
			d.release = release
			d.mu.Unlock()
		} else {
			release()
		}
	}()
	cluster, crd, err := d.factory.identity(ctx, e.currentGVR())
	if err != nil {
		e.cacheErr(err)
		return
	}
	id := persist.Identity{Spec: d.specAt(e.currentGVR()), Cluster: cluster, CRD: crd}
	st, info, err := dir.Load(d.name, id)
	// Nothing stored under the versioned encoding: a state stored by
	// informerkit before it (legacyDiskSpec) is taken over, written
	// again under the new name; one that does not match is removed, as
	// any other.
	legacy, legacySpec := d.legacyAt(e.key, e.currentGVR())
	if errors.Is(err, fs.ErrNotExist) && legacy != "" && legacy != d.name {
		lid := id
		lid.Spec = legacySpec
		if lst, linfo, lerr := dir.Load(legacy, lid); !errors.Is(lerr, fs.ErrNotExist) {
			st, info, err = lst, linfo, lerr
			e.logger.V(2).Info("stored cache of the unversioned spec encoding taken over", "file", legacy, "to", d.name, "objects", len(st.Objects))
		} else {
			legacy = ""
		}
	} else {
		legacy = ""
	}
	cold, gone := "", ""
	switch {
	case persist.Reason(err) == persist.ReasonCRD && len(st.Objects) > 0:
		// Stored for a CRD deleted (or deleted and created again) while
		// the process was down: its objects are restored, then deleted.
		gone = "the CustomResourceDefinition was deleted while the process was down"
		if crd != "" {
			gone = "the CustomResourceDefinition was deleted and created again while the process was down"
		}
		e.logger.Info("stored cache of a CustomResourceDefinition since deleted: its objects are delivered as deletes", "file", d.name, "objects", len(st.Objects), "reason", gone)
	case errors.Is(err, fs.ErrNotExist):
		cold = persist.ReasonNone
	case err != nil:
		// Not used and removed; the informer lists.
		cold = persist.Reason(err)
		e.logger.Info("stored cache ignored and removed", "dir", dir.Path(), "file", d.name, "reason", err.Error())
	case info.JournalErr != nil:
		e.logger.Info("stored journal read in part (the end of a crash)", "file", d.name, "applied", info.Journaled, "reason", info.JournalErr.Error())
	}
	if cold == "" && (len(st.Objects) == 0 || st.RV == "") {
		cold = "nothing stored at a resourceVersion"
	}
	if cold == "" && gone == "" && newerRV(st.RV, d.factory.serverRVNow()) {
		// Never back in time: the server's history does not reach the
		// stored state (an etcd restored from a backup?).
		cold = reasonNewer
		e.logger.Info("stored cache ignored and removed", "file", d.name, "reason", "its resourceVersion "+st.RV+" is newer than the server's "+d.factory.serverRVNow())
		dir.Remove(d.name)
	}
	if cold == "" {
		list, err := e.restoredList(st)
		switch {
		case err != nil:
			e.logger.Info("stored cache ignored", "file", d.name, "reason", err.Error())
			cold = persist.ReasonCorrupt
		case gone != "":
			e.lw.SetRestoredGone(list, gone)
		case st.Listing:
			// Stored inside a list: no resourceVersion says what it
			// holds, so it is compared with a new list.
			e.lw.SetRestoredStale(list)
			e.logger.Info("stored cache was written during a list: restored, then compared with a new list", "file", d.name, "objects", len(st.Objects))
		case d.diffed != "":
			e.lw.SetRestoredStale(list)
		default:
			e.lw.SetRestored(list)
		}
	}
	restored := len(st.Objects)
	if cold != "" || gone != "" {
		// Nothing of it is current: the new snapshot starts empty.
		st = persist.State{}
	}
	if cold != "" {
		restored = 0
	}
	var w *persist.Writer
	if cold == "" && gone == "" && legacy == "" {
		// Restored whole: journal after the files as they are (Create
		// if a journal was read in part).
		w, err = dir.Continue(d.name, id, st, info)
	} else {
		w, err = dir.Create(d.name, id, st)
	}
	if legacy != "" {
		dir.Remove(legacy) // (taken over, or not used)
	}
	if err != nil {
		e.lw.SetRestored(nil) // the gone objects too: the informer lists
		e.cacheErr(err)
		return
	}
	kept = true
	// The server's resourceVersion now, read before d.mu is taken: the
	// request's contact report updates the informer's Status, which
	// takes d.mu (a deadlock the soak found when the contact changed
	// during this request).
	catchUpRV := ""
	if cold == "" && gone == "" && restored > 0 {
		catchUpRV = d.factory.currentRV(ctx)
	}
	d.mu.Lock()
	d.w, d.id = w, id
	d.rvs = make(map[string]string, len(st.Objects))
	for _, o := range st.Objects {
		d.rvs[o.Key] = o.RV
	}
	d.restored = restored
	d.listedOnce = restored > 0
	d.catchUpRV = catchUpRV
	if cold == "" && !info.Written.IsZero() {
		d.age = max(time.Since(info.Written), 0)
	}
	d.mu.Unlock()
	switch {
	case cold != "":
		e.diskStarted(DiskCold, cold)
	case gone != "":
		e.diskStarted(DiskRemoved, gone)
	case st.Listing && restored > 0:
		e.diskStarted(DiskDiffed, reasonInsideList)
	case d.diffed != "" && restored > 0:
		e.diskStarted(DiskDiffed, d.diffed)
	}
}

// reasonInsideList is DiskStatus.Reason of a Diffed start whose stored
// state was written while a list was under way.
const reasonInsideList = "stored during a list"

// restoredList decodes st into a list of the reflector's type at st.RV.
func (e *entry) restoredList(st persist.State) (runtime.Object, error) {
	items := make([]runtime.Object, 0, len(st.Objects))
	for _, o := range st.Objects {
		obj, err := decodeFromDisk(o.Data, e.cfg.metadataOnly)
		if err != nil {
			return nil, fmt.Errorf("object %s: %w", o.Key, err)
		}
		items = append(items, obj)
	}
	list := e.lw.EmptyList(st.RV)
	if err := meta.SetList(list, items); err != nil {
		return nil, err
	}
	return list, nil
}

// The stored form of an object (persist.Object.Data, format version 2):
// one byte naming its encoding, then the encoding.
const (
	// diskTree: the compact tree encoding of an
	// *unstructured.Unstructured's content (package cache's, through
	// internal/treecodec). A compact cache's objects are written as its
	// decoder built them (the envelope's decode.Tree, which its Compactor
	// keeps); others are encoded, which costs a walk of the map and no
	// escaping or number formatting.
	diskTree = 'T'
	// diskJSON: JSON (a *metav1.PartialObjectMetadata, or an object
	// holding values JSON decoding never makes, such as an int a
	// transform set).
	diskJSON = 'J'
)

// appendForDisk appends obj's stored form to dst.
func appendForDisk(dst []byte, obj interface{}) ([]byte, error) {
	if enc, ok := treecodec.Encoding(obj); ok {
		return append(append(dst, diskTree), enc...), nil
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		if t, ok := u.Object[decode.TreeKey].(*decode.Tree); ok {
			// An envelope of the compact decoder (a compact cache's
			// object before its Compactor): its encoding is the one the
			// Compact will keep.
			return append(append(dst, diskTree), t.Enc...), nil
		}
		if b, err := treecodec.Encode(append(dst, diskTree), u.Object); err == nil {
			return b, nil
		}
		data, err := u.MarshalJSON()
		if err != nil {
			return nil, err
		}
		return append(append(dst, diskJSON), data...), nil
	}
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	return append(append(dst, diskJSON), data...), nil
}

// appendRawForDisk appends the stored form of raw, the JSON the server
// sent of an object cached as decoded from it (Factory.rawJournal): JSON
// as it is.
// The bytes are given back to codec.Release once appended: the queued
// entry holding them is dropped after its encoding.
func appendRawForDisk(dst []byte, raw any) ([]byte, error) {
	b := raw.([]byte)
	dst = append(append(dst, diskJSON), b...)
	codec.Release(b)
	return dst, nil
}

// decodeFromDisk decodes a stored form into the reflector's type: a
// *metav1.PartialObjectMetadata if metadataOnly, else an
// *unstructured.Unstructured (whose strings may share data's memory).
func decodeFromDisk(data []byte, metadataOnly bool) (runtime.Object, error) {
	if len(data) == 0 {
		return nil, errors.New("empty stored object")
	}
	body := data[1:]
	switch data[0] {
	case diskTree:
		m, err := treecodec.Decode(body)
		if err != nil {
			return nil, err
		}
		if !metadataOnly {
			return &unstructured.Unstructured{Object: m}, nil
		}
		p := &metav1.PartialObjectMetadata{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, p); err != nil {
			return nil, err
		}
		return p, nil
	case diskJSON:
		if metadataOnly {
			p := &metav1.PartialObjectMetadata{}
			if err := json.Unmarshal(body, p); err != nil {
				return nil, err
			}
			return p, nil
		}
		// What the informer's fast path would have decoded from the
		// same JSON (the server's, appendRawForDisk); anything else as
		// client-go decodes it.
		if m, err := decode.Object(body, decode.Options{}); err == nil && m != nil {
			if kind, _ := m["kind"].(string); kind != "" {
				return &unstructured.Unstructured{Object: m}, nil
			}
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(body); err != nil {
			return nil, err
		}
		return u, nil
	}
	return nil, fmt.Errorf("unknown stored encoding %q", data[0])
}

// diskJournal is the gate.Recorder of an informer kept on disk: its
// journal records what the reflector is handed, in the order handed, so
// it needs no event handler of its own. The goroutine that hands a thing
// (the reflector's for a list page, the stream's for an event) reads
// what the journal needs of it and queues that (diskQueue); the disk
// goroutine applies the queue in order and writes (diskApply), so a slow
// disk never holds up the informer. Lists are bracketed (Writer.Listing,
// then Listed at the list's resourceVersion once all of it and the
// deletes of what it lacked were journaled); a bookmark outside a list
// journals its resourceVersion (Writer.Progress), so that a quiet
// resource resumes from there.
type diskJournal struct{ e *entry }

var _ gate.Recorder = diskJournal{}

// diskOp is one thing the reflector was handed, as the journal records
// it.
type diskOp struct {
	kind byte    // one of the diskOp* constants
	put  diskPut // diskOpPut's; diskOpDelete's key and rv
	rv   string  // diskOpEnd's, diskOpProgress's
}

const (
	diskOpPut = iota
	diskOpDelete
	diskOpBegin
	diskOpEnd
	diskOpProgress
)

// diskKickAt is how many queued operations wake the disk goroutine
// before its next tick. diskQueueMax and diskQueueBytes bound the queue
// (operations; bytes of JSON and encodings copied): a journal that far
// behind (a disk stuck under a busy resource) stops (Status.CacheErr),
// and what is on disk stays the state it reached, a state the reflector
// was handed.
const (
	diskKickAt     = 256
	diskQueueMax   = 1 << 16
	diskQueueBytes = 64 << 20
)

// errJournalBehind: the disk did not keep up with the informer's events.
var errJournalBehind = errors.New("the journal fell behind the informer's events (the disk did not keep up); nothing more is written")

// diskQueue queues op for diskApply.
func (e *entry) diskQueue(op diskOp) {
	d := e.disk
	d.qmu.Lock()
	if d.behind {
		d.qmu.Unlock()
		codec.Release(op.put.raw)
		return
	}
	d.queue = append(d.queue, op)
	d.queued += len(op.put.raw) + len(op.put.enc)
	n := len(d.queue)
	over := n > diskQueueMax || d.queued > diskQueueBytes
	if over {
		for _, q := range d.queue {
			codec.Release(q.put.raw)
		}
		d.queue, d.queued, d.behind = nil, 0, true
	}
	d.qmu.Unlock()
	switch {
	case over:
		e.diskFailed(errJournalBehind)
	case n == diskKickAt:
		select {
		case d.kick <- struct{}{}:
		default:
		}
	}
}

// diskApply journals the queued operations, in order (the disk
// goroutine's, and the informer's end).
func (e *entry) diskApply() {
	d := e.disk
	d.amu.Lock()
	defer d.amu.Unlock()
	d.qmu.Lock()
	ops := d.queue
	d.queue, d.queued = d.spare[:0], 0
	d.qmu.Unlock()
	if len(ops) == 0 {
		d.spare = ops
		return
	}
	if stop := diskcost.Start(); stop != nil {
		defer stop()
	}
	for i := range ops {
		op := &ops[i]
		switch op.kind {
		case diskOpPut:
			e.journalPut(op.put)
		case diskOpDelete:
			e.journalDelete(op.put.key, op.put.rv)
		case diskOpBegin:
			e.journalListBegun()
		case diskOpEnd:
			e.journalListEnded(op.rv)
		case diskOpProgress:
			e.journalProgress(op.rv)
		}
	}
	clear(ops)
	d.spare = ops[:0]
}

// ListBegun implements gate.Recorder.
func (j diskJournal) ListBegun() { j.e.diskQueue(diskOp{kind: diskOpBegin}) }

// journalListBegun journals a list as begun.
func (e *entry) journalListBegun() {
	d := e.disk
	d.mu.Lock()
	w := d.w
	d.listFor = d.identified
	if w != nil {
		d.seen = make(map[string]struct{}, len(d.rvs))
		d.listing = true
	}
	d.mu.Unlock()
	if w == nil {
		return
	}
	// (Written without d.mu: a write on a stalled disk must not hold up
	// Status and the informer's other readers of d.)
	if err := w.Listing(); err != nil {
		e.diskWriteFailed(w, err)
	}
}

// ListPage implements gate.Recorder.
func (j diskJournal) ListPage(list runtime.Object, end bool, rv string) {
	_ = meta.EachListItem(list, func(o runtime.Object) error {
		if p, ok := j.e.diskPrepare(o); ok {
			j.e.diskQueue(diskOp{kind: diskOpPut, put: p})
		}
		return nil
	})
	if end {
		j.ListEnded(rv)
	}
}

// ListEnded implements gate.Recorder.
func (j diskJournal) ListEnded(rv string) { j.e.diskQueue(diskOp{kind: diskOpEnd, rv: rv}) }

// journalListEnded journals the list begun as complete at rv, after the
// deletes of the keys it lacked.
func (e *entry) journalListEnded(rv string) {
	d := e.disk
	type gone struct{ key, rv string }
	var deletes []gone
	d.mu.Lock()
	w, seen, listing := d.w, d.seen, d.listing
	d.seen, d.listing = nil, false
	d.refilled = d.listFor
	if w != nil && seen != nil {
		for key, krv := range d.rvs {
			if _, ok := seen[key]; !ok {
				deletes = append(deletes, gone{key, krv})
				delete(d.rvs, key)
			}
		}
		d.listedOnce = true
	}
	d.mu.Unlock()
	if w == nil {
		return
	}
	for _, g := range deletes {
		if err := w.Delete(g.key, g.rv); err != nil {
			e.diskWriteFailed(w, err)
			return
		}
	}
	if listing {
		if err := w.Listed(rv); err != nil {
			e.diskWriteFailed(w, err)
		}
	}
}

// Observe implements gate.Recorder. What the journal needs of the event
// it reads now (the object is the reader's once taken); it writes once
// the reflector took the event.
func (j diskJournal) Observe(ev watch.Event) (taken func()) {
	e := j.e
	switch ev.Type {
	case watch.Added, watch.Modified:
		p, ok := e.diskPrepare(ev.Object)
		if !ok {
			return nil
		}
		return func() { e.diskQueue(diskOp{kind: diskOpPut, put: p}) }
	case watch.Deleted:
		if raw := e.disk.raw; raw != nil {
			if b, ok := raw.Take(ev.Object); ok { // a DELETED event's object: not written
				codec.Release(b)
			}
		}
		key, err := toolscache.DeletionHandlingMetaNamespaceKeyFunc(ev.Object)
		if err != nil {
			return nil
		}
		rv := ""
		if m, err := meta.Accessor(ev.Object); err == nil {
			rv = m.GetResourceVersion()
		}
		return func() { e.diskQueue(diskOp{kind: diskOpDelete, put: diskPut{key: key, rv: rv}}) }
	case watch.Bookmark:
		if raw := e.disk.raw; raw != nil {
			if b, ok := raw.Take(ev.Object); ok { // not written
				codec.Release(b)
			}
		}
		m, err := meta.Accessor(ev.Object)
		if err != nil {
			return nil
		}
		rv := m.GetResourceVersion()
		if reflectorseam.EndsInitialEvents(ev.Object) {
			return func() { j.ListEnded(rv) }
		}
		return func() { e.diskQueue(diskOp{kind: diskOpProgress, rv: rv}) }
	}
	return nil
}

// diskPut is an object to journal, read when it was handed: its key and
// resourceVersion, and its stored form — the server's JSON (raw), an
// encoding made at once (enc), or the object itself, held and encoded
// when written (entryDisk.held).
type diskPut struct {
	key, rv string
	raw     []byte
	enc     []byte
	obj     runtime.Object
}

// diskPrepare reads what journalPut needs of obj, which the informer's
// transforms may change once it is handed. ok false: obj has no key.
// Only an encoding made here is measured (internal/diskcost: measuring
// each event would add the measurement's own cost to the figure; the
// queue is measured as diskApply writes it); reading the key, taking the
// JSON and queueing are not.
func (e *entry) diskPrepare(obj runtime.Object) (p diskPut, ok bool) {
	d := e.disk
	m, err := meta.Accessor(obj)
	if err != nil {
		return p, false
	}
	p.key, p.rv = toolscache.MetaObjectToName(m).String(), m.GetResourceVersion()
	if d.raw != nil {
		if b, ok := d.raw.Take(obj); ok {
			p.raw = b
			return p, true
		}
	}
	if d.held {
		p.obj = obj
		return p, true
	}
	// (Encoded even if unchanged: what the journal holds is known only
	// once the queue ahead of this object is applied.)
	stop := diskcost.Start()
	enc, err := appendForDisk(nil, obj)
	if stop != nil {
		stop()
	}
	if err != nil {
		e.diskFailed(fmt.Errorf("encoding %s: %w", p.key, err))
		return p, false
	}
	p.enc = enc
	return p, true
}

// journalPut journals an object handed to the reflector. An object
// already written at its resourceVersion (a restored one, one a relist
// brought unchanged) is not written again.
func (e *entry) journalPut(p diskPut) {
	d := e.disk
	d.mu.Lock()
	w := d.w
	if d.seen != nil {
		d.seen[p.key] = struct{}{}
	}
	same := d.rvs[p.key] == p.rv
	d.mu.Unlock()
	if w == nil || same {
		codec.Release(p.raw)
		return
	}
	var err error
	switch {
	case p.raw != nil:
		err = w.PutObject(p.key, p.rv, p.raw, appendRawForDisk)
	case p.enc != nil:
		err = w.Put(p.key, p.rv, p.enc)
	default:
		err = w.PutObject(p.key, p.rv, p.obj, appendForDisk)
	}
	if err != nil {
		e.diskWriteFailed(w, err)
		return
	}
	d.mu.Lock()
	if d.w == w {
		d.rvs[p.key] = p.rv
	}
	d.mu.Unlock()
}

// journalDelete journals a delete handed to the reflector (of a key the
// journal holds).
func (e *entry) journalDelete(key, rv string) {
	d := e.disk
	d.mu.Lock()
	w := d.w
	_, known := d.rvs[key]
	delete(d.rvs, key)
	if d.seen != nil {
		delete(d.seen, key)
	}
	d.mu.Unlock()
	if w == nil || !known {
		return
	}
	if err := w.Delete(key, rv); err != nil {
		e.diskWriteFailed(w, err)
	}
}

// journalProgress journals a bookmark's resourceVersion: everything
// before it was handed, so the journal is the state at rv — unless a
// list is under way (its end says that), or rv is not later than what
// was journaled (a bookmark the gate made up).
func (e *entry) journalProgress(rv string) {
	d := e.disk
	d.mu.Lock()
	w, inList := d.w, d.listing || d.seen != nil
	d.mu.Unlock()
	if w == nil || inList || !newerRV(rv, w.Stats().RV) {
		return
	}
	if err := w.Progress(rv); err != nil {
		e.diskWriteFailed(w, err)
	}
}

// diskWriteFailed is diskFailed for a write to w, unless w was closed
// because a new state replaced it (diskReidentify: what was being
// written belonged to the old state) or the informer stopped.
func (e *entry) diskWriteFailed(w *persist.Writer, err error) {
	if errors.Is(err, persist.ErrClosed) {
		d := e.disk
		d.mu.Lock()
		replaced := d.w != w // (nil: the informer is stopping)
		d.mu.Unlock()
		if replaced {
			return
		}
	}
	e.diskFailed(err)
}

// diskFailed: a write failed (a full disk, a read-only directory). What
// is on disk stays a state the informer held; nothing more is written.
func (e *entry) diskFailed(err error) {
	e.cacheErr(fmt.Errorf("writing: %w", err))
}

// diskLoop makes the journal durable every diskSyncPeriod and folds it
// into the snapshot when it has grown, until ctx ends.
func (e *entry) diskLoop(ctx context.Context) {
	d := e.disk
	t := time.NewTicker(diskSyncPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.kick:
			e.diskApply()
			continue
		case <-t.C:
		}
		e.diskApply()
		d.mu.Lock()
		w := d.w
		d.mu.Unlock()
		if w == nil {
			return
		}
		if err := diskMeasured(w.Sync); err != nil {
			e.diskFailed(err)
			return
		}
		e.diskReport(w.Stats())
		e.diskConfirm(false)
		e.diskCatchUp()
		if w.FoldDue() {
			if err := diskMeasured(w.Fold); err != nil {
				e.diskFailed(err)
				return
			}
		}
	}
}

// diskMeasured runs a disk call (a sync, a fold) inside the persistence
// cost measurement (internal/diskcost), beside the journal's work.
func diskMeasured(f func() error) error {
	if stop := diskcost.Start(); stop != nil {
		defer stop()
	}
	return f()
}

// diskCatchUp sets DiskStatus.CaughtUp once the cache has applied the
// server's resourceVersion read when the informer restored its state.
func (e *entry) diskCatchUp() {
	d := e.disk
	d.mu.Lock()
	target, done := d.catchUpRV, d.caughtUp
	d.mu.Unlock()
	if done || target == "" {
		return
	}
	rv := e.informer.GetStore().LastStoreSyncResourceVersion()
	if rv == "" {
		return
	}
	if c, err := resourceversion.CompareResourceVersion(rv, target); err != nil || c < 0 {
		return
	}
	d.mu.Lock()
	d.caughtUp = true
	d.mu.Unlock()
	e.logger.V(2).Info("restored cache caught up with the server", "resourceVersion", rv, "target", target)
}

// closeDisk folds and closes the journal once the informer has stopped.
// The journal holds what the reflector was handed, in order: a state the
// server had (a list under way at the end stays journaled as such, and a
// restart compares it with a new list). An informer that never completed
// a list and restored nothing leaves no state to resume from.
func (e *entry) closeDisk() {
	d := e.disk
	e.diskApply() // what the reflector was handed before it stopped
	d.mu.Lock()
	w, restored, release, listed := d.w, d.restored, d.release, d.listedOnce
	d.release = nil
	d.w = nil // (a stream still ending writes nothing more)
	d.mu.Unlock()
	if release != nil {
		defer release()
	}
	if w == nil {
		return
	}
	e.diskConfirm(true)
	err := w.Close()
	st := w.Stats()
	d.mu.Lock()
	d.written = st.Written
	d.mu.Unlock()
	e.diskReport(st)
	if err != nil {
		e.diskFailed(err)
		return
	}
	if !listed && restored == 0 {
		if dir, err := d.factory.open(); err == nil && dir != nil {
			dir.Remove(d.name)
		}
	}
}

// diskMoved: a following informer moved to another version; the relist
// at it first reads the identity again (diskListing), which starts a new
// state under that version.
func (e *entry) diskMoved() { e.diskEmptied() }

// diskEmptied: the cache was emptied (the resource is no longer served);
// the lists that refill it (when it is served again) first read the
// identity again (diskListing).
func (e *entry) diskEmptied() {
	d := e.disk
	if d == nil {
		return
	}
	d.mu.Lock()
	d.emptied++
	d.mu.Unlock()
}

// reidentifyDue reports whether the identity must be read again before
// a list: the cache was emptied and no list has refilled it since an
// identity read.
func (d *entryDisk) reidentifyDue() (due bool, emptied uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.w != nil && d.refilled != d.emptied, d.emptied
}

// diskListing: a list is about to be sent; while the cache was emptied
// and not refilled since, it reads the identity again (diskReidentify).
// Every such list reads it, not only the first: one that fails (the
// resource not served yet, its CRD not created yet) refills nothing.
func (e *entry) diskListing() {
	d := e.disk
	if d == nil {
		return
	}
	if due, _ := d.reidentifyDue(); !due {
		return
	}
	// What was handed before belongs to the old state: journaled into
	// it before a new one may replace it (and a list that ended since
	// is taken into account).
	e.diskApply()
	due, emptied := d.reidentifyDue()
	if due && e.diskReidentify() {
		d.mu.Lock()
		d.identified = emptied
		d.mu.Unlock()
	}
}

// diskReidentify reads the identity again after the cache was emptied,
// before a list that may refill it: if the resource's CRD is another one
// now (deleted and created again), or the version another one, a new
// state is started under the new identity, so that a restart compares
// its objects with the CRD they belong to. The new state starts empty
// and so does the record of what it holds: the new objects come from the
// list, after, and the deletes of old objects still on their way are not
// written. It reports whether the identity was read; if it could not be,
// or the new state not created, nothing more is written (CacheErr).
func (e *entry) diskReidentify() bool {
	d := e.disk
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	gvr := e.currentGVR()
	cluster, crd, err := d.factory.identity(ctx, gvr)
	// (No journaling while the state may be replaced: a write to the
	// old one after it was closed would be lost.)
	d.amu.Lock()
	defer d.amu.Unlock()
	d.mu.Lock()
	old, id := d.w, d.id
	d.mu.Unlock()
	if old == nil {
		return false
	}
	if err != nil {
		e.diskStop(old, err)
		return false
	}
	spec := d.specAt(gvr)
	if id.Cluster == cluster && id.CRD == crd && id.Spec == spec {
		return true
	}
	// A new state starts empty, so what it holds starts empty too: every
	// object is written again as the relist delivers it (at another
	// version its resourceVersion is the same; of another CRD instance
	// it is another object), and a delete of an object of the old state
	// is not written (the new one does not hold it).
	d.mu.Lock()
	d.rvs = make(map[string]string, len(d.rvs))
	d.mu.Unlock()
	id.Cluster, id.CRD, id.Spec = cluster, crd, spec
	dir, err := d.factory.open()
	if err != nil {
		e.diskStop(old, err)
		return false
	}
	old.Close()
	w, err := dir.Create(d.name, id, persist.State{})
	if err != nil {
		e.diskStop(nil, err)
		return false
	}
	e.logger.V(2).Info("disk cache restarted for another CustomResourceDefinition or version", "crd", crd, "version", gvr.Version)
	d.mu.Lock()
	d.before += old.Written()
	d.reported -= old.Written()
	d.w, d.id = w, id
	d.mu.Unlock()
	return true
}

// diskStop: the state cannot be identified or replaced; old (if not
// nil) is closed as it is and nothing more is written (diskFailed).
func (e *entry) diskStop(old *persist.Writer, err error) {
	d := e.disk
	if old != nil {
		old.Close()
	}
	d.mu.Lock()
	if old != nil {
		d.before += old.Written()
	}
	d.w = nil
	d.mu.Unlock()
	e.diskFailed(err)
}

// restoredHook: the gate handed the reflector the restored list.
func (e *entry) restoredHook(rv string) {
	ds, _ := e.disk.status()
	restored := ds.Restored
	e.apply(lifecycle.Event{Kind: lifecycle.RestoredFromDisk, RV: rv,
		Reason: fmt.Sprintf("restored %d objects from disk at resourceVersion %s; resuming the watch", restored, rv)})
}
