package membership

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/shard"
)

// Labels and annotations of a member's Lease.
const (
	// GroupLabel carries the group's name on every member's Lease.
	GroupLabel = "informerkit.io/shard-group"
	// HeldAnnotation says which ranges the member's caches hold (every
	// consumer registered with the member has listed them); others release
	// a range they hand over only once the new owner holds it.
	HeldAnnotation = "informerkit.io/shard-held"
	// LeavingAnnotation ("true") marks a member that is leaving: the others
	// take its ranges over while it still holds them.
	LeavingAnnotation = "informerkit.io/shard-leaving"
)

// Defaults of Options.
const (
	DefaultLeaseDuration = 15 * time.Second
)

// ErrInvalidOptions is wrapped by Join's errors for options that cannot
// work.
var ErrInvalidOptions = errors.New("invalid membership options")

// Options configure Join.
type Options struct {
	// Namespace holds the group's Leases. Required.
	Namespace string
	// Group names the shard group: members of one group divide the hash
	// space between them. Required; a label value.
	Group string
	// Identity names this member (its Lease is Group-Identity). Default:
	// DefaultIdentity(). Two live members must not share one.
	Identity string
	// LeaseDuration: a member whose Lease was not renewed for this long is
	// dead and its ranges go to the others. Default DefaultLeaseDuration.
	LeaseDuration time.Duration
	// RenewInterval: how often the Lease is renewed and the member set is
	// checked for expired members. Default LeaseDuration/3.
	RenewInterval time.Duration
	// VirtualRanges: points per member on the hash ring (shard.Assign).
	// Default shard.DefaultVirtualRanges.
	VirtualRanges int
	// Field the group shards by. Default shard.UID.
	Field shard.Field
	// HandoffTimeout bounds how long a member keeps ranges that moved to
	// another member which has not said it holds them (a member with no
	// consumers never does). Default 2 × LeaseDuration.
	HandoffTimeout time.Duration
	// Logger. Default logr.Discard().
	Logger logr.Logger
}

// DefaultIdentity is the Identity Join uses when none is given: the host
// name (a pod's name in a cluster), lower-cased, with every character a
// Lease name cannot hold replaced by '-', then the process id — unique
// among the processes of a host and among pods, and readable in
// `kubectl get leases`.
func DefaultIdentity() string {
	host, _ := os.Hostname()
	return identityFor(host, os.Getpid())
}

func identityFor(host string, pid int) string {
	var b strings.Builder
	for _, r := range strings.ToLower(host) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	id := strings.Trim(b.String(), "-.")
	if len(id) > 200 {
		id = id[:200]
	}
	if id == "" {
		id = "replica"
	}
	return id + "-" + strconv.Itoa(pid)
}

func (o *Options) defaults() error {
	if o.Namespace == "" || o.Group == "" {
		return fmt.Errorf("%w: Namespace and Group are required", ErrInvalidOptions)
	}
	if errs := validation.IsValidLabelValue(o.Group); len(errs) > 0 {
		return fmt.Errorf("%w: group %q: %s", ErrInvalidOptions, o.Group, strings.Join(errs, "; "))
	}
	if o.Identity == "" {
		o.Identity = DefaultIdentity()
	}
	if o.LeaseDuration <= 0 {
		o.LeaseDuration = DefaultLeaseDuration
	}
	if o.RenewInterval <= 0 {
		o.RenewInterval = o.LeaseDuration / 3
	}
	if o.RenewInterval >= o.LeaseDuration {
		return fmt.Errorf("%w: RenewInterval %v must be shorter than LeaseDuration %v", ErrInvalidOptions, o.RenewInterval, o.LeaseDuration)
	}
	if o.VirtualRanges <= 0 {
		o.VirtualRanges = shard.DefaultVirtualRanges
	}
	if o.Field == "" {
		o.Field = shard.UID
	}
	if o.HandoffTimeout <= 0 {
		o.HandoffTimeout = 2 * o.LeaseDuration
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
	name := o.Group + "-" + o.Identity
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("%w: lease name %q: %s", ErrInvalidOptions, name, strings.Join(errs, "; "))
	}
	return nil
}

// Member is this process's membership of a shard group: it holds and
// renews a Lease labelled with the group, watches the group's Leases, and
// computes its shard from the live members by consistent hashing
// (shard.Assign). It is a shard.Source: give it to informers with
// dynamicinformer.WithShardSource.
//
// Ownership. After the member set has been stable for a moment, each
// range of the hash space belongs to exactly one live member. When a
// member joins or leaves gracefully (Leave), a range that moves is kept by
// its old owner until the new owner's Lease says it holds it (every
// consumer of the new owner has listed it), so an object may be held by
// two members for a moment, never by none; HandoffTimeout bounds how long
// the old owner waits. When a member dies (stops renewing), its ranges
// are taken over once its Lease expires: within LeaseDuration plus
// RenewInterval, plus the time the others' informers take to relist
// (client-go's reflector backoff, 0.8 s doubling to 30 s under repeated
// switches, then one list).
//
// Methods are safe for concurrent use.
type Member struct {
	client coordinationv1client.LeaseInterface
	opts   Options
	name   string // the Lease's name
	log    logr.Logger
	leases toolscache.SharedIndexInformer
	wake   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}

	mu        sync.Mutex // guards the fields below
	now       shard.Shard
	changed   chan struct{}
	members   []string // live members, sorted, this one included unless leaving
	consumers map[*consumer]bool
	leaving   bool
	keepSince time.Time // when ranges that moved away were first kept
	lease     *coordinationv1.Lease
	stopped   bool
}

// Join creates (or takes over) this member's Lease, waits until the
// group's Leases are known, computes the member's first shard and starts
// renewing. It returns once Current is meaningful. Stop or Leave ends it.
func Join(ctx context.Context, client kubernetes.Interface, opts Options) (*Member, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	m := &Member{
		client:    client.CoordinationV1().Leases(opts.Namespace),
		opts:      opts,
		name:      opts.Group + "-" + opts.Identity,
		log:       opts.Logger.WithValues("group", opts.Group, "member", opts.Identity),
		wake:      make(chan struct{}, 1),
		done:      make(chan struct{}),
		changed:   make(chan struct{}),
		consumers: map[*consumer]bool{},
	}
	if err := m.renew(ctx); err != nil {
		return nil, err
	}
	sel := GroupLabel + "=" + opts.Group
	m.leases = toolscache.NewSharedIndexInformer(toolscache.ToListWatcherWithWatchListSemantics(&toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = sel
			return m.client.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = sel
			return m.client.Watch(ctx, o)
		},
	}, client), &coordinationv1.Lease{}, 0, toolscache.Indexers{})
	if _, err := m.leases.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(interface{}) { m.nudge() },
		UpdateFunc: func(_, _ interface{}) { m.nudge() },
		DeleteFunc: func(interface{}) { m.nudge() },
	}); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	informerDone := make(chan struct{})
	go func() {
		defer close(informerDone)
		m.leases.RunWithContext(runCtx)
	}()
	if !toolscache.WaitForCacheSync(ctx.Done(), m.leases.HasSynced) {
		cancel()
		<-informerDone
		return nil, fmt.Errorf("membership: the group's leases did not sync: %w", context.Cause(ctx))
	}
	m.recompute()
	go func() {
		defer close(m.done)
		m.loop(runCtx)
		<-informerDone
	}()
	return m, nil
}

// Identity is the member's name in the group.
func (m *Member) Identity() string { return m.opts.Identity }

// Current implements shard.Source.
func (m *Member) Current() (shard.Shard, <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now, m.changed
}

// Members returns the live members this member counts, sorted.
func (m *Member) Members() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.members)
}

// Register implements shard.Source.
func (m *Member) Register(name string) shard.Consumer {
	c := &consumer{m: m, name: name}
	m.mu.Lock()
	m.consumers[c] = true
	m.mu.Unlock()
	m.nudge()
	return c
}

// Stop stops renewing the Lease and watching the group, without deleting
// the Lease: to the others the member dies, and its ranges go to them when
// the Lease expires. Current no longer changes. It waits for the member's
// goroutines.
func (m *Member) Stop() {
	m.mu.Lock()
	m.stopped = true
	m.mu.Unlock()
	m.cancel()
	<-m.done
}

// Leave leaves the group gracefully: the Lease is marked leaving, the
// others take this member's ranges over, and once their Leases say they
// hold all of them (at once if no other member is live; or when
// HandoffTimeout has passed, or ctx ends) the Lease is deleted and the
// member stops. Until then its shard does not change, so
// its informers keep holding it.
func (m *Member) Leave(ctx context.Context) error {
	m.mu.Lock()
	m.leaving = true
	m.mu.Unlock()
	m.nudge()
	deadline := time.Now().Add(m.opts.HandoffTimeout)
	t := time.NewTicker(m.opts.RenewInterval / 4)
	defer t.Stop()
	for {
		m.mu.Lock()
		now := m.now
		m.mu.Unlock()
		peers := m.peers()
		if held, ok := m.handedOver(peers, liveOthers(peers, m.opts.Identity)); ok && held.Covers(now) {
			break
		}
		if !othersLive(peers, m.opts.Identity) {
			break // nobody to hand over to
		}
		if time.Now().After(deadline) {
			m.log.Info("leaving before the others said they hold this member's ranges", "timeout", m.opts.HandoffTimeout.String())
			break
		}
		select {
		case <-ctx.Done():
			m.Stop()
			return context.Cause(ctx)
		case <-t.C:
		}
	}
	m.Stop()
	err := m.client.Delete(ctx, m.name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		err = nil
	}
	return err
}

func (m *Member) nudge() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// loop renews the Lease every RenewInterval and recomputes the shard
// whenever a Lease of the group changes, a consumer reports, or the
// interval passes (a member may have expired).
func (m *Member) loop(ctx context.Context) {
	t := time.NewTicker(m.opts.RenewInterval)
	defer t.Stop()
	for {
		due := false
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			due = true
		case <-m.wake:
		}
		m.recompute()
		// Renew on the interval, or at once when what the Lease says
		// changes — not on every event of the group's Leases (each renewal
		// is one to the others).
		if !due && !m.publishChanged() {
			continue
		}
		if err := m.renew(ctx); err != nil && ctx.Err() == nil {
			m.log.Info("cannot renew the lease; retrying", "err", err.Error())
		}
	}
}

// publishChanged reports whether the Lease would say something new about
// the held ranges or leaving.
func (m *Member) publishChanged() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lease == nil {
		return true
	}
	held, ok := m.heldLocked()
	want := ""
	if ok {
		want = encodeHeld(held)
	}
	return m.lease.Annotations[HeldAnnotation] != want || (m.lease.Annotations[LeavingAnnotation] == "true") != m.leaving
}

// peer is what one Lease of the group says.
type peer struct {
	identity string
	live     bool
	leaving  bool
	held     *shard.Shard
}

func (m *Member) peers() []peer {
	var out []peer
	now := time.Now()
	for _, o := range m.leases.GetStore().List() {
		l := o.(*coordinationv1.Lease)
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			continue
		}
		p := peer{identity: *l.Spec.HolderIdentity, leaving: l.Annotations[LeavingAnnotation] == "true"}
		if l.Spec.RenewTime != nil && l.Spec.LeaseDurationSeconds != nil {
			p.live = l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second).After(now)
		}
		if s, ok := decodeHeld(l.Annotations[HeldAnnotation]); ok {
			p.held = &s
		}
		out = append(out, p)
	}
	return out
}

// handedOver is what the other live members hold of their own targets
// (ok false: nothing): a range moved from this member may be released
// once it is in there. Only a member's own target counts: its Lease may
// still advertise ranges it has just released to someone else. live is
// the member set to compute targets over (this member excluded if it is
// leaving).
func (m *Member) handedOver(peers []peer, live []string) (shard.Shard, bool) {
	var out shard.Shard
	any := false
	for _, p := range peers {
		if p.identity == m.opts.Identity || !p.live || p.leaving || p.held == nil || !slices.Contains(live, p.identity) {
			continue
		}
		target, err := shard.Assign(m.opts.Field, live, p.identity, m.opts.VirtualRanges)
		if err != nil {
			continue
		}
		part, ok := p.held.Intersect(target)
		if !ok {
			continue
		}
		if !any {
			out, any = part, true
		} else {
			out = out.Union(part)
		}
	}
	return out, any
}

// othersLive reports whether another member is live and not leaving.
func othersLive(peers []peer, me string) bool { return len(liveOthers(peers, me)) > 0 }

// liveOthers are the other members that are live and not leaving, sorted.
func liveOthers(peers []peer, me string) []string {
	var out []string
	for _, p := range peers {
		if p.identity != me && p.live && !p.leaving {
			out = append(out, p.identity)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// recompute derives the member's shard from the live members: its
// consistent-hashing target, plus the ranges it had that moved to members
// that do not hold them yet (see Member).
func (m *Member) recompute() {
	peers := m.peers()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return
	}
	live := liveOthers(peers, m.opts.Identity)
	if !m.leaving {
		live = append(live, m.opts.Identity)
		slices.Sort(live)
	}
	m.members = live
	if m.leaving {
		return // keep the shard until the others hold it (Leave)
	}
	target, err := shard.Assign(m.opts.Field, live, m.opts.Identity, m.opts.VirtualRanges)
	if err != nil {
		m.log.Error(err, "cannot compute this member's shard")
		return
	}
	next := target
	if !m.now.IsZero() {
		if moved, any := m.now.Subtract(target); any {
			held, anyHeld := m.handedOver(peers, live)
			keep, anyKeep := moved, true
			if anyHeld {
				keep, anyKeep = moved.Subtract(held)
			}
			switch {
			case !anyKeep:
				m.keepSince = time.Time{}
			case m.keepSince.IsZero():
				m.keepSince = time.Now()
				next = target.Union(keep)
			case time.Since(m.keepSince) > m.opts.HandoffTimeout:
				m.log.Info("releasing ranges their new owners have not taken", "timeout", m.opts.HandoffTimeout.String(), "ranges", keep.Selector())
				m.keepSince = time.Time{}
			default:
				next = target.Union(keep)
			}
		} else {
			m.keepSince = time.Time{}
		}
	}
	if next.Equal(m.now) {
		return
	}
	m.log.V(1).Info("shard changed", "members", len(live), "size", next.Size())
	m.now = next
	close(m.changed)
	m.changed = make(chan struct{})
}

// heldLocked is what every consumer holds (ok false: nothing, or no
// consumer). m.mu must be held.
func (m *Member) heldLocked() (shard.Shard, bool) {
	if len(m.consumers) == 0 {
		return shard.Shard{}, false
	}
	var held shard.Shard
	first := true
	for c := range m.consumers {
		if !c.ok {
			return shard.Shard{}, false
		}
		if first {
			held, first = c.held, false
			continue
		}
		var ok bool
		if held, ok = held.Intersect(c.held); !ok {
			return shard.Shard{}, false
		}
	}
	return held, true
}

// renew creates or updates the member's Lease: renew time, duration,
// held ranges, leaving.
func (m *Member) renew(ctx context.Context) error {
	err := m.renewOnce(ctx)
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		m.mu.Lock()
		m.lease = nil // read it again
		m.mu.Unlock()
		err = m.renewOnce(ctx)
	}
	return err
}

func (m *Member) renewOnce(ctx context.Context) error {
	m.mu.Lock()
	held, ok := m.heldLocked()
	leaving := m.leaving
	prev := m.lease
	m.mu.Unlock()
	now := metav1.NowMicro()
	secs := int32((m.opts.LeaseDuration + time.Second - 1) / time.Second)
	identity := m.opts.Identity
	l := &coordinationv1.Lease{}
	if prev != nil {
		l = prev.DeepCopy()
	}
	l.Name, l.Namespace = m.name, m.opts.Namespace
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	l.Labels[GroupLabel] = m.opts.Group
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[HeldAnnotation] = ""
	if ok {
		l.Annotations[HeldAnnotation] = encodeHeld(held)
	}
	delete(l.Annotations, LeavingAnnotation)
	if leaving {
		l.Annotations[LeavingAnnotation] = "true"
	}
	l.Spec.HolderIdentity = &identity
	l.Spec.LeaseDurationSeconds = &secs
	l.Spec.RenewTime = &now
	if l.Spec.AcquireTime == nil {
		l.Spec.AcquireTime = &now
	}
	var out *coordinationv1.Lease
	var err error
	if prev == nil {
		out, err = m.client.Create(ctx, l, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			var cur *coordinationv1.Lease
			if cur, err = m.client.Get(ctx, m.name, metav1.GetOptions{}); err == nil {
				l.ResourceVersion = cur.ResourceVersion
				out, err = m.client.Update(ctx, l, metav1.UpdateOptions{})
			}
		}
	} else {
		out, err = m.client.Update(ctx, l, metav1.UpdateOptions{})
	}
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.lease = out
	m.mu.Unlock()
	return nil
}

// consumer is one registered cache.
type consumer struct {
	m    *Member
	name string
	held shard.Shard // guarded by m.mu
	ok   bool        // guarded by m.mu
}

func (c *consumer) Holds(s shard.Shard, ok bool) {
	c.m.mu.Lock()
	c.held, c.ok = s, ok
	c.m.mu.Unlock()
	c.m.nudge()
}

func (c *consumer) Close() {
	c.m.mu.Lock()
	delete(c.m.consumers, c)
	c.m.mu.Unlock()
	c.m.nudge()
}
