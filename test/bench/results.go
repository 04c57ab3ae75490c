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
	return median(vs), true
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

// RunRatios are impl's samples of (row, case, metric) each over the peer's
// sample taken in the same run (the k-th over the k-th: a run measures
// every implementation once, one after the other), sorted. On a machine
// whose speed drifts over minutes, these ratios vary less than the ratio
// of medians, whose medians may come from different runs. ok is false
// unless both have the same number (≥1) of samples, all of the peer's
// non-zero.
func (r *Results) RunRatios(row, cs, metric, impl, peer string) ([]float64, bool) {
	var a, b []float64
	for _, s := range r.Samples {
		if s.Row != row || s.Case != cs || s.Metric != metric {
			continue
		}
		switch s.Impl {
		case impl:
			a = append(a, s.Value)
		case peer:
			b = append(b, s.Value)
		}
	}
	if len(a) == 0 || len(a) != len(b) {
		return nil, false
	}
	rs := make([]float64, len(a))
	for i := range a {
		if b[i] == 0 {
			return nil, false
		}
		rs[i] = a[i] / b[i]
	}
	sort.Float64s(rs)
	return rs, true
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
							rs = append(rs, formatRatio(x))
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
	r.runRatios(&b, peers, cols[RowSync])
	return b.String()
}

// runRatios renders, for the initial sync's columns, each informerkit
// variant's run-by-run ratios to each peer: median and range.
func (r *Results) runRatios(b *strings.Builder, peers []string, cols []column) {
	var lines []string
	for _, im := range r.Impls {
		if im.Peer {
			continue
		}
		var cells []string
		for _, c := range cols {
			var rs []string
			for _, p := range peers {
				x, ok := r.RunRatios(RowSync, c.cs, c.metric, im.Name, p)
				if !ok || len(x) < 2 {
					rs = append(rs, "–")
					continue
				}
				rs = append(rs, fmt.Sprintf("%.2f× (%.2f–%.2f)", median(x), x[0], x[len(x)-1]))
			}
			cells = append(cells, strings.Join(rs, " / "))
		}
		lines = append(lines, fmt.Sprintf("| %s | %s |", im.Name, strings.Join(cells, " | ")))
	}
	if len(lines) == 0 || len(cols) == 0 {
		return
	}
	fmt.Fprintf(b, "\n**%s, run by run**: each run's sample over the same run's %s sample; median (min–max)\n\n| implementation |", RowSync, strings.Join(peers, " / "))
	for _, c := range cols {
		fmt.Fprintf(b, " %s %s |", c.cs, c.metric)
	}
	b.WriteString("\n|---|")
	for range cols {
		b.WriteString("---|")
	}
	b.WriteString("\n" + strings.Join(lines, "\n") + "\n")
}

// median of sorted values.
func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// formatRatio keeps two significant digits below 0.1 (a restart's
// bytes are a few thousandths of a cold start's).
func formatRatio(x float64) string {
	if x != 0 && math.Abs(x) < 0.1 {
		return fmt.Sprintf("%.2g×", x)
	}
	return fmt.Sprintf("%.2f×", x)
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
