package shard

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/sharding"
)

// Field is the object field a shard hashes: the string the API server and
// Contains feed to FNV-1a. Its value is the field path of the server's
// shardRange function.
type Field string

const (
	// UID shards by metadata.uid. UIDs spread evenly over the hash space
	// (10k UIDs split four ways landed 2458–2566 per shard), and an
	// object's UID never changes, so an object never moves between shards.
	UID Field = "object.metadata.uid"
	// Namespace shards by metadata.namespace: all objects of a namespace
	// land in one shard. It distributes badly: the ranges test the top
	// bits of the hash, and namespace names that differ only near their end
	// often share them ("team-a" … "team-z" all fall in one of 16 equal
	// shards; 44 realistic names split 4/36/6/42 four ways). Every object
	// of a cluster-scoped resource has the namespace "" and falls in one
	// shard. Prefer UID unless handlers need a whole namespace in one
	// process.
	Namespace Field = "object.metadata.namespace"
)

// ErrInvalid is wrapped by every error of New, Split, Static and
// ParseStatic.
var ErrInvalid = errors.New("invalid shard")

// Range is a part of the 64-bit hash space: the hashes h with
// Start <= h <= Last (Last is inclusive, so the whole space is
// {0, math.MaxUint64} and no range is empty).
type Range struct {
	Start uint64
	Last  uint64
}

// Contains reports whether hash h is in r.
func (r Range) Contains(h uint64) bool { return r.Start <= h && h <= r.Last }

// Size is the number of hashes in r, as a fraction of the whole space.
func (r Range) Size() float64 {
	return (float64(r.Last-r.Start) + 1) / (math.MaxUint64 + 1.0)
}

// startHex and endHex are the bounds the server's shardRange takes: 16
// lowercase hex digits, and 2^64 (17 digits) for the end of the space.
func (r Range) startHex() string { return fmt.Sprintf("0x%016x", r.Start) }

func (r Range) endHex() string {
	if r.Last == math.MaxUint64 {
		return "0x10000000000000000"
	}
	return fmt.Sprintf("0x%016x", r.Last+1)
}

// Shard is a set of ranges of the hash space over one field: the objects
// whose field hashes into one of the ranges. The zero Shard is no sharding
// (IsZero): it contains every object and has no selector. A Shard is an
// immutable value, safe for concurrent use and to copy.
type Shard struct {
	field  Field
	ranges []Range // sorted, disjoint, not adjacent
}

// New returns the shard of the given ranges over field (UID or Namespace).
// Ranges may overlap or touch; they are merged. At least one range is
// needed: the zero Shard, not an empty one, means "everything".
func New(field Field, ranges ...Range) (Shard, error) {
	if field != UID && field != Namespace {
		return Shard{}, fmt.Errorf("%w: field %q (want %q or %q)", ErrInvalid, field, UID, Namespace)
	}
	if len(ranges) == 0 {
		return Shard{}, fmt.Errorf("%w: no range", ErrInvalid)
	}
	rs := slices.Clone(ranges)
	for _, r := range rs {
		if r.Start > r.Last {
			return Shard{}, fmt.Errorf("%w: range start %#x after last %#x", ErrInvalid, r.Start, r.Last)
		}
	}
	slices.SortFunc(rs, func(a, b Range) int {
		switch {
		case a.Start < b.Start:
			return -1
		case a.Start > b.Start:
			return 1
		}
		return 0
	})
	merged := rs[:1]
	for _, r := range rs[1:] {
		last := &merged[len(merged)-1]
		if last.Last == math.MaxUint64 || r.Start <= last.Last+1 {
			last.Last = max(last.Last, r.Last)
			continue
		}
		merged = append(merged, r)
	}
	return Shard{field: field, ranges: slices.Clip(merged)}, nil
}

// Split returns member i (0 <= i < n) of n contiguous, equal shards of the
// hash space over field: range i is [i·2⁶⁴/n, (i+1)·2⁶⁴/n). The n shards
// are disjoint and cover the whole space.
func Split(field Field, i, n int) (Shard, error) {
	if n < 1 || i < 0 || i >= n {
		return Shard{}, fmt.Errorf("%w: member %d of %d (want 0 <= i < n)", ErrInvalid, i, n)
	}
	return New(field, bounds(i, n))
}

// Static is Split over UID: this replica is member i of n.
func Static(i, n int) (Shard, error) { return Split(UID, i, n) }

// ParseStatic parses "i/n" (as the examples' --shard flag takes it) into
// Static(i, n).
func ParseStatic(s string) (Shard, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil {
		return Shard{}, fmt.Errorf("%w: %q is not i/n", ErrInvalid, s)
	}
	return Static(i, n)
}

// bounds returns range i of n contiguous, equal ranges of the hash space
// (0 <= i < n; it panics otherwise).
func bounds(i, n int) Range {
	if n < 1 || i < 0 || i >= n {
		panic(fmt.Sprintf("shard: bounds(%d, %d)", i, n))
	}
	r := Range{Start: boundary(uint64(i), uint64(n)), Last: math.MaxUint64}
	if i+1 < n {
		r.Last = boundary(uint64(i+1), uint64(n)) - 1
	}
	return r
}

// boundary is floor(k·2⁶⁴/n) for k < n.
func boundary(k, n uint64) uint64 {
	q, _ := bits.Div64(k, 0, n)
	return q
}

// IsZero reports whether s is the zero Shard (no sharding).
func (s Shard) IsZero() bool { return len(s.ranges) == 0 }

// Field is the field s hashes ("" for the zero Shard).
func (s Shard) Field() Field { return s.field }

// Ranges returns a copy of s's ranges, sorted and merged.
func (s Shard) Ranges() []Range { return slices.Clone(s.ranges) }

// Size is the part of the hash space s covers, from 0 to 1 (1 for the zero
// Shard).
func (s Shard) Size() float64 {
	if s.IsZero() {
		return 1
	}
	var f float64
	for _, r := range s.ranges {
		f += r.Size()
	}
	return f
}

// Selector is s as metav1.ListOptions.ShardSelector: one
// shardRange(field, 'start', 'end') per range, joined with " || ",
// bounds as 16 lowercase hex digits (the end of the space as
// '0x10000000000000000'), formatted by apimachinery's sharding package.
// It is "" for the zero Shard.
func (s Shard) Selector() string {
	if s.IsZero() {
		return ""
	}
	reqs := make([]sharding.ShardRangeRequirement, len(s.ranges))
	for i, r := range s.ranges {
		reqs[i] = sharding.ShardRangeRequirement{Key: string(s.field), Start: r.startHex(), End: r.endHex()}
	}
	return sharding.NewSelector(reqs...).String()
}

// String is Selector, or "all" for the zero Shard.
func (s Shard) String() string {
	if s.IsZero() {
		return "all"
	}
	return s.Selector()
}

// Equal reports whether s and o select the same objects.
func (s Shard) Equal(o Shard) bool {
	return s.field == o.field && slices.Equal(s.ranges, o.ranges)
}

// Contains reports whether obj (anything meta.Accessor reads: *unstructured.Unstructured,
// *metav1.PartialObjectMetadata, typed objects) is in s, hashing its field
// as the API server does. The zero Shard contains everything; an object
// without metadata is in no other shard.
func (s Shard) Contains(obj any) bool {
	if s.IsZero() {
		return true
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return false
	}
	v := m.GetNamespace()
	if s.field == UID {
		v = string(m.GetUID())
	}
	return s.ContainsValue(v)
}

// ContainsValue reports whether the field value v (a UID or a namespace
// name) hashes into s.
func (s Shard) ContainsValue(v string) bool {
	if s.IsZero() {
		return true
	}
	h := Hash(v)
	i, _ := slices.BinarySearchFunc(s.ranges, h, func(r Range, h uint64) int {
		switch {
		case r.Last < h:
			return -1
		case r.Start > h:
			return 1
		}
		return 0
	})
	return i < len(s.ranges) && s.ranges[i].Contains(h)
}

// Hash is the 64-bit FNV-1a hash of v's bytes (hash/fnv's New64a), the
// hash the API server's shardRange tests.
func Hash(v string) uint64 {
	const (
		offset64 = 14695981039346656037
		prime64  = 1099511628211
	)
	h := uint64(offset64)
	for i := 0; i < len(v); i++ {
		h ^= uint64(v[i])
		h *= prime64
	}
	return h
}
