package lifecycle

import (
	"fmt"
	"strings"
)

// EventKind names an event; Events documents each.
type EventKind string

// The events. Each is fed by one place of the informer (Events says
// which); a watch that ends and is reopened by the reflector is not an
// event (it fails as ListFailed, or closes with CacheEmptied).
const (
	Start               EventKind = "start"
	Stop                EventKind = "stop"
	ConfigError         EventKind = "config error"
	GateWaiting         EventKind = "waiting"
	SlotWaiting         EventKind = "slot waiting"
	RestoredFromDisk    EventKind = "restored"
	ListStarted         EventKind = "list started"
	ListAnswered        EventKind = "list answered"
	ListFailed          EventKind = "list failed"
	WatchOpened         EventKind = "watch opened"
	ResourceServed      EventKind = "resource served"
	ResourceRemoved     EventKind = "resource removed"
	VersionSwitched     EventKind = "version switched"
	CacheEmptied        EventKind = "cache emptied"
	CacheChecked        EventKind = "cache checked"
	AccessDenied        EventKind = "access denied"
	AccessGranted       EventKind = "access granted"
	ContactLost         EventKind = "contact lost"
	ContactRegained     EventKind = "contact regained"
	NamespacesForbidden EventKind = "namespaces forbidden"
	ShardChanged        EventKind = "shard changed"
	ShardIgnored        EventKind = "shard ignored"
)

// EventDoc documents an event: what it means and which Event fields it
// carries.
type EventDoc struct {
	Kind   EventKind
	Means  string
	Fields string
}

// Events documents every event kind.
var Events = []EventDoc{
	{Start, "the informer's goroutines started", "Open (the gate is open), Reason and Err (why not)"},
	{Stop, "released or its factory shut down", "Reason; Err only for an informer that could never run"},
	{ConfigError, "its options cannot work on the resource (a namespace asked of a cluster-scoped resource, an invalid selector)", "Err, Reason"},
	{GateWaiting, "it never listed and the gate is closed", "Reason, Err (ErrNotServed of Reason)"},
	{SlotWaiting, "its first list waits for an initial-list slot", ""},
	{RestoredFromDisk, "the gate handed the reflector the list restored from disk (Options.CacheDir)", "RV (the stored resourceVersion), Reason"},
	{ListStarted, "a real list or watch-list stream is about to be sent", ""},
	{ListAnswered, "a real list returned, or a watch-list stream opened", "RV (\"\" for a stream)"},
	{ListFailed, "the reflector's list or watch failed", "Err (classified), Class, Reason (the kind), Detail"},
	{WatchOpened, "a server watch was handed to the reflector", ""},
	{ResourceServed, "presence: the resource is served", ""},
	{ResourceRemoved, "presence: the resource is not served", "Reason, Err (ErrNotServed), Known (an authoritative source said so)"},
	{VersionSwitched, "a following informer moved to another version", "Version, Reason"},
	{CacheEmptied, "the gate handed the reflector a delete per cached object and closed its watch", "Reason, Err (ErrNotServed), At"},
	{CacheChecked, "the sync monitor looked at client-go's informer", "InformerSynced, LastRV, CacheEmpty, Removal, At"},
	{AccessDenied, "the access check found verbs missing", "Err (ErrForbidden), Reason, Detail"},
	{AccessGranted, "the access check passed, or could not be made", ""},
	{ContactLost, "a request got no response", "Err (ErrNoContact), Reason (the cause in words, no URL), Detail"},
	{ContactRegained, "a request was answered", ""},
	{NamespacesForbidden, "a several-namespace informer listed: its denied or listed namespaces may have changed", "Err (ErrForbidden; nil: none), Changed (the namespaces listed or denied changed)"},
	{ShardChanged, "the informer's shard changed", ""},
	{ShardIgnored, "the server sent the first object outside the shard", ""},
}

// Rule is one transition: on event On (empty: any) in a state of From
// (nil: any but Stopped), when When holds, the state becomes To (empty:
// it stays) with at most Effects, and Also says what else changes. Next
// reports the rule it applied; the first that matches applies.
type Rule struct {
	ID      string
	On      EventKind
	From    []State
	When    string
	To      State
	Effects Effect
	Also    string
}

var (
	running = []State{Restored, Syncing, Synced, Stale}
	notYet  = []State{Pending, Removed, Failed}
)

// Rules is the machine's transition table, in the order Next tries them.
var Rules = []Rule{
	{ID: "stopped", From: []State{Stopped}, Also: "nothing: Stopped is final"},
	{ID: "config-sticky", From: []State{Failed}, When: "a configuration error is recorded; any event but stop, contact, namespace and shard events",
		Also: "nothing: no retry cures it"},
	{ID: "stop", On: Stop, To: Stopped, Effects: Publish, Also: "a pending removal is dropped"},
	{ID: "config-error", On: ConfigError, To: Failed, Effects: Publish, Also: "the error is recorded (sticky)"},

	{ID: "start-waiting", On: Start, From: []State{Pending}, When: "the gate is closed", To: Pending, Effects: Publish,
		Also: "no error while presence checks; else ErrNotServed, reason \"" + NotServedPrefix + "<reason>\""},
	{ID: "start", On: Start, When: "otherwise", Also: "recorded as started"},
	{ID: "waiting-removed", On: GateWaiting, When: "Removed, or a removal is pending"},
	{ID: "waiting", On: GateWaiting, When: "otherwise", To: Pending, Effects: Publish, Also: "as start-waiting"},
	{ID: "slot-waiting-ignored", On: SlotWaiting, From: []State{Restored, Syncing, Synced, Stale, Removed, Failed}},
	{ID: "slot-waiting", On: SlotWaiting, From: []State{Pending}, To: Pending, Effects: Publish,
		Also: "reason \"" + WaitingForSlotReason + "\""},

	{ID: "restored", On: RestoredFromDisk, From: []State{Pending}, To: Restored, Effects: Publish | Nudge,
		Also: "reason the event's; the watch resumes from RV"},
	{ID: "restored-ignored", On: RestoredFromDisk, When: "otherwise"},
	{ID: "list-started-failed", On: ListStarted, From: []State{Failed},
		Also: "a pending removal is dropped; Failed until a list answers"},
	{ID: "list-started-removed", On: ListStarted, From: []State{Removed},
		Also: "nothing: Removed until the list answers (a 404 leaves it Removed; list answered makes it Syncing)"},
	{ID: "list-started", On: ListStarted, From: []State{Pending, Restored, Syncing, Synced, Stale}, When: "Pending or Restored (the resume was refused: a fresh list), or a removal is pending",
		To: Syncing, Effects: Publish, Also: "reason \"" + ListingReason + "\"; a pending removal is dropped (served again before it was published)"},
	{ID: "list-started-relist", On: ListStarted, From: running, When: "no removal is pending"},
	{ID: "list-answered-relist", On: ListAnswered, From: running, Effects: Nudge,
		Also: "the list's resourceVersion is recorded if a relist is awaited; the failure log resets; Stale stays Stale until contact regained (an answered list reports contact first)"},
	{ID: "list-answered", On: ListAnswered, From: notYet, To: Syncing, Effects: Publish | Nudge,
		Also: "reason \"" + ListingReason + "\"; as list-answered-relist"},

	{ID: "list-failed-not-served", On: ListFailed, When: "class NotServed (a 404)", Effects: Log,
		Also: "the gate closes and presence re-checks; every rule of list failed logs a kind once until a list answers"},
	{ID: "list-failed-no-contact", On: ListFailed, When: "class NoContact", Effects: Log, Also: "ContactErr says it (contact lost)"},
	{ID: "list-failed-synced-watch", On: ListFailed, From: []State{Synced, Stale}, When: "class Broken", Effects: Log,
		Also: "the reflector resumes by itself; Err stays nil"},
	{ID: "list-failed-same", On: ListFailed, From: []State{Failed}, When: "the same error again", Effects: Log, Also: "Since is kept"},
	{ID: "list-failed", On: ListFailed, When: "otherwise", To: Failed, Effects: Publish | Log,
		Also: "Err the classified error, reason its kind"},

	{ID: "watch-opened-again", On: WatchOpened, When: "a watch was open since the last removal"},
	{ID: "watch-opened", On: WatchOpened, When: "otherwise", Effects: Nudge, Also: "a watch is open (Synced needs one)"},

	{ID: "resource-served", On: ResourceServed, Also: "nothing: the gate opens and list started follows"},
	{ID: "removed-reason", On: ResourceRemoved, When: "a removal is pending and the verdict is authoritative",
		Also: "the pending removal takes the verdict's reason"},
	{ID: "removed-reason-changed", On: ResourceRemoved, From: []State{Removed}, When: "authoritative, with another reason",
		To: Removed, Effects: Publish},
	{ID: "removed-waiting", On: ResourceRemoved, From: []State{Pending}, When: "started", To: Pending, Effects: Publish,
		Also: "as start-waiting"},
	{ID: "removed-ignored", On: ResourceRemoved, When: "otherwise",
		Also: "nothing: a serving informer's stream empties the cache (cache emptied)"},
	{ID: "version-switched", On: VersionSwitched, From: []State{Restored, Syncing, Synced, Stale, Removed}, To: Syncing, Effects: Publish,
		Also: "reason \"following version <v>: <reason>\"; a real relist is awaited"},
	{ID: "version-switched-quiet", On: VersionSwitched, From: []State{Pending, Failed}, Also: "a real relist is awaited"},

	{ID: "cache-emptied", On: CacheEmptied, Effects: Nudge,
		Also: "a removal is pending (its reason, since At); the watch is closed; a real relist is awaited"},
	{ID: "removal-published", On: CacheChecked, When: "the removal observed is pending and the cache is empty or RemovalGrace has passed",
		To: Removed, Effects: Publish, Also: "Err ErrNotServed, reason the removal's"},
	{ID: "synced", On: CacheChecked, From: []State{Restored, Syncing},
		When: "client-go's informer has synced, a watch is open and, after a removal or version switch, the relist returned and the cache applied it (the store's resourceVersion reached it)",
		To:   Synced, Effects: Publish | CloseSynced, Also: "the first time, the synced channel is closed"},
	{ID: "synced-stale", On: CacheChecked, From: []State{Restored, Syncing}, When: "as synced, while contact is lost",
		To: Stale, Effects: Publish | CloseSynced, Also: "as synced; reason the lost contact's"},
	{ID: "cache-checked", On: CacheChecked, When: "otherwise"},

	{ID: "access-denied-same", On: AccessDenied, From: []State{Failed}, When: "the same denial"},
	{ID: "access-denied", On: AccessDenied, When: "otherwise", To: Failed, Effects: Publish | Log,
		Also: "Err ErrForbidden naming the verbs, reason \"forbidden: ...\"; a new denial is logged"},
	{ID: "access-granted", On: AccessGranted, From: []State{Failed}, When: "Failed by the access check's denial", To: Pending,
		Effects: Publish | Log, Also: "reason \"" + AccessGrantedReason + "\""},
	{ID: "access-granted-quiet", On: AccessGranted, When: "otherwise", Effects: Log, Also: "a recorded denial is cleared and logged"},

	{ID: "contact-lost-again", On: ContactLost, When: "contact is lost already", Also: "nothing: ContactErr keeps the error that lost contact"},
	{ID: "contact-lost-stale", On: ContactLost, From: []State{Synced}, When: "contact is not lost already", To: Stale, Effects: Publish | Log,
		Also: "ContactErr set; reason the event's (the cause, no URL)"},
	{ID: "contact-lost", On: ContactLost, When: "otherwise", Effects: Publish | Log,
		Also: "ContactErr set; while Syncing, the reason says no contact after its own"},
	{ID: "contact-regained-noop", On: ContactRegained, When: "contact is not lost"},
	{ID: "contact-regained-synced", On: ContactRegained, From: []State{Stale}, To: Synced, Effects: Publish | Log,
		Also: "ContactErr cleared; reason empty"},
	{ID: "contact-regained", On: ContactRegained, When: "otherwise", Effects: Publish | Log, Also: "ContactErr cleared"},
	{ID: "namespaces-forbidden-same", On: NamespacesForbidden, When: "the same error (or none) again, not Changed"},
	{ID: "namespaces-forbidden", On: NamespacesForbidden, When: "otherwise", Effects: Publish,
		Also: "recorded; Err shows it while Syncing, Synced or Stale; Status.Denied and Permitted show the namespaces"},
	{ID: "shard-changed", On: ShardChanged, Effects: Publish, Also: "Status.Shard changed"},
	{ID: "shard-ignored", On: ShardIgnored, Effects: Publish, Also: "Status.OutsideShard above 0"},
	{ID: "unknown", When: "an event kind not in Events", Also: "nothing"},
}

// RuleByID returns the rule with that ID.
func RuleByID(id string) (Rule, bool) {
	for _, r := range Rules {
		if r.ID == id {
			return r, true
		}
	}
	return Rule{}, false
}

// Admits reports whether the rule may apply to ev in state s.
func (r Rule) Admits(s State, ev EventKind) bool {
	if r.On != "" && r.On != ev {
		return false
	}
	if r.From == nil {
		return s != Stopped
	}
	for _, f := range r.From {
		if f == s {
			return true
		}
	}
	return false
}

// Table renders Events and Rules as the Markdown tables of
// docs/LIFECYCLE.md.
func Table() string {
	var b strings.Builder
	b.WriteString("| Event | Means | Fields |\n|---|---|---|\n")
	for _, e := range Events {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", e.Kind, e.Means, cell(e.Fields))
	}
	b.WriteString("\n| Rule | On | From | When | To | Effects | Also |\n|---|---|---|---|---|---|---|\n")
	for _, r := range Rules {
		on := string(r.On)
		if on == "" {
			on = "any"
		}
		from := "any"
		if r.From != nil {
			s := make([]string, len(r.From))
			for i, f := range r.From {
				s[i] = string(f)
			}
			from = strings.Join(s, ", ")
		}
		to := string(r.To)
		if to == "" {
			to = "same"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", r.ID, on, from, cell(r.When), to, cell(r.Effects.String()), cell(r.Also))
	}
	return b.String()
}

func cell(s string) string {
	if s == "" {
		return "-"
	}
	return strings.ReplaceAll(s, "|", "\\|")
}
