package shard

import (
	"math"
	"math/rand/v2"
	"testing"
)

// Set operations agree with membership of random hashes.
func TestSetOperations(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	randomShard := func() Shard {
		n := 1 + r.IntN(4)
		rs := make([]Range, n)
		for i := range rs {
			a, b := r.Uint64(), r.Uint64()
			if a > b {
				a, b = b, a
			}
			rs[i] = Range{a, b}
		}
		s, err := New(UID, rs...)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	in := func(s Shard, h uint64) bool {
		for _, rg := range s.ranges {
			if rg.Contains(h) {
				return true
			}
		}
		return s.IsZero()
	}
	for k := 0; k < 300; k++ {
		a, b := randomShard(), randomShard()
		u := a.Union(b)
		d, left := a.Subtract(b)
		probes := []uint64{0, math.MaxUint64}
		for _, s := range []Shard{a, b} {
			for _, rg := range s.ranges {
				probes = append(probes, rg.Start, rg.Last, rg.Start-1, rg.Last+1)
			}
		}
		for i := 0; i < 200; i++ {
			probes = append(probes, r.Uint64())
		}
		for _, h := range probes {
			if in(u, h) != (in(a, h) || in(b, h)) {
				t.Fatalf("union wrong at %#x: %v ∪ %v = %v", h, a.ranges, b.ranges, u.ranges)
			}
			wantD := in(a, h) && !in(b, h)
			if (left && in(d, h)) != wantD {
				t.Fatalf("subtract wrong at %#x: %v − %v = %v (%v)", h, a.ranges, b.ranges, d.ranges, left)
			}
		}
		if !u.Covers(a) || !u.Covers(b) {
			t.Fatal("a union must cover its parts")
		}
	}
	var all Shard
	half, _ := Static(0, 2)
	other, _ := Static(1, 2)
	if rest, ok := all.Subtract(half); !ok || !rest.Equal(other) {
		t.Fatalf("everything − first half = %v", rest)
	}
	if _, ok := half.Subtract(all); ok {
		t.Fatal("nothing is left of a shard minus everything")
	}
	if !all.Covers(half) || half.Covers(all) {
		t.Fatal("Covers and the zero Shard")
	}
}

func TestIntersect(t *testing.T) {
	a, _ := New(UID, Range{0, 99}, Range{200, 299})
	b, _ := New(UID, Range{50, 249})
	got, ok := a.Intersect(b)
	want, _ := New(UID, Range{50, 99}, Range{200, 249})
	if !ok || !got.Equal(want) {
		t.Fatalf("intersect %v, %v", got.Ranges(), ok)
	}
	c, _ := New(UID, Range{100, 199})
	if _, ok := a.Intersect(c); ok {
		t.Fatal("disjoint shards intersect")
	}
	var all Shard
	if got, ok := all.Intersect(a); !ok || !got.Equal(a) {
		t.Fatal("everything ∩ a = a")
	}
}
