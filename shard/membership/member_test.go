package membership

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/informerkit/informerkit/internal/leakcheck"
	"github.com/informerkit/informerkit/shard"
)

// follower stands for an informer: it follows a member's shard and says
// it holds it at once.
type follower struct {
	m    *Member
	c    shard.Consumer
	stop chan struct{}
	done chan struct{}
}

func follow(m *Member) *follower {
	f := &follower{m: m, c: m.Register("test"), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(f.done)
		for {
			s, changed := m.Current()
			f.c.Holds(s, true)
			select {
			case <-changed:
			case <-f.stop:
				return
			}
		}
	}()
	return f
}

func (f *follower) close() {
	close(f.stop)
	<-f.done
	f.c.Close()
}

func join(t *testing.T, client *fake.Clientset, id string) *Member {
	t.Helper()
	m, err := Join(context.Background(), client, Options{
		Namespace: "ns", Group: "g", Identity: id,
		LeaseDuration: 2 * time.Second, RenewInterval: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// converged waits until the members' shards are disjoint and cover the
// space, each being its consistent-hashing share of want.
func converged(t *testing.T, ms []*Member, want []string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok := true
		total := 0.0
		for _, m := range ms {
			s, _ := m.Current()
			target, err := shard.Assign(shard.UID, want, m.Identity(), 0)
			if err != nil {
				t.Fatal(err)
			}
			if !s.Equal(target) {
				ok = false
			}
			total += s.Size()
		}
		if ok && total > 1-1e-9 && total < 1+1e-9 {
			return
		}
		if time.Now().After(deadline) {
			for _, m := range ms {
				s, _ := m.Current()
				t.Logf("%s: members %v size %.3f", m.Identity(), m.Members(), s.Size())
			}
			t.Fatalf("members did not converge on %v", want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestJoinLeaveDie(t *testing.T) {
	check := leakcheck.Snapshot("informerkit/shard/membership.")
	client := fake.NewClientset()
	a, b, c := join(t, client, "a"), join(t, client, "b"), join(t, client, "c")
	fs := []*follower{follow(a), follow(b), follow(c)}
	converged(t, []*Member{a, b, c}, []string{"a", "b", "c"})

	// A fourth joins; while it has said nothing, the others keep what
	// moved to it (held twice, never by none).
	d := join(t, client, "d")
	time.Sleep(500 * time.Millisecond)
	var union shard.Shard
	for i, m := range []*Member{a, b, c} {
		s, _ := m.Current()
		if i == 0 {
			union = s
		} else {
			union = union.Union(s)
		}
	}
	if union.Size() < 1-1e-9 {
		t.Fatalf("before d holds anything, a, b and c cover only %.3f of the space", union.Size())
	}
	fs = append(fs, follow(d))
	converged(t, []*Member{a, b, c, d}, []string{"a", "b", "c", "d"})

	// b leaves gracefully: Leave returns once the others hold its ranges.
	bShard, _ := b.Current()
	fs[1].close()
	if err := b.Leave(context.Background()); err != nil {
		t.Fatal(err)
	}
	var others shard.Shard
	for i, m := range []*Member{a, c, d} {
		s, _ := m.Current()
		if i == 0 {
			others = s
		} else {
			others = others.Union(s)
		}
	}
	if !others.Covers(bShard) {
		t.Fatal("b left before the others took its ranges")
	}
	converged(t, []*Member{a, c, d}, []string{"a", "c", "d"})

	// c dies (stops renewing): its ranges go to a and d once its Lease
	// expires.
	start := time.Now()
	fs[2].close()
	c.Stop()
	converged(t, []*Member{a, d}, []string{"a", "d"})
	if took := time.Since(start); took > 2*time.Second+time.Second {
		t.Fatalf("takeover took %v", took)
	} else {
		t.Logf("c's ranges taken over %v after it stopped (lease 2s)", took.Round(time.Millisecond))
	}
	for _, f := range []*follower{fs[0], fs[3]} {
		f.close()
	}
	a.Stop()
	d.Stop()
	check(t)
}

func TestOptionsAndHeldEncoding(t *testing.T) {
	for _, o := range []Options{{Group: "g"}, {Namespace: "ns"}, {Namespace: "ns", Group: "bad group"},
		{Namespace: "ns", Group: "g", LeaseDuration: time.Second, RenewInterval: time.Second},
		{Namespace: "ns", Group: "g", Identity: "Not_DNS"}} {
		if _, err := Join(context.Background(), fake.NewClientset(), o); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%+v: %v", o, err)
		}
	}
	s, _ := shard.New(shard.Namespace, shard.Range{Start: 1, Last: 5}, shard.Range{Start: 1 << 63, Last: 1<<64 - 1})
	got, ok := decodeHeld(encodeHeld(s))
	if !ok || !got.Equal(s) {
		t.Fatalf("round trip %q: %v %v", encodeHeld(s), got.Ranges(), ok)
	}
	for _, bad := range []string{"", "uid:", "uid:zz-01", "name:0-1", "uid:5-1"} {
		if _, ok := decodeHeld(bad); ok {
			t.Errorf("%q decoded", bad)
		}
	}
}

func TestDefaultIdentity(t *testing.T) {
	for host, want := range map[string]string{
		"watcher-7d9f":     "watcher-7d9f-42",
		"Laptop.Local":     "laptop.local-42",
		"weird_host name!": "weird-host-name-42",
		"":                 "replica-42",
	} {
		got := identityFor(host, 42)
		if got != want {
			t.Errorf("identityFor(%q) = %q, want %q", host, got, want)
		}
		if errs := validation.IsDNS1123Subdomain("group-" + got); len(errs) > 0 {
			t.Errorf("lease name for %q invalid: %v", got, errs)
		}
	}
	o := Options{Namespace: "ns", Group: "g"}
	if err := o.defaults(); err != nil {
		t.Fatalf("defaults with the default identity: %v", err)
	}
	if o.Identity != DefaultIdentity() {
		t.Errorf("Identity = %q, want DefaultIdentity() %q", o.Identity, DefaultIdentity())
	}
}
