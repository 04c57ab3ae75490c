// Package soaktest is informerkit's soak harness: many informers, one of
// every mode the library offers, run against a real kube-apiserver and
// etcd in the test process while writers change objects at a steady rate
// and faults from a seeded schedule hit the system, several at once.
//
// At every quiet point (writers stopped, faults healed) the check runs,
// polling for a bounded time until it holds: every informer's cache holds
// exactly the keys and resourceVersions a fresh LIST as admin returns for
// its scope (namespaces, label selector, shard); replaying the events its
// handler received gives the same keys and resourceVersions; the members
// of the shard group together hold every object exactly once; and every
// informer's Status is Synced (with the forbidden namespace named in Err
// for the informer over several namespaces). How long that took after the
// last fault healed is recorded per fault kind. Informers kept on disk
// (Options.CacheDir) are among them: the disk-restart fault stops their
// factory as a process exit would and starts a new one on the same
// directory, whose new handlers must replay to the server's state too.
//
// The schedule comes from math/rand/v2 seeded with a printed seed: the
// same seed gives the same faults, offsets, durations and writer choices
// (the interleaving with the server is still the machine's). A divergence
// names the seed, the iteration, the faults before it, the informer and
// the keys missing, extra or at a stale resourceVersion.
//
// The default (short) run injects every fault kind once, three
// overlapping kinds per iteration, and fits the repository's test command
// (TestShortModeCoversEveryKind holds it to every kind); a divergence is
// recorded and the run goes on; INFORMERKIT_SOAK=<duration> runs iterations
// for that long and writes a report (see docs/RELIABILITY.md, "Soak").
package soaktest
