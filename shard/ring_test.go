package shard

import (
	"fmt"
	"slices"
	"testing"
)

func assignAll(t *testing.T, members []string) map[string]Shard {
	t.Helper()
	out := map[string]Shard{}
	for _, m := range members {
		s, err := Assign(UID, members, m, 0)
		if err != nil {
			t.Fatal(err)
		}
		out[m] = s
	}
	return out
}

// The members' shards are disjoint and cover the space, for 1 to 8
// members, whatever order the member list is in.
func TestAssignPartitions(t *testing.T) {
	var members []string
	for n := 1; n <= 8; n++ {
		members = append(members, fmt.Sprintf("replica-%d", n))
		shards := assignAll(t, members)
		var union Shard
		total := 0.0
		for i, m := range members {
			s := shards[m]
			total += s.Size()
			if i == 0 {
				union = s
				continue
			}
			union = union.Union(s)
			for _, o := range members[:i] {
				if rest, _ := s.Subtract(shards[o]); !rest.Equal(s) {
					t.Fatalf("%d members: %s and %s overlap", n, m, o)
				}
			}
		}
		if total < 1-1e-9 || total > 1+1e-9 || union.Size() < 1-1e-9 {
			t.Fatalf("%d members cover %.6f of the space (union %.6f)", n, total, union.Size())
		}
		rev := slices.Clone(members)
		slices.Reverse(rev)
		again := assignAll(t, rev)
		for _, m := range members {
			if !again[m].Equal(shards[m]) {
				t.Fatalf("member order changed %s's shard", m)
			}
		}
	}
	if _, err := Assign(UID, []string{"a"}, "b", 0); err == nil {
		t.Fatal("a non-member got a shard")
	}
}

// A fourth member joining takes about a quarter of the space, only from
// the others' shards (nothing moves between the three), and leaving gives
// exactly that back.
func TestAssignJoinMovesAboutOneNth(t *testing.T) {
	three := []string{"a", "b", "c"}
	four := append(slices.Clone(three), "d")
	before, after := assignAll(t, three), assignAll(t, four)
	moved := 0.0
	for _, m := range three {
		if !before[m].Covers(after[m]) {
			t.Fatalf("%s gained a range when d joined", m)
		}
		if lost, ok := before[m].Subtract(after[m]); ok {
			if !after["d"].Covers(lost) {
				t.Fatalf("%s's lost ranges did not all go to d", m)
			}
			moved += lost.Size()
		}
	}
	if moved < 0.15 || moved > 0.35 {
		t.Fatalf("a fourth member moved %.3f of the space, want about 0.25", moved)
	}
	t.Logf("join moved %.3f of the space; shares %.3f %.3f %.3f %.3f; ranges of d: %d",
		moved, after["a"].Size(), after["b"].Size(), after["c"].Size(), after["d"].Size(), len(after["d"].Ranges()))
}
