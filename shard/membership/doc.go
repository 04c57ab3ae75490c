// Package membership lets replicas of a program divide a resource's
// objects between them, agreeing on who holds what through
// coordination.k8s.io Leases, the way Kubernetes components agree on
// leaders.
//
// Each replica Joins a group: it holds and renews a Lease named
// "<group>-<identity>" in a namespace it is given, labelled
// GroupLabel=<group>, and watches the group's Leases. Its shard is its
// part of the hash space by consistent hashing over the live members
// (shard.Assign: several ranges per member, sent joined with "||"), so a
// member joining or leaving moves about 1/N of the objects, not half.
// A Member is a shard.Source: informers given it with
// dynamicinformer.WithShardSource follow its shard, relisting when it
// changes (objects that left reach handlers as deletes, objects that
// entered as adds), and tell it what they hold; the Lease publishes that
// (HeldAnnotation).
//
// Ownership: see Member. In short, after the member set settles each
// object is held by exactly one live member; on a join or a graceful
// Leave the new owner takes a range before the old one lets it go (an
// object may be held twice for a moment, never by nobody); a member that
// dies (stops renewing) has its ranges taken over once its Lease expires,
// within LeaseDuration plus RenewInterval plus the informers' relist
// (client-go's reflector backoff, then one list).
//
// The replica needs RBAC to get, list, watch, create, update and delete
// Leases in the namespace. A Member starts two goroutines (the Lease
// informer and its renew loop); Stop or Leave ends them.
package membership
