package listwatch

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
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

// DefaultRetryForbidden is how long a merged watch runs before it ends to
// retry namespaces whose list was forbidden.
const DefaultRetryForbidden = 30 * time.Second

// MultiNamespace lists and watches several namespaces as one collection.
// Lists are concatenated (their resourceVersion is the highest of the
// namespaces'); watches are merged. Because events of different
// namespaces can arrive out of resourceVersion order, a merged watch
// cannot resume from a resourceVersion: every watch after the first one of
// a list answers "expired", so the reflector relists. Relists are
// consistent and each namespace is listed in pages (see ListWithContext).
// Watch-list streaming is declined (the reflector falls back to a list).
//
// A namespace whose list is forbidden does not fail the others: the list
// holds the allowed namespaces, ForbiddenNamespaces is told which were
// refused, and the merged watch ends after RetryForbidden so the next
// relist tries them again. If every namespace is refused, the list fails
// with the first namespace's error.
type MultiNamespace struct {
	Funcs      Funcs
	Namespaces []string
	Selectors  Selectors
	Lists      ListBuilder
	// ForbiddenNamespaces, if set, is called after every successful list
	// with the namespaces that were refused and why (empty: none).
	ForbiddenNamespaces func(map[string]error)
	// RetryForbidden overrides DefaultRetryForbidden (tests).
	RetryForbidden time.Duration

	mu       sync.Mutex // guards listRV, consumed, listed
	listRV   string
	consumed bool
	listed   []string // the namespaces the last list read
}

var _ toolscache.ListerWatcherWithContext = (*MultiNamespace)(nil)

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
	var items []runtime.Object
	var maxRV uint64
	forbidden := map[string]error{}
	var listed []string
	for _, ns := range lw.Namespaces {
		// Each namespace in pages, as the reflector would list it: a
		// paginated consistent list is answered from storage while the
		// server's watch cache cannot initialize, so the list fails with
		// that error instead of a 429 the reflector would retry forever.
		p := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return lw.Funcs.List(ctx, ns, opts)
		})
		obj, _, err := p.List(ctx, o)
		if apierrors.IsForbidden(err) {
			forbidden[ns] = err
			continue
		}
		if err != nil {
			return nil, err
		}
		rv, _ := ListRV(obj)
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
	if len(listed) == 0 && len(forbidden) > 0 {
		return nil, forbidden[lw.Namespaces[0]]
	}
	rv := strconv.FormatUint(maxRV, 10)
	lw.mu.Lock()
	lw.listRV, lw.consumed, lw.listed = rv, false, listed
	lw.mu.Unlock()
	if lw.ForbiddenNamespaces != nil {
		lw.ForbiddenNamespaces(forbidden)
	}
	return lw.Lists(rv, items)
}

// WatchWithContext implements toolscache.ListerWatcherWithContext.
func (lw *MultiNamespace) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	if reflectorseam.WatchListRequested(o) {
		return nil, ErrWatchListDeclined
	}
	lw.mu.Lock()
	fresh := !lw.consumed && o.ResourceVersion == lw.listRV
	lw.consumed = true
	namespaces := lw.listed
	lw.mu.Unlock()
	if !fresh {
		return nil, reflectorseam.Expired("a watch over several namespaces resumes by relisting")
	}
	lw.Selectors.Apply(&o)
	o.AllowWatchBookmarks = false // bookmarks of one namespace say nothing of the others
	watches := make([]watch.Interface, 0, len(namespaces))
	for _, ns := range namespaces {
		w, err := lw.Funcs.Watch(ctx, ns, o)
		if err != nil {
			for _, w := range watches {
				w.Stop()
			}
			return nil, err
		}
		watches = append(watches, w)
	}
	var retry time.Duration
	if len(namespaces) < len(lw.Namespaces) {
		retry = lw.RetryForbidden
		if retry <= 0 {
			retry = DefaultRetryForbidden
		}
	}
	return newMergedWatch(watches, retry), nil
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

// ForbiddenMessage describes refused namespaces, sorted, for a status.
func ForbiddenMessage(forbidden map[string]error) string {
	names := make([]string, 0, len(forbidden))
	for ns := range forbidden {
		names = append(names, ns)
	}
	sort.Strings(names)
	return fmt.Sprintf("namespaces %v: %v", names, forbidden[names[0]])
}

// mergedWatch forwards the events of several watches; it ends when any of
// them ends (the reflector then relists), when stopped, or after lifetime
// (if not zero).
type mergedWatch struct {
	result  chan watch.Event
	stop    chan struct{}
	once    sync.Once
	watches []watch.Interface
}

func newMergedWatch(ws []watch.Interface, lifetime time.Duration) *mergedWatch {
	m := &mergedWatch{result: make(chan watch.Event), stop: make(chan struct{}), watches: ws}
	var wg sync.WaitGroup
	for _, w := range ws {
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
					select {
					case m.result <- ev:
					case <-m.stop:
						return
					}
				case <-m.stop:
					return
				}
			}
		}()
	}
	if lifetime > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTimer(lifetime)
			defer t.Stop()
			select {
			case <-t.C:
				m.Stop()
			case <-m.stop:
			}
		}()
	}
	go func() {
		wg.Wait()
		close(m.result)
	}()
	return m
}

func (m *mergedWatch) ResultChan() <-chan watch.Event { return m.result }

func (m *mergedWatch) Stop() {
	m.once.Do(func() {
		close(m.stop)
		for _, w := range m.watches {
			w.Stop()
		}
	})
}
