package controller

import (
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/util/workqueue"
)

// item is what the work queue holds: a 4-byte resource id (resource.id,
// big-endian) followed by the object's cache key ("namespace/name", or
// "name"). The queue hashes its items several times per reconcile; a
// string costs what client-go's string keys cost, where a struct (Key, or
// a pointer and a string) costs about twice as much per map operation.
// Items of one object are equal, so the queue deduplicates them as it
// would Keys.
type item string

const idLen = 4

// itemPrefix is the id part of the items of resource id.
func itemPrefix(id uint32) string {
	return string([]byte{byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id)})
}

// itemOf returns obj's item in resource r; ok is false for something
// without a name.
func itemOf(r *resource, obj any) (item, bool) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return "", false
	}
	name := m.GetName()
	if name == "" {
		return "", false
	}
	if ns := m.GetNamespace(); ns != "" {
		return item(r.prefix + ns + "/" + name), true
	}
	return item(r.prefix + name), true
}

func (it item) resourceID() uint32 {
	s := string(it)
	return uint32(s[0])<<24 | uint32(s[1])<<16 | uint32(s[2])<<8 | uint32(s[3])
}

// objectKey is the object's key in its informer's cache.
func (it item) objectKey() string { return string(it[idLen:]) }

// key is the item's public form; r is its resource.
func (it item) key(r *resource) Key {
	ns, name, found := strings.Cut(it.objectKey(), "/")
	if !found {
		ns, name = "", it.objectKey()
	}
	return Key{GVR: r.gvr, Namespace: ns, Name: name}
}

// keyLimiter gives a rate limiter of Keys (Options.RateLimiter) the
// queue's items.
type keyLimiter struct {
	l         workqueue.TypedRateLimiter[Key]
	resources *resourceTable
}

func (k keyLimiter) toKey(it item) Key { return it.key(k.resources.byID(it.resourceID())) }

func (k keyLimiter) When(it item) time.Duration { return k.l.When(k.toKey(it)) }
func (k keyLimiter) Forget(it item)             { k.l.Forget(k.toKey(it)) }
func (k keyLimiter) NumRequeues(it item) int    { return k.l.NumRequeues(k.toKey(it)) }
