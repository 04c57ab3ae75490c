package shard

// Source is a shard that changes while the program runs, such as a
// replica's part of a group whose members come and go (package
// shard/membership). An informer given a Source (dynamicinformer's
// WithShardSource) follows it: on a change it relists with the new shard,
// so handlers get a delete for each object that left and an add for each
// object that entered, and it tells the source, through its Consumer,
// which shard its cache holds.
//
// Implementations must be safe for concurrent use.
type Source interface {
	// Current returns the shard now (never the zero Shard) and a channel
	// that is closed when it changes.
	Current() (Shard, <-chan struct{})
	// Register adds a consumer: a cache that holds the source's shard. A
	// source that hands ranges over between replicas counts a range as
	// held only once every registered consumer holds it. name identifies
	// the consumer in logs.
	Register(name string) Consumer
}

// Consumer is one cache following a Source.
type Consumer interface {
	// Holds says the consumer's cache holds every object of s (ok true),
	// or that it holds nothing for sure (ok false: it has not listed yet).
	// A consumer that switches from shard a to shard b says it holds the
	// part of a within b at once, and b once a list of b is in.
	Holds(s Shard, ok bool)
	// Close says the consumer has stopped; it no longer counts.
	Close()
}

// Intersect returns the objects in both s and o, and whether there are
// any (the zero Shard is everything). Both must hash the same field.
func (s Shard) Intersect(o Shard) (Shard, bool) {
	if s.IsZero() {
		return o, true
	}
	if o.IsZero() {
		return s, true
	}
	outside, any := s.Subtract(o)
	if !any {
		return s, true
	}
	return s.Subtract(outside)
}
