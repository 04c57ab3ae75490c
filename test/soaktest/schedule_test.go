package soaktest

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// Fault kinds the schedule draws from.
const (
	faultCompact = "compact" // informers' connections stalled, writes and an etcd compaction behind them, then cut: 410 Gone and relist
	faultCut     = "cut"     // every proxied connection closed, twice
	faultStall   = "stall"   // the proxy forwards nothing for a while
	faultRefuse  = "refuse"  // the proxy closes every connection and refuses new ones for a while
	faultRestart = "restart" // kube-apiserver stopped and started again on the same etcd
	faultCRD     = "crd"     // a watched CRD deleted (its objects with it) and re-created
	faultRBAC    = "rbac"    // the impersonated user's bindings deleted, connections cut, bindings re-created
	faultShard   = "shard"   // a shard member stopped (dies or leaves) and another one joins
	// a watched CRD (widgets) updated in place: its storage version
	// switched between v1 and v2, v2 served or not with it (v1, the
	// watched version, stays served)
	faultCRDVersion = "crd-version"
	// a watched CRD (gadgets) deleted and re-created with another version
	// set (v1 and v2, v2 the storage version) and a structural schema
	faultCRDRecreate = "crd-recreate"
	// garbage written to one object's etcd value (the server's watch
	// cache of the resource cannot read it), then the object deleted the
	// only way the server allows
	faultCorrupt = "corrupt"
)

var allFaults = []string{faultCompact, faultCut, faultStall, faultRefuse, faultRestart, faultCRD, faultRBAC, faultShard,
	faultCRDVersion, faultCRDRecreate, faultCorrupt, faultDiskRestart}

// fault is one scheduled fault: it starts At into the writers' window and
// lasts For (where a duration means something); Pick chooses among
// targets (which shard member, dies or leaves).
type fault struct {
	Kind    string
	At, For time.Duration
	Pick    int
}

func (f fault) String() string {
	return fmt.Sprintf("%s@%v+%v", f.Kind, f.At.Round(time.Millisecond), f.For.Round(time.Millisecond))
}

// iteration is one round: writers run for Window while Faults happen,
// then the writers stop, the faults heal and the check runs.
type iteration struct {
	N          int
	Window     time.Duration
	WriterSeed uint64
	Faults     []fault
}

func (it iteration) String() string {
	var fs []string
	for _, f := range it.Faults {
		fs = append(fs, f.String())
	}
	return fmt.Sprintf("iteration %d: writes for %v, faults [%s]", it.N, it.Window.Round(time.Millisecond), strings.Join(fs, " "))
}

// schedule draws iterations from a seed: the first len(kinds) iterations
// have each kind once (in a drawn order), with a second, overlapping
// fault in about 40% of them (with group n > 1: the first
// ceil(len(kinds)/n) have n kinds each, the last the rest); later ones
// one to three distinct kinds.
// The same seed and kinds give the same iterations.
type schedule struct {
	rnd    *rand.Rand
	kinds  []string
	order  []int
	n      int
	window func(*rand.Rand) time.Duration
	// group > 1: the first iterations take the kinds group at a time
	// (every kind in 1/group as many iterations, overlapping).
	group int
}

func newSchedule(seed uint64, kinds []string, window func(*rand.Rand) time.Duration) *schedule {
	rnd := rand.New(rand.NewPCG(seed, 0x50a4))
	return &schedule{rnd: rnd, kinds: kinds, order: rnd.Perm(len(kinds)), window: window}
}

func (s *schedule) next() iteration {
	it := iteration{N: s.n, Window: s.window(s.rnd), WriterSeed: s.rnd.Uint64()}
	var kinds []string
	if g := s.group; g > 1 && g*s.n < len(s.order) {
		for _, i := range s.order[g*s.n : min(g*s.n+g, len(s.order))] {
			kinds = append(kinds, s.kinds[i])
		}
	} else if g <= 1 && s.n < len(s.order) {
		kinds = append(kinds, s.kinds[s.order[s.n]])
		if len(s.kinds) > 1 && s.rnd.IntN(10) < 4 {
			for {
				k := s.kinds[s.rnd.IntN(len(s.kinds))]
				if k != kinds[0] {
					kinds = append(kinds, k)
					break
				}
			}
		}
	} else if len(s.kinds) > 0 {
		want := 1 + s.rnd.IntN(3)
		for _, i := range s.rnd.Perm(len(s.kinds)) {
			if len(kinds) == want {
				break
			}
			kinds = append(kinds, s.kinds[i])
		}
	}
	for _, k := range kinds {
		it.Faults = append(it.Faults, fault{
			Kind: k,
			At:   time.Duration(s.rnd.Int64N(int64(it.Window) * 6 / 10)),
			For:  300*time.Millisecond + time.Duration(s.rnd.Int64N(int64(2500*time.Millisecond))),
			Pick: s.rnd.IntN(1 << 20),
		})
	}
	s.n++
	return it
}
