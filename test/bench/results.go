package bench

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// Sample is one measurement of one implementation.
type Sample struct {
	Row    string // scenario ("1. initial sync", ...)
	Case   string // the scenario's parameters ("N=10000", "K=10", ...)
	Metric string // what was measured ("sync", "p99", ...)
	Unit   string // "ms", "µs", "ns/op", "B/object", "MiB", "count"
	Impl   string
	Value  float64
}

// Results are every sample of a Run, in the order they were taken.
type Results struct {
	Impls   []Impl
	Samples []Sample
}

func (r *Results) add(row, cs, metric, unit, impl string, v float64) {
	r.Samples = append(r.Samples, Sample{Row: row, Case: cs, Metric: metric, Unit: unit, Impl: impl, Value: v})
}

// Median is the median of impl's samples of (row, case, metric); ok is
// false without samples.
func (r *Results) Median(row, cs, metric, impl string) (float64, bool) {
	var vs []float64
	for _, s := range r.Samples {
		if s.Row == row && s.Case == cs && s.Metric == metric && s.Impl == impl {
			vs = append(vs, s.Value)
		}
	}
	if len(vs) == 0 {
		return 0, false
	}
	sort.Float64s(vs)
	if len(vs)%2 == 1 {
		return vs[len(vs)/2], true
	}
	return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2, true
}

// Ratio is impl's median over peer's (lower is better for every metric:
// below 1 means impl costs less). ok is false if either is missing or the
// peer's median is zero.
func (r *Results) Ratio(row, cs, metric, impl, peer string) (float64, bool) {
	a, ok1 := r.Median(row, cs, metric, impl)
	b, ok2 := r.Median(row, cs, metric, peer)
	if !ok1 || !ok2 || b == 0 || math.IsNaN(a) || math.IsNaN(b) {
		return 0, false
	}
	return a / b, true
}

type column struct{ cs, metric, unit string }

// Markdown renders one table per scenario: a row per implementation, a
// column per (case, metric) with the median, and for informerkit's variants
// the ratio to each peer (×peer1 / ×peer2; below 1 is better).
func (r *Results) Markdown() string {
	var rows []string
	cols := map[string][]column{}
	for _, s := range r.Samples {
		if _, ok := cols[s.Row]; !ok {
			rows = append(rows, s.Row)
		}
		c := column{s.Case, s.Metric, s.Unit}
		found := false
		for _, e := range cols[s.Row] {
			if e == c {
				found = true
			}
		}
		if !found {
			cols[s.Row] = append(cols[s.Row], c)
		}
	}
	var peers []string
	for _, im := range r.Impls {
		if im.Peer {
			peers = append(peers, im.Name)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Medians; informerkit cells add the ratio to %s (below 1: informerkit costs less).\n", strings.Join(peers, " / "))
	for _, row := range rows {
		fmt.Fprintf(&b, "\n**%s**\n\n| implementation |", row)
		for _, c := range cols[row] {
			fmt.Fprintf(&b, " %s %s (%s) |", c.cs, c.metric, c.unit)
		}
		b.WriteString("\n|---|")
		for range cols[row] {
			b.WriteString("---|")
		}
		b.WriteString("\n")
		for _, im := range r.Impls {
			fmt.Fprintf(&b, "| %s |", im.Name)
			for _, c := range cols[row] {
				v, ok := r.Median(row, c.cs, c.metric, im.Name)
				if !ok {
					b.WriteString(" – |")
					continue
				}
				cell := formatValue(v)
				if !im.Peer {
					var rs []string
					for _, p := range peers {
						if x, ok := r.Ratio(row, c.cs, c.metric, im.Name, p); ok {
							rs = append(rs, fmt.Sprintf("%.2f×", x))
						} else {
							rs = append(rs, "–")
						}
					}
					cell += " · " + strings.Join(rs, " / ")
				}
				fmt.Fprintf(&b, " %s |", cell)
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

func formatValue(v float64) string {
	switch {
	case v == 0:
		return "0"
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}
