package gate

import (
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/informerkit/informerkit/dynamicinformer/internal/reflectorseam"
)

// KeySet is what the ListerWatcher has handed to its reflector: the key
// (namespace/name) and UID of every object of the last complete list,
// updated by every added, modified and deleted event the reader took.
// Unlike the informer's indexer it does not lag the reflector's queue: an
// add still queued is in it. A shard switch diffs the new shard's list
// against it, so that every object the reflector was given and the new
// list lacks is deleted.
//
// The zero value is ready to use and not Valid. Safe for concurrent use.
type KeySet struct {
	mu    sync.Mutex // guards keys, next, valid
	keys  map[string]types.UID
	next  map[string]types.UID // a list being received (pages, or a watch-list stream's initial events)
	valid bool                 // keys is a complete list plus the events since
}

// Valid reports whether the set describes the reflector's store: a list
// was received completely, and every event since was recorded.
func (k *KeySet) Valid() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.valid
}

// Len is the number of keys.
func (k *KeySet) Len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.keys)
}

// beginList starts receiving a list: its items go aside until endList
// (or the bookmark that ends a watch-list stream's initial events). The
// set is not Valid meanwhile: the reflector is receiving a list that
// replaces its store, so no switch may happen inside that stream.
func (k *KeySet) beginList() {
	k.mu.Lock()
	k.next, k.valid = map[string]types.UID{}, false
	k.mu.Unlock()
}

// listPage records one page of the list begun.
func (k *KeySet) listPage(list runtime.Object) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.next == nil {
		k.next = map[string]types.UID{}
	}
	_ = meta.EachListItem(list, func(it runtime.Object) error {
		k.putLocked(k.next, it)
		return nil
	})
}

// endList makes the list received the set (the reflector replaces its
// store with it).
func (k *KeySet) endList() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.next == nil {
		k.next = map[string]types.UID{}
	}
	k.keys, k.next, k.valid = k.next, nil, true
}

// observe reads what the set needs of ev (before it is offered to the
// reader: see listwatch.Stream.Observe) and returns the func that records
// it once the reader took it (nil for an event it does not record).
func (k *KeySet) observe(ev watch.Event) (taken func()) {
	switch ev.Type {
	case watch.Added, watch.Modified:
		key, uid, ok := keyUID(ev.Object)
		if !ok {
			return nil
		}
		return func() {
			k.mu.Lock()
			defer k.mu.Unlock()
			set := k.receiving()
			if set == nil {
				set = map[string]types.UID{}
				k.keys = set
			}
			set[key] = uid
		}
	case watch.Deleted:
		key, err := toolscache.DeletionHandlingMetaNamespaceKeyFunc(ev.Object)
		if err != nil {
			return nil
		}
		return func() {
			k.mu.Lock()
			defer k.mu.Unlock()
			delete(k.receiving(), key)
		}
	case watch.Bookmark:
		if !reflectorseam.EndsInitialEvents(ev.Object) {
			return nil
		}
		return func() {
			k.mu.Lock()
			defer k.mu.Unlock()
			if k.next != nil {
				k.keys, k.next, k.valid = k.next, nil, true
			}
		}
	}
	return nil
}

// receiving is the set events go to: a watch-list stream's initial
// events while they arrive, else the keys. k.mu must be held.
func (k *KeySet) receiving() map[string]types.UID {
	if k.next != nil {
		return k.next
	}
	return k.keys
}

func (k *KeySet) putLocked(set map[string]types.UID, obj interface{}) {
	if key, uid, ok := keyUID(obj); ok {
		set[key] = uid
	}
}

// keyUID is obj's key as MetaNamespaceKeyFunc gives it ("namespace/name",
// or "name" for a cluster-scoped object) and its UID.
func keyUID(obj interface{}) (string, types.UID, bool) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return "", "", false
	}
	return toolscache.MetaObjectToName(m).String(), m.GetUID(), true
}

// missing returns the keys (and UIDs) of the set that listed lacks.
func (k *KeySet) missing(listed map[string]struct{}) map[string]types.UID {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := map[string]types.UID{}
	for key, uid := range k.keys {
		if _, ok := listed[key]; !ok {
			out[key] = uid
		}
	}
	return out
}
