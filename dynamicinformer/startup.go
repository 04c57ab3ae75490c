package dynamicinformer

// defaultMaxConcurrentInitialLists is the default of
// WithMaxConcurrentInitialLists (the cap gitops-engine uses).
const defaultMaxConcurrentInitialLists = 50

// WithMaxConcurrentInitialLists bounds how many of the factory's informers
// send their first list at the same time, so that starting many informers
// (a subscription over 200 CRDs) does not send the API server as many
// lists at once. An informer waiting for a slot stays Pending. The first
// list holds its slot until it returns; a first sync that streams
// (watch-list) holds it until its initial events have been delivered or
// the stream ends. An informer over several namespaces takes one slot for
// all of them. A first list that fails gives its slot back before the
// retry's backoff. Later lists (relists, the refill of a resource that
// returns) are not bounded. Default 50; zero
// or negative: no bound.
func WithMaxConcurrentInitialLists(n int) Option {
	return func(c *factoryConfig) { c.maxInitial = n }
}
