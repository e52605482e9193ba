package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tripodmq/tripod/internal/cluster"
	"github.com/tripodmq/tripod/internal/zkserver"
)

// TestBenchFailover runs `tripod bench failover` for one leader kill on a
// 4-partition topic on each backend, and checks that the table has a row
// per backend with no acknowledged record lost, that failover.json holds
// that run's measurements for every partition the killed broker led, and
// that failover.svg is an SVG document.
func TestBenchFailover(t *testing.T) {
	zkserver.Require(t)
	backends := []string{"raft", "zk", "etcd"}
	out, stdout, stderr, report := benchFailoverOutput(t, 3*time.Minute, "--coord", strings.Join(backends, ","), "--partitions", "4",
		"--runs", "1", "--case", "leader")
	if !strings.Contains(stderr, "1/3 runs") || !strings.Contains(stderr, "3/3 runs") {
		t.Errorf("stderr has no progress from 1/3 to 3/3 runs:\n%q", stderr)
	}

	// A row: backend, case, partitions, runs, affected partitions, 9 phase
	// figures, 2 rejoin figures, acked, lost.
	for _, backend := range backends {
		row := regexp.MustCompile(`(?m)^\s*` + backend + `\s+leader\s+4\s+1\s+[1-4](\s+\d+){11}\s+[1-9]\d*\s+0\s*$`)
		if !row.MatchString(stdout) {
			t.Errorf("no table row for %s, leader, 4 partitions, 1 run, with every phase measured, records acknowledged and 0 lost", backend)
		}
	}

	if report.Lost != 0 {
		t.Errorf("failover.json: %d acknowledged records lost, want 0", report.Lost)
	}
	if report.Brokers != 3 || report.RaftVoters != 3 {
		t.Errorf("failover.json: %d brokers, %d raft voters; want 3 and 3 (every broker votes by default)", report.Brokers, report.RaftVoters)
	}
	if len(report.Series) != len(backends) {
		t.Fatalf("failover.json holds %d series, want %d (one per backend)", len(report.Series), len(backends))
	}
	for i, s := range report.Series {
		if s.Backend != backends[i] || s.Partitions != 4 {
			t.Errorf("series %d: backend %s with %d partitions, want %s with 4", i, s.Backend, s.Partitions, backends[i])
		}
		if s.Error != "" {
			t.Errorf("%s: series error %q", s.Backend, s.Error)
		}
		if s.MinInsyncReplicas != 2 {
			t.Errorf("%s: topic min.insync.replicas %d, want 2", s.Backend, s.MinInsyncReplicas)
		}
		if s.Acked == 0 || s.Lost != 0 || s.Consumed < s.Acked {
			t.Errorf("%s: %d acknowledged, %d read back, %d lost; want some acknowledged, all read back, 0 lost (e.g. %v)",
				s.Backend, s.Acked, s.Consumed, s.Lost, s.LostSample)
		}
		if len(s.Runs) != 1 {
			t.Errorf("%s: %d runs, want 1", s.Backend, len(s.Runs))
			continue
		}
		r := s.Runs[0]
		if r.Case != "leader" || r.Killed < 1 || r.Killed > 3 {
			t.Errorf("%s: run case %q killed broker %d, want case leader and a broker 1..3", s.Backend, r.Case, r.Killed)
		}
		if r.RejoinMs <= 0 {
			t.Errorf("%s: rejoin %v ms, want the restarted broker's time back into every ISR", s.Backend, r.RejoinMs)
		}
		if r.DetectionMs == nil || *r.DetectionMs <= 0 {
			t.Errorf("%s: detection %v, want a time after the kill", s.Backend, r.DetectionMs)
		}
		if len(r.Partitions) == 0 || len(r.Unrecovered) != 0 {
			t.Errorf("%s: %d affected partitions, %v unrecovered; want at least one, all recovered", s.Backend, len(r.Partitions), r.Unrecovered)
		}
		for _, p := range r.Partitions {
			if p.OldLeader != r.Killed || p.NewLeader == r.Killed || p.NewLeader < 1 || p.NewLeader > 3 {
				t.Errorf("%s partition %d: leader %d -> %d, want from the killed broker %d to another", s.Backend, p.Partition, p.OldLeader, p.NewLeader, r.Killed)
			}
			if p.ElectionMs == nil || *p.ElectionMs <= 0 || p.UnavailabilityMs == nil || *p.UnavailabilityMs <= 0 || p.LeaderVisibleMs == nil {
				t.Errorf("%s partition %d: election %v, unavailability %v, leader visible %v; want all measured",
					s.Backend, p.Partition, p.ElectionMs, p.UnavailabilityMs, p.LeaderVisibleMs)
			}
		}
	}
	if len(report.Rows) != len(backends) {
		t.Errorf("failover.json holds %d table rows, want %d", len(report.Rows), len(backends))
	}

	svg, err := os.ReadFile(filepath.Join(out, "failover.svg"))
	if err != nil {
		t.Fatalf("read failover.svg: %v", err)
	}
	root, bars, err := svgRootAndBars(svg)
	if err != nil {
		t.Fatalf("failover.svg does not parse as XML: %v", err)
	}
	if root != "svg" {
		t.Errorf("failover.svg root element <%s>, want <svg>", root)
	}
	// One bar per backend and phase: detection, election, unavailability.
	if want := 3 * len(backends); bars != want {
		t.Errorf("failover.svg has %d bars, want %d", bars, want)
	}
}

// TestBenchFailoverRefusesBadQuorum checks that --brokers below the
// replication factor, --voters outside 0..--brokers and, with --case
// zone on raft, voters of which one rack holds too many to keep the
// Raft quorum without it, and a --background-load beyond the machine's
// CPUs, are refused by name, before anything starts.
func TestBenchFailoverRefusesBadQuorum(t *testing.T) {
	for _, c := range []struct {
		brokers, voters int
		cases           []string
		want            string
	}{
		{2, 0, nil, "--brokers 2: must be between 3 (the replication factor) and 100"},
		{101, 0, nil, "--brokers 101: must be between 3 (the replication factor) and 100"},
		{5, 6, nil, "--voters 6: must be between 1 and 5 (--brokers), or 0 for every broker"},
		{5, -1, nil, "--voters -1: must be between 1 and 5 (--brokers), or 0 for every broker"},
		{6, 4, []string{"leader", "zone"}, "--voters 4: with --case zone on raft, rack az1 holds 2 of the 4 Raft voters"},
		{4, 0, []string{"zone"}, "--brokers 4 (every broker voting): with --case zone on raft, rack az1 holds 2 of the 4 Raft voters"},
		{4, 0, []string{"rack"}, `--case "rack": must be leader, controller or zone`},
	} {
		cfg := DefaultFailoverConfig()
		cfg.Brokers, cfg.Voters, cfg.Binary, cfg.Out = c.brokers, c.voters, "/nonexistent/tripod", t.TempDir()
		if c.cases != nil {
			cfg.Cases = c.cases
		}
		if err := Failover(context.Background(), cfg, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--brokers %d --voters %d --case %v: got %v, want %q", c.brokers, c.voters, c.cases, err, c.want)
		}
	}
	for _, load := range []int{-1, runtime.NumCPU() + 1} {
		cfg := DefaultFailoverConfig()
		cfg.BackgroundLoad, cfg.Binary, cfg.Out = load, "/nonexistent/tripod", t.TempDir()
		want := fmt.Sprintf("--background-load %d: must be between 0 (none) and %d (this machine's CPUs)", load, runtime.NumCPU())
		if err := Failover(context.Background(), cfg, io.Discard, io.Discard); err == nil || err.Error() != want {
			t.Errorf("--background-load %d: got %v, want %q", load, err, want)
		}
	}
}

// TestBenchFailoverProducePartitions runs one controller kill on Raft with
// 6 partitions over 2 topics, of which the producer writes 4 (the first
// topic's 3 and one of the second's): the partitions written are measured
// by their acknowledgements, the others by their new leader in the
// Metadata, and the output says when every one of them had one. Another
// process keeps a CPU busy meanwhile (--background-load 1), and the
// output says how much CPU time it had.
func TestBenchFailoverProducePartitions(t *testing.T) {
	_, stdout, _, report := benchFailoverOutput(t, 2*time.Minute, "--coord", "raft", "--partitions", "6", "--topics", "2", "--produce-partitions", "4",
		"--runs", "1", "--case", "controller", "--background-load", "1")
	if report.BackgroundLoad != 1 || report.BackgroundLoadCPUSeconds <= 0 {
		t.Errorf("failover.json: background load %d CPUs, which had %v CPU s; want 1 and some", report.BackgroundLoad, report.BackgroundLoadCPUSeconds)
	}
	if !regexp.MustCompile(`another process kept 1 CPU\(s\) busy \(it had \d+ CPU s of the \d+ s\)`).MatchString(stdout) {
		t.Errorf("the summary does not say another process kept a CPU busy, and for how long")
	}
	if !regexp.MustCompile(`raft, 6 partitions, controller run 1: a new leader for every one of the \d+ partitions broker \d led in a live broker's Metadata \d+ ms after the kill`).MatchString(stdout) {
		t.Errorf("no line saying when every partition the killed broker led had a new leader in the Metadata")
	}
	if len(report.Series) != 1 || len(report.Series[0].Runs) != 1 {
		t.Fatalf("failover.json: want one series with one run, got %+v", report.Series)
	}
	s := report.Series[0]
	if s.ProducedPartitions != 4 || s.Lost != 0 || s.Acked == 0 || s.Consumed < s.Acked {
		t.Errorf("series: %d partitions written, %d acknowledged, %d read back, %d lost; want 4, some, all of them, 0", s.ProducedPartitions, s.Acked, s.Consumed, s.Lost)
	}
	if want := []string{"failover-raft-0", "failover-raft-1"}; !slices.Equal(s.Topics, want) || s.Topic != want[0] {
		t.Errorf("series: topic %s, topics %v; want %s and %v", s.Topic, s.Topics, want[0], want)
	}
	r := s.Runs[0]
	// The machine's CPU from the kill on, read from /proc/stat: with a
	// CPU kept busy by the background load, the machine was busy.
	if b, st := r.MachineCPUBusyPct, r.MachineCPUStealPct; b == nil || st == nil || *b <= 0 || *st < 0 || *b+*st > 100.001 {
		t.Errorf("run: machine CPU busy %v, steal %v; want busy above 0 and busy plus steal at most 100 %%", b, st)
	}
	if !regexp.MustCompile(`machine CPU from each kill to the end of its run: \d+-\d+ % busy, [\d.]+-[\d.]+ % stolen by the hypervisor \(the most: raft, 6 partitions, controller run 1\)`).MatchString(stdout) {
		t.Errorf("the summary does not give the machine's CPU over the runs")
	}
	if r.LeadersVisibleMaxMs == nil || len(r.Unrecovered) != 0 {
		t.Errorf("run: leaders visible at %v, unrecovered %v; want a time and none", r.LeadersVisibleMaxMs, r.Unrecovered)
	}
	for _, p := range r.Partitions {
		written := p.Topic == "failover-raft-0" || p.Topic == "failover-raft-1" && p.Partition == 0
		if p.LeaderVisibleMs == nil || p.NewLeader == r.Killed || p.NewLeader < 1 || p.NewLeader > 3 {
			t.Errorf("partition %s-%d: leader %d -> %d visible at %v, want a new leader other than %d in the Metadata", p.Topic, p.Partition, p.OldLeader, p.NewLeader, p.LeaderVisibleMs, r.Killed)
		}
		if written != (p.ElectionMs != nil) {
			t.Errorf("partition %s-%d (written: %t): election %v, want one exactly for the partitions written", p.Topic, p.Partition, written, p.ElectionMs)
		}
	}
}

// TestBenchFailoverZone runs `tripod bench failover --case zone` once on
// each backend with 6 brokers in racks az1, az2 and az3 (round robin) and
// a 6-partition topic: every partition has one replica per rack, and the
// run kills the two brokers of one rack at once, exactly that rack's.
// Every partition they led gets a new leader in another rack and
// acknowledges writes again (min.insync.replicas 2 is met by the two
// replicas left), every acknowledged record is read back and none is
// lost.
func TestBenchFailoverZone(t *testing.T) {
	zkserver.Require(t)
	backends := []string{"raft", "zk", "etcd"}
	_, stdout, _, report := benchFailoverOutput(t, 6*time.Minute, "--coord", strings.Join(backends, ","), "--partitions", "6",
		"--brokers", "6", "--runs", "1", "--case", "zone")
	zones := map[string][]int32{"az1": {1, 4}, "az2": {2, 5}, "az3": {3, 6}}
	if report.Lost != 0 {
		t.Errorf("failover.json: %d acknowledged records lost, want 0", report.Lost)
	}
	if want := []string{"az1", "az2", "az3"}; report.Brokers != 6 || !slices.Equal(report.Racks, want) {
		t.Errorf("failover.json: %d brokers in racks %v, want 6 in %v", report.Brokers, report.Racks, want)
	}
	for _, backend := range backends {
		row := regexp.MustCompile(`(?m)^\s*` + backend + `\s+zone\s+6\s+1\s+[1-6](\s+\d+){11}\s+[1-9]\d*\s+0\s*$`)
		if !row.MatchString(stdout) {
			t.Errorf("no table row for %s, zone, 6 partitions, 1 run, with every phase measured, records acknowledged and 0 lost", backend)
		}
		if !regexp.MustCompile(backend + `, 6 partitions, zone run 1: killed brokers \d,\d \(rack az\d\), which led [1-6] partitions`).MatchString(stdout) {
			t.Errorf("no line naming the brokers and rack killed on %s", backend)
		}
	}
	if len(report.Series) != len(backends) {
		t.Fatalf("failover.json holds %d series, want %d (one per backend)", len(report.Series), len(backends))
	}
	for _, s := range report.Series {
		if s.Error != "" || s.MinInsyncReplicas != 2 || s.Acked == 0 || s.Lost != 0 || s.Consumed < s.Acked {
			t.Errorf("%s: error %q, min.insync.replicas %d, %d acknowledged, %d read back, %d lost; want no error, 2, some acknowledged, all read back, 0 lost (e.g. %v)",
				s.Backend, s.Error, s.MinInsyncReplicas, s.Acked, s.Consumed, s.Lost, s.LostSample)
		}
		if len(s.Runs) != 1 {
			t.Errorf("%s: %d runs, want 1", s.Backend, len(s.Runs))
			continue
		}
		r := s.Runs[0]
		zone, ok := zones[r.Rack]
		if r.Case != "zone" || !ok || !slices.Equal(r.KilledBrokers, zone) || !slices.Contains(zone, r.Killed) {
			t.Errorf("%s: run case %q killed brokers %v of rack %q around broker %d, want case zone killing exactly one rack's brokers (%v)",
				s.Backend, r.Case, r.KilledBrokers, r.Rack, r.Killed, zones)
		}
		if r.DetectionMs == nil || *r.DetectionMs <= 0 || r.RejoinMs <= 0 {
			t.Errorf("%s: detection %v, rejoin %v ms; want both measured", s.Backend, r.DetectionMs, r.RejoinMs)
		}
		if len(r.Partitions) == 0 || len(r.Unrecovered) != 0 {
			t.Errorf("%s: %d affected partitions, %v unrecovered; want at least one, all recovered", s.Backend, len(r.Partitions), r.Unrecovered)
		}
		for _, p := range r.Partitions {
			if !slices.Contains(zone, p.OldLeader) || slices.Contains(zone, p.NewLeader) || p.NewLeader < 1 || p.NewLeader > 6 {
				t.Errorf("%s partition %d: leader %d -> %d, want from a broker of rack %s %v to one of another rack", s.Backend, p.Partition, p.OldLeader, p.NewLeader, r.Rack, zone)
			}
			if p.ElectionMs == nil || p.UnavailabilityMs == nil || *p.UnavailabilityMs <= 0 {
				t.Errorf("%s partition %d: election %v, unavailability %v; want both measured", s.Backend, p.Partition, p.ElectionMs, p.UnavailabilityMs)
			}
		}
	}
}

// svgRootAndBars parses an SVG document and returns its root element's
// name and the number of bars (rect elements with a title).
func svgRootAndBars(doc []byte) (root string, bars int, err error) {
	dec := xml.NewDecoder(bytes.NewReader(doc))
	var stack []string
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return root, bars, nil
		}
		if err != nil {
			return root, bars, err
		}
		switch el := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = el.Name.Local
			}
			if el.Name.Local == "title" && len(stack) > 0 && stack[len(stack)-1] == "rect" {
				bars++
			}
			stack = append(stack, el.Name.Local)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		}
	}
}

// TestBenchFailoverPauseAndCut runs `tripod bench failover --failure
// pause,cut` for one leader on a 4-partition topic on each backend (Raft,
// whose transport is not proxied, has no cut case), and checks that each
// paused or cut broker was replaced only once its session could have
// expired, not at once as a crashed one is, that its partitions moved to
// the other brokers, that it rejoined, and that no acknowledged record
// was lost.
func TestBenchFailoverPauseAndCut(t *testing.T) {
	zkserver.Require(t)
	backends := []string{"raft", "zk", "etcd"}
	const session = 2 * time.Second
	_, _, _, report := benchFailoverOutput(t, 5*time.Minute, "--coord", strings.Join(backends, ","), "--partitions", "4",
		"--runs", "1", "--case", "leader", "--failure", "pause,cut", "--session-timeout", session.String())
	if report.Lost != 0 {
		t.Errorf("failover.json: %d acknowledged records lost, want 0", report.Lost)
	}
	want := map[string][]string{"raft": {"leader-pause"}, "zk": {"leader-pause", "leader-cut"}, "etcd": {"leader-pause", "leader-cut"}}
	for _, s := range report.Series {
		if s.Error != "" || s.Acked == 0 || s.Lost != 0 || s.Consumed < s.Acked {
			t.Errorf("%s: error %q, %d acknowledged, %d read back, %d lost; want no error, some acknowledged, all read back, 0 lost",
				s.Backend, s.Error, s.Acked, s.Consumed, s.Lost)
		}
		var cases []string
		for _, r := range s.Runs {
			cases = append(cases, r.Case)
			// A registration is renewed every third of the session timeout
			// at most, so it expires no sooner than two thirds of it after
			// the failure; a crash probe would have fenced the broker in a
			// few hundred ms.
			if r.DetectionMs == nil || *r.DetectionMs < float64(session.Milliseconds())/2 {
				t.Errorf("%s %s: detection %v ms, want the session's expiry, at least %v after the failure", s.Backend, r.Case, r.DetectionMs, session/2)
			}
			if r.RejoinMs <= 0 {
				t.Errorf("%s %s: rejoin %v ms, want the failed broker back in every ISR", s.Backend, r.Case, r.RejoinMs)
			}
			if len(r.Partitions) == 0 || len(r.Unrecovered) != 0 {
				t.Errorf("%s %s: %d affected partitions, %v unrecovered; want at least one, all recovered", s.Backend, r.Case, len(r.Partitions), r.Unrecovered)
			}
			for _, p := range r.Partitions {
				if p.OldLeader != r.Killed || p.NewLeader == r.Killed || p.NewLeader < 1 || p.NewLeader > 3 {
					t.Errorf("%s %s partition %d: leader %d -> %d, want from the failed broker %d to another", s.Backend, r.Case, p.Partition, p.OldLeader, p.NewLeader, r.Killed)
				}
			}
		}
		if !slices.Equal(cases, want[s.Backend]) {
			t.Errorf("%s: runs of cases %v, want %v", s.Backend, cases, want[s.Backend])
		}
	}
	if len(report.Series) != len(backends) {
		t.Errorf("failover.json holds %d series, want %d", len(report.Series), len(backends))
	}
}

// benchFailoverOutput runs `tripod bench failover` with args and --out in a
// new directory, failing the test if it fails or takes longer than
// timeout, and returns that directory, what it printed and its
// failover.json.
func benchFailoverOutput(t *testing.T, timeout time.Duration, args ...string) (out, stdout, stderr string, report failoverReport) {
	t.Helper()
	out = t.TempDir()
	b, stderr := runBench(t, timeout, append(append([]string{"bench", "failover"}, args...), "--out", out)...)
	stdout = string(b)
	b, err := os.ReadFile(filepath.Join(out, "failover.json"))
	if err != nil {
		t.Fatalf("read failover.json: %v", err)
	}
	if err := json.Unmarshal(b, &report); err != nil {
		t.Fatalf("decode failover.json: %v\n%s", err, b)
	}
	return out, stdout, stderr, report
}

// TestMetadataChangeCountsOnlyTheFailure: detection is a killed broker
// leaving an ISR, or a partition losing its leader; a preferred-leader
// election decided as the kill came (leaders moved, every replica still
// in sync) is not.
func TestMetadataChangeCountsOnlyTheFailure(t *testing.T) {
	topics := []string{"t"}
	state := func(leader, epoch int32, isr ...int32) *cluster.Metadata {
		return &cluster.Metadata{Partitions: map[string][]cluster.Partition{
			"t": {{Partition: 0, Leader: 1, ISR: []int32{1, 2, 3}}, {Partition: 1, Leader: leader, LeaderEpoch: epoch, ISR: isr}},
		}}
	}
	base := state(2, 3, 1, 2, 3)
	killed := func(id int32) bool { return id == 2 }
	for _, c := range []struct {
		name string
		md   *cluster.Metadata
		want bool
	}{
		{"nothing changed", state(2, 3, 1, 2, 3), false},
		{"a preferred-leader election", state(1, 4, 1, 2, 3), false},
		{"another broker left the ISR", state(2, 3, 2, 3), false},
		{"the killed broker left the ISR", state(2, 3, 1, 3), true},
		{"a new leader without the killed broker", state(1, 4, 1, 3), true},
		{"no leader", state(-1, 4, 2), true},
	} {
		if got := metadataChange(base, c.md, topics, killed) != ""; got != c.want {
			t.Errorf("%s: detected %v, want %v", c.name, got, c.want)
		}
	}
}
