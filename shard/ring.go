package shard

import (
	"fmt"
	"math"
	"slices"
	"strconv"
)

// DefaultVirtualRanges is Assign's number of points per member when it is
// given 0.
const DefaultVirtualRanges = 32

// Assign divides the hash space over field between members by consistent
// hashing and returns member me's shard: each member places vnodes points
// on the ring (a mixed FNV-1a hash of "name#k"), and each point owns the
// hashes from it up to the next point. A member joining or leaving moves
// only the ranges it gains or loses (about 1/N of the space), never ranges
// between other members. Every member computing Assign over the same
// member set gets disjoint shards that cover the space.
//
// members may be in any order and hold duplicates; me must be one of them.
func Assign(field Field, members []string, me string, vnodes int) (Shard, error) {
	if vnodes <= 0 {
		vnodes = DefaultVirtualRanges
	}
	if !slices.Contains(members, me) {
		return Shard{}, fmt.Errorf("%w: %q is not among the members", ErrInvalid, me)
	}
	type point struct {
		at     uint64
		member string
	}
	names := slices.Clone(members)
	slices.Sort(names)
	names = slices.Compact(names)
	points := make([]point, 0, len(names)*vnodes)
	for _, m := range names {
		for k := 0; k < vnodes; k++ {
			points = append(points, point{mix(Hash(m + "#" + strconv.Itoa(k))), m})
		}
	}
	slices.SortFunc(points, func(a, b point) int {
		switch {
		case a.at < b.at:
			return -1
		case a.at > b.at:
			return 1
		case a.member < b.member:
			return -1
		case a.member > b.member:
			return 1
		}
		return 0
	})
	var mine []Range
	for i, p := range points {
		if i+1 < len(points) && points[i+1].at == p.at {
			continue // two points at one place: the later one owns it
		}
		if p.member != me {
			continue
		}
		if i+1 < len(points) {
			mine = append(mine, Range{p.at, points[i+1].at - 1})
			continue
		}
		// The last point owns the end of the space and its start.
		mine = append(mine, Range{p.at, math.MaxUint64})
		if points[0].at > 0 {
			mine = append(mine, Range{0, points[0].at - 1})
		}
	}
	if len(mine) == 0 {
		return Shard{}, fmt.Errorf("%w: %q owns no range", ErrInvalid, me)
	}
	return New(field, mine...)
}

// mix spreads FNV-1a's bits (MurmurHash3's 64-bit finalizer): names that
// differ only at their end share FNV-1a's top bits, which decide where a
// point lands.
func mix(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}
