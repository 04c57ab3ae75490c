package shard

import (
	"math"
	"slices"
)

// Union returns the shard of the objects in s or in o. Both must hash the
// same field (the zero Shard, everything, absorbs the other).
func (s Shard) Union(o Shard) Shard {
	if s.IsZero() || o.IsZero() {
		return Shard{}
	}
	u, _ := New(s.field, append(slices.Clone(s.ranges), o.ranges...)...)
	return u
}

// Subtract returns the ranges of s that o does not cover, and whether any
// are left (a Shard cannot be empty: with none left it returns the zero
// Shard and false). s and o must hash the same field; the zero Shard as s
// stands for the whole space.
func (s Shard) Subtract(o Shard) (Shard, bool) {
	field := s.field
	rs := s.ranges
	if s.IsZero() {
		field, rs = o.field, []Range{{0, math.MaxUint64}}
	}
	if o.IsZero() {
		return Shard{}, false
	}
	var out []Range
	for _, r := range rs {
		cur := r
		alive := true
		for _, c := range o.ranges {
			if !alive || c.Start > cur.Last {
				break
			}
			if c.Last < cur.Start {
				continue
			}
			if c.Start > cur.Start {
				out = append(out, Range{cur.Start, c.Start - 1})
			}
			if c.Last >= cur.Last {
				alive = false
				break
			}
			cur.Start = c.Last + 1
		}
		if alive {
			out = append(out, cur)
		}
	}
	if len(out) == 0 {
		return Shard{}, false
	}
	res, _ := New(field, out...)
	return res, true
}

// Covers reports whether every hash of o is in s (the zero Shard covers
// everything).
func (s Shard) Covers(o Shard) bool {
	if s.IsZero() {
		return true
	}
	_, left := o.Subtract(s)
	return !left
}
