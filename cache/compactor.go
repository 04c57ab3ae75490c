package cache

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	toolscache "k8s.io/client-go/tools/cache"
)

// defaultCompactIdle is how long a Compactor keeps a decoded object that
// nobody reads, when CompactorOptions.Idle is zero.
const defaultCompactIdle = 2 * time.Minute

// CompactorOptions configure a Compactor. The zero value is the default.
type CompactorOptions struct {
	// MaxDecoded bounds the number of decoded objects kept. Zero means no
	// bound: the Compactor keeps what is being read (see Compactor) and
	// nothing more. A negative value keeps none: every read decodes.
	MaxDecoded int
	// Idle is how long a decoded object is kept without being read
	// (two minutes when zero; at least 2ms). Idle objects are
	// dropped lazily, a few at a time as the Compactor's objects are read
	// or written, or all at once by Trim; an object is never dropped
	// sooner than Idle after its last read.
	Idle time.Duration
	// KeepListsOnSecondRead makes a read in a list keep an object only
	// the second time it is read, so that a one-off List of many objects
	// does not raise the heap for Idle; a repeated List is then slow
	// twice instead of once. (With MaxDecoded, Lists never push out
	// objects being read one by one, whatever this says.)
	KeepListsOnSecondRead bool
}

// Compactor builds the Compact objects of compact mode and keeps decoded
// forms of the ones that are read, so that reads of hot objects cost a
// pointer load while the cache stays compact. Use one Compactor per
// informer: informer.SetTransform(ikcache.NewCompactor(opts).Transform)
// (after other transforms: Chain(StripManagedFields, c.Transform)), or
// a compact dynamicinformer.Projection, with which informerkit's factory
// does that.
//
// What it keeps is sized by what is read, per Compactor, not by a fixed
// process-wide capacity:
//
//   - A point read (Compact.Shared: a lister's Get) keeps the decoded
//     object.
//   - A read in a list (Compact.SharedInList: List, ByIndex, ByField)
//     keeps it too, so a repeated List is answered from decoded objects
//     from its second run on; with KeepListsOnSecondRead, only the second
//     time the object is read in a list (a one-off List then keeps
//     nothing, and a repeated one is kept from its third run).
//   - Event handlers (DecodingHandler) share a kept object but keep none:
//     every object passes through them once, so keeping would decode the
//     whole cache.
//   - An object not read for Idle is dropped; so the heap of decoded
//     objects follows what was read in the last Idle.
//   - With MaxDecoded, a full Compactor makes room first from objects not
//     read since they were kept (what a List put there); a List finds no
//     room otherwise and decodes without keeping. A Get makes room with
//     the CLOCK algorithm: objects read since the clock hand last passed
//     them get a second chance.
//
// Decoded objects are attached to the Compact they were decoded from. An
// update or a delete replaces the Compact in the informer's cache, so a
// reader can never be served an older version than the cache holds: the
// new Compact has no decoded form until it is read. (The replaced
// Compact's decoded form is dropped when it goes idle, or by the CLOCK.)
//
// Decoded objects returned by Shared and SharedInList are shared with
// every reader, like the objects of a normal informer cache: they must not
// be modified (DeepCopy first). A Compactor is safe for concurrent use.
//
// Envelopes. Informers of a dynamicinformer factory whose projection is
// compact (dynamicinformer.Projection) and that run no transform of their
// own before the Compactor do not decode objects into maps: the decoder writes the compact
// encoding straight from the JSON and returns an
// *unstructured.Unstructured envelope holding apiVersion, kind, the
// metadata fields a Compact keeps (name, namespace, uid, resourceVersion,
// generation, labels, ownerReferences, deletionTimestamp) — which is all
// the informer machinery between decoder and cache reads: key functions,
// the reflector's resourceVersion, shard filters, list merging — and the
// encoding, under a value of a type no JSON decoding produces. Transform
// turns an envelope into its *Compact without walking any map; the
// Compact decodes reflect.DeepEqual to the object decoded from the same
// JSON. Envelopes exist only between the decoder and this transform:
// bookmarks, Status objects and objects without a metadata.uid are
// decoded as usual, and the informer's transform runs on every object
// before its store, indexers or handlers see it.
type Compactor struct {
	maxDecoded        int
	idle              time.Duration
	listsOnSecondRead bool
	now               func() time.Time

	// epoch counts ticks of idle/2; an object not read for 3 ticks is
	// idle. Read without the lock on the read path.
	epoch atomic.Uint32
	// writes counts Transform calls, to sweep every few writes.
	writes atomic.Uint32

	// mu guards ring, free, hand, held, lastTick and the counters below.
	mu   sync.Mutex
	ring []*Compact // the CLOCK: Compacts holding a decoded form, nil for free slots
	free []int      // free slots of ring
	hand int
	held int
	// lastTick is when epoch last advanced.
	lastTick            time.Time
	admitted, discarded uint64
}

// compactState is the per-Compact part of the Compactor's cache.
type compactState struct {
	// decoded is the kept decoded object, nil when none.
	decoded atomic.Pointer[unstructured.Unstructured]
	// flags: stateSeen (read before without being kept), stateRef (read
	// since the CLOCK hand last passed), stateHot (read since it was kept).
	flags atomic.Uint32
	// stamp is the Compactor's epoch at the last read.
	stamp atomic.Uint32
}

const (
	stateSeen uint32 = 1 << iota
	stateRef
	stateHot
)

// idleTicks is the number of epochs without a read after which a decoded
// object is dropped: with ticks of Idle/2 that is between Idle and 1.5×Idle.
const idleTicks = 3

// sweepSteps is how many CLOCK slots each sweep examines.
const sweepSteps = 4

// NewCompactor returns a Compactor with the given options.
func NewCompactor(opts CompactorOptions) *Compactor {
	if opts.Idle <= 0 {
		opts.Idle = defaultCompactIdle
	}
	opts.Idle = max(opts.Idle, 2*time.Millisecond)
	return &Compactor{maxDecoded: opts.MaxDecoded, idle: opts.Idle, listsOnSecondRead: opts.KeepListsOnSecondRead,
		now: time.Now, lastTick: time.Now()}
}

// Transform is the TransformFunc of compact mode: it turns each
// *unstructured.Unstructured into a *Compact owned by c. Compact objects
// and other types pass through; a tombstone whose object is an
// Unstructured gets a new tombstone with its Compact form (the original
// is only read, never modified).
func (c *Compactor) Transform(obj interface{}) (interface{}, error) {
	if c.writes.Add(1)%16 == 0 {
		c.maintain()
	}
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		return c.newCompact(o)
	case toolscache.DeletedFinalStateUnknown:
		if u, ok := o.Obj.(*unstructured.Unstructured); ok {
			cp, err := c.newCompact(u)
			if err != nil {
				return nil, err
			}
			return toolscache.DeletedFinalStateUnknown{Key: o.Key, Obj: cp}, nil
		}
	}
	return obj, nil
}

func (c *Compactor) newCompact(u *unstructured.Unstructured) (*Compact, error) {
	return newCompact(u, c)
}

// Shared returns the object decoded, shared with other readers: it must
// not be modified. It is the read of one object (a lister's Get): the
// decoded object is kept by the Compact's Compactor (see Compactor).
func (cp *Compact) Shared() (*unstructured.Unstructured, error) { return cp.read(false) }

// SharedInList is Shared for a read among many (a List): the decoded
// object is kept unless the Compactor is full, or was made with
// KeepListsOnSecondRead and this Compact was not read in a list before
// (see Compactor). An object not kept is decoded afresh; the rule "must
// not be modified" holds all the same.
func (cp *Compact) SharedInList() (*unstructured.Unstructured, error) { return cp.read(true) }

// peek returns the kept decoded object, or a fresh one without counting
// the read (index functions evaluated on writes use it).
func (cp *Compact) peek() (*unstructured.Unstructured, error) {
	if cp.st != nil {
		if u := cp.st.decoded.Load(); u != nil {
			return u, nil
		}
	}
	return cp.Decode()
}

func (cp *Compact) read(inList bool) (*unstructured.Unstructured, error) {
	st, owner := cp.st, cp.owner
	if st == nil || owner == nil {
		return cp.Decode()
	}
	if u := st.decoded.Load(); u != nil {
		if e := owner.epoch.Load(); st.stamp.Load() != e {
			st.stamp.Store(e)
			owner.maintain() // at most once per object and tick
		}
		if st.flags.Load()&(stateRef|stateHot) != stateRef|stateHot {
			st.flags.Or(stateRef | stateHot)
		}
		if rand.Uint32()%256 == 0 { // lets the epoch advance when every read hits
			owner.maintain()
		}
		return u, nil
	}
	u, err := cp.Decode()
	if err != nil {
		return nil, err
	}
	if owner.maxDecoded < 0 {
		return u, nil
	}
	if inList && owner.listsOnSecondRead && st.flags.Load()&stateSeen == 0 {
		st.flags.Or(stateSeen)
		return u, nil
	}
	return owner.admit(cp, u, inList), nil
}

// admit keeps u as cp's decoded form and returns the form readers share
// (another reader's, if one was kept concurrently). When the Compactor is
// full, a read in a list is kept only in place of an object that was not
// read since it was kept; u is returned unkept otherwise.
func (c *Compactor) admit(cp *Compact, u *unstructured.Unstructured, inList bool) *unstructured.Unstructured {
	c.mu.Lock()
	defer c.mu.Unlock()
	if kept := cp.st.decoded.Load(); kept != nil {
		return kept
	}
	c.tickLocked()
	c.sweepLocked(sweepSteps)
	var slot int
	switch {
	case len(c.free) > 0:
		slot = c.free[len(c.free)-1]
		c.free = c.free[:len(c.free)-1]
	case c.maxDecoded == 0 || len(c.ring) < c.maxDecoded:
		slot = len(c.ring)
		c.ring = append(c.ring, nil)
	default:
		var ok bool
		if slot, ok = c.evictForRoomLocked(inList); !ok {
			return u
		}
	}
	c.ring[slot] = cp
	c.held++
	c.admitted++
	cp.st.stamp.Store(c.epoch.Load())
	cp.st.flags.And(^(stateRef | stateHot)) // kept, not yet read again
	cp.st.decoded.Store(u)
	return u
}

// maintain advances the epoch and sweeps a few slots, unless another
// goroutine holds the lock (then it is busy doing the same).
func (c *Compactor) maintain() {
	if !c.mu.TryLock() {
		return
	}
	defer c.mu.Unlock()
	c.tickLocked()
	c.sweepLocked(sweepSteps)
}

func (c *Compactor) tickLocked() {
	now := c.now()
	if tick := c.idle / 2; now.Sub(c.lastTick) >= tick {
		n := now.Sub(c.lastTick) / tick
		c.epoch.Add(uint32(n))
		c.lastTick = c.lastTick.Add(n * tick)
	}
}

// idleLocked says whether cp was not read for idleTicks epochs. A set
// reference bit means a read the stamp may not reflect yet.
func (c *Compactor) idleLocked(cp *Compact) bool {
	return cp.st.flags.Load()&stateRef == 0 && c.epoch.Load()-cp.st.stamp.Load() >= idleTicks
}

// passLocked is the hand passing cp (in slot) on a sweep: an object read
// since the last pass is stamped with the current epoch (the reads that
// set its reference bit may not have seen the epoch advance), and its
// bit cleared; an idle one is dropped.
func (c *Compactor) passLocked(cp *Compact, slot int) {
	if cp.st.flags.Load()&stateRef != 0 {
		cp.st.flags.And(^stateRef)
		cp.st.stamp.Store(c.epoch.Load())
		return
	}
	if c.idleLocked(cp) {
		c.dropLocked(slot)
	}
}

// sweepLocked moves the hand over up to n slots, dropping idle objects.
func (c *Compactor) sweepLocked(n int) {
	if c.held == 0 {
		return
	}
	for ; n > 0 && len(c.ring) > 0; n-- {
		c.hand %= len(c.ring)
		if cp := c.ring[c.hand]; cp != nil {
			c.passLocked(cp, c.hand)
		}
		c.hand++
	}
}

// probeSlots bounds the search of a full Compactor for an object not read
// since it was kept.
const probeSlots = 64

// evictForRoomLocked frees a slot of a full ring. First it looks, over a
// few slots from the hand, for an idle object or one not read since it
// was kept (what a List put there). Failing that, a read in a list gets
// no slot (false), so Lists never push out objects that are being read;
// a point read gets one by CLOCK: the hand drops the first object not
// read since the hand last passed, clearing the reference bit of the
// others it passes (two turns at most).
func (c *Compactor) evictForRoomLocked(inList bool) (int, bool) {
	for i := min(len(c.ring), probeSlots); i > 0; i-- {
		c.hand %= len(c.ring)
		slot := c.hand
		c.hand++
		if cp := c.ring[slot]; cp != nil && (cp.st.flags.Load()&stateHot == 0 || c.idleLocked(cp)) {
			c.dropLocked(slot)
			c.free = c.free[:len(c.free)-1] // the slot dropLocked freed
			return slot, true
		}
	}
	if inList {
		return 0, false
	}
	for turns := 2*len(c.ring) + 1; turns > 0; turns-- {
		c.hand %= len(c.ring)
		slot := c.hand
		c.hand++
		cp := c.ring[slot]
		if cp == nil { // not reached: a full ring has no free slot
			continue
		}
		if cp.st.flags.Load()&stateRef == 0 {
			c.dropLocked(slot)
			c.free = c.free[:len(c.free)-1]
			return slot, true
		}
		cp.st.flags.And(^stateRef)
		cp.st.stamp.Store(c.epoch.Load())
	}
	return 0, false // not reached: two turns clear every bit
}

func (c *Compactor) dropLocked(slot int) {
	cp := c.ring[slot]
	c.ring[slot] = nil
	c.free = append(c.free, slot)
	c.held--
	c.discarded++
	cp.st.decoded.Store(nil)
}

// Trim drops every decoded object that has been idle for the Compactor's
// Idle time, at once.
func (c *Compactor) Trim() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tickLocked()
	c.sweepLocked(len(c.ring))
}

// CompactorStats describe a Compactor's cache of decoded objects.
type CompactorStats struct {
	// Held is the number of decoded objects kept now.
	Held int
	// Admitted and Dropped count objects kept and dropped since the
	// Compactor was made.
	Admitted, Dropped uint64
}

// Stats returns the Compactor's counters.
func (c *Compactor) Stats() CompactorStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return CompactorStats{Held: c.held, Admitted: c.admitted, Dropped: c.discarded}
}
