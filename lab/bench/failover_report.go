package bench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tripodmq/tripod/internal/hostcpu"
)

// failoverReport is everything `tripod bench failover` measured; it is
// written to DIR/failover.json.
type failoverReport struct {
	// Command is the command line that produced the report.
	Command string `json:"command"`
	// Started is when the benchmark started.
	Started time.Time `json:"started"`
	// WallSeconds is how long the whole benchmark took.
	WallSeconds float64 `json:"wall_seconds"`
	// Brokers is how many brokers each cluster ran.
	Brokers int `json:"brokers"`
	// RaftVoters is how many of them voted in the Raft quorum of the raft
	// series (the others observed); absent without a raft series.
	RaftVoters int `json:"raft_voters,omitempty"`
	// SessionTimeoutMs is every broker's session timeout, the configured
	// failure detection time, the same for every backend.
	SessionTimeoutMs float64 `json:"session_timeout_ms"`
	// RatePerPartition is the records/s the producer wrote to each
	// partition.
	RatePerPartition float64 `json:"rate_per_partition"`
	// ClientBackoffMs is the producer's retry backoff and metadata min age.
	ClientBackoffMs float64 `json:"client_backoff_ms"`
	// BrokerGoMaxProcs is every broker's GOMAXPROCS.
	BrokerGoMaxProcs int `json:"broker_gomaxprocs"`
	// BackgroundLoad is how many CPUs another process kept busy
	// throughout (--background-load); absent: none.
	BackgroundLoad int `json:"background_load,omitempty"`
	// BackgroundLoadCPUSeconds is the CPU time that process had.
	BackgroundLoadCPUSeconds float64 `json:"background_load_cpu_seconds,omitempty"`
	// Sets are the extra broker properties of every broker.
	Sets []string `json:"sets,omitempty"`
	// Racks are the brokers' racks (broker.rack), round robin: broker i
	// is in Racks[(i-1) % len(Racks)]; absent without case zone.
	Racks []string `json:"racks,omitempty"`
	// Series holds one entry per backend and partition count.
	Series []*failoverSeries `json:"series"`
	// Rows are the table's rows: backend × case × partitions.
	Rows []failoverRow `json:"rows"`
	// Lost is the number of acknowledged records missing at the end, over
	// every series.
	Lost int64 `json:"lost"`
}

// failoverSeries is one cluster's share of the benchmark: one backend and
// partition count, every case and run on the same topic and producer.
type failoverSeries struct {
	Backend    string `json:"backend"`
	Partitions int    `json:"partitions"`
	// Topic is the series' topic; with --topics above 1 Topics names
	// them all (the partitions spread evenly, in that order) and Topic is
	// the first.
	Topic  string   `json:"topic"`
	Topics []string `json:"topics,omitempty"`
	// MinInsyncReplicas is the topic's min.insync.replicas, or 0 when the
	// brokers did not accept that topic config (it was created without).
	MinInsyncReplicas int `json:"min_insync_replicas"`
	// ProducedPartitions is how many partitions (the first) the producer
	// wrote.
	ProducedPartitions int `json:"produced_partitions"`
	// TopicReadyMs is the time from CreateTopics sent until every written
	// partition's leader had acknowledged an acks=all write.
	TopicReadyMs float64        `json:"topic_ready_ms"`
	Runs         []*failoverRun `json:"runs,omitempty"`
	// Produced, Acked and Failed count the producer's records: sent,
	// acknowledged, and failed for good.
	Produced int64 `json:"produced"`
	Acked    int64 `json:"acked"`
	Failed   int64 `json:"failed"`
	// Consumed is the number of records read back at the end; Duplicates
	// the records read more than once (a retried batch written twice).
	Consumed   int64 `json:"consumed"`
	Duplicates int64 `json:"duplicates"`
	// Lost is the number of acknowledged records not read back; LostSample
	// names some of them as "topic-partition/sequence".
	Lost       int64    `json:"lost"`
	LostSample []string `json:"lost_sample,omitempty"`
	// Error says why the series stopped early, if it did.
	Error string `json:"error,omitempty"`
	// DataDir holds the brokers' data and logs, when they were kept.
	DataDir string `json:"data_dir,omitempty"`
}

// failoverRun is one SIGKILL and what followed it. Times are milliseconds
// after the kill.
type failoverRun struct {
	Case string `json:"case"`
	Run  int    `json:"run"`
	// Killed is the broker killed (case zone: the broker whose rack was
	// killed, the one case leader kills); Controller the controller
	// before the kill; KilledWasController whether it was killed.
	Killed              int32 `json:"killed"`
	Controller          int32 `json:"controller"`
	KilledWasController bool  `json:"killed_was_controller"`
	// KilledBrokers and Rack are, in case zone, every broker killed and
	// their rack.
	KilledBrokers []int32 `json:"killed_brokers,omitempty"`
	Rack          string  `json:"rack,omitempty"`
	// KilledAt is when SIGKILL was sent.
	KilledAt time.Time `json:"killed_at"`
	// DetectionMs is when a live broker first showed a partition whose
	// ISR lost a killed broker, or which lost its leader: the controller
	// has acted on the failure (metadataChange). DetectionSignal says
	// what changed first.
	DetectionMs     *float64 `json:"detection_ms"`
	DetectionSignal string   `json:"detection_signal,omitempty"`
	// MembershipMs is when a live broker first stopped listing the killed
	// broker (its session ended in the backend).
	MembershipMs *float64 `json:"membership_ms,omitempty"`
	// NewControllerMs is when a live broker first named another live
	// controller (case controller).
	NewControllerMs *float64 `json:"new_controller_ms,omitempty"`
	// Partitions are the partitions the killed brokers led.
	Partitions []partitionFailover `json:"partitions"`
	// ElectionMaxMs is when the last of them acknowledged a write from its
	// new leader: every affected partition accepts writes again.
	ElectionMaxMs *float64 `json:"election_max_ms,omitempty"`
	// LeadersVisibleMaxMs is when a live broker's Metadata had named a new
	// leader for the last of them: the controller's failover is done and
	// its UpdateMetadata applied.
	LeadersVisibleMaxMs *float64 `json:"leaders_visible_max_ms,omitempty"`
	// Unrecovered lists affected partitions, as topic-partition, that
	// acknowledged nothing from a new leader before the run's deadline.
	Unrecovered []string `json:"unrecovered,omitempty"`
	// RejoinMs is how long the restarted brokers took until every ISR was
	// full again (0 when no run followed).
	RejoinMs float64 `json:"rejoin_ms,omitempty"`
	// MachineCPUBusyPct and MachineCPUStealPct are how the machine's CPU
	// time was spent from the kill until the run's measurement ended, in
	// percent: busy, and stolen by the hypervisor for other guests, which
	// the run's times carry. Absent where /proc/stat cannot be read.
	MachineCPUBusyPct  *float64 `json:"machine_cpu_busy_pct,omitempty"`
	MachineCPUStealPct *float64 `json:"machine_cpu_steal_pct,omitempty"`
}

// setMachineCPU records u as the run's machine CPU.
func (r *failoverRun) setMachineCPU(u hostcpu.Usage) {
	busy, steal := 100*u.Busy, 100*u.Steal
	r.MachineCPUBusyPct, r.MachineCPUStealPct = &busy, &steal
}

// writeMachineCPU prints the range of the runs' machine CPU, and the run
// the hypervisor took the most from, when any run has the figures.
func writeMachineCPU(w io.Writer, series []*failoverSeries) {
	var busy, steal []float64
	var most *failoverRun
	var mostSeries *failoverSeries
	for _, s := range series {
		for _, r := range s.Runs {
			if r.MachineCPUBusyPct == nil {
				continue
			}
			busy, steal = append(busy, *r.MachineCPUBusyPct), append(steal, *r.MachineCPUStealPct)
			if most == nil || *r.MachineCPUStealPct > *most.MachineCPUStealPct {
				most, mostSeries = r, s
			}
		}
	}
	if most == nil {
		return
	}
	fmt.Fprintf(w, "machine CPU from each kill to the end of its run: %.0f-%.0f %% busy, %.1f-%.1f %% stolen by the hypervisor (the most: %s, %d partitions, %s run %d)\n",
		slices.Min(busy), slices.Max(busy), slices.Min(steal), slices.Max(steal), mostSeries.Backend, mostSeries.Partitions, most.Case, most.Run)
}

// killedDescription names the brokers r killed: "broker 2", or in case
// zone "brokers 2,5 (rack az2)".
func (r *failoverRun) killedDescription() string {
	if len(r.KilledBrokers) == 0 {
		return fmt.Sprintf("broker %d", r.Killed)
	}
	ids := make([]string, len(r.KilledBrokers))
	for i, id := range r.KilledBrokers {
		ids[i] = strconv.Itoa(int(id))
	}
	noun := "brokers"
	if len(ids) == 1 {
		noun = "broker"
	}
	return fmt.Sprintf("%s %s (rack %s)", noun, strings.Join(ids, ","), r.Rack)
}

// partitionFailover is one affected partition of a run. Times are
// milliseconds after the kill.
type partitionFailover struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	OldLeader int32  `json:"old_leader"`
	// NewLeader is the broker whose acknowledgement came first after the
	// kill (for a partition not written to, the leader the Metadata
	// named), -1 if none.
	NewLeader int32 `json:"new_leader"`
	// LeaderVisibleMs is when a live broker's Metadata first named a new
	// leader.
	LeaderVisibleMs *float64 `json:"leader_visible_ms"`
	// LastAckBeforeMs is the last acknowledgement from the old leader
	// (negative: before the kill).
	LastAckBeforeMs *float64 `json:"last_ack_before_ms"`
	// ElectionMs is the first acknowledgement from a new leader: election
	// and propagation.
	ElectionMs *float64 `json:"election_ms"`
	// UnavailabilityMs is the client-visible gap, last acknowledgement
	// before the kill to the first after.
	UnavailabilityMs *float64 `json:"unavailability_ms"`
}

// phaseStats summarises one phase's samples, in milliseconds.
type phaseStats struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
}

// failoverRow is one line of the table: a backend, case and partition
// count over all runs.
type failoverRow struct {
	Backend        string     `json:"backend"`
	Case           string     `json:"case"`
	Partitions     int        `json:"partitions"`
	Runs           int        `json:"runs"`
	Detection      phaseStats `json:"detection"`
	Election       phaseStats `json:"election"`
	Unavailability phaseStats `json:"unavailability"`
	// Rejoin is the time from restarting the killed broker until every
	// ISR was full again, one sample per run.
	Rejoin phaseStats `json:"rejoin"`
	// Acked and Lost are the series' (backend and partition count), shared
	// by its cases.
	Acked int64 `json:"acked"`
	Lost  int64 `json:"lost"`
}

// failoverPhases names the measured phases in table and chart order.
var failoverPhases = []string{"detection", "election", "unavailability"}

// phase returns the row's statistics of phase, one of failoverPhases.
func (r failoverRow) phase(name string) phaseStats {
	switch name {
	case "detection":
		return r.Detection
	case "election":
		return r.Election
	}
	return r.Unavailability
}

// summarise computes stats over samples: nearest-rank percentiles.
func summarise(samples []float64) phaseStats {
	if len(samples) == 0 {
		return phaseStats{}
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	rank := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	return phaseStats{N: len(s), P50: rank(0.50), P99: rank(0.99), Max: s[len(s)-1]}
}

// buildRows summarises every series per case, in the order of the series
// and of cases.
func buildRows(series []*failoverSeries, cases []string) []failoverRow {
	var rows []failoverRow
	for _, s := range series {
		for _, c := range cases {
			row := failoverRow{Backend: s.Backend, Case: c, Partitions: s.Partitions, Acked: s.Acked, Lost: s.Lost}
			var detection, election, unavailability, rejoin []float64
			for _, r := range s.Runs {
				if r.Case != c {
					continue
				}
				row.Runs++
				if r.DetectionMs != nil {
					detection = append(detection, *r.DetectionMs)
				}
				if r.RejoinMs > 0 {
					rejoin = append(rejoin, r.RejoinMs)
				}
				for _, p := range r.Partitions {
					if p.ElectionMs != nil {
						election = append(election, *p.ElectionMs)
					}
					if p.UnavailabilityMs != nil {
						unavailability = append(unavailability, *p.UnavailabilityMs)
					}
				}
			}
			row.Detection = summarise(detection)
			row.Election = summarise(election)
			row.Unavailability = summarise(unavailability)
			row.Rejoin = summarise(rejoin)
			rows = append(rows, row)
		}
	}
	return rows
}

// writeFailoverTable prints rows as an aligned table: the partitions the
// killed brokers led over all runs (AFFECTED), p50/p99/max of each phase in
// milliseconds ("-" for a phase with no sample), the killed broker's rejoin
// time (restart to every ISR full again, p50 and max) and the records
// acknowledged and lost.
func writeFailoverTable(w io.Writer, rows []failoverRow) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "BACKEND\tCASE\tPARTITIONS\tRUNS\tAFFECTED\tDETECT_P50\tDETECT_P99\tDETECT_MAX\tELECT_P50\tELECT_P99\tELECT_MAX\tUNAVAIL_P50\tUNAVAIL_P99\tUNAVAIL_MAX\tREJOIN_P50\tREJOIN_MAX\tACKED\tLOST\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t", r.Backend, r.Case, r.Partitions, r.Runs, r.Election.N)
		for _, ph := range failoverPhases {
			st := r.phase(ph)
			if st.N == 0 {
				fmt.Fprint(tw, "-\t-\t-\t")
				continue
			}
			fmt.Fprintf(tw, "%.0f\t%.0f\t%.0f\t", st.P50, st.P99, st.Max)
		}
		if r.Rejoin.N == 0 {
			fmt.Fprint(tw, "-\t-\t")
		} else {
			fmt.Fprintf(tw, "%.0f\t%.0f\t", r.Rejoin.P50, r.Rejoin.Max)
		}
		fmt.Fprintf(tw, "%d\t%d\t\n", r.Acked, r.Lost)
	}
	return tw.Flush()
}

// msSince returns t - ref in milliseconds, or nil when t is zero.
func msSince(t, ref time.Time) *float64 {
	if t.IsZero() {
		return nil
	}
	ms := math.Round(float64(t.Sub(ref))/float64(time.Microsecond)) / 1000
	return &ms
}
