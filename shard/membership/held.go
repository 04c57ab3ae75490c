package membership

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/informerkit/informerkit/shard"
)

// encodeHeld writes a shard for HeldAnnotation: the field, then the
// ranges as inclusive hex bounds ("uid:0000000000000000-5555555555555554,...").
func encodeHeld(s shard.Shard) string {
	var b strings.Builder
	b.WriteString(fieldName(s.Field()))
	b.WriteByte(':')
	for i, r := range s.Ranges() {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%016x-%016x", r.Start, r.Last)
	}
	return b.String()
}

// decodeHeld reads encodeHeld's format (ok false for "" or anything else).
func decodeHeld(v string) (shard.Shard, bool) {
	name, list, found := strings.Cut(v, ":")
	if !found || list == "" {
		return shard.Shard{}, false
	}
	var field shard.Field
	switch name {
	case "uid":
		field = shard.UID
	case "namespace":
		field = shard.Namespace
	default:
		return shard.Shard{}, false
	}
	var ranges []shard.Range
	for _, part := range strings.Split(list, ",") {
		a, b, found := strings.Cut(part, "-")
		start, err1 := strconv.ParseUint(a, 16, 64)
		last, err2 := strconv.ParseUint(b, 16, 64)
		if !found || err1 != nil || err2 != nil {
			return shard.Shard{}, false
		}
		ranges = append(ranges, shard.Range{Start: start, Last: last})
	}
	s, err := shard.New(field, ranges...)
	return s, err == nil
}

func fieldName(f shard.Field) string {
	if f == shard.Namespace {
		return "namespace"
	}
	return "uid"
}
