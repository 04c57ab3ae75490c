package shardtest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/dynamicinformer"
	"github.com/informerkit/informerkit/shard"
	"github.com/informerkit/informerkit/shard/membership"
	"github.com/informerkit/informerkit/test/controlplane"
)

// replica is one member of a shard group: its Lease membership, its
// factory and informer following the membership, and what its handlers
// were given.
type replica struct {
	name    string
	member  *membership.Member
	factory *dynamicinformer.Factory
	handle  *dynamicinformer.InformerHandle
	lists   *listLog // the LISTs of its informer

	mu      sync.Mutex // guards adds, deletes
	adds    map[types.UID]int
	deletes map[types.UID]int
}

func (r *replica) handler() toolscache.ResourceEventHandler {
	uid := func(o interface{}) types.UID {
		if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
			o = d.Obj
		}
		return o.(*unstructured.Unstructured).GetUID()
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(o interface{}) {
			r.mu.Lock()
			r.adds[uid(o)]++
			r.mu.Unlock()
		},
		DeleteFunc: func(o interface{}) {
			r.mu.Lock()
			r.deletes[uid(o)]++
			r.mu.Unlock()
		},
	}
}

func (r *replica) held() map[types.UID]bool {
	out := map[types.UID]bool{}
	for _, o := range r.handle.Informer().GetStore().List() {
		out[o.(*unstructured.Unstructured).GetUID()] = true
	}
	return out
}

// waitHandlersCaughtUp waits until, for every replica, the objects its
// handlers were told of (adds minus deletes) are the objects its indexer
// holds, and fails the test if that does not happen within a minute.
func waitHandlersCaughtUp(t *testing.T, rs ...*replica) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		behind := ""
		for _, r := range rs {
			held := r.held()
			adds, deletes := r.events()
			told := 0
			for uid, n := range adds {
				if n > deletes[uid] {
					told++
					if !held[uid] {
						behind = fmt.Sprintf("%s's handlers hold %s, its indexer does not", r.name, uid)
					}
				}
			}
			if behind == "" && told != len(held) {
				behind = fmt.Sprintf("%s's handlers were told of %d objects, its indexer holds %d", r.name, told, len(held))
			}
			if behind != "" {
				break
			}
		}
		if behind == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("handlers did not catch up with their indexers: %s", behind)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *replica) events() (adds, deletes map[types.UID]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	adds, deletes = map[types.UID]int{}, map[types.UID]int{}
	for k, v := range r.adds {
		adds[k] = v
	}
	for k, v := range r.deletes {
		deletes[k] = v
	}
	return adds, deletes
}

const (
	testLease = 3 * time.Second
	testRenew = 300 * time.Millisecond
)

// TestDynamicMembership: replicas agree on their shards through Leases
// (gate on). Three join and partition the objects; a fourth joins and
// takes about a quarter, its handlers getting an add and the old owner's a
// delete for each object that moved; one leaves gracefully; one dies and
// its objects are taken over within the Lease duration plus a sync. During
// the joins and the graceful leave a sampler checks that every object of
// the server is held by some member.
func TestDynamicMembership(t *testing.T) {
	controlplane.Parallel(t) // on a control plane of its own
	n := 600
	if v := os.Getenv("INFORMERKIT_SHARD_DYNAMIC_OBJECTS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 10 {
			t.Fatalf("INFORMERKIT_SHARD_DYNAMIC_OBJECTS=%q", v)
		}
	}
	cp := startControlPlane(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	crd := controlplane.NewCRD("dynamic.shardtest.example.com", "Part", "parts")
	if err := cp.InstallCRD(ctx, crd); err != nil {
		t.Fatal(err)
	}
	gvr := controlplane.GVR(crd)
	for _, ns := range []string{"parts", "leases"} {
		if err := cp.CreateNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	dyn := cp.Dynamic()
	if err := parallel(n, 16, func(i int) error {
		_, err := dyn.Resource(gvr).Namespace("parts").Create(ctx, part(gvr, fmt.Sprintf("p%05d", i)), metav1.CreateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	want := serverUIDs(ctx, t, dyn, gvr)

	before := controlplane.SnapshotGoroutines()
	var all []*replica
	start := func(name string) *replica {
		t.Helper()
		m, err := membership.Join(ctx, cp.Kube(), membership.Options{
			Namespace: "leases", Group: "parts", Identity: name,
			LeaseDuration: testLease, RenewInterval: testRenew, HandoffTimeout: time.Minute,
		})
		if err != nil {
			t.Fatal(err)
		}
		cfg, lists := logLists(cp.Config(), gvr.Resource)
		f, err := dynamicinformer.NewForConfig(cfg, dynamicinformer.Options{Defaults: []dynamicinformer.ResourceOption{dynamicinformer.WithShardSource(m)}})
		if err != nil {
			t.Fatal(err)
		}
		r := &replica{name: name, member: m, factory: f, handle: f.ForResource(gvr), lists: lists,
			adds: map[types.UID]int{}, deletes: map[types.UID]int{}}
		if _, err := r.handle.Informer().AddEventHandler(r.handler()); err != nil {
			t.Fatal(err)
		}
		f.Start(ctx)
		all = append(all, r)
		return r
	}
	stopped := map[*replica]bool{}
	stop := func(r *replica) {
		if !stopped[r] {
			stopped[r] = true
			r.factory.Shutdown()
			r.member.Stop()
		}
	}
	defer func() {
		for _, r := range all {
			stop(r)
		}
	}()

	a, b, c := start("a"), start("b"), start("c")
	took := waitPartition(t, want, a, b, c)
	t.Logf("3 members: partitioned %d objects %v after joining", len(want), took)
	// The first member held everything until the others took their part:
	// count handler events from here on, once every member's handlers
	// have heard of what its indexer holds (client-go's processor
	// delivers after the indexer is updated, so a's deletes for what b
	// and c took may still be on their way when the partition is seen).
	waitHandlersCaughtUp(t, a, b, c)
	for _, r := range []*replica{a, b, c} {
		r.mu.Lock()
		r.adds, r.deletes = map[types.UID]int{}, map[types.UID]int{}
		r.mu.Unlock()
	}

	// From here on, no object of the server may be held by nobody while
	// members join and leave gracefully.
	sampler := newSampler(want)
	sampler.start(a, b, c)

	d := start("d")
	sampler.add(d)
	took = waitPartition(t, want, a, b, c, d)
	moved := d.held()
	t.Logf("a fourth member joined: partition after %v; it holds %d of %d objects", took, len(moved), len(want))
	if f := float64(len(moved)) / float64(len(want)); f < 0.10 || f > 0.40 {
		t.Errorf("the fourth member took %.2f of the objects, want about a quarter", f)
	}
	// Handlers: d got an add per object it holds; of a, b and c, exactly
	// one got a delete for it (its old owner), and nobody got a delete for
	// an object that did not move. Handlers are told after the indexer is
	// updated (client-go's processor delivers asynchronously): wait until
	// they have heard of as many deletes as objects moved.
	for wait := time.Now(); time.Since(wait) < 10*time.Second; time.Sleep(20 * time.Millisecond) {
		n := 0
		for _, r := range []*replica{a, b, c} {
			_, del := r.events()
			n += len(del)
		}
		if dAdds, _ := d.events(); n >= len(moved) && len(dAdds) >= len(moved) {
			break
		}
	}
	dAdds, _ := d.events()
	for uid := range moved {
		if dAdds[uid] != 1 {
			t.Errorf("d's handlers got %d adds of an object it holds", dAdds[uid])
		}
	}
	for _, r := range []*replica{a, b, c} {
		adds, deletes := r.events()
		for uid, k := range deletes {
			if !moved[uid] || k != 1 || adds[uid] != 0 {
				t.Errorf("%s: %d deletes (%d adds) of %s (moved to d: %v)", r.name, k, adds[uid], uid, moved[uid])
			}
		}
	}
	deletes := 0
	for _, r := range []*replica{a, b, c} {
		_, del := r.events()
		deletes += len(del)
	}
	if deletes != len(moved) {
		t.Errorf("a, b and c got %d deletes for the %d objects that moved to d", deletes, len(moved))
	}

	// b leaves gracefully: Leave returns when the others hold its
	// ranges; then its informers stop.
	leaveStart := time.Now()
	if err := b.member.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	leaveTook := time.Since(leaveStart).Round(time.Millisecond)
	sampler.remove(b)
	stopped[b] = true
	b.factory.Shutdown()
	took = waitPartition(t, want, a, c, d)
	t.Logf("b left: Leave returned after %v (the others held its ranges), partition %v later", leaveTook, took)
	if gaps := sampler.stop(); gaps != "" {
		t.Errorf("objects held by no member during joins and leaves: %s", gaps)
	} else {
		t.Logf("sampler: %d samples, no object held by nobody", sampler.samples.Load())
	}

	// c dies: it stops renewing; its objects go to a and d within the
	// Lease duration plus a sync.
	listsA, listsD := a.lists.len(), d.lists.len()
	stop(c)
	took = waitPartition(t, want, a, d)
	switchLists := append(a.lists.since(listsA), d.lists.since(listsD)...)
	t.Logf("c died: a and d hold everything %v after (lease %v, renew %v); LISTs of a and d meanwhile: %d",
		took, testLease, testRenew, len(switchLists))
	// Bound: the Lease (c's last renewal may be up to a renew interval
	// before it stopped), the survivors' next recomputation (a renew
	// interval), and one switch inside each survivor's open stream (one
	// consistent LIST of its new shard). A switch through the reflector's
	// relist would wait for its backoff as well (0.8 s doubling to 30 s
	// while relists follow each other within 2 min; this test has
	// switched several times before): 8.6-13 s were measured that way.
	if limit := testLease + 3*time.Second; took > limit {
		t.Errorf("takeover after a death took %v, more than %v", took, limit)
	}
	if len(switchLists) > 2 {
		t.Errorf("the takeover cost %d LISTs, want one per survivor: %q", len(switchLists), switchLists)
	}
	for _, r := range all {
		stop(r)
	}
	before.VerifyNoLeaks(t)
}

// waitPartition waits until the replicas have converged — each one's
// shard is its consistent-hashing target over rs (no range kept for a
// handoff any more) and its cache holds nothing outside it — and their
// caches hold want between them, each object once; it returns how long
// that took.
func waitPartition(t *testing.T, want map[types.UID]bool, rs ...*replica) time.Duration {
	t.Helper()
	start := time.Now()
	var names []string
	for _, r := range rs {
		names = append(names, r.name)
	}
	var counts []int
	for time.Since(start) < 2*time.Minute {
		converged := true
		for _, r := range rs {
			target, err := shard.Assign(shard.UID, names, r.name, 0)
			if err != nil {
				t.Fatal(err)
			}
			if s, _ := r.member.Current(); !s.Equal(target) {
				converged = false
			}
		}
		if !converged {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		held := map[types.UID]int{}
		counts = counts[:0]
		inside := true // every member's cache within its shard (a switch has been taken in)
		for _, r := range rs {
			h := r.held()
			counts = append(counts, len(h))
			s, _ := r.member.Current()
			for uid := range h {
				held[uid]++
				if !s.ContainsValue(string(uid)) {
					inside = false
				}
			}
		}
		if inside && equalSets(held, want) {
			return time.Since(start).Round(time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, r := range rs {
		s, _ := r.member.Current()
		st := r.handle.Status()
		t.Logf("%s: members %v, shard size %.3f, state %s (%s), %d objects", r.name, r.member.Members(), s.Size(), st.State, st.Reason, st.Objects)
	}
	t.Fatalf("no partition of %d objects within 2 minutes: per member %v", len(want), counts)
	return 0
}

// sampler reads the members' caches every 20 ms, twice in a row in the
// same order (an object handed from one member to another between the
// reads of the two members is then seen in the second pass), and records
// objects of the server held by none.
type sampler struct {
	want    map[types.UID]bool
	mu      sync.Mutex // guards members, gaps
	members []*replica
	gaps    []string
	samples atomic.Int64
	quit    chan struct{}
	done    chan struct{}
}

func newSampler(want map[types.UID]bool) *sampler {
	return &sampler{want: want, quit: make(chan struct{}), done: make(chan struct{})}
}

func (s *sampler) start(rs ...*replica) {
	s.members = append(s.members, rs...)
	go func() {
		defer close(s.done)
		for {
			select {
			case <-s.quit:
				return
			case <-time.After(20 * time.Millisecond):
			}
			s.mu.Lock()
			rs := append([]*replica(nil), s.members...)
			s.mu.Unlock()
			seen := map[types.UID]bool{}
			for pass := 0; pass < 2; pass++ {
				for _, r := range rs {
					for uid := range r.held() {
						seen[uid] = true
					}
				}
			}
			missing := 0
			for uid := range s.want {
				if !seen[uid] {
					missing++
				}
			}
			s.samples.Add(1)
			if missing > 0 {
				s.mu.Lock()
				s.gaps = append(s.gaps, fmt.Sprintf("%d objects at %s", missing, time.Now().Format("15:04:05.000")))
				s.mu.Unlock()
			}
		}
	}()
}

// add counts r from now on; a joining member is added before it holds
// anything, which cannot hide a gap (it only adds to the union).
func (s *sampler) add(r *replica) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.members = append(s.members, r)
}

// remove stops counting r (after it has left gracefully).
func (s *sampler) remove(r *replica) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, m := range s.members {
		if m == r {
			s.members = append(s.members[:i], s.members[i+1:]...)
			return
		}
	}
}

func (s *sampler) stop() string {
	close(s.quit)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.gaps) == 0 {
		return ""
	}
	return fmt.Sprint(len(s.gaps), " samples: ", s.gaps)
}
