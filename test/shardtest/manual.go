package shardtest

import (
	"sync"

	"github.com/informerkit/informerkit/shard"
)

// ManualSource is a shard.Source whose shard a test sets (Set). Its
// consumers' reports are ignored. Safe for concurrent use.
type ManualSource struct {
	mu      sync.Mutex // guards now, changed
	now     shard.Shard
	changed chan struct{}
}

// NewManualSource returns a source at s.
func NewManualSource(s shard.Shard) *ManualSource {
	return &ManualSource{now: s, changed: make(chan struct{})}
}

// Current implements shard.Source.
func (s *ManualSource) Current() (shard.Shard, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now, s.changed
}

// Set moves the source to n.
func (s *ManualSource) Set(n shard.Shard) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = n
	close(s.changed)
	s.changed = make(chan struct{})
}

// Register implements shard.Source.
func (s *ManualSource) Register(string) shard.Consumer { return nopConsumer{} }

type nopConsumer struct{}

func (nopConsumer) Holds(shard.Shard, bool) {}
func (nopConsumer) Close()                  {}
