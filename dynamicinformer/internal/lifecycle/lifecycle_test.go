package lifecycle

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/informerkit/informerkit/dynamicinformer/internal/presence"
)

var update = flag.Bool("update", false, "rewrite the generated tables of docs/LIFECYCLE.md")

// Sentinels standing for dynamicinformer's error kinds.
var (
	errNotServed = errors.New("resource not served")
	errForbidden = errors.New("forbidden")
	errWatch     = errors.New("list/watch error")
	errNoContact = errors.New("no contact with the API server")
	errConfig    = errors.New("namespace option on a cluster-scoped resource")
	errShutdown  = errors.New("informer factory is shut down")
)

func kindErr(kind error, cause string) error { return fmt.Errorf("gvr: %w: %s", kind, cause) }

const lostReason = "no contact with the API server: connection refused"

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

// Events the fixtures and rows use.
var (
	start        = Event{Kind: Start, At: at(1), Open: true}
	startClosed  = Event{Kind: Start, At: at(1), Reason: "no CRD", Err: kindErr(errNotServed, "no CRD")}
	startCheck   = Event{Kind: Start, At: at(1), Reason: presence.CheckingReason}
	listStarted  = Event{Kind: ListStarted, At: at(2)}
	restoredEv   = Event{Kind: RestoredFromDisk, At: at(2), RV: "10", Reason: "restored 3 objects from disk"}
	listAnswered = Event{Kind: ListAnswered, At: at(3), RV: "10"}
	watchOpened  = Event{Kind: WatchOpened, At: at(4)}
	refused      = Event{Kind: ListFailed, At: at(5), Class: Refused, Reason: "forbidden", Err: kindErr(errForbidden, "rbac"), Detail: "rbac"}
	broken       = Event{Kind: ListFailed, At: at(5), Class: Broken, Reason: "list/watch error", Err: kindErr(errWatch, "eof"), Detail: "eof"}
	emptied      = Event{Kind: CacheEmptied, At: at(10 * time.Second), Reason: "CRD deleted", Err: kindErr(errNotServed, "CRD deleted")}
	denied       = Event{Kind: AccessDenied, At: at(2), Reason: "forbidden: may not watch", Err: kindErr(errForbidden, "may not watch"), Detail: "may not watch"}
	lost         = Event{Kind: ContactLost, At: at(6), Err: kindErr(errNoContact, "refused"), Reason: lostReason, Detail: "refused"}
	regained     = Event{Kind: ContactRegained, At: at(7)}
	configErr    = Event{Kind: ConfigError, At: at(2), Reason: "cluster-scoped", Err: kindErr(errConfig, "cluster-scoped")}
)

func checked(synced bool, rv string) Event {
	return Event{Kind: CacheChecked, At: at(5 * time.Second), InformerSynced: synced, LastRV: rv}
}

// drive feeds events to m, failing on a rule that does not admit them.
func drive(t *testing.T, m Machine, evs ...Event) Machine {
	t.Helper()
	for _, ev := range evs {
		from := m.State()
		var out Output
		m, out = Next(m, ev)
		checkRule(t, from, ev, m, out)
	}
	return m
}

// Fixtures: machines in each state, reached through Next.
func pending(t *testing.T) Machine  { return drive(t, New(t0), start) }
func syncing(t *testing.T) Machine  { return drive(t, pending(t), listStarted) }
func restored(t *testing.T) Machine { return drive(t, pending(t), restoredEv) }
func synced(t *testing.T) Machine {
	return drive(t, syncing(t), listAnswered, watchOpened, checked(true, "10"))
}
func draining(t *testing.T) Machine { return drive(t, synced(t), emptied) }
func removed(t *testing.T) Machine {
	m := draining(t)
	return drive(t, m, Event{Kind: CacheChecked, At: at(11 * time.Second), InformerSynced: true, CacheEmpty: true, Removal: m.Removal()})
}
func failed(t *testing.T) Machine       { return drive(t, syncing(t), refused) }
func accessFailed(t *testing.T) Machine { return drive(t, pending(t), denied) }
func configFailed(t *testing.T) Machine { return drive(t, pending(t), configErr) }
func stopped(t *testing.T) Machine {
	return drive(t, synced(t), Event{Kind: Stop, At: at(time.Minute), Reason: "released"})
}
func lostContact(t *testing.T) Machine { return drive(t, synced(t), lost) }
func syncingLost(t *testing.T) Machine { return drive(t, syncing(t), lost) }

// inState returns a machine in s.
func inState(t *testing.T, s State) Machine {
	switch s {
	case Pending:
		return pending(t)
	case Restored:
		return restored(t)
	case Syncing:
		return syncing(t)
	case Synced:
		return synced(t)
	case Stale:
		return lostContact(t)
	case Removed:
		return removed(t)
	case Failed:
		return failed(t)
	case Stopped:
		return stopped(t)
	}
	t.Fatalf("no fixture for %s", s)
	return Machine{}
}

// checkRule checks a transition against the rule it reports: the rule
// exists, admits the event in the state it left, leads where it says,
// and had no effect it does not declare.
func checkRule(t *testing.T, from State, ev Event, m Machine, out Output) {
	t.Helper()
	r, ok := RuleByID(out.Rule)
	if !ok {
		t.Fatalf("%s in %s: rule %q is not in Rules", ev.Kind, from, out.Rule)
	}
	if !r.Admits(from, ev.Kind) {
		t.Fatalf("%s in %s: rule %s (on %q from %v) does not admit it", ev.Kind, from, r.ID, r.On, r.From)
	}
	want := r.To
	if want == "" {
		want = from
	}
	if m.State() != want || out.Status.State != want {
		t.Fatalf("%s in %s: rule %s says %s, machine says %s (view %s)", ev.Kind, from, r.ID, want, m.State(), out.Status.State)
	}
	if extra := out.Effects &^ r.Effects; extra != 0 {
		t.Fatalf("%s in %s: rule %s had effects %q beyond its declared %q", ev.Kind, from, r.ID, extra, r.Effects)
	}
	if (out.Effects&Log != 0) != (len(out.Logs) > 0) {
		t.Fatalf("%s in %s: effect log %v with %d lines", ev.Kind, from, out.Effects&Log != 0, len(out.Logs))
	}
	if out.Poll != m.Polls() {
		t.Fatalf("%s in %s: Output.Poll %v, Machine.Polls %v", ev.Kind, from, out.Poll, m.Polls())
	}
}

type row struct {
	name   string
	from   func(*testing.T) Machine
	ev     Event
	rule   string
	state  State
	errIs  error // nil: Status.Err must be nil
	reason string
	// effects are exactly these.
	effects Effect
	check   func(*testing.T, Machine, Output)
}

func rows() []row {
	return []row{
		{name: "stopped ignores a list", from: stopped, ev: listAnswered, rule: "stopped", state: Stopped, reason: "released"},
		{name: "stopped ignores stop", from: stopped, ev: Event{Kind: Stop, Reason: "factory shut down"}, rule: "stopped", state: Stopped, reason: "released"},
		{name: "config error absorbs a list", from: configFailed, ev: listAnswered, rule: "config-sticky", state: Failed, errIs: errConfig, reason: "cluster-scoped"},
		{name: "config error absorbs a verdict", from: configFailed, ev: Event{Kind: ResourceRemoved, Reason: "gone", Known: true, Err: kindErr(errNotServed, "gone")},
			rule: "config-sticky", state: Failed, errIs: errConfig, reason: "cluster-scoped"},
		{name: "config error lets contact through", from: configFailed, ev: lost, rule: "contact-lost", state: Failed, errIs: errConfig, reason: "cluster-scoped",
			effects: Publish | Log, check: func(t *testing.T, m Machine, o Output) {
				if !errors.Is(o.Status.ContactErr, errNoContact) {
					t.Errorf("ContactErr %v", o.Status.ContactErr)
				}
			}},
		{name: "stop a synced informer", from: synced, ev: Event{Kind: Stop, At: at(time.Hour), Reason: "released"}, rule: "stop", state: Stopped, reason: "released",
			effects: Publish, check: sinceIs(at(time.Hour))},
		{name: "stop drops a pending removal", from: draining, ev: Event{Kind: Stop, Reason: "factory shut down"}, rule: "stop", state: Stopped, reason: "factory shut down",
			effects: Publish, check: func(t *testing.T, m Machine, o Output) {
				if m.Removal() != 0 || o.Poll {
					t.Errorf("removal %d, poll %v after stop", m.Removal(), o.Poll)
				}
			}},
		{name: "stop of an informer that never ran keeps its error", from: func(*testing.T) Machine { return New(t0) },
			ev: Event{Kind: Stop, Reason: errShutdown.Error(), Err: errShutdown}, rule: "stop", state: Stopped, errIs: errShutdown, reason: errShutdown.Error(), effects: Publish},
		{name: "config error", from: pending, ev: configErr, rule: "config-error", state: Failed, errIs: errConfig, reason: "cluster-scoped", effects: Publish,
			check: func(t *testing.T, m Machine, _ Output) {
				if !m.ConfigFailed() {
					t.Error("not recorded as a config error")
				}
			}},

		{name: "start, gate closed: not served", from: func(*testing.T) Machine { return New(t0) }, ev: startClosed, rule: "start-waiting", state: Pending,
			errIs: errNotServed, reason: NotServedPrefix + "no CRD", effects: Publish, check: sinceIs(t0)},
		{name: "start, presence checking: no error", from: func(*testing.T) Machine { return New(t0) }, ev: startCheck, rule: "start-waiting", state: Pending,
			reason: presence.CheckingReason, effects: Publish},
		{name: "start, gate open", from: func(*testing.T) Machine { return New(t0) }, ev: start, rule: "start", state: Pending, reason: NotStartedReason},
		{name: "start after a failure", from: func(t *testing.T) Machine { return drive(t, New(t0), listStarted, refused) }, ev: startClosed, rule: "start",
			state: Failed, errIs: errForbidden, reason: "forbidden"},

		{name: "waiting, not served", from: pending, ev: Event{Kind: GateWaiting, At: at(2), Reason: "404", Err: kindErr(errNotServed, "404")}, rule: "waiting",
			state: Pending, errIs: errNotServed, reason: NotServedPrefix + "404", effects: Publish},
		{name: "waiting after a first list failed", from: failed, ev: Event{Kind: GateWaiting, At: at(6), Reason: "404", Err: kindErr(errNotServed, "404")}, rule: "waiting",
			state: Pending, errIs: errNotServed, reason: NotServedPrefix + "404", effects: Publish, check: sinceIs(at(6))},
		{name: "waiting, same verdict again is not published", from: func(t *testing.T) Machine {
			return drive(t, pending(t), Event{Kind: GateWaiting, At: at(2), Reason: "404", Err: kindErr(errNotServed, "404")})
		}, ev: Event{Kind: GateWaiting, At: at(3), Reason: "404", Err: kindErr(errNotServed, "404")}, rule: "waiting",
			state: Pending, errIs: errNotServed, reason: NotServedPrefix + "404", check: sinceIs(t0)},
		{name: "waiting while Removed", from: removed, ev: Event{Kind: GateWaiting, Reason: "404", Err: kindErr(errNotServed, "404")}, rule: "waiting-removed",
			state: Removed, errIs: errNotServed, reason: "CRD deleted"},
		{name: "waiting while a removal drains", from: draining, ev: Event{Kind: GateWaiting, Reason: "404"}, rule: "waiting-removed", state: Synced},

		{name: "slot waiting", from: pending, ev: Event{Kind: SlotWaiting, At: at(2)}, rule: "slot-waiting", state: Pending, reason: WaitingForSlotReason, effects: Publish},
		{name: "slot waiting after a failure", from: failed, ev: Event{Kind: SlotWaiting}, rule: "slot-waiting-ignored", state: Failed, errIs: errForbidden, reason: "forbidden"},

		{name: "restored from disk", from: pending, ev: restoredEv, rule: "restored", state: Restored, reason: "restored 3 objects from disk",
			effects: Publish | Nudge, check: sinceIs(at(2))},
		{name: "restored only from Pending", from: synced, ev: restoredEv, rule: "restored-ignored", state: Synced},
		{name: "a refused resume lists", from: restored, ev: listStarted, rule: "list-started", state: Syncing, reason: ListingReason, effects: Publish},
		{name: "restored, then the watch resumed", from: func(t *testing.T) Machine { return drive(t, restored(t), watchOpened) },
			ev: checked(true, "10"), rule: "synced", state: Synced, effects: Publish | CloseSynced},
		{name: "restored waits for the watch", from: restored, ev: checked(true, "10"), rule: "cache-checked", state: Restored, reason: "restored 3 objects from disk"},
		{name: "list started from Pending", from: pending, ev: listStarted, rule: "list-started", state: Syncing, reason: ListingReason, effects: Publish, check: sinceIs(at(2))},
		{name: "list started from Removed", from: removed, ev: listStarted, rule: "list-started-removed", state: Removed, errIs: errNotServed, reason: "CRD deleted"},
		{name: "a 404 after a list started from Removed leaves it Removed", from: func(t *testing.T) Machine { return drive(t, removed(t), listStarted) },
			ev:   Event{Kind: ListFailed, Class: NotServed, Reason: "resource not served", Err: kindErr(errNotServed, "404"), Detail: "404"},
			rule: "list-failed-not-served", state: Removed, errIs: errNotServed, reason: "CRD deleted", effects: Log},
		{name: "list answered after a list started from Removed", from: func(t *testing.T) Machine { return drive(t, removed(t), listStarted) }, ev: listAnswered,
			rule: "list-answered", state: Syncing, reason: ListingReason, effects: Publish | Nudge},
		{name: "list started while a removal drains", from: draining, ev: listStarted, rule: "list-started", state: Syncing, reason: ListingReason, effects: Publish,
			check: func(t *testing.T, m Machine, o Output) {
				if m.Removal() != 0 {
					t.Error("the pending removal was kept")
				}
			}},
		{name: "list started from Failed", from: failed, ev: listStarted, rule: "list-started-failed", state: Failed, errIs: errForbidden, reason: "forbidden"},
		{name: "list started on Failed drops a removal", from: func(t *testing.T) Machine { return drive(t, draining(t), refused) }, ev: listStarted,
			rule: "list-started-failed", state: Failed, errIs: errForbidden, reason: "forbidden", check: func(t *testing.T, m Machine, o Output) {
				if m.Removal() != 0 {
					t.Error("the pending removal was kept")
				}
			}},
		{name: "relist started while Synced", from: synced, ev: listStarted, rule: "list-started-relist", state: Synced},

		{name: "list answered while Syncing", from: syncing, ev: listAnswered, rule: "list-answered-relist", state: Syncing, reason: ListingReason, effects: Nudge},
		{name: "list answered after Failed", from: failed, ev: listAnswered, rule: "list-answered", state: Syncing, reason: ListingReason, effects: Publish | Nudge},
		{name: "list answered (watch-list) from Pending", from: pending, ev: Event{Kind: ListAnswered, At: at(3)}, rule: "list-answered", state: Syncing,
			reason: ListingReason, effects: Publish | Nudge},
		{name: "list answered from Removed", from: removed, ev: listAnswered, rule: "list-answered", state: Syncing, reason: ListingReason, effects: Publish | Nudge},

		{name: "404 leaves the state to the gate", from: syncing, ev: Event{Kind: ListFailed, Class: NotServed, Reason: "resource not served", Err: kindErr(errNotServed, "404"), Detail: "404"},
			rule: "list-failed-not-served", state: Syncing, reason: ListingReason, effects: Log},
		{name: "no contact leaves the state", from: synced, ev: Event{Kind: ListFailed, Class: NoContact, Reason: "no contact", Err: kindErr(errNoContact, "refused")},
			rule: "list-failed-no-contact", state: Synced, effects: Log},
		{name: "a broken watch on a synced cache", from: synced, ev: broken, rule: "list-failed-synced-watch", state: Synced, effects: Log},
		{name: "a broken watch while Syncing fails", from: syncing, ev: broken, rule: "list-failed", state: Failed, errIs: errWatch, reason: "list/watch error", effects: Publish | Log},
		{name: "a refusal on a synced cache fails", from: synced, ev: refused, rule: "list-failed", state: Failed, errIs: errForbidden, reason: "forbidden",
			effects: Publish | Log, check: sinceIs(at(5))},
		{name: "the same failure again: once", from: failed, ev: Event{Kind: ListFailed, At: at(time.Minute), Class: Refused, Reason: "forbidden", Err: kindErr(errForbidden, "rbac")},
			rule: "list-failed-same", state: Failed, errIs: errForbidden, reason: "forbidden", check: sinceIs(at(5))},
		{name: "another failure of the same kind: published, not logged", from: failed,
			ev:   Event{Kind: ListFailed, At: at(time.Minute), Class: Refused, Reason: "forbidden", Err: kindErr(errForbidden, "other"), Detail: "other"},
			rule: "list-failed", state: Failed, errIs: errForbidden, reason: "forbidden", effects: Publish, check: sinceIs(at(5))},
		{name: "the failure log resets when a list answers", from: func(t *testing.T) Machine { return drive(t, failed(t), listAnswered) }, ev: refused,
			rule: "list-failed", state: Failed, errIs: errForbidden, reason: "forbidden", effects: Publish | Log},

		{name: "first watch nudges", from: func(t *testing.T) Machine { return drive(t, syncing(t), listAnswered) }, ev: watchOpened, rule: "watch-opened",
			state: Syncing, reason: ListingReason, effects: Nudge},
		{name: "a watch again", from: synced, ev: watchOpened, rule: "watch-opened-again", state: Synced},
		{name: "served", from: pending, ev: Event{Kind: ResourceServed}, rule: "resource-served", state: Pending, reason: NotStartedReason},

		{name: "authoritative reason replaces a pending removal's", from: draining,
			ev:   Event{Kind: ResourceRemoved, Reason: "CRD serves no v1", Known: true, Err: kindErr(errNotServed, "CRD serves no v1")},
			rule: "removed-reason", state: Synced, check: func(t *testing.T, m Machine, _ Output) {
				m2 := drive(t, m, Event{Kind: CacheChecked, At: at(11 * time.Second), CacheEmpty: true, Removal: m.Removal()})
				if v := m2.View(); v.State != Removed || v.Reason != "CRD serves no v1" {
					t.Errorf("published %s %q", v.State, v.Reason)
				}
			}},
		{name: "Removed takes a new authoritative reason", from: removed,
			ev:   Event{Kind: ResourceRemoved, At: at(time.Minute), Reason: "no established CRD", Known: true, Err: kindErr(errNotServed, "no established CRD")},
			rule: "removed-reason-changed", state: Removed, errIs: errNotServed, reason: "no established CRD", effects: Publish, check: sinceIs(at(11 * time.Second))},
		{name: "Removed keeps its reason for a 404", from: removed, ev: Event{Kind: ResourceRemoved, Reason: "404", Err: kindErr(errNotServed, "404")},
			rule: "removed-ignored", state: Removed, errIs: errNotServed, reason: "CRD deleted"},
		{name: "Pending, started: waits", from: pending, ev: Event{Kind: ResourceRemoved, At: at(2), Reason: "no CRD", Known: true, Err: kindErr(errNotServed, "no CRD")},
			rule: "removed-waiting", state: Pending, errIs: errNotServed, reason: NotServedPrefix + "no CRD", effects: Publish},
		{name: "Pending, not started: stays not started", from: func(*testing.T) Machine { return New(t0) },
			ev:   Event{Kind: ResourceRemoved, Reason: "no CRD", Known: true, Err: kindErr(errNotServed, "no CRD")},
			rule: "removed-ignored", state: Pending, reason: NotStartedReason},
		{name: "Synced: the stream empties the cache first", from: synced, ev: Event{Kind: ResourceRemoved, Reason: "gone", Known: true, Err: kindErr(errNotServed, "gone")},
			rule: "removed-ignored", state: Synced},

		{name: "version switch on a synced informer", from: synced, ev: Event{Kind: VersionSwitched, At: at(time.Minute), Version: "v2", Reason: "preferred"},
			rule: "version-switched", state: Syncing, reason: "following version v2: preferred", effects: Publish, check: awaitsRelist},
		{name: "version switch on a Removed informer", from: removed, ev: Event{Kind: VersionSwitched, Version: "v2", Reason: "v1 unserved"},
			rule: "version-switched", state: Syncing, reason: "following version v2: v1 unserved", effects: Publish},
		{name: "version switch before the first list", from: pending, ev: Event{Kind: VersionSwitched, Version: "v2", Reason: "preferred"},
			rule: "version-switched-quiet", state: Pending, reason: NotStartedReason},
		{name: "version switch on a Failed informer", from: failed, ev: Event{Kind: VersionSwitched, Version: "v2", Reason: "preferred"},
			rule: "version-switched-quiet", state: Failed, errIs: errForbidden, reason: "forbidden"},

		{name: "cache emptied", from: synced, ev: emptied, rule: "cache-emptied", state: Synced, effects: Nudge, check: func(t *testing.T, m Machine, o Output) {
			if m.Removal() == 0 || !o.Poll {
				t.Errorf("removal %d, poll %v", m.Removal(), o.Poll)
			}
		}},
		{name: "removal published once the cache is empty", from: draining, ev: Event{Kind: CacheChecked, At: at(10*time.Second + time.Millisecond), InformerSynced: true, CacheEmpty: true, Removal: 1},
			rule: "removal-published", state: Removed, errIs: errNotServed, reason: "CRD deleted", effects: Publish, check: func(t *testing.T, m Machine, o Output) {
				if o.Poll || m.Removal() != 0 {
					t.Errorf("still polling after Removed")
				}
			}},
		{name: "removal not published while the cache holds objects", from: draining, ev: Event{Kind: CacheChecked, At: at(12 * time.Second), InformerSynced: true, Removal: 1},
			rule: "cache-checked", state: Synced, check: func(t *testing.T, _ Machine, o Output) {
				if !o.Poll {
					t.Error("not polling while a removal drains")
				}
			}},
		{name: "removal published after the grace", from: draining, ev: Event{Kind: CacheChecked, At: at(10*time.Second + RemovalGrace + time.Millisecond), Removal: 1},
			rule: "removal-published", state: Removed, errIs: errNotServed, reason: "CRD deleted", effects: Publish},
		{name: "an observation older than the removal does not publish it", from: draining, ev: Event{Kind: CacheChecked, At: at(11 * time.Second), CacheEmpty: true, Removal: 0},
			rule: "cache-checked", state: Synced},
		{name: "first sync", from: func(t *testing.T) Machine { return drive(t, syncing(t), listAnswered, watchOpened) }, ev: checked(true, "10"),
			rule: "synced", state: Synced, effects: Publish | CloseSynced},
		{name: "synced again: the channel is closed once", from: func(t *testing.T) Machine {
			return drive(t, synced(t), refused, listStarted, listAnswered)
		}, ev: checked(true, "10"), rule: "synced", state: Synced, effects: Publish},
		{name: "no sync without a watch", from: func(t *testing.T) Machine { return drive(t, syncing(t), listAnswered) }, ev: checked(true, "10"),
			rule: "cache-checked", state: Syncing, reason: ListingReason},
		{name: "no sync before client-go's informer synced", from: func(t *testing.T) Machine { return drive(t, syncing(t), listAnswered, watchOpened) },
			ev: checked(false, ""), rule: "cache-checked", state: Syncing, reason: ListingReason},
		{name: "after a removal, not before the relist returned", from: func(t *testing.T) Machine { return drive(t, removed(t), listStarted, watchOpened) },
			ev: checked(true, "10"), rule: "cache-checked", state: Removed, errIs: errNotServed, reason: "CRD deleted", check: func(t *testing.T, _ Machine, o Output) {
				if o.Poll {
					t.Error("polling before the relist returned (its answer nudges)")
				}
			}},
		{name: "after a removal, not before the reflector reached the relist", from: func(t *testing.T) Machine {
			return drive(t, removed(t), listStarted, Event{Kind: ListAnswered, RV: "20"}, watchOpened)
		}, ev: checked(true, "19"), rule: "cache-checked", state: Syncing, reason: ListingReason, check: func(t *testing.T, _ Machine, o Output) {
			if !o.Poll {
				t.Error("not polling while the reflector catches up with the relist")
			}
		}},
		{name: "after a removal, the synthetic resourceVersion is not a relist", from: func(t *testing.T) Machine {
			return drive(t, removed(t), listStarted, Event{Kind: ListAnswered, RV: "1"}, watchOpened)
		}, ev: checked(true, "1"), rule: "cache-checked", state: Syncing, reason: ListingReason},
		{name: "after a removal, Synced once the relist is in", from: func(t *testing.T) Machine {
			return drive(t, removed(t), listStarted, Event{Kind: ListAnswered, RV: "20"}, watchOpened)
		}, ev: checked(true, "21"), rule: "synced", state: Synced, effects: Publish, check: func(t *testing.T, m Machine, o Output) {
			if o.Poll {
				t.Error("polling after Synced")
			}
		}},
		{name: "after a version switch, Synced once the relist is in", from: func(t *testing.T) Machine {
			return drive(t, synced(t), Event{Kind: VersionSwitched, Version: "v2"}, listAnswered)
		}, ev: checked(true, "10"), rule: "synced", state: Synced, effects: Publish},
		{name: "after a version switch, the old list does not count", from: func(t *testing.T) Machine {
			return drive(t, synced(t), Event{Kind: VersionSwitched, Version: "v2"})
		}, ev: checked(true, "10"), rule: "cache-checked", state: Syncing, reason: "following version v2: "},

		{name: "access denied", from: pending, ev: denied, rule: "access-denied", state: Failed, errIs: errForbidden, reason: "forbidden: may not watch", effects: Publish | Log},
		{name: "the same denial again", from: accessFailed, ev: Event{Kind: AccessDenied, At: at(time.Minute), Reason: denied.Reason, Err: kindErr(errForbidden, "may not watch"), Detail: "may not watch"},
			rule: "access-denied-same", state: Failed, errIs: errForbidden, reason: "forbidden: may not watch", check: sinceIs(at(2))},
		{name: "another denial", from: accessFailed, ev: Event{Kind: AccessDenied, At: at(time.Minute), Reason: "forbidden: may not list", Err: kindErr(errForbidden, "may not list"), Detail: "may not list"},
			rule: "access-denied", state: Failed, errIs: errForbidden, reason: "forbidden: may not list", effects: Publish | Log, check: sinceIs(at(2))},
		{name: "access granted after a denial", from: accessFailed, ev: Event{Kind: AccessGranted, At: at(time.Minute)}, rule: "access-granted", state: Pending,
			reason: AccessGrantedReason, effects: Publish | Log},
		{name: "access granted, never denied", from: pending, ev: Event{Kind: AccessGranted}, rule: "access-granted-quiet", state: Pending, reason: NotStartedReason},
		{name: "access granted does not lift a list's refusal", from: failed, ev: Event{Kind: AccessGranted}, rule: "access-granted-quiet", state: Failed,
			errIs: errForbidden, reason: "forbidden"},
		{name: "access granted after a denial replaced by a list failure", from: func(t *testing.T) Machine { return drive(t, accessFailed(t), refused) },
			ev: Event{Kind: AccessGranted}, rule: "access-granted-quiet", state: Failed, errIs: errForbidden, reason: "forbidden", effects: Log},

		{name: "contact lost: Synced becomes Stale", from: synced, ev: lost, rule: "contact-lost-stale", state: Stale, reason: lostReason, effects: Publish | Log,
			check: func(t *testing.T, m Machine, o Output) {
				if !errors.Is(o.Status.ContactErr, errNoContact) || !m.ContactLost() {
					t.Errorf("ContactErr %v", o.Status.ContactErr)
				}
				sinceIs(at(6))(t, m, o)
			}},
		{name: "contact lost without words", from: synced, ev: Event{Kind: ContactLost, Err: kindErr(errNoContact, "refused")}, rule: "contact-lost-stale",
			state: Stale, reason: NoContactReason, effects: Publish | Log},
		{name: "contact lost while Syncing: the reason says it", from: syncing, ev: lost, rule: "contact-lost", state: Syncing,
			reason: ListingReason + "; " + lostReason, effects: Publish | Log},
		{name: "contact regained while Syncing", from: syncingLost, ev: regained, rule: "contact-regained", state: Syncing,
			reason: ListingReason, effects: Publish | Log},
		{name: "contact lost on Pending", from: pending, ev: lost, rule: "contact-lost", state: Pending, reason: NotStartedReason, effects: Publish | Log},
		{name: "contact lost on Removed", from: removed, ev: lost, rule: "contact-lost", state: Removed, errIs: errNotServed, reason: "CRD deleted", effects: Publish | Log},
		{name: "contact lost again", from: lostContact, ev: Event{Kind: ContactLost, Err: kindErr(errNoContact, "reset"), Reason: "other"}, rule: "contact-lost-again",
			state: Stale, reason: lostReason,
			check: func(t *testing.T, _ Machine, o Output) {
				if o.Status.ContactErr == nil || !strings.Contains(o.Status.ContactErr.Error(), "refused") {
					t.Errorf("ContactErr %v, want the error that lost contact", o.Status.ContactErr)
				}
			}},
		{name: "contact regained: Stale becomes Synced", from: lostContact, ev: regained, rule: "contact-regained-synced", state: Synced, effects: Publish | Log,
			check: func(t *testing.T, m Machine, o Output) {
				if o.Status.ContactErr != nil {
					t.Errorf("ContactErr %v", o.Status.ContactErr)
				}
				sinceIs(at(7))(t, m, o)
				// Lost again: Stale again, with the new loss's words.
				m2 := drive(t, m, Event{Kind: ContactLost, At: at(8), Err: kindErr(errNoContact, "reset"), Reason: "no contact: reset"})
				if v := m2.View(); v.State != Stale || v.Reason != "no contact: reset" {
					t.Errorf("lost again: %s %q", v.State, v.Reason)
				}
			}},
		{name: "contact regained on Failed", from: func(t *testing.T) Machine { return drive(t, failed(t), lost) }, ev: regained, rule: "contact-regained",
			state: Failed, errIs: errForbidden, reason: "forbidden", effects: Publish | Log},

		// Stale behaves as Synced for every event but contact's.
		{name: "Stale: first sync while contact is lost", from: func(t *testing.T) Machine { return drive(t, syncing(t), listAnswered, watchOpened, lost) },
			ev: checked(true, "10"), rule: "synced-stale", state: Stale, reason: lostReason, effects: Publish | CloseSynced, check: func(t *testing.T, m Machine, o Output) {
				if o.Status.ContactErr == nil {
					t.Error("Stale without ContactErr")
				}
				m2 := drive(t, m, regained)
				if m2.State() != Synced {
					t.Errorf("contact regained: %s", m2.State())
				}
			}},
		{name: "Stale: a relist", from: lostContact, ev: listStarted, rule: "list-started-relist", state: Stale, reason: lostReason},
		{name: "Stale: a list answered waits for contact", from: lostContact, ev: listAnswered, rule: "list-answered-relist", state: Stale, reason: lostReason, effects: Nudge},
		{name: "Stale: a broken watch", from: lostContact, ev: broken, rule: "list-failed-synced-watch", state: Stale, reason: lostReason, effects: Log},
		{name: "Stale: no contact in a list", from: lostContact, ev: Event{Kind: ListFailed, Class: NoContact, Reason: "no contact", Err: kindErr(errNoContact, "refused")},
			rule: "list-failed-no-contact", state: Stale, reason: lostReason, effects: Log},
		{name: "Stale: a refusal fails", from: lostContact, ev: refused, rule: "list-failed", state: Failed, errIs: errForbidden, reason: "forbidden", effects: Publish | Log},
		{name: "Stale: access denied", from: lostContact, ev: denied, rule: "access-denied", state: Failed, errIs: errForbidden, reason: "forbidden: may not watch", effects: Publish | Log},
		{name: "Stale: stop", from: lostContact, ev: Event{Kind: Stop, At: at(time.Hour), Reason: "released"}, rule: "stop", state: Stopped, reason: "released", effects: Publish},
		{name: "Stale: slot waiting", from: lostContact, ev: Event{Kind: SlotWaiting}, rule: "slot-waiting-ignored", state: Stale, reason: lostReason},
		{name: "Stale: version switch", from: lostContact, ev: Event{Kind: VersionSwitched, At: at(time.Minute), Version: "v2", Reason: "preferred"},
			rule: "version-switched", state: Syncing, reason: "following version v2: preferred; " + lostReason, effects: Publish},
		{name: "Stale: a removal drains", from: lostContact, ev: emptied, rule: "cache-emptied", state: Stale, reason: lostReason, effects: Nudge},
		{name: "Stale: the removal is published", from: func(t *testing.T) Machine { return drive(t, lostContact(t), emptied) },
			ev:   Event{Kind: CacheChecked, At: at(11 * time.Second), InformerSynced: true, CacheEmpty: true, Removal: 1},
			rule: "removal-published", state: Removed, errIs: errNotServed, reason: "CRD deleted", effects: Publish},
		{name: "Stale: a verdict waits for the stream", from: lostContact, ev: Event{Kind: ResourceRemoved, Reason: "gone", Known: true, Err: kindErr(errNotServed, "gone")},
			rule: "removed-ignored", state: Stale, reason: lostReason},
		{name: "Stale: namespaces forbidden show", from: lostContact, ev: Event{Kind: NamespacesForbidden, Err: kindErr(errForbidden, "namespace b")},
			rule: "namespaces-forbidden", state: Stale, errIs: errForbidden, reason: lostReason, effects: Publish},
		{name: "contact never lost", from: synced, ev: Event{Kind: ContactRegained}, rule: "contact-regained-noop", state: Synced},

		{name: "namespaces forbidden show on a synced informer", from: synced, ev: Event{Kind: NamespacesForbidden, Err: kindErr(errForbidden, "namespace b")},
			rule: "namespaces-forbidden", state: Synced, errIs: errForbidden, effects: Publish},
		{name: "namespaces forbidden, the same", from: func(t *testing.T) Machine {
			return drive(t, synced(t), Event{Kind: NamespacesForbidden, Err: kindErr(errForbidden, "namespace b")})
		}, ev: Event{Kind: NamespacesForbidden, Err: kindErr(errForbidden, "namespace b")}, rule: "namespaces-forbidden-same", state: Synced, errIs: errForbidden},
		{name: "namespaces allowed again", from: func(t *testing.T) Machine {
			return drive(t, synced(t), Event{Kind: NamespacesForbidden, Err: kindErr(errForbidden, "namespace b")})
		}, ev: Event{Kind: NamespacesForbidden}, rule: "namespaces-forbidden", state: Synced, effects: Publish},
		{name: "namespaces forbidden do not show on a Removed informer", from: removed, ev: Event{Kind: NamespacesForbidden, Err: kindErr(errForbidden, "namespace b")},
			rule: "namespaces-forbidden", state: Removed, errIs: errNotServed, reason: "CRD deleted", effects: Publish},
		{name: "namespaces none forbidden, none before", from: synced, ev: Event{Kind: NamespacesForbidden}, rule: "namespaces-forbidden-same", state: Synced},

		{name: "shard changed", from: synced, ev: Event{Kind: ShardChanged}, rule: "shard-changed", state: Synced, effects: Publish},
		{name: "shard ignored", from: synced, ev: Event{Kind: ShardIgnored}, rule: "shard-ignored", state: Synced, effects: Publish},
		{name: "config error lets shard changes through", from: configFailed, ev: Event{Kind: ShardChanged}, rule: "shard-changed", state: Failed,
			errIs: errConfig, reason: "cluster-scoped", effects: Publish},
		{name: "unknown event", from: synced, ev: Event{Kind: "bogus"}, rule: "unknown", state: Synced},
	}
}

func sinceIs(want time.Time) func(*testing.T, Machine, Output) {
	return func(t *testing.T, _ Machine, o Output) {
		if !o.Status.Since.Equal(want) {
			t.Errorf("Since %v, want %v", o.Status.Since.Sub(t0), want.Sub(t0))
		}
	}
}

func awaitsRelist(t *testing.T, m Machine, _ Output) {
	// The list from before the switch is in; only a new one counts.
	m2 := drive(t, m, checked(true, "10"))
	if m2.State() != Syncing {
		t.Fatalf("Synced before a relist: %s", m2.State())
	}
	m3 := drive(t, m2, listAnswered, checked(true, "10"))
	if m3.State() != Synced {
		t.Fatalf("not Synced after the relist: %s", m3.State())
	}
}

func TestTransitions(t *testing.T) {
	fired := map[string]bool{}
	kinds := map[EventKind]bool{}
	for _, r := range rows() {
		t.Run(r.name, func(t *testing.T) {
			m := r.from(t)
			before := m
			from := m.State()
			next, out := Next(m, r.ev)
			checkRule(t, from, r.ev, next, out)
			if out.Rule != r.rule {
				t.Fatalf("rule %s, want %s", out.Rule, r.rule)
			}
			fired[out.Rule] = true
			kinds[r.ev.Kind] = true
			v := out.Status
			if v.State != r.state {
				t.Errorf("state %s, want %s", v.State, r.state)
			}
			if r.errIs == nil && v.Err != nil || r.errIs != nil && !errors.Is(v.Err, r.errIs) {
				t.Errorf("err %v, want errors.Is %v", v.Err, r.errIs)
			}
			if v.Reason != r.reason {
				t.Errorf("reason %q, want %q", v.Reason, r.reason)
			}
			if out.Effects != r.effects {
				t.Errorf("effects %q, want %q", out.Effects, r.effects)
			}
			if out.Effects&Publish == 0 && viewChanged(before.View(), v) {
				t.Errorf("the status changed without publish: %+v -> %+v", before.View(), v)
			}
			if r.check != nil {
				r.check(t, next, out)
			}
			// Next is a function of its arguments: the same input gives
			// the same output, and the input is not changed.
			again, out2 := Next(m, r.ev)
			if again.View() != next.View() || out2.Rule != out.Rule || out2.Effects != out.Effects || m.View() != before.View() {
				t.Error("Next is not deterministic or changed its input")
			}
		})
	}
	for _, r := range Rules {
		if !fired[r.ID] {
			t.Errorf("rule %s has no row", r.ID)
		}
	}
	for _, e := range Events {
		if !kinds[e.Kind] {
			t.Errorf("event %s has no row", e.Kind)
		}
	}
}

func viewChanged(a, b View) bool {
	return a.State != b.State || a.Reason != b.Reason || !sameErr(a.Err, b.Err) || !sameErr(a.ContactErr, b.ContactErr)
}

// TestEveryStateEveryEvent feeds every event kind to a machine in every
// state (and in the special states a config error, an access denial and
// a draining removal make) and checks the rule it reports.
func TestEveryStateEveryEvent(t *testing.T) {
	samples := map[EventKind]Event{
		Start: startClosed, Stop: {Kind: Stop, Reason: "released"}, ConfigError: configErr,
		GateWaiting: {Kind: GateWaiting, Reason: "404", Err: kindErr(errNotServed, "404")}, SlotWaiting: {Kind: SlotWaiting},
		RestoredFromDisk: restoredEv, ListStarted: listStarted, ListAnswered: listAnswered, ListFailed: refused, WatchOpened: watchOpened,
		ResourceServed: {Kind: ResourceServed}, ResourceRemoved: {Kind: ResourceRemoved, Reason: "gone", Known: true, Err: kindErr(errNotServed, "gone")},
		VersionSwitched: {Kind: VersionSwitched, Version: "v2"}, CacheEmptied: emptied,
		CacheChecked: {Kind: CacheChecked, At: at(time.Hour), InformerSynced: true, CacheEmpty: true, LastRV: "99", Removal: 1},
		AccessDenied: denied, AccessGranted: {Kind: AccessGranted}, ContactLost: lost, ContactRegained: {Kind: ContactRegained},
		NamespacesForbidden: {Kind: NamespacesForbidden, Err: kindErr(errForbidden, "b")}, ShardChanged: {Kind: ShardChanged}, ShardIgnored: {Kind: ShardIgnored},
	}
	fixtures := map[string]func(*testing.T) Machine{"config failed": configFailed, "access failed": accessFailed, "draining": draining,
		"syncing, contact lost": syncingLost, "draining, contact lost": func(t *testing.T) Machine { return drive(t, lostContact(t), emptied) }}
	for _, s := range States {
		fixtures[string(s)] = func(t *testing.T) Machine { return inState(t, s) }
	}
	for name, fix := range fixtures {
		for _, e := range Events {
			ev, ok := samples[e.Kind]
			if !ok {
				t.Fatalf("no sample of %s", e.Kind)
			}
			m := fix(t)
			next, out := Next(m, ev)
			checkRule(t, m.State(), ev, next, out)
			if m.State() == Stopped && (out.Rule != "stopped" || out.Effects != 0) {
				t.Errorf("%s in %s: %s %q", e.Kind, name, out.Rule, out.Effects)
			}
			if m.ConfigFailed() && !passesConfigError(e.Kind) && out.Rule != "config-sticky" {
				t.Errorf("%s in %s: %s, want config-sticky", e.Kind, name, out.Rule)
			}
		}
	}
}

// TestEventsHaveRules: every event kind has a rule of its own.
func TestEventsHaveRules(t *testing.T) {
	on := map[EventKind]bool{}
	for _, r := range Rules {
		on[r.On] = true
	}
	seen := map[string]bool{}
	for _, r := range Rules {
		if seen[r.ID] {
			t.Errorf("rule %s twice", r.ID)
		}
		seen[r.ID] = true
	}
	for _, e := range Events {
		if !on[e.Kind] {
			t.Errorf("event %s has no rule", e.Kind)
		}
	}
}

const (
	lifecycleDoc = "../../../docs/LIFECYCLE.md"
	tableBegin   = "<!-- lifecycle tables: generated by `go test ./dynamicinformer/internal/lifecycle -run TestDesignDoc -update`; do not edit -->\n"
	tableFinish  = "<!-- end of lifecycle tables -->\n"
)

// TestDesignDoc checks that docs/LIFECYCLE.md shows exactly the machine's
// events and rules (-update rewrites them there). docs/DESIGN.md
// ("Informer lifecycle") has the prose and links to that file.
func TestDesignDoc(t *testing.T) {
	b, err := os.ReadFile(lifecycleDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, tableBegin)
	j := strings.Index(doc, tableFinish)
	if i < 0 || j < i {
		t.Fatalf("docs/LIFECYCLE.md has no generated lifecycle tables (markers %q ... %q)", tableBegin, tableFinish)
	}
	got := doc[i+len(tableBegin) : j]
	want := "\n" + Table() + "\n"
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(lifecycleDoc, []byte(doc[:i+len(tableBegin)]+want+doc[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("docs/LIFECYCLE.md's lifecycle tables differ from Rules and Events; run with -update. Want:\n%s", want)
}

func TestRVReached(t *testing.T) {
	for _, c := range []struct {
		last, want string
		ok         bool
	}{
		{"", "5", false}, {"1", "1", false}, {"4", "5", false}, {"5", "5", true}, {"6", "5", true},
		{"abc", "5", true}, {"10", "", true},
	} {
		if got := RVReached(c.last, c.want); got != c.ok {
			t.Errorf("RVReached(%q, %q) = %v", c.last, c.want, got)
		}
	}
}
