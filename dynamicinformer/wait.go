package dynamicinformer

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	toolscache "k8s.io/client-go/tools/cache"
)

// Bounds of the poll of the cache's resourceVersion while waiting: the
// first check is immediate, then every waitPollMin, doubling to
// waitPollMax. client-go's store has no notification for its
// resourceVersion (bookmarks move it without any handler call).
const (
	waitPollMin = 5 * time.Millisecond
	waitPollMax = 100 * time.Millisecond
)

// WaitForResourceVersion returns once the informer's cache has caught up
// with rv — the resourceVersion a write to the informer's resource
// returned — so that its listers see that write (read-your-writes, the
// pattern of KEP-5647): when the informer is Synced and the cache's last
// resourceVersion (client-go's Store.LastStoreSyncResourceVersion: the
// last object, list or bookmark taken into the cache) is at least rv, in
// the API server's order (resourceversion.CompareResourceVersion). A
// Stale informer whose cache has reached rv is caught up too (the write
// is in its cache); one that has not waits, as Pending and Syncing do,
// for contact to return or ctx to end. When the informer is not
// caught up and Removed it returns an error wrapping ErrNotServed; Failed:
// wrapping its Status.Err (so errors.Is(err, ErrForbidden), ErrStoreRead,
// ... tell why); Stopped, or this handle released: ErrStopped (at once).
// When ctx ends first it returns the context's error (errors.Is
// context.DeadlineExceeded or context.Canceled). A resourceVersion that
// is not an integer the API server's ordering applies to (an aggregated
// API server's opaque versions), in rv or in the cache, and an informer
// over several namespaces, whose merged events do not arrive in
// resourceVersion order (use WaitForObject there), are ErrInvalid.
//
// It polls the cache's resourceVersion (a mutex read), immediately, then
// every 5 ms doubling to 100 ms; it starts no goroutine. A write the
// informer does not see (another namespace, a selector it does not match)
// is waited for all the same: any later event or bookmark of the resource
// moves the cache past it; an idle resource gets a bookmark about every
// minute.
//
// Which resourceVersion to pass: the one the write's answer carries. A
// delete's answer carries none for most resources (a Status), so wait for
// a delete with WaitForDeletion. A list's resourceVersion is not a
// write's: it is the whole server's revision, which every other
// resource's writes move, so the cache may reach it only at this
// resource's next event or bookmark — on an idle resource, up to about a
// minute later.
//
// If client-go's AtomicFIFO feature is turned off (KUBE_FEATURE_AtomicFIFO=
// false), client-go's store keeps no resourceVersion; the reflector's
// last-synced resourceVersion is used instead, which may run ahead of the
// cache by the events queued between the two (WaitForObject does not
// depend on it).
func (h *InformerHandle) WaitForResourceVersion(ctx context.Context, rv string) error {
	if _, err := resourceversion.CompareResourceVersion(rv, rv); err != nil {
		return fmt.Errorf("%w: resourceVersion %q is not comparable: %w", ErrInvalid, rv, err)
	}
	if h.released.Load() {
		return fmt.Errorf("waiting for resourceVersion %s of %s: this handle was released: %w", rv, h.e.currentGVR(), ErrStopped)
	}
	if len(h.e.cfg.namespaces) > 1 {
		return fmt.Errorf("%w: WaitForResourceVersion on an informer that merges %d namespaces (their resourceVersions are not ordered; use WaitForObject)", ErrInvalid, len(h.e.cfg.namespaces))
	}
	return h.e.waitFor(ctx, rv, h.e.storeReached)
}

// WaitForObject is WaitForResourceVersion for the object a write returned
// (Create, Update, Patch, or a Get after it): it also returns once the
// cache holds obj at obj's resourceVersion or later, which works for
// informers over several namespaces too. An object the informer does not
// see (a selector it does not match) is caught up with as in
// WaitForResourceVersion — except by an informer over several
// namespaces, which waits until ctx ends.
func (h *InformerHandle) WaitForObject(ctx context.Context, obj metav1.Object) error {
	rv := obj.GetResourceVersion()
	if _, err := resourceversion.CompareResourceVersion(rv, rv); err != nil {
		return fmt.Errorf("%w: resourceVersion %q is not comparable: %w", ErrInvalid, rv, err)
	}
	if h.released.Load() {
		return fmt.Errorf("waiting for resourceVersion %s of %s: this handle was released: %w", rv, h.e.currentGVR(), ErrStopped)
	}
	key, err := toolscache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return err
	}
	e := h.e
	multi := len(e.cfg.namespaces) > 1
	return e.waitFor(ctx, rv, func(want string) (bool, error) {
		if cached, ok, _ := e.informer.GetIndexer().GetByKey(key); ok {
			if m, err := meta.Accessor(cached); err == nil {
				if c, err := resourceversion.CompareResourceVersion(m.GetResourceVersion(), want); err == nil && c >= 0 {
					return true, nil
				}
			}
		}
		if multi {
			return false, nil
		}
		return e.storeReached(want)
	})
}

// WaitForDeletion is the wait for a delete: it returns once the cache no
// longer holds obj — the object the caller deleted, as it last read it
// (from the cache, or from a write's answer): when the cache has caught up
// with obj's resourceVersion (as WaitForResourceVersion) and holds no
// object under obj's namespace and name with obj's UID. An object of the
// same name created again since (another UID) does not hold the wait. A
// delete's own answer carries no resourceVersion for most resources,
// which is why the wait takes the object as last read instead. Errors are
// WaitForResourceVersion's. An informer over several namespaces cannot
// compare resourceVersions; it returns once the key is gone from the
// cache, which for an object it never held is at once.
func (h *InformerHandle) WaitForDeletion(ctx context.Context, obj metav1.Object) error {
	rv := obj.GetResourceVersion()
	if _, err := resourceversion.CompareResourceVersion(rv, rv); err != nil {
		return fmt.Errorf("%w: resourceVersion %q is not comparable: %w", ErrInvalid, rv, err)
	}
	if h.released.Load() {
		return fmt.Errorf("waiting for the deletion of %s/%s of %s: this handle was released: %w", obj.GetNamespace(), obj.GetName(), h.e.currentGVR(), ErrStopped)
	}
	key, err := toolscache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return err
	}
	e := h.e
	multi := len(e.cfg.namespaces) > 1
	uid := obj.GetUID()
	return e.waitFor(ctx, rv, func(want string) (bool, error) {
		if cached, ok, _ := e.informer.GetIndexer().GetByKey(key); ok {
			if m, err := meta.Accessor(cached); err == nil && (uid == "" || m.GetUID() == uid) {
				return false, nil
			}
		}
		if multi {
			return true, nil
		}
		return e.storeReached(want)
	})
}

// waitFor polls reached (see WaitForResourceVersion) until it says yes,
// the informer is Removed, Failed or Stopped, or ctx ends.
func (e *entry) waitFor(ctx context.Context, rv string, reached func(string) (bool, error)) error {
	var t *time.Timer
	poll := waitPollMin
	done := e.done
	for {
		e.mu.Lock()
		v := e.lc.View()
		e.mu.Unlock()
		state, stErr := State(v.State), v.Err
		if state == Synced || state == Stale {
			ok, err := reached(rv)
			if ok || err != nil {
				return err
			}
		}
		switch state {
		case Removed:
			return fmt.Errorf("waiting for resourceVersion %s of %s: %w: %w", rv, e.currentGVR(), ErrNotServed, stErr)
		case Failed:
			return fmt.Errorf("waiting for resourceVersion %s of %s: the informer failed: %w", rv, e.currentGVR(), stErr)
		case Stopped:
			return fmt.Errorf("waiting for resourceVersion %s of %s: %w", rv, e.currentGVR(), ErrStopped)
		}
		if t == nil {
			t = time.NewTimer(poll)
			defer t.Stop()
		} else {
			t.Reset(poll)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for resourceVersion %s of %s (cache at %q): %w", rv, e.currentGVR(), e.storeRV(), ctx.Err())
		case <-done:
			// The informer ended: its state says Stopped (published
			// before done is closed).
			done = nil
		case <-t.C:
			poll = min(2*poll, waitPollMax)
		}
	}
}

// storeRV is the cache's last resourceVersion: client-go's store's, or,
// without AtomicFIFO, the reflector's.
func (e *entry) storeRV() string {
	if rv := e.informer.GetStore().LastStoreSyncResourceVersion(); rv != "" {
		return rv
	}
	return e.informer.LastSyncResourceVersion()
}

// storeReached reports whether the cache's resourceVersion is at least rv.
func (e *entry) storeReached(rv string) (bool, error) {
	last := e.storeRV()
	if last == "" {
		return false, nil
	}
	c, err := resourceversion.CompareResourceVersion(last, rv)
	if err != nil {
		return false, fmt.Errorf("%w: the cache's resourceVersion %q is not comparable: %w", ErrInvalid, last, err)
	}
	return c >= 0, nil
}
