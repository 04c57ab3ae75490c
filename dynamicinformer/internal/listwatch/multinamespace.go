package listwatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/pager"

	"github.com/informerkit/informerkit/dynamicinformer/internal/reflectorseam"
)

// ErrWatchListDeclined is reflectorseam.ErrWatchListDeclined: the answer
// to a reflector that asks a merged watch to stream a list.
var ErrWatchListDeclined = reflectorseam.ErrWatchListDeclined

// DefaultRecheck is how often a merged watch checks its namespaces again
// (Resolve) and retries the namespaces whose list was refused.
const DefaultRecheck = 30 * time.Second

// NamespaceSet is what Resolve answers: the namespaces to list and watch,
// and those not to, with why.
type NamespaceSet struct {
	// All: list and watch all namespaces at once (one cluster-wide
	// stream); Names is ignored.
	All    bool
	Names  []string
	Denied map[string]error
}

// equal reports whether s and o list the same namespaces.
func (s NamespaceSet) equal(o NamespaceSet) bool {
	return s.All == o.All && slices.Equal(s.Names, o.Names)
}

// Listed is what a list read: the namespaces listed (All: all at once),
// those not listed and why (denied by Resolve, or refused by the
// server), and when they are checked again (zero: not).
type Listed struct {
	All    bool
	Names  []string
	Denied map[string]error
	Next   time.Time
}

// MultiNamespace lists and watches several namespaces as one collection.
// Lists are concatenated (their resourceVersion is the highest of the
// namespaces'); watches are merged, each namespace's watch starting at
// its own list's resourceVersion. Events of different namespaces arrive
// out of resourceVersion order, so one resourceVersion cannot say where
// each namespace was: MultiNamespace remembers each namespace's
// resourceVersion as its events are handed on. A watch asked from the
// resourceVersion of the last event handed on (the reflector's, after a
// merged watch it read to the end: a connection cut, the server's watch
// timeout) resumes each namespace from its own, with no list, as a
// reflector over one namespace resumes. Any other resourceVersion, a
// watch after a merged watch ended for a change of namespaces (below), a
// watch while a refused one waits for its re-check, or after a watch
// request failed or went unanswered for WatchOpenBound (the merged watch
// has no liveness bound: this bound, and a relist after any failure, keep
// a server that answers only its lists honestly from leaving it Synced
// and stale), answers "expired", so the reflector relists. Relists are
// consistent and each namespace is listed in pages (see ListWithContext).
// Watch-list streaming is declined (the reflector falls back to a list).
//
// The namespaces are Namespaces, or, with Resolve, what it answers at
// each list. A namespace whose list is forbidden, or that Resolve denies,
// does not fail the others: the list holds the listed namespaces and
// Hook is told which were not listed and why. The merged watch ends when
// one of its watches ends (the reflector resumes it, above); and, so that
// the reflector relists, when a namespace
// the server refused answers a probe (a list of one object, sent every
// Recheck while the watch runs); and, with Resolve, when Resolve, asked
// again every Recheck while some namespace is denied (or always, with
// Follow, and at once when Wake fires, through Quick), answers other
// namespaces than the list's; the list that follows uses that answer
// instead of asking again. With Switch, a change found by a check and a
// 403 on a running watch call Switch instead of ending the merged watch,
// so the cache is switched inside the open stream, without the
// reflector's relist. A refused namespace that is still refused
// costs that one probe per period and no relist: each relist restarts the
// reflector, whose one back-off (shared by every namespace of the
// informer, reset only every 2 min) would grow with each retry towards
// its 30 s cap and delay the listed namespaces' recovery after any watch
// end by as much. If no namespace is listed, the list fails with the
// first namespace's error, unless AllowNone (an empty list).
//
// A 403 met while running re-checks at once instead of failing: when the
// server refuses a namespace's watch (as it opens, or as an error event
// of a running one), the merged watch ends as "expired", so the reflector
// relists and, with Resolve, asks it again, with no failure in between.
// If Resolve still permits that namespace (or there is no Resolve), the
// relist leaves it out as refused and probes it as above: at most one
// refused watch per namespace per Recheck, no 403 loop. A namespace whose
// list is refused although Resolve permitted it has Resolve asked once
// more, at once, so its denial carries Resolve's reason (the missing
// verbs) when Resolve now denies it.
type MultiNamespace struct {
	Funcs      Funcs
	Namespaces []string
	Selectors  Selectors
	Lists      ListBuilder
	// Resolve, if set, answers the namespaces of each list (its error
	// fails the list).
	Resolve func(ctx context.Context) (NamespaceSet, error)
	// Follow: Resolve is asked again every Recheck even when nothing is
	// denied (the namespaces themselves may change).
	Follow bool
	// AllowNone: a list with no namespace to read is empty, not an error.
	AllowNone bool
	// Hook, if set, is called after every successful list.
	Hook func(Listed)
	// Next, if set, is told when the namespaces are checked again: at
	// each list and after each re-check (zero: not).
	Next func(time.Time)
	// Recheck overrides DefaultRecheck.
	Recheck time.Duration
	// Wake, if set, asks for a check now, between the periodic ones (the
	// server's namespaces changed): a running merged watch asks Quick
	// (Resolve if nil) at once and ends if the answer changed.
	Wake <-chan struct{}
	// Quick answers a check asked by Wake (a cheaper Resolve).
	Quick func(ctx context.Context) (NamespaceSet, error)
	// PerNamespace, if set, stretches the re-check period to at least
	// this times the namespaces Resolve answered for (listed and denied),
	// bounding the reviews a re-check costs per second.
	PerNamespace time.Duration

	// Switch, if set, makes a change take effect inside the open stream:
	// when a running merged watch's check finds other namespaces, or the
	// server refuses one of its watches with a 403 error event, it calls
	// Switch (gate.ListerWatcher.Switch: the stream lists again through
	// this MultiNamespace, which uses the answer found instead of asking
	// again, and hands the reflector the difference as adds and deletes)
	// and goes on delivering until that stops it, instead of ending, which
	// makes the reflector relist after its back-off (up to 30 s). If
	// nothing stops it within switchGrace it ends as without Switch. It
	// must not block.
	Switch func()

	// State. Everything below is guarded by mu, except hookGen (hookMu).
	// A list (ListWithContext, on the reflector's goroutine or on the
	// stream that switches) sets listRV, nsRV, listGen, current (nil),
	// relist (false), listed, resolved, refused, next, period and last
	// from what it read, and takes (clears) pending and watchRefused. A
	// watch call takes current's position into listRV and nsRV and clears
	// current; if it resumes, it copies listed, resolved, refused, period
	// and that position for the merged watch it opens, which becomes
	// current; that watch's goroutines set relist and pending
	// (follow, when the answer changed), add to watchRefused (a 403), and
	// replace resolved.Denied and last (the denials changed, the
	// namespaces listed did not).
	mu sync.Mutex
	// listRV is where a watch resumes: the last list's resourceVersion
	// (the highest of its namespaces'), or the resourceVersion of the last
	// event a merged watch handed on, taken from it when the next watch is
	// asked for.
	listRV string
	// nsRV is each listed namespace's own resourceVersion, from the list
	// or its last event handed on: its watch starts there, not at listRV
	// (the highest), or the events of a namespace listed earlier that came
	// before a later one's list would be lost.
	nsRV map[string]string
	// listGen counts the lists: a watch whose open failed marks relist
	// only if no list came meanwhile.
	listGen uint64
	// current is the merged watch opened last, until the next list or
	// watch call (nil: none). It records its own position (the
	// resourceVersion of the last event it handed on, and each
	// namespace's) as it hands events on, under the lock it holds to hand
	// them on; the next watch call takes that position into listRV and
	// nsRV, and a watch from listRV resumes each namespace from its own.
	current *mergedWatch
	// relist: the last merged watch ended for a change of namespaces
	// (follow found one, or Switch was called): the next watch answers
	// "expired" until a list.
	relist   bool
	listed   NamespaceSet // the namespaces the last list read
	resolved NamespaceSet // what Resolve answered for it (Denied: by Resolve)
	refused  []string     // the namespaces of it the server refused, sorted
	next     time.Time    // when its namespaces are checked again (zero: not)
	period   time.Duration
	// last is what Hook was last told (by a list, or by a change of the
	// denials alone).
	last Listed
	// pending is the answer a merged watch found changed, for the list
	// that follows (nil: that list asks Resolve).
	pending *NamespaceSet
	// watchRefused: namespaces whose watch the server refused since the
	// last list, and why; the next list re-checks them (Resolve) and
	// does not list them again before the next Recheck.
	watchRefused map[string]error

	// hookMu serializes the calls of Hook; hookGen counts the lists, so a
	// running watch's report of changed denials does not follow a newer
	// list's.
	hookMu  sync.Mutex
	hookGen uint64
}

// WatchOpenBound is how long a namespace's watch request may go
// unanswered before the merged watch gives up opening and the reflector
// relists. A merged watch has no liveness bound of its own (it asks for
// no bookmarks), and a server whose watch cache cannot initialize answers
// watches 429, which client-go retries inside the request for minutes;
// its consistent, paginated list fails at once with the real error.
var WatchOpenBound = 10 * time.Second

// switchGrace is how long a merged watch that called Switch waits to be
// stopped before it ends by itself.
var switchGrace = 30 * time.Second

var _ toolscache.ListerWatcherWithContext = (*MultiNamespace)(nil)

func (lw *MultiNamespace) recheck() time.Duration {
	if lw.Recheck > 0 {
		return lw.Recheck
	}
	return DefaultRecheck
}

// nextCheck is the first multiple of period (since the zero time) after
// now: informers that share answers re-check together, and a change made
// at any moment is checked within one period (the check after a list may
// come soon after it: its reviews are then the list's, shared). It used to
// skip a multiple less than half a period away, which let a grant made
// just before that multiple wait up to 1.5 periods.
func nextCheck(now time.Time, period time.Duration) time.Time {
	return now.Truncate(period).Add(period)
}

// ListWithContext implements toolscache.ListerWatcherWithContext.
func (lw *MultiNamespace) ListWithContext(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
	lw.Selectors.Apply(&o)
	o.Limit, o.Continue = 0, ""
	if o.ResourceVersion != "" && o.ResourceVersion != "0" {
		// A relist after a watch ended asks for "not older than" the last
		// version, which the server answers from its watch cache — with
		// 429 "storage is (re)initializing" for as long as that cache
		// cannot initialize. Ask for a consistent list instead.
		o.ResourceVersion, o.ResourceVersionMatch = "", ""
	}
	set := NamespaceSet{Names: lw.Namespaces}
	lw.mu.Lock()
	pending := lw.pending
	lw.pending = nil
	lw.mu.Unlock()
	switch {
	case lw.Resolve == nil:
	case pending != nil:
		set = *pending // the answer that ended the watch, just asked
	default:
		var err error
		if set, err = lw.Resolve(ctx); err != nil {
			return nil, err
		}
	}
	namespaces := set.Names
	if set.All {
		namespaces = []string{metav1.NamespaceAll}
	}
	lw.mu.Lock()
	watchRefused := lw.watchRefused
	lw.watchRefused = nil
	lw.mu.Unlock()
	var items []runtime.Object
	var maxRV uint64
	denied := map[string]error{}
	for ns, err := range set.Denied {
		denied[ns] = err
	}
	var refused []string
	var listed []string
	var listRefused []string // refused by the server although Resolve permitted them
	nsRV := map[string]string{}
	for _, ns := range namespaces {
		if err, ok := watchRefused[ns]; ok {
			// Its watch was refused since the last list and Resolve (or
			// the namespaces given) still has it: wait for the next
			// check instead of a list and watch the server refuses.
			denied[ns] = err
			refused = append(refused, ns)
			continue
		}
		// Each namespace in pages, as the reflector would list it: a
		// paginated consistent list is answered from storage while the
		// server's watch cache cannot initialize, so the list fails with
		// that error instead of a 429 the reflector would retry forever.
		p := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return lw.Funcs.List(ctx, ns, opts)
		})
		obj, _, err := p.List(ctx, o)
		if apierrors.IsForbidden(err) {
			denied[ns] = err
			refused = append(refused, ns)
			listRefused = append(listRefused, ns)
			continue
		}
		if err != nil {
			return nil, err
		}
		rv, _ := ListRV(obj)
		nsRV[ns] = rv
		if n, err := strconv.ParseUint(rv, 10, 64); err == nil && n > maxRV {
			maxRV = n
		}
		its, err := meta.ExtractList(obj)
		if err != nil {
			return nil, err
		}
		items = append(items, its...)
		listed = append(listed, ns)
	}
	if len(listRefused) > 0 && lw.Resolve != nil {
		// Resolve permitted them a moment ago: ask it once more, now, so
		// a revocation is named with its reason (the server's 403 is kept
		// if Resolve still permits them).
		if again, err := lw.Resolve(ctx); err == nil {
			for _, ns := range listRefused {
				if why, ok := again.Denied[ns]; ok {
					denied[ns] = why
				}
			}
		} else if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	if len(listed) == 0 && !lw.AllowNone {
		return nil, firstDenied(denied, append(append([]string(nil), lw.Namespaces...), namespaces...))
	}
	rv := strconv.FormatUint(maxRV, 10)
	period := max(lw.recheck(), time.Duration(len(set.Names)+len(set.Denied))*lw.PerNamespace)
	var next time.Time
	if len(refused) > 0 || (lw.Resolve != nil && (lw.Follow || len(set.Denied) > 0)) {
		next = nextCheck(time.Now(), period)
	}
	sort.Strings(refused)
	told := Listed{All: set.All && len(listed) > 0, Names: listed, Denied: denied, Next: next}
	lw.hookMu.Lock()
	lw.hookGen++
	lw.mu.Lock()
	lw.listRV, lw.nsRV, lw.relist, lw.refused, lw.next, lw.period = rv, nsRV, false, refused, next, period
	lw.listGen++
	lw.current = nil // a merged watch still open no longer says where to resume
	lw.listed = NamespaceSet{All: told.All, Names: listed}
	lw.resolved, lw.last = set, told
	lw.mu.Unlock()
	if lw.Hook != nil {
		lw.Hook(told)
	}
	lw.hookMu.Unlock()
	if lw.Next != nil {
		lw.Next(next)
	}
	return lw.Lists(rv, items)
}

// firstDenied is the error of the first of order that was denied (any, if
// none of them), or an error saying there was no namespace.
func firstDenied(denied map[string]error, order []string) error {
	for _, ns := range order {
		if err, ok := denied[ns]; ok {
			return err
		}
	}
	if len(denied) > 0 {
		return denied[firstKey(denied)]
	}
	return fmt.Errorf("no namespace to list")
}

func firstKey(m map[string]error) string {
	best, first := "", true
	for k := range m {
		if first || k < best {
			best, first = k, false
		}
	}
	return best
}

// WatchWithContext implements toolscache.ListerWatcherWithContext.
func (lw *MultiNamespace) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	if reflectorseam.WatchListRequested(o) {
		return nil, ErrWatchListDeclined
	}
	lw.mu.Lock()
	if lw.current != nil {
		// The merged watch before this call is done with: where it ended
		// is where watches resume, whatever it hands on from now on.
		lw.listRV, lw.nsRV = lw.current.position()
		lw.current = nil
	}
	fromRV, nsRV := lw.listRV, lw.nsRV
	resumes := o.ResourceVersion == fromRV && !lw.relist && lw.pending == nil && len(lw.watchRefused) == 0
	listGen := lw.listGen
	listed, resolved, refused, period := lw.listed, lw.resolved, lw.refused, lw.period
	lw.mu.Unlock()
	lw.hookMu.Lock()
	gen := lw.hookGen
	lw.hookMu.Unlock()
	if !resumes {
		return nil, reflectorseam.Expired("a watch over several namespaces resumes only from the last event it handed on; relisting")
	}
	lw.Selectors.Apply(&o)
	o.AllowWatchBookmarks = false // bookmarks of one namespace say nothing of the others
	namespaces := listed.Names
	watches := make([]watch.Interface, 0, len(namespaces))
	cancels := make([]context.CancelFunc, 0, len(namespaces))
	for _, ns := range namespaces {
		wo := o
		if rv := nsRV[ns]; rv != "" && rv != "0" {
			wo.ResourceVersion = rv // from its own list, or its last event
		}
		w, cancel, err := openWithin(ctx, WatchOpenBound, func(ctx context.Context) (watch.Interface, error) {
			return lw.Funcs.Watch(ctx, ns, wo)
		})
		if err != nil {
			for i, w := range watches {
				w.Stop()
				cancels[i]()
			}
			if apierrors.IsForbidden(err) {
				lw.refusedWatch(ns, err)
				return nil, reflectorseam.Expired(fmt.Sprintf("the watch of namespace %q was refused; relisting checks access again", ns))
			}
			// Whatever went wrong, the next watch does not resume: the
			// reflector's list says what the server says.
			lw.mu.Lock()
			if lw.listGen == listGen {
				lw.relist = true
			}
			lw.mu.Unlock()
			if errors.Is(err, errOpenUnanswered) {
				return nil, reflectorseam.Expired(fmt.Sprintf("the watch of namespace %q was not answered within %v; relisting", ns, WatchOpenBound))
			}
			return nil, err
		}
		watches, cancels = append(watches, w), append(cancels, cancel)
	}
	m := &mergedWatch{period: period, next: lw.Next, names: namespaces, refused: lw.refusedWatch, wake: lw.Wake, switchTo: lw.Switch, cancels: cancels}
	m.rv, m.rvs = fromRV, make([]string, len(namespaces))
	for i, ns := range namespaces {
		m.rvs[i] = nsRV[ns]
	}
	m.mustRelist = func() {
		lw.mu.Lock()
		if lw.current == m {
			lw.relist = true
		}
		lw.mu.Unlock()
	}
	lw.mu.Lock()
	if lw.listGen == listGen {
		lw.current = m
	}
	lw.mu.Unlock()
	follow := lw.Resolve != nil && (lw.Follow || len(resolved.Denied) > 0)
	if follow || len(refused) > 0 {
		m.changed = func(ctx context.Context, quick bool) bool {
			if follow {
				resolve := lw.Resolve
				if quick && lw.Quick != nil {
					resolve = lw.Quick
				}
				set, err := resolve(ctx)
				if err == nil && !set.equal(resolved) {
					lw.mu.Lock()
					lw.pending = &set
					lw.mu.Unlock()
					return true
				}
				if err == nil && !sameDenials(set.Denied, resolved.Denied) {
					// The same namespaces, other denials (a namespace
					// denied was deleted, or one was created denied):
					// nothing held changes, so nothing is listed, but
					// Hook is told.
					lw.denialsChanged(gen, resolved.Denied, set.Denied)
					resolved.Denied = set.Denied
				}
			}
			// A wake is about the server's namespaces; the refused ones
			// are probed at the periodic checks only.
			return !quick && lw.readable(ctx, refused, o)
		}
	}
	m.start(ctx, watches)
	return m, nil
}

// errOpenUnanswered: a watch request not answered within its bound.
var errOpenUnanswered = errors.New("watch request not answered in time")

// openWithin opens a watch with open, cancelling the request if it is not
// answered within bound (errOpenUnanswered; ctx's error if ctx ended). The
// watch it returns runs under a context of its own: cancel it once the
// watch is stopped.
func openWithin(ctx context.Context, bound time.Duration, open func(context.Context) (watch.Interface, error)) (watch.Interface, context.CancelFunc, error) {
	wctx, cancel := context.WithCancel(ctx)
	// Whoever claims first decides: the timer (cancel the request) or the
	// request's return (keep what it answered).
	var claimed atomic.Bool
	timedOut := make(chan struct{})
	timer := time.AfterFunc(bound, func() {
		if claimed.CompareAndSwap(false, true) {
			close(timedOut)
			cancel()
		}
	})
	w, err := open(wctx)
	if !claimed.CompareAndSwap(false, true) {
		<-timedOut
		if w != nil {
			w.Stop()
		}
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		return nil, nil, errOpenUnanswered
	}
	timer.Stop()
	if err != nil {
		cancel()
		return nil, nil, err
	}
	return w, cancel, nil
}

// sameDenials reports whether a and b deny the same namespaces for the
// same reasons.
func sameDenials(a, b map[string]error) bool {
	if len(a) != len(b) {
		return false
	}
	for ns, err := range a {
		o, ok := b[ns]
		if !ok || (err == nil) != (o == nil) || (err != nil && err.Error() != o.Error()) {
			return false
		}
	}
	return true
}

// denialsChanged tells Hook the last list's outcome with Resolve's
// denials now (the server's refusals kept), unless a list came after the
// watch of generation gen opened.
func (lw *MultiNamespace) denialsChanged(gen uint64, before, now map[string]error) {
	lw.hookMu.Lock()
	defer lw.hookMu.Unlock()
	if lw.hookGen != gen {
		return
	}
	lw.mu.Lock()
	told := lw.last
	denied := make(map[string]error, len(now)+len(told.Denied))
	for ns, err := range told.Denied {
		if _, byResolve := before[ns]; !byResolve {
			denied[ns] = err // refused by the server
		}
	}
	for ns, err := range now {
		denied[ns] = err
	}
	told.Denied = denied
	lw.last = told
	lw.resolved.Denied = now
	lw.mu.Unlock()
	if lw.Hook != nil {
		lw.Hook(told)
	}
}

// readable reports whether the server now answers a list (of one object,
// with the watch's selectors) in one of the refused namespaces. A 403 or
// any other error is not readable: a broken connection ends the merged
// watch by itself.
func (lw *MultiNamespace) readable(ctx context.Context, refused []string, o metav1.ListOptions) bool {
	for _, ns := range refused {
		probe := metav1.ListOptions{LabelSelector: o.LabelSelector, FieldSelector: o.FieldSelector, Limit: 1}
		if _, err := lw.Funcs.List(ctx, ns, probe); err == nil {
			return true
		}
	}
	return false
}

// refusedWatch records that the server refused ns's watch (err, a 403):
// the next list re-checks it.
func (lw *MultiNamespace) refusedWatch(ns string, err error) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.watchRefused == nil {
		lw.watchRefused = map[string]error{}
	}
	lw.watchRefused[ns] = err
}

// List implements the deprecated toolscache.Lister.
func (lw *MultiNamespace) List(o metav1.ListOptions) (runtime.Object, error) {
	return lw.ListWithContext(context.Background(), o)
}

// Watch implements the deprecated toolscache.Watcher.
func (lw *MultiNamespace) Watch(o metav1.ListOptions) (watch.Interface, error) {
	return lw.WatchWithContext(context.Background(), o)
}

// IsWatchListSemanticsUnSupported: merged watches never stream lists.
func (lw *MultiNamespace) IsWatchListSemanticsUnSupported() bool { return true }

// ForbiddenError is the error of an informer over several namespaces
// some of which are forbidden: "namespaces [a b]: " and the first
// namespace's error, which it wraps (errors.Is, apierrors.IsForbidden).
// The reason is said once: wrapping this message's text around the same
// error again printed it twice.
func ForbiddenError(forbidden map[string]error) error {
	names := make([]string, 0, len(forbidden))
	for ns := range forbidden {
		names = append(names, ns)
	}
	sort.Strings(names)
	return fmt.Errorf("namespaces %v: %w", names, forbidden[names[0]])
}

// mergedWatch forwards the events of several watches; it ends when any of
// them ends (the reflector then relists), when stopped, or when changed
// (if set), asked at multiples of period, reports true (asked at once,
// quick, when wake fires). A watch's error event that is a 403 is not
// forwarded:
// refused (if set) is told the namespace (names[i] is watch i's) and the
// merged watch ends with an "expired" event, so the reflector relists
// without failing.
type mergedWatch struct {
	period  time.Duration
	changed func(ctx context.Context, quick bool) bool
	next    func(time.Time)
	wake    <-chan struct{}
	names   []string
	refused func(ns string, err error)
	// switchTo, if set, is called instead of ending the watch when
	// changed reports true or a watch is refused (see MultiNamespace.Switch).
	switchTo func()
	// mustRelist, if set, is called before the watch ends or switches
	// because changed reported true.
	mustRelist func()

	// cancels end the watches' request contexts, after Stop.
	cancels []context.CancelFunc

	// sendMu is held from offering an event to recording its position, so
	// the position recorded last is that of the reader's last event.
	sendMu sync.Mutex
	// rv is the resourceVersion of the last event the reader took (not
	// error events; at first, the one the watch resumed from), and rvs[i]
	// that of the last of names[i]'s (at first, where its watch opened).
	// Guarded by sendMu.
	rv      string
	rvs     []string
	result  chan watch.Event
	stop    chan struct{}
	once    sync.Once
	watches []watch.Interface
}

func (m *mergedWatch) start(ctx context.Context, ws []watch.Interface) {
	m.result, m.stop, m.watches = make(chan watch.Event), make(chan struct{}), ws
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer m.Stop()
			for {
				select {
				case ev, ok := <-w.ResultChan():
					if !ok {
						return
					}
					if err := forbiddenEvent(ev); err != nil && m.refused != nil && i < len(m.names) {
						m.refused(m.names[i], err)
						if m.switchTo != nil {
							w.Stop()
							m.switched(ctx)
							return
						}
						ev = reflectorseam.ExpiredEvent(fmt.Sprintf("the watch of namespace %q was refused; relisting checks access again", m.names[i]))
						select {
						case m.result <- ev:
						case <-m.stop:
						}
						return
					}
					if !m.send(ev, i) {
						return
					}
				case <-m.stop:
					return
				}
			}
		}()
	}
	if m.changed != nil {
		ctx, cancel := context.WithCancel(ctx)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cancel()
			m.follow(ctx)
		}()
	}
	go func() {
		wg.Wait()
		close(m.result)
	}()
}

// send offers ev to the reader until it takes it (true) or the watch
// stops, then records its resourceVersion as the watch's position. The
// lock keeps the records in the order the reader took the events.
func (m *mergedWatch) send(ev watch.Event, i int) bool {
	m.sendMu.Lock()
	defer m.sendMu.Unlock()
	select {
	case m.result <- ev:
	case <-m.stop:
		return false
	}
	if ev.Type == watch.Error || i >= len(m.rvs) {
		return true
	}
	if a, err := meta.Accessor(ev.Object); err == nil && a.GetResourceVersion() != "" {
		m.rv, m.rvs[i] = a.GetResourceVersion(), a.GetResourceVersion()
	}
	return true
}

// position is the resourceVersion of the last event the reader took and
// each namespace's, a watch from which resumes where this one ended.
func (m *mergedWatch) position() (string, map[string]string) {
	m.sendMu.Lock()
	defer m.sendMu.Unlock()
	nsRV := make(map[string]string, len(m.names))
	for i, ns := range m.names {
		nsRV[ns] = m.rvs[i]
	}
	return m.rv, nsRV
}

// follow asks changed at multiples of period, and at once when wake
// fires, until it reports true (the
// watch is stopped), the watch stops or ctx ends.
func (m *mergedWatch) follow(ctx context.Context) {
	for {
		next := nextCheck(time.Now(), m.period)
		t := time.NewTimer(time.Until(next))
		quick := false
		select {
		case <-t.C:
		case <-m.wake:
			t.Stop()
			quick = true
		case <-m.stop:
			t.Stop()
			return
		case <-ctx.Done():
			t.Stop()
			return
		}
		done := make(chan struct{})
		rctx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-m.stop:
				cancel()
			case <-done:
			}
		}()
		changed := m.changed(rctx, quick)
		close(done)
		cancel()
		if changed && m.mustRelist != nil {
			m.mustRelist()
		}
		if changed && m.switchTo != nil {
			m.switched(ctx)
			return
		}
		if changed {
			m.Stop()
			return
		}
		if m.next != nil && rctx.Err() == nil && !quick {
			m.next(nextCheck(time.Now(), m.period))
		}
	}
}

// switched calls switchTo and waits for the stream to stop the watch
// (within switchGrace, else it stops it itself) or ctx to end.
func (m *mergedWatch) switched(ctx context.Context) {
	m.switchTo()
	t := time.NewTimer(switchGrace)
	defer t.Stop()
	select {
	case <-m.stop:
	case <-ctx.Done():
	case <-t.C:
		m.Stop()
	}
}

// forbiddenEvent is the 403 an error event carries (nil if it is not one).
func forbiddenEvent(ev watch.Event) error {
	if ev.Type != watch.Error {
		return nil
	}
	status, ok := ev.Object.(*metav1.Status)
	if !ok {
		return nil
	}
	if err := apierrors.FromObject(status); apierrors.IsForbidden(err) {
		return err
	}
	return nil
}

func (m *mergedWatch) ResultChan() <-chan watch.Event { return m.result }

func (m *mergedWatch) Stop() {
	m.once.Do(func() {
		close(m.stop)
		for _, w := range m.watches {
			w.Stop()
		}
		for _, cancel := range m.cancels {
			cancel()
		}
	})
}
