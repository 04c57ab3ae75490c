// Package shard splits the objects of a resource between replicas by a
// hash of one of their fields, the way the Kubernetes API server's
// ShardedListAndWatch feature (KEP-5866, alpha in 1.36;
// metav1.ListOptions.ShardSelector) does.
//
// A Shard is a set of ranges of the 64-bit FNV-1a hash space over
// metadata.uid (UID, the default) or metadata.namespace (Namespace, with a
// poor distribution: see its documentation). Static(i, n) is replica i of
// n equal, contiguous shards; New takes any ranges (several ranges are
// sent joined with "||").
//
// Selector formats the shard as the server wants it — only valid
// selectors: bounds of 16 lowercase hex digits, the end of the space as
// '0x10000000000000000' — and Contains tests an object with the same hash
// the server uses (hash/fnv New64a of the field's bytes), so a client can
// filter what a server without the feature gate sends (such a server
// ignores the selector and returns everything).
//
// dynamicinformer.WithShard gives an informer a Shard: every list page
// and watch carries the selector, and every object is checked with
// Contains before it reaches the cache.
//
// Assign divides the space between named members by consistent hashing
// (several ranges per member; a member joining or leaving moves about 1/N
// of the space), and a Source is a shard that changes while the program
// runs: package shard/membership implements one on coordination.k8s.io
// Leases, and dynamicinformer.WithShardSource follows it. Union,
// Subtract, Intersect and Covers compute with shards of one field.
//
// The package starts no goroutines; a Shard is an immutable value.
package shard
