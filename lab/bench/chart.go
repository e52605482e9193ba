package bench

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"slices"
	"strings"
)

// backendColors are the bar colours of the backends in the failover chart.
var backendColors = map[string]string{"raft": "#4e79a7", "zk": "#f28e2b", "etcd": "#59a14f"}

// Chart geometry, in SVG user units.
const (
	chartLeft        = 70  // left margin, room for the axis labels
	chartRight       = 20  // right margin
	chartTop         = 56  // title and legend
	chartPanelHeight = 250 // one panel per partition count
	chartPlotHeight  = 170 // the bars' area inside a panel
	chartBarWidth    = 22
	chartGroupGap    = 34
)

// failoverChart draws report as an SVG: one panel per partition count, in
// each a group of bars per phase and case, one bar per backend whose height
// is the p50 with a whisker up to the p99.
func failoverChart(report *failoverReport) []byte {
	var backends, cases []string
	var partitionCounts []int
	for _, r := range report.Rows {
		if !slices.Contains(backends, r.Backend) {
			backends = append(backends, r.Backend)
		}
		if !slices.Contains(cases, r.Case) {
			cases = append(cases, r.Case)
		}
		if !slices.Contains(partitionCounts, r.Partitions) {
			partitionCounts = append(partitionCounts, r.Partitions)
		}
	}
	type group struct{ phase, kase string }
	var groups []group
	for _, ph := range failoverPhases {
		for _, c := range cases {
			groups = append(groups, group{ph, c})
		}
	}
	groupWidth := max(1, len(backends))*chartBarWidth + chartGroupGap
	width := max(760, chartLeft+chartRight+max(1, len(groups))*groupWidth)
	// A narrow chart is widened to fit its title; its groups spread out.
	groupWidth = (width - chartLeft - chartRight) / max(1, len(groups))
	height := chartTop + max(1, len(partitionCounts))*chartPanelHeight + 30

	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="15" font-weight="bold">%s</text>`+"\n", chartLeft,
		esc("tripod failover by coordination backend: p50 (bar) and p99 (whisker), ms"))
	x := chartLeft
	for _, be := range backends {
		fmt.Fprintf(&b, `<rect x="%d" y="32" width="12" height="12" fill="%s"/><text x="%d" y="43">%s</text>`+"\n", x, color(be), x+16, esc(be))
		x += 80
	}
	fmt.Fprintf(&b, `<text x="%d" y="43" fill="#555">%s</text>`+"\n", x+10,
		esc(fmt.Sprintf("session timeout %.0f ms, acks=all, RF 3, %g records/s per partition", report.SessionTimeoutMs, report.RatePerPartition)))
	for i, line := range []string{
		"detection: SIGKILL → a live broker shows the controller's change (leader, leader epoch or ISR of a partition)",
		"election: SIGKILL → first ack from the new leader; unavailability: last ack before the kill → first ack after",
	} {
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11" fill="#555">%s</text>`+"\n", chartLeft, height-22+i*14, esc(line))
	}

	for pi, pc := range partitionCounts {
		top := chartTop + pi*chartPanelHeight
		base := top + 24 + chartPlotHeight
		var ceiling float64
		for _, r := range report.Rows {
			if r.Partitions != pc {
				continue
			}
			for _, ph := range failoverPhases {
				ceiling = math.Max(ceiling, r.phase(ph).P99)
			}
		}
		step, ceiling := niceScale(ceiling)
		y := func(v float64) float64 { return float64(base) - v/ceiling*chartPlotHeight }
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", chartLeft, top+14, esc(plural(pc, "partition")))
		for v := 0.0; v <= ceiling+step/2; v += step {
			fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`, chartLeft, y(v), width-chartRight, y(v))
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" fill="#555">%s</text>`+"\n", chartLeft-6, y(v)+4, esc(fmt.Sprintf("%.0f", v)))
		}
		fmt.Fprintf(&b, `<text transform="translate(16,%d) rotate(-90)" text-anchor="middle" fill="#555">ms</text>`+"\n", base-chartPlotHeight/2)
		for gi, g := range groups {
			gx := chartLeft + gi*groupWidth + (groupWidth-len(backends)*chartBarWidth)/2
			for bi, be := range backends {
				row, ok := findRow(report.Rows, be, g.kase, pc)
				if !ok {
					continue
				}
				st := row.phase(g.phase)
				bx := gx + bi*chartBarWidth
				if st.N == 0 {
					// No sample: in case controller, the controller led no partition.
					fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" font-size="9" fill="#777">n/a</text>`+"\n", bx+chartBarWidth/2, base-4)
					continue
				}
				tip := fmt.Sprintf("%s, %s, %s, %d partitions: p50 %.0f ms, p99 %.0f ms, max %.0f ms (%d samples)",
					be, g.kase, g.phase, pc, st.P50, st.P99, st.Max, st.N)
				fmt.Fprintf(&b, `<rect x="%d" y="%.1f" width="%d" height="%.1f" fill="%s"><title>%s</title></rect>`+"\n",
					bx+1, y(st.P50), chartBarWidth-2, float64(base)-y(st.P50), color(be), esc(tip))
				cx := bx + chartBarWidth/2
				fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#222"/>`, cx, y(st.P50), cx, y(st.P99))
				fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#222"/>`+"\n", cx-5, y(st.P99), cx+5, y(st.P99))
			}
			mid := gx + len(backends)*chartBarWidth/2
			fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`, mid, base+16, esc(g.phase))
			fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" fill="#555">%s</text>`+"\n", mid, base+30, esc(g.kase))
		}
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#222"/>`+"\n", chartLeft, base, width-chartRight, base)
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// niceScale returns a tick step of 1, 2 or 5 times a power of ten giving
// about five ticks up to maxValue, and the axis ceiling, a multiple of it.
func niceScale(maxValue float64) (step, ceiling float64) {
	if maxValue <= 0 {
		return 1, 5
	}
	raw := maxValue / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if step = m * mag; step >= raw {
			break
		}
	}
	return step, math.Ceil(maxValue/step) * step
}

// findRow returns the row of backend, kase and partitions.
func findRow(rows []failoverRow, backend, kase string, partitions int) (failoverRow, bool) {
	for _, r := range rows {
		if r.Backend == backend && r.Case == kase && r.Partitions == partitions {
			return r, true
		}
	}
	return failoverRow{}, false
}

// color returns backend's bar colour.
func color(backend string) string {
	if c, ok := backendColors[backend]; ok {
		return c
	}
	return "#999"
}

// esc escapes s for SVG text and attribute values.
func esc(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}

// plural returns "n noun" or "n nouns".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
