package dynamicinformer

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// State is where an informer is in its life.
type State string

const (
	// Pending: not started yet, or still checking whether its resource is
	// served (Err nil in both), or waiting for it to be served, e.g. a CRD
	// not installed yet (Err wraps ErrNotServed: a source — the CRDs,
	// discovery or the server's 404 — said so). Handlers have seen
	// nothing.
	Pending State = "Pending"
	// Restored: the cache holds what was stored on disk (Options.CacheDir)
	// and is read from; handlers have received it as initial-list adds.
	// The watch resumes from the stored resourceVersion: Synced once the
	// server accepted it; Syncing if it answers 410 Expired and the
	// informer lists instead. The cache may be out of date meanwhile
	// (by what changed while the process was down); it stays Restored
	// while the server cannot be reached.
	Restored State = "Restored"
	// Syncing: listing; the cache is not complete yet.
	Syncing State = "Syncing"
	// Synced: the initial list is in the cache and the watch runs.
	Synced State = "Synced"
	// Stale: the cache holds a complete list, but the API server cannot be
	// reached (ContactErr says why), so the cache is no longer kept
	// current and may be out of date. Reads are served from it, HasSynced
	// stays true; Reason names the lost contact ("no contact with the API
	// server: connection refused"). It replaces Synced the moment the
	// factory finds contact lost (Factory.Contact: within about a second
	// for refused or cut connections, within Options.ContactCheckInterval
	// and ContactCheckTimeout for a black hole) and gives way to Synced the
	// moment contact is regained; the informer's requests wait for it
	// meanwhile, so its watch resumes where it stopped and what changed
	// arrives then. Any other event acts on it as on Synced.
	Stale State = "Stale"
	// Removed: the resource stopped being served (CRD deleted, version no
	// longer served, API group gone). Handlers received a delete for every
	// cached object and the cache is empty — except, rarely, an object
	// whose add was in flight while the deletes were taken: Removed is then
	// published after 5 s and that object goes when the resource returns.
	// The informer resumes by itself if the resource is served again.
	Removed State = "Removed"
	// Failed: the server answered list or watch with a refusal or an
	// error (forbidden, unauthorized, invalid selector, unreadable
	// storage, ...); a server that cannot be reached is not Failed but
	// shows in ContactErr;
	// Status.Err says which. The informer keeps retrying with the
	// reflector's backoff and moves on by itself if the cause goes away —
	// except for ErrInvalid, a configuration error no
	// retry cures (no request is sent).
	Failed State = "Failed"
	// Stopped: released or shut down; it will not run again.
	Stopped State = "Stopped"
)

// DiskStart is how an informer kept on disk (Options.CacheDir) started.
type DiskStart string

const (
	// DiskResumed: objects were restored from disk and the server
	// accepted the watch from the stored resourceVersion; nothing was
	// listed. Handlers saw the restored objects as initial-list adds,
	// then what changed while the process was down.
	DiskResumed DiskStart = "Resumed"
	// DiskDiffed: objects were restored, but the server could not resume
	// from the stored resourceVersion (410 Expired): the informer listed,
	// and handlers saw only the differences from what was restored.
	DiskDiffed DiskStart = "Diffed"
	// DiskCold: nothing usable was on disk (DiskStatus.Reason says why);
	// the informer listed as without a cache directory.
	DiskCold DiskStart = "Cold"
	// DiskRemoved: the resource's CustomResourceDefinition was deleted
	// (or deleted and created again) while the process was down: the
	// stored objects were restored and then deleted (handlers saw an
	// initial-list add and a delete per object); the informer is
	// Removed, or lists the new resource as a cold start once it is
	// served.
	DiskRemoved DiskStart = "Removed"
)

// DiskStatus is what the disk cache (Options.CacheDir) did for an
// informer.
type DiskStatus struct {
	// Start is how the informer started; "" until known (objects
	// restored, the watch not yet answered) or when the informer is not
	// kept on disk (see Status.CacheErr).
	Start DiskStart
	// Reason says why a stored state was not used (Start DiskCold: "none
	// stored", "another cluster", "another CustomResourceDefinition",
	// "another informer spec", "another format version", "corrupt",
	// "newer than the server", ...) or why it was deleted (DiskRemoved).
	Reason string
	// Restored is Status.Restored: the objects restored from disk.
	Restored int
	// Age is how old the stored state was when the informer started
	// (since it was last written); 0 when none was used.
	Age time.Duration
	// Written counts the bytes written to the cache directory for the
	// informer since it started (snapshots and journals).
	Written int64
	// CaughtUp: after a restore (Start DiskResumed or DiskDiffed), the
	// cache has reached the server's resourceVersion read as it started
	// (an event or a bookmark at or past it, or the diff's list applied):
	// what changed while the process was down is in the cache. Synced
	// comes first (a resumed informer is Synced once the server accepted
	// its watch; the changes since follow as ordinary events), and a
	// quiet resource reaches CaughtUp only with its first bookmark (the
	// API server sends one about every minute). False otherwise, and when
	// the server's resourceVersion could not be read (no list of
	// namespaces allowed) or client-go's AtomicFIFO is off.
	CaughtUp bool
}

// Status is a snapshot of one informer's state.
type Status struct {
	// GVR is the resource the state belongs to. For an informer that
	// follows its CRD's preferred version it moves to the new version
	// together with the state (Syncing at the new version), never before.
	GVR           schema.GroupVersionResource
	Namespaces    []string // empty: all namespaces (WithPermittedNamespaces: see Permitted)
	LabelSelector string
	FieldSelector string
	MetadataOnly  bool
	// Shard is the informer's shard selector now (WithShard, or the
	// current shard of WithShardSource); "" when it is not sharded.
	Shard string
	// OutsideShard counts the objects the server sent that were outside
	// the informer's shard and were dropped before the cache (each list
	// item and watch event counts). Above 0, the server ignores the shard
	// selector (its ShardedListAndWatch feature gate is off): the cache is
	// still exactly the shard, but every replica receives every object.
	// It stays 0 while the server applies the selector. The first drop
	// publishes a status change.
	OutsideShard int64
	State        State
	// Err says what is wrong, nil when nothing is: why the informer is
	// Failed, Pending (ErrNotServed) or Removed, or, with Syncing, Synced
	// or Stale, the namespaces of a several-namespace informer that are
	// denied (the others are cached; see Denied). It is an *InformerError: errors.Is(err,
	// ErrForbidden), ErrNotServed, ErrInvalid, ...; errors.As
	// reaches the server's *apierrors.StatusError where there is one. A
	// failure the reflector recovers from by itself on a synced cache (a
	// watch broken and resumed) does not set it.
	Err error
	// Reason is a short human-readable explanation of State.
	Reason string
	// Since is when State last changed.
	Since time.Time
	// Objects is the number of objects in the cache at snapshot time.
	Objects int
	// LastContact is when a request of this informer was last answered by
	// the API server (zero: never).
	LastContact time.Time
	// ContactErr is set while the API server cannot be reached (an
	// *InformerError, errors.Is ErrNoContact, wrapping the connection
	// error or the unanswered probe): from the first request or probe
	// that fails to reach it (see Options.ContactCheckInterval) until a
	// request or probe is answered again (Factory.Contact). Meanwhile a
	// Synced informer is Stale, a Syncing one says so in its Reason, and
	// the other states stay; OnStatusChange reports both transitions.
	ContactErr error
	// HandlerPanics counts panics recovered from handlers added with
	// InformerHandle.Informer(); LastHandlerPanic is the last one
	// (an *eventhandler.PanicError, see errors.As), nil
	// if none.
	// A panic does not change State: the informer itself is healthy.
	HandlerPanics    int64
	LastHandlerPanic error
	// Restored is the number of objects restored from disk when the
	// informer started (Options.CacheDir; 0: none, a cold start).
	Restored int
	// CacheErr says why the informer is not kept on disk although
	// Options.CacheDir is set (errors.Is ErrCache, wrapping the cause: the
	// directory locked by another process, the cluster's identity not
	// readable, a write failed), nil while it is. The informer works from
	// the server meanwhile. A change of it is seen in the next Status; it
	// publishes nothing by itself.
	CacheErr error
	// Disk says how an informer kept on disk (Options.CacheDir) started
	// and what it has written; zero for one that is not.
	Disk DiskStatus
	// Denied names the namespaces of a several-namespace informer
	// (WithNamespaces) that it does not list, and why: the missing verbs
	// (WithAccessCheck) or the server's 403. The others are listed,
	// watched and delivered; while one is denied the informer is not
	// Ready, and NextAccessCheck says when they are tried again.
	Denied map[string]string
	// Permitted, with WithPermittedNamespaces (nil without), names the
	// namespaces the informer holds now, sorted: [""] (all namespaces)
	// when its user may list and watch cluster-wide (one stream), empty
	// when no namespace is permitted. NotPermitted names the server's (or
	// the candidate) namespaces not permitted, with the missing verbs;
	// they do not make the informer unready.
	Permitted    []string
	NotPermitted map[string]string
	// NextAccessCheck is when the namespaces are checked again (denied
	// ones, or a WithPermittedNamespaces informer's); zero when no check
	// is due.
	NextAccessCheck time.Time
}

// Ready reports whether the informer serves everything it was asked for:
// Synced, with no namespace Denied. Stale, Failed, Pending, Syncing,
// Removed and Stopped are not ready. A WithPermittedNamespaces informer
// is ready when Synced, whatever is NotPermitted.
func (s Status) Ready() bool { return s.State == Synced && len(s.Denied) == 0 }

// statusNotifier delivers status changes to subscribers in order, from one
// goroutine, so a slow subscriber delays only other status subscribers,
// never an informer.
type statusNotifier struct {
	mu      sync.Mutex // guards queue, subs, nextID, closed
	cond    *sync.Cond
	queue   []Status
	subs    map[int]func(Status)
	nextID  int
	closed  bool
	started bool
	done    chan struct{}
}

func newStatusNotifier() *statusNotifier {
	n := &statusNotifier{subs: map[int]func(Status){}, done: make(chan struct{})}
	n.cond = sync.NewCond(&n.mu)
	return n
}

func (n *statusNotifier) subscribe(f func(Status)) func() {
	n.mu.Lock()
	defer n.mu.Unlock()
	id := n.nextID
	n.nextID++
	n.subs[id] = f
	if !n.started && !n.closed {
		n.started = true
		go n.run()
	}
	return func() {
		n.mu.Lock()
		delete(n.subs, id)
		n.mu.Unlock()
	}
}

func (n *statusNotifier) publish(s Status) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed || len(n.subs) == 0 {
		return
	}
	n.queue = append(n.queue, s)
	n.cond.Signal()
}

func (n *statusNotifier) run() {
	defer close(n.done)
	for {
		n.mu.Lock()
		for len(n.queue) == 0 && !n.closed {
			n.cond.Wait()
		}
		if len(n.queue) == 0 && n.closed {
			n.mu.Unlock()
			return
		}
		s := n.queue[0]
		n.queue[0] = Status{}
		n.queue = n.queue[1:]
		subs := make([]func(Status), 0, len(n.subs))
		for _, f := range n.subs {
			subs = append(subs, f)
		}
		n.mu.Unlock()
		for _, f := range subs {
			f(s)
		}
	}
}

// close delivers what is queued, then stops the goroutine and waits for it.
func (n *statusNotifier) close() {
	n.mu.Lock()
	n.closed = true
	started := n.started
	n.cond.Broadcast()
	n.mu.Unlock()
	if started {
		<-n.done
	}
}
