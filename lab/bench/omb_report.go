package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/tripodmq/tripod/internal/hostcpu"
)

// stealWarnPct is the share of the machine's CPU time the hypervisor may
// take during a test before the result warns of it: at 2 % a busy
// machine's requests already wait tens of milliseconds now and then.
const stealWarnPct = 2.0

// ombQuantiles are the percentiles OMB reports, with their names in its
// TestResult fields (publishLatency50pct ... publishLatency9999pct).
var ombQuantiles = []struct {
	name string
	q    float64
}{{"50", 50}, {"75", 75}, {"95", 95}, {"99", 99}, {"999", 99.9}, {"9999", 99.99}}

// ombPercentiles are one histogram's figures, in its unit: avg, the
// percentiles of ombQuantiles, max, and how many values it holds.
type ombPercentiles struct {
	Avg, Max float64
	Pct      [6]float64
	Count    int64
}

// percentiles returns h's figures in h's unit (microseconds); ms
// scales them.
func percentiles(h *hdrhistogram.Histogram) ombPercentiles {
	p := ombPercentiles{Avg: h.Mean(), Max: float64(h.Max()), Count: h.TotalCount()}
	for i, q := range ombQuantiles {
		p.Pct[i] = float64(h.ValueAtQuantile(q.q))
	}
	return p
}

// ms returns p, of microseconds, in milliseconds.
func (p ombPercentiles) ms() ombPercentiles {
	p.Avg, p.Max = p.Avg/1000, p.Max/1000
	for i := range p.Pct {
		p.Pct[i] /= 1000
	}
	return p
}

// ombWindow is one sampling window's figures.
type ombWindow struct {
	PublishRate, PublishErrorRate, PublishMBps float64
	ConsumeRate, ConsumeMBps                   float64
	Backlog                                    int64
	// Publish and EndToEnd are in microseconds, DelayMicros too.
	Publish, EndToEnd, DelayMicros ombPercentiles
	// CPU is how the machine's CPU time was spent meanwhile; HasCPU is
	// false where it could not be read.
	CPU    hostcpu.Usage
	HasCPU bool
}

// line formats w as OMB's periodic log line.
func (w ombWindow) line() string {
	p, e := w.Publish.ms(), w.EndToEnd.ms()
	return fmt.Sprintf("Pub rate %7.1f msg/s / %6.2f MB/s | Pub err %5.1f err/s | Cons rate %7.1f msg/s / %6.2f MB/s | Backlog: %6.1f K | Pub Latency (ms) avg: %6.2f - 50%%: %6.2f - 99%%: %6.2f - 99.9%%: %6.2f - Max: %7.2f | E2E Latency (ms) avg: %6.2f - 50%%: %6.2f - 99%%: %6.2f - 99.9%%: %6.2f - Max: %7.2f",
		w.PublishRate, w.PublishMBps, w.PublishErrorRate, w.ConsumeRate, w.ConsumeMBps, float64(w.Backlog)/1000,
		p.Avg, p.Pct[0], p.Pct[3], p.Pct[4], p.Max, e.Avg, e.Pct[0], e.Pct[3], e.Pct[4], e.Max) + w.cpuText()
}

// cpuText is tripod's addition to OMB's line: the machine's CPU over the
// window, busy and stolen by the hypervisor.
func (w ombWindow) cpuText() string {
	if !w.HasCPU {
		return ""
	}
	return fmt.Sprintf(" | Machine CPU busy %5.1f%% - steal %4.1f%%", 100*w.CPU.Busy, 100*w.CPU.Steal)
}

// ombResult is what `tripod bench omb` writes as JSON: OMB's TestResult
// fields, with its names and units (rates in msg/s, latencies in ms,
// publish delay in µs, one list entry per window after the warm-up), and
// a few of tripod's own after them.
type ombResult struct {
	Workload          string `json:"workload"`
	Driver            string `json:"driver"`
	MessageSize       int    `json:"messageSize"`
	Topics            int    `json:"topics"`
	Partitions        int    `json:"partitions"`
	ProducersPerTopic int    `json:"producersPerTopic"`
	ConsumersPerTopic int    `json:"consumersPerTopic"`

	PublishRate      []float64 `json:"publishRate"`
	PublishErrorRate []float64 `json:"publishErrorRate"`
	ConsumeRate      []float64 `json:"consumeRate"`
	Backlog          []int64   `json:"backlog"`

	PublishLatencyAvg     []float64 `json:"publishLatencyAvg"`
	PublishLatency50pct   []float64 `json:"publishLatency50pct"`
	PublishLatency75pct   []float64 `json:"publishLatency75pct"`
	PublishLatency95pct   []float64 `json:"publishLatency95pct"`
	PublishLatency99pct   []float64 `json:"publishLatency99pct"`
	PublishLatency999pct  []float64 `json:"publishLatency999pct"`
	PublishLatency9999pct []float64 `json:"publishLatency9999pct"`
	PublishLatencyMax     []float64 `json:"publishLatencyMax"`

	PublishDelayLatencyAvg     []float64 `json:"publishDelayLatencyAvg"`
	PublishDelayLatency50pct   []int64   `json:"publishDelayLatency50pct"`
	PublishDelayLatency75pct   []int64   `json:"publishDelayLatency75pct"`
	PublishDelayLatency95pct   []int64   `json:"publishDelayLatency95pct"`
	PublishDelayLatency99pct   []int64   `json:"publishDelayLatency99pct"`
	PublishDelayLatency999pct  []int64   `json:"publishDelayLatency999pct"`
	PublishDelayLatency9999pct []int64   `json:"publishDelayLatency9999pct"`
	PublishDelayLatencyMax     []int64   `json:"publishDelayLatencyMax"`

	AggregatedPublishLatencyAvg     float64 `json:"aggregatedPublishLatencyAvg"`
	AggregatedPublishLatency50pct   float64 `json:"aggregatedPublishLatency50pct"`
	AggregatedPublishLatency75pct   float64 `json:"aggregatedPublishLatency75pct"`
	AggregatedPublishLatency95pct   float64 `json:"aggregatedPublishLatency95pct"`
	AggregatedPublishLatency99pct   float64 `json:"aggregatedPublishLatency99pct"`
	AggregatedPublishLatency999pct  float64 `json:"aggregatedPublishLatency999pct"`
	AggregatedPublishLatency9999pct float64 `json:"aggregatedPublishLatency9999pct"`
	AggregatedPublishLatencyMax     float64 `json:"aggregatedPublishLatencyMax"`

	AggregatedPublishDelayLatencyAvg     float64 `json:"aggregatedPublishDelayLatencyAvg"`
	AggregatedPublishDelayLatency50pct   int64   `json:"aggregatedPublishDelayLatency50pct"`
	AggregatedPublishDelayLatency75pct   int64   `json:"aggregatedPublishDelayLatency75pct"`
	AggregatedPublishDelayLatency95pct   int64   `json:"aggregatedPublishDelayLatency95pct"`
	AggregatedPublishDelayLatency99pct   int64   `json:"aggregatedPublishDelayLatency99pct"`
	AggregatedPublishDelayLatency999pct  int64   `json:"aggregatedPublishDelayLatency999pct"`
	AggregatedPublishDelayLatency9999pct int64   `json:"aggregatedPublishDelayLatency9999pct"`
	AggregatedPublishDelayLatencyMax     int64   `json:"aggregatedPublishDelayLatencyMax"`

	EndToEndLatencyAvg     []float64 `json:"endToEndLatencyAvg"`
	EndToEndLatency50pct   []float64 `json:"endToEndLatency50pct"`
	EndToEndLatency75pct   []float64 `json:"endToEndLatency75pct"`
	EndToEndLatency95pct   []float64 `json:"endToEndLatency95pct"`
	EndToEndLatency99pct   []float64 `json:"endToEndLatency99pct"`
	EndToEndLatency999pct  []float64 `json:"endToEndLatency999pct"`
	EndToEndLatency9999pct []float64 `json:"endToEndLatency9999pct"`
	EndToEndLatencyMax     []float64 `json:"endToEndLatencyMax"`

	AggregatedEndToEndLatencyAvg     float64 `json:"aggregatedEndToEndLatencyAvg"`
	AggregatedEndToEndLatency50pct   float64 `json:"aggregatedEndToEndLatency50pct"`
	AggregatedEndToEndLatency75pct   float64 `json:"aggregatedEndToEndLatency75pct"`
	AggregatedEndToEndLatency95pct   float64 `json:"aggregatedEndToEndLatency95pct"`
	AggregatedEndToEndLatency99pct   float64 `json:"aggregatedEndToEndLatency99pct"`
	AggregatedEndToEndLatency999pct  float64 `json:"aggregatedEndToEndLatency999pct"`
	AggregatedEndToEndLatency9999pct float64 `json:"aggregatedEndToEndLatency9999pct"`
	AggregatedEndToEndLatencyMax     float64 `json:"aggregatedEndToEndLatencyMax"`

	// tripod's own: the MB/s per window (OMB logs them, its TestResult
	// does not keep them), the run's settings, and the totals of the
	// whole run, warm-up included, with which a user checks that every
	// acknowledged record was read and timed.
	PublishMBps            []float64 `json:"tripodPublishMBps"`
	ConsumeMBps            []float64 `json:"tripodConsumeMBps"`
	ProducerRate           int       `json:"tripodProducerRate"`
	ReplicationFactor      int       `json:"tripodReplicationFactor"`
	Acks                   string    `json:"tripodAcks"`
	WarmupSeconds          float64   `json:"tripodWarmupSeconds"`
	TestSeconds            float64   `json:"tripodTestSeconds"`
	WindowSeconds          float64   `json:"tripodWindowSeconds"`
	MessagesSent           int64     `json:"tripodMessagesSent"`
	MessagesAcknowledged   int64     `json:"tripodMessagesAcknowledged"`
	MessagesReceived       int64     `json:"tripodMessagesReceived"`
	EndToEndLatencySamples int64     `json:"tripodEndToEndLatencySamples"`
	// SendErrors and FetchErrors count the producers' unacknowledged
	// messages and the consumers' fetch errors, with the first of each.
	SendErrors      int64  `json:"tripodSendErrors"`
	FetchErrors     int64  `json:"tripodFetchErrors"`
	FirstSendError  string `json:"tripodFirstSendError,omitempty"`
	FirstFetchError string `json:"tripodFirstFetchError,omitempty"`
	// The machine's CPU time, per window and over the test, in percent:
	// busy (every process, this one included), and stolen by the
	// hypervisor for other guests, which a virtual machine's latencies
	// carry. Left out where /proc/stat cannot be read.
	MachineCPUBusyPct      []float64 `json:"tripodMachineCpuBusyPct,omitempty"`
	MachineCPUStealPct     []float64 `json:"tripodMachineCpuStealPct,omitempty"`
	TestMachineCPUBusyPct  *float64  `json:"tripodTestMachineCpuBusyPct,omitempty"`
	TestMachineCPUStealPct *float64  `json:"tripodTestMachineCpuStealPct,omitempty"`
}

// newOMBResult starts the result of a run of w.
func newOMBResult(w *OMBWorkload, cfg *OMBConfig, warmup, test time.Duration) *ombResult {
	return &ombResult{
		Workload: w.Name, Driver: "Kafka (tripod bench omb, franz-go)", MessageSize: w.MessageSize,
		Topics: w.Topics, Partitions: w.PartitionsPerTopic, ProducersPerTopic: w.ProducersPerTopic,
		ConsumersPerTopic: w.SubscriptionsPerTopic * w.ConsumerPerSubscription,
		ProducerRate:      w.ProducerRate, ReplicationFactor: cfg.ReplicationFactor, Acks: cfg.Acks,
		WarmupSeconds: warmup.Seconds(), TestSeconds: test.Seconds(), WindowSeconds: cfg.Window.Seconds(),
	}
}

// addWindow appends one window after the warm-up.
func (r *ombResult) addWindow(w ombWindow) {
	r.PublishRate = append(r.PublishRate, w.PublishRate)
	r.PublishErrorRate = append(r.PublishErrorRate, w.PublishErrorRate)
	r.ConsumeRate = append(r.ConsumeRate, w.ConsumeRate)
	r.Backlog = append(r.Backlog, w.Backlog)
	r.PublishMBps = append(r.PublishMBps, w.PublishMBps)
	r.ConsumeMBps = append(r.ConsumeMBps, w.ConsumeMBps)
	p, e, d := w.Publish.ms(), w.EndToEnd.ms(), w.DelayMicros
	r.PublishLatencyAvg = append(r.PublishLatencyAvg, p.Avg)
	r.PublishLatency50pct = append(r.PublishLatency50pct, p.Pct[0])
	r.PublishLatency75pct = append(r.PublishLatency75pct, p.Pct[1])
	r.PublishLatency95pct = append(r.PublishLatency95pct, p.Pct[2])
	r.PublishLatency99pct = append(r.PublishLatency99pct, p.Pct[3])
	r.PublishLatency999pct = append(r.PublishLatency999pct, p.Pct[4])
	r.PublishLatency9999pct = append(r.PublishLatency9999pct, p.Pct[5])
	r.PublishLatencyMax = append(r.PublishLatencyMax, p.Max)
	r.EndToEndLatencyAvg = append(r.EndToEndLatencyAvg, e.Avg)
	r.EndToEndLatency50pct = append(r.EndToEndLatency50pct, e.Pct[0])
	r.EndToEndLatency75pct = append(r.EndToEndLatency75pct, e.Pct[1])
	r.EndToEndLatency95pct = append(r.EndToEndLatency95pct, e.Pct[2])
	r.EndToEndLatency99pct = append(r.EndToEndLatency99pct, e.Pct[3])
	r.EndToEndLatency999pct = append(r.EndToEndLatency999pct, e.Pct[4])
	r.EndToEndLatency9999pct = append(r.EndToEndLatency9999pct, e.Pct[5])
	r.EndToEndLatencyMax = append(r.EndToEndLatencyMax, e.Max)
	r.PublishDelayLatencyAvg = append(r.PublishDelayLatencyAvg, d.Avg)
	r.PublishDelayLatency50pct = append(r.PublishDelayLatency50pct, int64(d.Pct[0]))
	r.PublishDelayLatency75pct = append(r.PublishDelayLatency75pct, int64(d.Pct[1]))
	r.PublishDelayLatency95pct = append(r.PublishDelayLatency95pct, int64(d.Pct[2]))
	r.PublishDelayLatency99pct = append(r.PublishDelayLatency99pct, int64(d.Pct[3]))
	r.PublishDelayLatency999pct = append(r.PublishDelayLatency999pct, int64(d.Pct[4]))
	r.PublishDelayLatency9999pct = append(r.PublishDelayLatency9999pct, int64(d.Pct[5]))
	r.PublishDelayLatencyMax = append(r.PublishDelayLatencyMax, int64(d.Max))
	if w.HasCPU {
		r.MachineCPUBusyPct = append(r.MachineCPUBusyPct, 100*w.CPU.Busy)
		r.MachineCPUStealPct = append(r.MachineCPUStealPct, 100*w.CPU.Steal)
	}
}

// setTestCPU records how the machine's CPU time was spent over the test.
func (r *ombResult) setTestCPU(u hostcpu.Usage) {
	busy, steal := 100*u.Busy, 100*u.Steal
	r.TestMachineCPUBusyPct, r.TestMachineCPUStealPct = &busy, &steal
}

// aggregate sets the aggregated figures from s's phase histograms; the
// caller holds s.mu.
func (r *ombResult) aggregate(s *ombStats) {
	p, e, d := percentiles(s.pubAggregate).ms(), percentiles(s.e2eAggregate).ms(), percentiles(s.delayAggregate)
	r.AggregatedPublishLatencyAvg, r.AggregatedPublishLatencyMax = p.Avg, p.Max
	r.AggregatedPublishLatency50pct, r.AggregatedPublishLatency75pct, r.AggregatedPublishLatency95pct = p.Pct[0], p.Pct[1], p.Pct[2]
	r.AggregatedPublishLatency99pct, r.AggregatedPublishLatency999pct, r.AggregatedPublishLatency9999pct = p.Pct[3], p.Pct[4], p.Pct[5]
	r.AggregatedEndToEndLatencyAvg, r.AggregatedEndToEndLatencyMax = e.Avg, e.Max
	r.AggregatedEndToEndLatency50pct, r.AggregatedEndToEndLatency75pct, r.AggregatedEndToEndLatency95pct = e.Pct[0], e.Pct[1], e.Pct[2]
	r.AggregatedEndToEndLatency99pct, r.AggregatedEndToEndLatency999pct, r.AggregatedEndToEndLatency9999pct = e.Pct[3], e.Pct[4], e.Pct[5]
	r.AggregatedPublishDelayLatencyAvg, r.AggregatedPublishDelayLatencyMax = d.Avg, int64(d.Max)
	r.AggregatedPublishDelayLatency50pct, r.AggregatedPublishDelayLatency75pct, r.AggregatedPublishDelayLatency95pct = int64(d.Pct[0]), int64(d.Pct[1]), int64(d.Pct[2])
	r.AggregatedPublishDelayLatency99pct, r.AggregatedPublishDelayLatency999pct, r.AggregatedPublishDelayLatency9999pct = int64(d.Pct[3]), int64(d.Pct[4]), int64(d.Pct[5])
}

// mean returns the mean of xs, 0 for none.
func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// fileStemUnsafe are the characters of a workload's name left out of
// the names of its result files, which OMB too names after the workload.
var fileStemUnsafe = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// write prints the summary table and writes the JSON and the chart to
// dir, named after the workload and the time.
func (r *ombResult) write(dir string, out io.Writer) error {
	fmt.Fprintf(out, "\nworkload %q: %d topic(s) × %d partitions, %d B, RF %d, acks=%s, %s, %.0f s after %.0f s of warm-up\n",
		r.Workload, r.Topics, r.Partitions, r.MessageSize, r.ReplicationFactor, r.Acks, rateText(r.ProducerRate), r.TestSeconds, r.WarmupSeconds)
	fmt.Fprintf(out, "publish %.1f msg/s (%.2f MB/s), consume %.1f msg/s (%.2f MB/s), mean over %d windows; backlog at the end of the last %d\n",
		mean(r.PublishRate), mean(r.PublishMBps), mean(r.ConsumeRate), mean(r.ConsumeMBps), len(r.PublishRate), r.Backlog[len(r.Backlog)-1])
	fmt.Fprintf(out, "%d messages sent, %d acknowledged, %d received with %d end-to-end latencies (whole run)\n",
		r.MessagesSent, r.MessagesAcknowledged, r.MessagesReceived, r.EndToEndLatencySamples)
	if r.SendErrors > 0 {
		fmt.Fprintf(out, "%d messages not acknowledged, the first: %s\n", r.SendErrors, r.FirstSendError)
	}
	if r.FetchErrors > 0 {
		fmt.Fprintf(out, "%d fetch errors, the first: %s\n", r.FetchErrors, r.FirstFetchError)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "LATENCY (ms)\tAVG\tP50\tP75\tP95\tP99\tP99.9\tP99.99\tMAX\t")
	fmt.Fprintf(tw, "publish\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", r.AggregatedPublishLatencyAvg,
		r.AggregatedPublishLatency50pct, r.AggregatedPublishLatency75pct, r.AggregatedPublishLatency95pct, r.AggregatedPublishLatency99pct,
		r.AggregatedPublishLatency999pct, r.AggregatedPublishLatency9999pct, r.AggregatedPublishLatencyMax)
	fmt.Fprintf(tw, "end-to-end\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", r.AggregatedEndToEndLatencyAvg,
		r.AggregatedEndToEndLatency50pct, r.AggregatedEndToEndLatency75pct, r.AggregatedEndToEndLatency95pct, r.AggregatedEndToEndLatency99pct,
		r.AggregatedEndToEndLatency999pct, r.AggregatedEndToEndLatency9999pct, r.AggregatedEndToEndLatencyMax)
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.TestMachineCPUBusyPct != nil {
		fmt.Fprintf(out, "machine CPU over the test: %.1f %% busy, %.1f %% stolen by the hypervisor\n", *r.TestMachineCPUBusyPct, *r.TestMachineCPUStealPct)
		if *r.TestMachineCPUStealPct >= stealWarnPct {
			fmt.Fprintf(out, "the hypervisor took %.1f %% of this machine's CPU time for other guests: the latencies above carry that wait; compare runs made without it\n", *r.TestMachineCPUStealPct)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--out %s: %w", dir, err)
	}
	stem := fmt.Sprintf("%s-%s", strings.Trim(fileStemUnsafe.ReplaceAllString(r.Workload, "-"), "-"), time.Now().UTC().Format("20060102T150405Z"))
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode the result: %w", err)
	}
	jsonPath := filepath.Join(dir, stem+".json")
	if err := os.WriteFile(jsonPath, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("--out %s: %w", dir, err)
	}
	svgPath := filepath.Join(dir, stem+".svg")
	if err := os.WriteFile(svgPath, ombChart(r), 0o644); err != nil {
		return fmt.Errorf("--out %s: %w", dir, err)
	}
	fmt.Fprintf(out, "result: %s\nchart: %s\n", jsonPath, svgPath)
	return nil
}

// ombChart draws r as an SVG of two panels: the publish and consume
// rates per window, and the aggregated publish and end-to-end latency
// percentiles as bars on a logarithmic axis (a max is often a hundred
// times the median).
func ombChart(r *ombResult) []byte {
	const width, panel, plot = 820, 280, 190
	height := chartTop + 2*panel + 20
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="15" font-weight="bold">%s</text>`+"\n", chartLeft,
		esc(fmt.Sprintf("tripod bench omb: %s", r.Workload)))
	fmt.Fprintf(&b, `<text x="%d" y="40" fill="#555">%s</text>`+"\n", chartLeft,
		esc(fmt.Sprintf("%d topic(s) × %d partitions, %d B, RF %d, acks=%s, %s; %.0f s after %.0f s of warm-up", r.Topics, r.Partitions, r.MessageSize, r.ReplicationFactor, r.Acks, rateText(r.ProducerRate), r.TestSeconds, r.WarmupSeconds)))

	// Rates per window.
	top := chartTop
	base := float64(top + 24 + plot)
	var ceiling float64
	for i := range r.PublishRate {
		ceiling = math.Max(ceiling, math.Max(r.PublishRate[i], r.ConsumeRate[i]))
	}
	step, ceiling := niceScale(ceiling)
	x := func(i int) float64 {
		if len(r.PublishRate) < 2 {
			return chartLeft
		}
		return chartLeft + float64(i)*float64(width-chartLeft-chartRight)/float64(len(r.PublishRate)-1)
	}
	y := func(v float64) float64 { return base - v/ceiling*plot }
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-weight="bold">rate per %.0f s window (msg/s): publish (blue), consume (orange)</text>`+"\n", chartLeft, top+14, r.WindowSeconds)
	for v := 0.0; v <= ceiling+step/2; v += step {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end" fill="#555">%.0f</text>`+"\n",
			chartLeft, y(v), width-chartRight, y(v), chartLeft-6, y(v)+4, v)
	}
	for _, s := range []struct {
		vals  []float64
		color string
	}{{r.PublishRate, "#4e79a7"}, {r.ConsumeRate, "#f28e2b"}} {
		var pts []string
		for i, v := range s.vals {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(i), y(v)))
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`, x(i), y(v), s.color)
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), s.color)
	}
	fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#222"/>`+"\n", chartLeft, base, width-chartRight, base)

	// Latency percentiles, log scale.
	top += panel
	base = float64(top + 24 + plot)
	labels := []string{"p50", "p75", "p95", "p99", "p99.9", "p99.99", "max"}
	pub := []float64{r.AggregatedPublishLatency50pct, r.AggregatedPublishLatency75pct, r.AggregatedPublishLatency95pct, r.AggregatedPublishLatency99pct, r.AggregatedPublishLatency999pct, r.AggregatedPublishLatency9999pct, r.AggregatedPublishLatencyMax}
	e2e := []float64{r.AggregatedEndToEndLatency50pct, r.AggregatedEndToEndLatency75pct, r.AggregatedEndToEndLatency95pct, r.AggregatedEndToEndLatency99pct, r.AggregatedEndToEndLatency999pct, r.AggregatedEndToEndLatency9999pct, r.AggregatedEndToEndLatencyMax}
	lo, hi := -1.0, 1.0 // decades: 0.1 ms to 10 ms at least
	for _, v := range append(append([]float64{}, pub...), e2e...) {
		if v > 0 {
			lo, hi = math.Min(lo, math.Floor(math.Log10(v))), math.Max(hi, math.Ceil(math.Log10(v)))
		}
	}
	ly := func(v float64) float64 {
		if v <= 0 {
			return base
		}
		return base - (math.Log10(v)-lo)/(hi-lo)*plot
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-weight="bold">latency after the warm-up (ms, log scale): publish (blue), end-to-end (green)</text>`+"\n", chartLeft, top+14)
	for d := lo; d <= hi; d++ {
		v := math.Pow(10, d)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end" fill="#555">%s</text>`+"\n",
			chartLeft, ly(v), width-chartRight, ly(v), chartLeft-6, ly(v)+4, esc(fmt.Sprintf("%g", v)))
	}
	groupWidth := (width - chartLeft - chartRight) / len(labels)
	for i, l := range labels {
		gx := chartLeft + i*groupWidth + (groupWidth-2*chartBarWidth)/2
		for j, s := range []struct {
			v     float64
			color string
			what  string
		}{{pub[i], "#4e79a7", "publish"}, {e2e[i], "#59a14f", "end-to-end"}} {
			bx := gx + j*chartBarWidth
			fmt.Fprintf(&b, `<rect x="%d" y="%.1f" width="%d" height="%.1f" fill="%s"><title>%s</title></rect>`+"\n",
				bx+1, ly(s.v), chartBarWidth-2, base-ly(s.v), s.color, esc(fmt.Sprintf("%s %s: %.2f ms", s.what, l, s.v)))
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="middle" font-size="9">%s</text>`, bx+chartBarWidth/2, ly(s.v)-3, esc(fmt.Sprintf("%.3g", s.v)))
		}
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="middle">%s</text>`+"\n", gx+chartBarWidth, base+16, esc(l))
	}
	fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#222"/>`+"\n", chartLeft, base, width-chartRight, base)
	b.WriteString("</svg>\n")
	return b.Bytes()
}
