package shard

import (
	"errors"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/sharding"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
)

func TestHashIsFNV1a64(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		b := make([]byte, r.IntN(40))
		for j := range b {
			b[j] = byte(r.UintN(256))
		}
		h := fnv.New64a()
		h.Write(b)
		if got, want := Hash(string(b)), h.Sum64(); got != want {
			t.Fatalf("Hash(%q) = %#x, hash/fnv says %#x", b, got, want)
		}
	}
}

// The API doc's own 2- and 4-way examples, character for character.
func TestSplitSelectorsMatchTheAPIDoc(t *testing.T) {
	want := map[int][]string{
		2: {"shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')",
			"shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')"},
		4: {"shardRange(object.metadata.uid, '0x0000000000000000', '0x4000000000000000')",
			"shardRange(object.metadata.uid, '0x4000000000000000', '0x8000000000000000')",
			"shardRange(object.metadata.uid, '0x8000000000000000', '0xc000000000000000')",
			"shardRange(object.metadata.uid, '0xc000000000000000', '0x10000000000000000')"},
	}
	for n, sels := range want {
		for i, w := range sels {
			s, err := Static(i, n)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Selector(); got != w {
				t.Errorf("Static(%d, %d).Selector() = %q, want %q", i, n, got, w)
			}
		}
	}
	one, _ := Static(0, 1)
	if got := one.Selector(); got != "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')" {
		t.Errorf("Static(0, 1) = %q", got)
	}
}

var rangeRE = regexp.MustCompile(`^shardRange\(object\.metadata\.(uid|namespace), '0x[0-9a-f]{16}', '(0x[0-9a-f]{16}|0x10000000000000000)'\)$`)

// Every split of 1..17 members: valid selectors only, the ranges tile the
// space (each member's start is the previous one's end), and random
// hashes fall in exactly one member, the same one apimachinery's
// sharding.Selector (the server's matcher) picks.
func TestSplitsTileTheSpace(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for n := 1; n <= 17; n++ {
		shards := make([]Shard, n)
		selectors := make([]sharding.Selector, n)
		var next uint64
		for i := range shards {
			s, err := Static(i, n)
			if err != nil {
				t.Fatal(err)
			}
			shards[i] = s
			for _, part := range strings.Split(s.Selector(), " || ") {
				if !rangeRE.MatchString(part) {
					t.Fatalf("Static(%d, %d): invalid selector part %q", i, n, part)
				}
			}
			rs := s.Ranges()
			if len(rs) != 1 || rs[0].Start != next {
				t.Fatalf("Static(%d, %d) ranges %v, want one starting at %#x", i, n, rs, next)
			}
			next = rs[0].Last + 1
			if i == n-1 && rs[0].Last != math.MaxUint64 {
				t.Fatalf("last member of %d ends at %#x", n, rs[0].Last)
			}
			if sz := s.Size(); math.Abs(sz-1/float64(n)) > 1e-9 {
				t.Fatalf("Static(%d, %d).Size() = %v", i, n, sz)
			}
			reqs := make([]sharding.ShardRangeRequirement, len(rs))
			for k, rg := range rs {
				reqs[k] = sharding.ShardRangeRequirement{Key: string(UID), Start: rg.startHex(), End: rg.endHex()}
			}
			selectors[i] = sharding.NewSelector(reqs...)
		}
		for k := 0; k < 500; k++ {
			obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{UID: types.UID(randomUID(r))}}
			in := 0
			for i := range shards {
				mine := shards[i].Contains(obj)
				server, err := selectors[i].Matches(obj)
				if err != nil {
					t.Fatal(err)
				}
				if mine != server {
					t.Fatalf("uid %s: Contains %v, apimachinery's matcher %v (member %d of %d)", obj.UID, mine, server, i, n)
				}
				if mine {
					in++
				}
			}
			if in != 1 {
				t.Fatalf("uid %s in %d of %d members", obj.UID, in, n)
			}
		}
	}
}

func randomUID(r *rand.Rand) string {
	const hex = "0123456789abcdef"
	b := []byte("xxxxxxxx-xxxx-4xxx-xxxx-xxxxxxxxxxxx")
	for i, c := range b {
		if c == 'x' {
			b[i] = hex[r.IntN(16)]
		}
	}
	return string(b)
}

// Real UIDs (apimachinery's generator, as the server's) spread evenly:
// three members each get a third, within 10%.
func TestUIDsSpreadEvenly(t *testing.T) {
	const total = 30000
	var counts [3]int
	shards := make([]Shard, 3)
	for i := range shards {
		shards[i], _ = Static(i, 3)
	}
	for k := 0; k < total; k++ {
		v := string(uuid.NewUUID())
		for i, s := range shards {
			if s.ContainsValue(v) {
				counts[i]++
			}
		}
	}
	for i, c := range counts {
		if c < total/3*9/10 || c > total/3*11/10 {
			t.Errorf("member %d of 3 got %d of %d UIDs", i, c, total)
		}
	}
}

func TestNewMergesAndValidates(t *testing.T) {
	s, err := New(Namespace, Range{10, 19}, Range{0, 9}, Range{15, 30}, Range{40, 50})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.Ranges(), []Range{{0, 30}, {40, 50}}; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("ranges %v, want %v", got, want)
	}
	if !strings.Contains(s.Selector(), "object.metadata.namespace") || strings.Count(s.Selector(), " || ") != 1 {
		t.Fatalf("selector %q", s.Selector())
	}
	full, err := New(UID, Range{0, math.MaxUint64 - 5}, Range{math.MaxUint64 - 5, math.MaxUint64})
	if err != nil {
		t.Fatal(err)
	}
	if rs := full.Ranges(); len(rs) != 1 || rs[0] != (Range{0, math.MaxUint64}) || full.Size() != 1 {
		t.Fatalf("full space: %v size %v", rs, full.Size())
	}
	for name, f := range map[string]func() (Shard, error){
		"no range":       func() (Shard, error) { return New(UID) },
		"bad field":      func() (Shard, error) { return New("object.metadata.name", Range{0, 1}) },
		"start > last":   func() (Shard, error) { return New(UID, Range{5, 4}) },
		"i >= n":         func() (Shard, error) { return Static(3, 3) },
		"n = 0":          func() (Shard, error) { return Static(0, 0) },
		"negative i":     func() (Shard, error) { return Static(-1, 2) },
		"parse no slash": func() (Shard, error) { return ParseStatic("1") },
		"parse junk":     func() (Shard, error) { return ParseStatic("1/3x") },
		"parse range":    func() (Shard, error) { return ParseStatic("3/3") },
	} {
		if _, err := f(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err %v, want ErrInvalid", name, err)
		}
	}
	p, err := ParseStatic("2/5")
	if want, _ := Static(2, 5); err != nil || !p.Equal(want) {
		t.Fatalf("ParseStatic(2/5) = %v, %v", p, err)
	}
}

func TestZeroShardContainsEverything(t *testing.T) {
	var s Shard
	if !s.IsZero() || s.Selector() != "" || !s.Contains(&unstructured.Unstructured{}) || !s.Contains(42) || s.Size() != 1 {
		t.Fatal("the zero Shard must mean no sharding")
	}
	one, _ := Static(0, 2)
	if one.Contains(42) {
		t.Fatal("an object without metadata is in no shard")
	}
}

func TestNamespaceField(t *testing.T) {
	s, _ := Split(Namespace, 0, 2)
	u := &unstructured.Unstructured{}
	u.SetNamespace("team-a")
	u.SetUID("whatever")
	if got, want := s.Contains(u), Hash("team-a") < 1<<63; got != want {
		t.Fatalf("Contains = %v, want %v (hash %#x)", got, want, Hash("team-a"))
	}
}
