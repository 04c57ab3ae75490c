package main

import (
	"sort"
	"strings"
)

// editDistance is the Levenshtein distance between a and b, counted in
// bytes (names here are ASCII), case-insensitively.
func editDistance(a, b string) int {
	a, b = strings.ToLower(a), strings.ToLower(b)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// closeEnough is the largest edit distance that still reads as a typo of
// a name of length n: one edit for short names, about a third of a long
// one.
func closeEnough(n int) int {
	return max(1, min(3, n/3))
}

// candidate is something a user may have meant: Label is what the
// suggestion prints, Names are the spellings it is matched against.
type candidate struct {
	Label string
	Names []string
}

// suggest returns the labels of the candidates closest to typed (at most
// limit, best first, ties in the candidates' order), or none when nothing
// is close enough to be a typo.
func suggest(typed string, cands []candidate, limit int) []string {
	type scored struct {
		label string
		dist  int
		order int
	}
	var hits []scored
	seen := map[string]bool{}
	for i, c := range cands {
		best := -1
		for _, n := range c.Names {
			if n == "" {
				continue
			}
			d := editDistance(typed, n)
			if d <= closeEnough(max(len(typed), len(n))) && (best < 0 || d < best) {
				best = d
			}
		}
		if best >= 0 && !seen[c.Label] {
			seen[c.Label] = true
			hits = append(hits, scored{c.Label, best, i})
		}
	}
	sort.SliceStable(hits, func(i, j int) bool {
		if hits[i].dist != hits[j].dist {
			return hits[i].dist < hits[j].dist
		}
		return hits[i].order < hits[j].order
	})
	out := make([]string, 0, min(limit, len(hits)))
	for _, h := range hits {
		if len(out) == limit {
			break
		}
		out = append(out, h.label)
	}
	return out
}

// didYouMean renders suggestions as the end of an error message:
// `; did you mean gateways (gtw)?` or "" when there are none.
func didYouMean(s []string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return "; did you mean " + s[0] + "?"
	}
	return "; did you mean one of: " + strings.Join(s, ", ") + "?"
}
