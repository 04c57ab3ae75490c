package dynamicinformer

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/pager"
)

// namespaceWakes are the delays, after a namespace is created, at which
// the informers following the namespaces are woken: at once, and again
// while its RoleBindings may still be arriving (access.YoungFor).
var namespaceWakes = []time.Duration{0, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second}

// namespaceWatchRetry is the back-off of a namespace watch the server
// refused (403): tried again at the first list at least min after, then
// doubling to max while it is refused.
var namespaceWatchRetry = struct{ min, max time.Duration }{30 * time.Second, 10 * time.Minute}

// namespaceWatch is the server's namespace list for the factory's
// WithPermittedNamespaces informers. Until a list succeeds, or when the
// user may not watch namespaces, each call lists them; after a list
// succeeds it starts one informer on namespaces, and while that runs the
// names come from its cache — no request — and a namespace created,
// deleted or marked for deletion wakes the subscribers (see
// namespaceWakes), so they check at once instead of at their period. A
// namespace marked for deletion counts as gone. A watch the server
// refuses (403) ends that informer, logged once; a list after the
// back-off (namespaceWatchRetry) starts it again, so a user granted the
// watch later gets it. Safe for concurrent use.
type namespaceWatch struct {
	client dynamic.Interface
	// start runs fn on a goroutine of the factory's run (false: the
	// factory is not running; nothing was started).
	start  func(fn func(ctx context.Context)) bool
	logger logr.Logger

	mu       sync.Mutex // guards everything below
	informer toolscache.SharedIndexInformer
	started  bool   // an informer was started and was not refused (it may have ended since)
	run      uint64 // counts the informers started; the current one's
	watching bool   // the informer runs and has synced: its cache is current (informer set)
	// retry is the back-off after the watch was refused (zero: it was
	// not, or it opened since); retryAt when to try again; told: the
	// refusal was logged.
	retry   time.Duration
	retryAt time.Time
	told    bool
	subs    map[int]func()
	nextSub int
	wakes   []time.Time // when to wake the subscribers, sorted
	kick    chan struct{}
}

func newNamespaceWatch(client dynamic.Interface, start func(fn func(ctx context.Context)) bool, logger logr.Logger) *namespaceWatch {
	return &namespaceWatch{client: client, start: start, logger: logger, subs: map[int]func(){}, kick: make(chan struct{}, 1)}
}

// subscribe calls wake (which must not block) when the namespaces
// changed. Call remove to stop.
func (w *namespaceWatch) subscribe(wake func()) (remove func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	id := w.nextSub
	w.nextSub++
	w.subs[id] = wake
	return func() {
		w.mu.Lock()
		delete(w.subs, id)
		w.mu.Unlock()
	}
}

// names are the server's namespaces, sorted (none marked for deletion).
func (w *namespaceWatch) names(ctx context.Context) ([]string, error) {
	w.mu.Lock()
	inf, watching := w.informer, w.watching
	w.mu.Unlock()
	if watching {
		var names []string
		for _, obj := range inf.GetStore().List() {
			if m, err := meta.Accessor(obj); err == nil && m.GetDeletionTimestamp() == nil {
				names = append(names, m.GetName())
			}
		}
		slices.Sort(names)
		return names, nil
	}
	var names []string
	err := pager.New(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return w.client.Resource(namespacesGVR).List(ctx, o)
	}).EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
		if m, err := meta.Accessor(obj); err == nil && m.GetDeletionTimestamp() == nil {
			names = append(names, m.GetName())
		}
		return nil
	})
	slices.Sort(names)
	if err == nil {
		w.startWatch()
	}
	return names, err
}

// startWatch starts the namespace informer, unless one runs or its
// watch was refused less than the back-off ago.
func (w *namespaceWatch) startWatch() {
	w.mu.Lock()
	if w.started || time.Now().Before(w.retryAt) {
		w.mu.Unlock()
		return
	}
	w.started = true
	w.run++
	run := w.run
	w.mu.Unlock()
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return w.client.Resource(namespacesGVR).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			wi, err := w.client.Resource(namespacesGVR).Watch(ctx, o)
			if err == nil {
				w.watchOpened()
			}
			return wi, err
		},
	}
	inf := toolscache.NewSharedIndexInformer(lw, &unstructured.Unstructured{}, 0, toolscache.Indexers{})
	ok := w.start(func(ctx context.Context) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *toolscache.Reflector, err error) {
			if apierrors.IsForbidden(err) {
				// The user may not watch namespaces: list them at each
				// check, and try the watch again after the back-off.
				// (Other errors: the reflector retries; the cache keeps
				// the last names meanwhile.)
				w.refused(run, err)
				cancel()
			}
		})
		_, _ = inf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
			AddFunc: func(obj interface{}, initial bool) {
				if !initial && !deleting(obj) {
					w.changed(true)
				}
			},
			UpdateFunc: func(old, obj interface{}) {
				if deleting(old) != deleting(obj) {
					w.changed(false)
				}
			},
			DeleteFunc: func(obj interface{}) {
				if !deleting(obj) {
					w.changed(false)
				}
			},
		})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			inf.RunWithContext(ctx)
		}()
		if toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			w.mu.Lock()
			if w.run == run && ctx.Err() == nil {
				w.informer, w.watching = inf, true
			}
			w.mu.Unlock()
		}
		w.wakeLoop(ctx)
		wg.Wait()
		w.mu.Lock()
		if w.run == run {
			w.informer, w.watching = nil, false
		}
		w.mu.Unlock()
	})
	if !ok {
		w.mu.Lock()
		if w.run == run {
			w.started = false
		}
		w.mu.Unlock()
	}
}

// refused: the server refused run's watch (err, a 403). The names are
// listed at each check meanwhile; the first list after the back-off
// starts a new informer. The first refusal is logged, and the watch
// opening again after one.
func (w *namespaceWatch) refused(run uint64, err error) {
	w.mu.Lock()
	if w.run != run || !w.started {
		w.mu.Unlock()
		return
	}
	w.started, w.watching, w.informer = false, false, nil
	w.retry = min(max(2*w.retry, namespaceWatchRetry.min), namespaceWatchRetry.max)
	w.retryAt = time.Now().Add(w.retry)
	log := !w.told
	w.told = true
	retry := w.retry
	w.mu.Unlock()
	if log {
		w.logger.Info("the namespace watch was refused; namespaces are listed at each access check, and the watch tried again with back-off", "err", err.Error(), "retryIn", retry.String())
	}
}

// watchOpened: a namespace watch was opened; the back-off starts over.
func (w *namespaceWatch) watchOpened() {
	w.mu.Lock()
	was := w.retry > 0
	w.retry, w.retryAt = 0, time.Time{}
	log := was && w.told
	w.told = w.told && !was
	w.mu.Unlock()
	if log {
		w.logger.Info("the namespace watch is open again")
	}
}

// deleting reports whether obj (a namespace, or a tombstone of one) is
// marked for deletion.
func deleting(obj interface{}) bool {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, err := meta.Accessor(obj)
	return err == nil && m.GetDeletionTimestamp() != nil
}

// changed schedules wakes: namespaceWakes for a namespace created (its
// bindings may follow it), one at once otherwise.
func (w *namespaceWatch) changed(created bool) {
	now := time.Now()
	w.mu.Lock()
	delays := namespaceWakes[:1]
	if created {
		delays = namespaceWakes
	}
	for _, d := range delays {
		w.wakes = append(w.wakes, now.Add(d))
	}
	slices.SortFunc(w.wakes, func(a, b time.Time) int { return a.Compare(b) })
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// wakeLoop wakes the subscribers when a wake is due, until ctx ends.
// Wakes due together (within 100 ms) are one.
func (w *namespaceWatch) wakeLoop(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		w.mu.Lock()
		var due []func()
		now := time.Now()
		i := 0
		for i < len(w.wakes) && !w.wakes[i].After(now.Add(100*time.Millisecond)) {
			i++
		}
		if i > 0 {
			w.wakes = w.wakes[i:]
			for _, s := range w.subs {
				due = append(due, s)
			}
		}
		wait := time.Hour
		if len(w.wakes) > 0 {
			wait = time.Until(w.wakes[0])
		}
		w.mu.Unlock()
		for _, wake := range due {
			wake()
		}
		t.Reset(max(wait, 0))
		select {
		case <-ctx.Done():
			return
		case <-w.kick:
			if !t.Stop() {
				select {
				case <-t.C:
				default:
				}
			}
		case <-t.C:
		}
	}
}
