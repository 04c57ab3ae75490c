// Package lifecycle is the state machine of one informer: a pure
// transition function, Next, from a Machine and an Event to the next
// Machine and the effects the informer applies (publish its Status, close
// its synced channel, log, nudge its sync monitor).
//
// Next takes no lock, does no I/O and reads no clock: the time is in the
// event, what the informer observed of client-go's cache too. The informer
// (dynamicinformer's entry) holds the lock, feeds events in the order they
// happen and applies the effects. Every transition is a Rule of Rules;
// docs/LIFECYCLE.md shows the tables Table renders, and docs/DESIGN.md
// ("Informer lifecycle") describes the machine.
package lifecycle

import (
	"strconv"
	"time"

	"github.com/informerkit/informerkit/dynamicinformer/internal/presence"
	"github.com/informerkit/informerkit/dynamicinformer/internal/reflectorseam"
)

// State is the public state of an informer; dynamicinformer.State has the
// same values.
type State string

// The states; see dynamicinformer.State for their contracts.
const (
	Pending  State = "Pending"
	Restored State = "Restored"
	Syncing  State = "Syncing"
	Synced   State = "Synced"
	Stale    State = "Stale"
	Removed  State = "Removed"
	Failed   State = "Failed"
	Stopped  State = "Stopped"
)

// States lists every state, in the order tables show them.
var States = []State{Pending, Restored, Syncing, Synced, Stale, Removed, Failed, Stopped}

// Reasons the machine gives.
const (
	// NotStartedReason is the reason of a new machine.
	NotStartedReason = "not started"
	// ListingReason is the reason of Syncing while a list runs.
	ListingReason = "listing"
	// WaitingForSlotReason: the first list waits for an initial-list slot.
	WaitingForSlotReason = "waiting for an initial-list slot"
	// AccessGrantedReason: Pending after a denied access check passed.
	AccessGrantedReason = "access granted; listing"
	// NotServedPrefix starts the reason of Pending with ErrNotServed.
	NotServedPrefix = "waiting for the resource to be served: "
	// NoContactReason is the reason of Stale when ContactLost gives none;
	// the informer gives it with the cause ("no contact with the API
	// server: connection refused").
	NoContactReason = "no contact with the API server"
)

// RemovalGrace bounds how long Removed waits for the cache to empty. An
// add the reflector had queued when the removal's deletes were taken
// reaches the cache after them; the informer's sync monitor sweeps such
// objects out (gate.ListerWatcher.Sweep) well within the grace, which is
// left as the bound for a cache that still does not empty.
const RemovalGrace = 5 * time.Second

// Class is what a failed list or watch means to the machine; the informer
// classifies the error (dynamicinformer's classify).
type Class int

const (
	// Refused: the server answered with a refusal or an error; Failed.
	Refused Class = iota
	// NotServed: a 404; the gate and presence handle it.
	NotServed
	// NoContact: the server was not reached; contact events report it.
	NoContact
	// Broken: another list/watch error (ErrWatch); on a Synced cache the
	// reflector resumes by itself.
	Broken
)

// Event is one thing that happened to the informer. Kind says which; the
// other fields are those its row of Events names, zero otherwise.
type Event struct {
	Kind EventKind
	// At is when it happened: Since of a new state, the start of a
	// removal's grace, and, for CacheChecked, the time of the check.
	At time.Time
	// Reason: why (a removal's, a stop's, a config error's reason).
	Reason string
	// Err is the typed error the event reports (built by the informer:
	// the machine publishes it as it is).
	Err error
	// Detail is the event's cause as text, for logs (an access denial, a
	// lost connection). A ContactLost's Reason is that cause in words
	// fit for a status (no URL): Stale's reason.
	Detail string
	// Class of a ListFailed error.
	Class Class
	// RV: the resourceVersion of an answered list ("" for a watch-list
	// stream).
	RV string
	// Known: a ResourceRemoved verdict came from an authoritative source.
	Known bool
	// Open: at Start, the gate is open (the resource is believed served).
	Open bool
	// Version: the version a VersionSwitched informer follows now.
	Version string
	// CacheChecked's observations: client-go's informer has synced, the
	// resourceVersion its cache has applied (with client-go's AtomicFIFO,
	// the store's: a relist's Replace counts once applied; without it,
	// the reflector's last-synced one), whether the cache is empty
	// (only looked at while a removal drains), and the Removal id that
	// was current when the observation began (Machine.Removal).
	InformerSynced bool
	LastRV         string
	CacheEmpty     bool
	Removal        uint64
	// Changed: at NamespacesForbidden, the namespaces listed or denied
	// changed (Status shows them).
	Changed bool
}

// Machine is an informer's state value. The zero value is not valid: use
// New. It holds no pointer the informer mutates; copies are independent.
type Machine struct {
	state  State
	err    error
	reason string
	since  time.Time

	started        bool   // Start was seen
	everSynced     bool   // Synced was reached once (the synced channel is closed)
	informerSynced bool   // client-go's informer has synced (last CacheChecked)
	watchOpen      bool   // a server watch was handed to the reflector since the last removal
	awaitRelist    bool   // a removal or version switch happened; Synced again after a real relist
	relisted       bool   // that relist returned
	relistRV       string // at this resourceVersion
	removal        removal
	removals       uint64 // removals so far; removal.id is the pending one's
	lastFailure    string // the kind of the last failure logged, to log a kind once
	configErr      error  // a configuration error no retry cures; sticky
	accessDenial   string // the access check's last denial, until granted
	failedByAccess bool   // Failed because of that denial
	contactErr     error  // the server cannot be reached (nil: it can)
	contactReason  string // that, in words: Stale's reason, added to Syncing's
	forbiddenNS    error  // some namespaces of a multi-namespace informer are forbidden
}

// removal is a removal not yet published: the cache was handed a delete
// per object; Removed waits for it to be empty (or RemovalGrace).
type removal struct {
	id     uint64 // 0: none pending
	reason string
	err    error
	since  time.Time
}

// New returns the machine of an informer built at time at: Pending, not
// started.
func New(at time.Time) Machine {
	return Machine{state: Pending, reason: NotStartedReason, since: at}
}

// View is the public part of a Machine: what Status shows.
type View struct {
	State  State
	Err    error
	Reason string
	Since  time.Time
	// ContactErr is set while the server cannot be reached.
	ContactErr error
}

// View returns the public state. Err is the state's error or, while
// Syncing, Synced or Stale with some namespaces forbidden, that error.
// While contact is lost, Syncing's reason says so after its own.
func (m Machine) View() View {
	v := View{State: m.state, Err: m.err, Reason: m.reason, Since: m.since, ContactErr: m.contactErr}
	if v.Err == nil && m.forbiddenNS != nil && m.serving() {
		v.Err = m.forbiddenNS
	}
	if m.state == Syncing && m.contactErr != nil {
		v.Reason += "; " + m.contactReason
	}
	return v
}

// serving reports whether the informer lists or holds a list: Restored,
// Syncing, Synced or Stale.
func (m Machine) serving() bool { return m.state == Restored || m.state == Syncing || m.complete() }

// complete reports whether the cache holds a complete list and the watch
// is meant to run: Synced, or Stale (the same with contact lost).
func (m Machine) complete() bool { return m.state == Synced || m.state == Stale }

// synced is the state a complete cache is in: Synced, or Stale while
// contact is lost.
func (m Machine) synced() (State, string) {
	if m.contactErr != nil {
		return Stale, m.contactReason
	}
	return Synced, ""
}

// State is the public state.
func (m Machine) State() State { return m.state }

// ConfigFailed reports whether a configuration error is recorded: the
// informer is Failed for good (until stopped).
func (m Machine) ConfigFailed() bool { return m.configErr != nil }

// ContactLost reports whether the server is believed unreachable.
func (m Machine) ContactLost() bool { return m.contactErr != nil }

// Removal returns the id of the removal waiting to be published (0:
// none). A CacheChecked event carries the id read before its observation,
// so that an observation made before a later removal does not publish it.
func (m Machine) Removal() uint64 { return m.removal.id }

// Polls reports whether the sync monitor must poll client-go's cache
// (nothing tells it when the cache empties or the reflector's
// resourceVersion moves): while a removal waits for the cache to empty,
// and while Syncing waits for the reflector to reach an awaited relist
// that returned, with a watch open (the events that set those nudge).
func (m Machine) Polls() bool {
	return m.removal.id != 0 || m.state == Syncing && m.informerSynced && m.awaitRelist && m.relisted && m.watchOpen
}

// Effect is a set of effects the informer applies after a transition.
type Effect uint8

const (
	// Publish: the public status changed; publish it.
	Publish Effect = 1 << iota
	// CloseSynced: the informer reached Synced for the first time; close
	// its synced channel (HasSynced, WaitForCacheSync).
	CloseSynced
	// Nudge: the sync monitor should check the cache again now.
	Nudge
	// Log: Output.Logs has lines to log.
	Log
)

var effectNames = []string{"publish", "close synced", "nudge", "log"}

func (e Effect) String() string {
	s := ""
	for i, n := range effectNames {
		if e&(1<<i) != 0 {
			if s != "" {
				s += ", "
			}
			s += n
		}
	}
	return s
}

// LogLine is a line the informer logs (at V(0)), with key/value pairs.
type LogLine struct {
	Msg string
	KV  []any
}

// Output is what a transition did.
type Output struct {
	// Rule is the ID of the rule that fired (see Rules).
	Rule string
	// Effects to apply, in this order: Log, Publish, CloseSynced, Nudge.
	Effects Effect
	Logs    []LogLine
	// Status is the machine's View after the transition.
	Status View
	// Poll: Machine.Polls after the transition.
	Poll bool
}

// Next returns the machine after ev and what the informer must do. It is
// pure: no lock, no I/O, no clock.
func Next(m Machine, ev Event) (Machine, Output) {
	t := &transition{m: m, ev: ev}
	t.run()
	t.out.Status = t.m.View()
	t.out.Poll = t.m.Polls()
	if len(t.out.Logs) > 0 {
		t.out.Effects |= Log
	}
	return t.m, t.out
}

type transition struct {
	m   Machine
	ev  Event
	out Output
}

func (t *transition) fire(rule string)          { t.out.Rule = rule }
func (t *transition) effect(e Effect)           { t.out.Effects |= e }
func (t *transition) log(msg string, kv ...any) { t.out.Logs = append(t.out.Logs, LogLine{msg, kv}) }

// set records a state; a change of state, error (by its text) or reason
// is published, and a change of state moves Since.
func (t *transition) set(s State, err error, reason string) {
	m := &t.m
	if m.state == s && sameErr(m.err, err) && m.reason == reason {
		return
	}
	if m.state != s {
		m.since = t.ev.At
	}
	m.state, m.err, m.reason = s, err, reason
	m.failedByAccess = false // accessDenied sets it after
	t.effect(Publish)
}

// pending sets Pending for a resource the gate keeps closed: no error
// while presence is still checking, the event's ErrNotServed once a
// source said it is not served.
func (t *transition) pending(reason string, notServed error) {
	if reason == presence.CheckingReason || reason == "" {
		t.set(Pending, nil, presence.CheckingReason)
		return
	}
	t.set(Pending, notServed, NotServedPrefix+reason)
}

func sameErr(a, b error) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a == b || a.Error() == b.Error()
}

// passesConfigError lists the events a configuration error does not
// absorb: they concern the server or the informer's identity, not its
// cache.
func passesConfigError(k EventKind) bool {
	switch k {
	case Stop, ContactLost, ContactRegained, NamespacesForbidden, ShardChanged, ShardIgnored:
		return true
	}
	return false
}

func (t *transition) run() {
	m, ev := &t.m, t.ev
	switch {
	case m.state == Stopped:
		t.fire("stopped")
		return
	case m.configErr != nil && !passesConfigError(ev.Kind):
		t.fire("config-sticky")
		return
	}
	switch ev.Kind {
	case Stop:
		t.fire("stop")
		t.set(Stopped, ev.Err, ev.Reason)
		m.removal = removal{}
	case ConfigError:
		t.fire("config-error")
		m.configErr = ev.Err
		m.removal = removal{}
		t.set(Failed, ev.Err, ev.Reason)
	case Start:
		m.started = true
		if m.state == Pending && !ev.Open {
			t.fire("start-waiting")
			t.pending(ev.Reason, ev.Err)
			return
		}
		t.fire("start")
	case GateWaiting:
		if m.state == Removed || m.removal.id != 0 {
			t.fire("waiting-removed")
			return
		}
		t.fire("waiting")
		t.pending(ev.Reason, ev.Err)
	case SlotWaiting:
		if m.state != Pending {
			t.fire("slot-waiting-ignored")
			return
		}
		t.fire("slot-waiting")
		t.set(Pending, nil, WaitingForSlotReason)
	case RestoredFromDisk:
		if m.state != Pending {
			t.fire("restored-ignored")
			return
		}
		t.fire("restored")
		t.set(Restored, nil, ev.Reason)
		if m.awaitRelist {
			m.relisted, m.relistRV = true, ev.RV
		}
		t.effect(Nudge)
	case ListStarted:
		t.listStarted()
	case ListAnswered:
		if m.serving() {
			t.fire("list-answered-relist")
		} else {
			t.fire("list-answered")
			t.set(Syncing, nil, ListingReason)
		}
		if m.awaitRelist {
			m.relisted, m.relistRV = true, ev.RV
		}
		m.lastFailure = ""
		t.effect(Nudge)
	case ListFailed:
		t.listFailed()
	case WatchOpened:
		if m.watchOpen {
			t.fire("watch-opened-again")
			return
		}
		t.fire("watch-opened")
		m.watchOpen = true
		t.effect(Nudge)
	case ResourceServed:
		t.fire("resource-served")
	case ResourceRemoved:
		t.resourceRemoved()
	case VersionSwitched:
		m.awaitRelist, m.relisted = true, false
		if m.serving() || m.state == Removed {
			t.fire("version-switched")
			t.set(Syncing, nil, "following version "+ev.Version+": "+ev.Reason)
			return
		}
		t.fire("version-switched-quiet")
	case CacheEmptied:
		t.fire("cache-emptied")
		m.awaitRelist, m.relisted, m.watchOpen = true, false, false
		m.removals++
		m.removal = removal{id: m.removals, reason: ev.Reason, err: ev.Err, since: ev.At}
		t.effect(Nudge)
	case CacheChecked:
		t.cacheChecked()
	case AccessDenied:
		t.accessDenied()
	case AccessGranted:
		t.accessGranted()
	case ContactLost:
		if m.contactErr != nil {
			t.fire("contact-lost-again") // ContactErr keeps the error that lost contact
			return
		}
		m.contactErr, m.contactReason = ev.Err, ev.Reason
		if m.contactReason == "" {
			m.contactReason = NoContactReason
		}
		t.log("lost contact with the API server", "err", ev.Detail)
		if m.state == Synced {
			t.fire("contact-lost-stale")
			t.set(Stale, nil, m.contactReason)
			return
		}
		t.fire("contact-lost")
		t.effect(Publish)
	case ContactRegained:
		if m.contactErr == nil {
			t.fire("contact-regained-noop")
			return
		}
		m.contactErr, m.contactReason = nil, ""
		t.log("contact with the API server restored")
		if m.state == Stale {
			t.fire("contact-regained-synced")
			t.set(Synced, nil, "")
			return
		}
		t.fire("contact-regained")
		t.effect(Publish)
	case NamespacesForbidden:
		if sameErr(m.forbiddenNS, ev.Err) && !ev.Changed {
			t.fire("namespaces-forbidden-same")
			return
		}
		t.fire("namespaces-forbidden")
		m.forbiddenNS = ev.Err
		t.effect(Publish)
	case ShardChanged:
		t.fire("shard-changed")
		t.effect(Publish)
	case ShardIgnored:
		t.fire("shard-ignored")
		t.effect(Publish)
	default:
		t.fire("unknown")
	}
}

func (t *transition) listStarted() {
	m := &t.m
	switch {
	case m.state == Failed:
		t.fire("list-started-failed")
		m.removal = removal{} // served again before the removal was published
	case m.state == Removed:
		t.fire("list-started-removed")
		m.removal = removal{}
	case m.state == Pending || m.state == Restored || m.removal.id != 0:
		t.fire("list-started")
		m.removal = removal{}
		t.set(Syncing, nil, ListingReason)
	default:
		t.fire("list-started-relist")
	}
}

func (t *transition) listFailed() {
	m, ev := &t.m, t.ev
	if m.lastFailure != ev.Reason {
		m.lastFailure = ev.Reason
		t.log("list/watch failed; retrying with backoff", "err", ev.Detail)
	}
	switch {
	case ev.Class == NotServed:
		t.fire("list-failed-not-served")
	case ev.Class == NoContact:
		t.fire("list-failed-no-contact")
	case m.complete() && ev.Class == Broken:
		t.fire("list-failed-synced-watch")
	case m.state == Failed && sameErr(m.err, ev.Err):
		t.fire("list-failed-same")
	default:
		t.fire("list-failed")
		t.set(Failed, ev.Err, ev.Reason)
	}
}

func (t *transition) resourceRemoved() {
	m, ev := &t.m, t.ev
	switch {
	case m.removal.id != 0 && ev.Known:
		t.fire("removed-reason")
		m.removal.reason, m.removal.err = ev.Reason, ev.Err // not yet published: the authoritative reason wins
	case m.state == Removed && ev.Known && m.reason != ev.Reason:
		t.fire("removed-reason-changed")
		t.set(Removed, ev.Err, ev.Reason)
	case m.state == Pending && m.started:
		t.fire("removed-waiting")
		t.pending(ev.Reason, ev.Err)
	default:
		t.fire("removed-ignored")
	}
}

func (t *transition) cacheChecked() {
	m, ev := &t.m, t.ev
	m.informerSynced = m.informerSynced || ev.InformerSynced
	if r := m.removal; r.id != 0 && ev.Removal == r.id && (ev.CacheEmpty || ev.At.Sub(r.since) > RemovalGrace) {
		t.fire("removal-published")
		m.removal = removal{}
		t.set(Removed, r.err, r.reason)
		return
	}
	if (m.state == Syncing || m.state == Restored) && m.informerSynced && m.watchOpen &&
		(!m.awaitRelist || m.relisted && RVReached(ev.LastRV, m.relistRV)) {
		s, reason := m.synced()
		if s == Stale {
			t.fire("synced-stale")
		} else {
			t.fire("synced")
		}
		if !m.everSynced {
			m.everSynced = true
			t.effect(CloseSynced)
		}
		m.awaitRelist, m.relisted = false, false
		t.set(s, nil, reason)
		return
	}
	t.fire("cache-checked")
}

func (t *transition) accessDenied() {
	m, ev := &t.m, t.ev
	if m.accessDenial != ev.Detail {
		t.log("access check denied; no list or watch until it is granted (re-checked with back-off)", "err", ev.Detail)
	}
	m.accessDenial = ev.Detail
	if m.state == Failed && sameErr(m.err, ev.Err) {
		t.fire("access-denied-same")
		return
	}
	t.fire("access-denied")
	t.set(Failed, ev.Err, ev.Reason)
	m.failedByAccess = true
}

func (t *transition) accessGranted() {
	m := &t.m
	denied := m.accessDenial != ""
	m.accessDenial = ""
	if denied {
		t.log("access granted; listing")
	}
	if denied && m.state == Failed && m.failedByAccess {
		t.fire("access-granted")
		t.set(Pending, nil, AccessGrantedReason)
		return
	}
	t.fire("access-granted-quiet")
}

// RVReached reports whether the reflector's last-synced resourceVersion
// has reached want (etcd's are integers; others: any real one other than
// the gate's synthetic one).
func RVReached(last, want string) bool {
	if last == "" || last == reflectorseam.SyntheticRV {
		return false
	}
	l, err1 := strconv.ParseUint(last, 10, 64)
	w, err2 := strconv.ParseUint(want, 10, 64)
	if err1 != nil || err2 != nil {
		return true
	}
	return l >= w
}
