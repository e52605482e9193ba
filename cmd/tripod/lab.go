package main

// The lab's commands: `tripod bench` and `tripod verify`. Each parses its
// flags into its package's Config and calls it (lab/bench, lab/verify);
// the measuring and the checking live there.

import (
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/tripodmq/tripod/lab/bench"
	"github.com/tripodmq/tripod/lab/verify"
)

// newBenchCmd builds `tripod bench`, the parent of the benchmarks that
// measure a tripod cluster the way its users would; lab/bench runs them.
func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Benchmark a tripod cluster (produce and consume throughput, latency, failover, OpenMessaging Benchmark workloads)",
	}
	cmd.AddCommand(newBenchProduceCmd(), newBenchConsumeCmd(), newBenchFailoverCmd(), newBenchTxnCmd(), newBenchMigrateCmd(), newBenchOMBCmd(), newBenchSpinCmd(), newBenchKfakeCmd())
	return cmd
}

// brokerGoMaxProcsUsage is the help of the benchmarks' --broker-gomaxprocs.
const brokerGoMaxProcsUsage = "GOMAXPROCS of each broker the benchmark starts, as a container's CPU limit would set it; 0: Go's default, every CPU this process may use"

// newBenchProduceCmd builds `tripod bench produce`.
func newBenchProduceCmd() *cobra.Command {
	cfg := bench.DefaultProduceConfig()
	cmd := &cobra.Command{
		Use:   "produce",
		Short: "Measure produce throughput and latency, like kafka-producer-perf-test",
		Long: `Measure produce throughput and per-record latency (send to ack) for every
combination of --acks, --replication-factor and --record-size, each on a
fresh topic, and print one kafka-producer-perf-test line per run and a
summary table. With --bootstrap it uses that cluster; without it, it starts
--brokers brokers of this binary on --coord (with a local ZooKeeper or an
embedded etcd as ` + "`tripod dev`" + ` does) and stops them at the end.
After each run's line it prints the CPU time the brokers (the processes it
started: tripod's brokers or kfake's) and the producer (this process) used
from the first record to the last ack, also per million records, and how
busy the machine was.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return bench.Produce(ctx, cfg, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Bootstrap, "bootstrap", cfg.Bootstrap, "HOST:PORT[,HOST:PORT] of an existing cluster; empty: start one")
	f.StringVar(&cfg.Coord, "coord", cfg.Coord, "coordination backend of the cluster started without --bootstrap: raft, zk or etcd; kfake starts franz-go's fake cluster instead (no replication, no disk), for comparison")
	f.IntVar(&cfg.Brokers, "brokers", cfg.Brokers, "brokers of the cluster started without --bootstrap")
	f.IntVar(&cfg.Records, "records", cfg.Records, "records to produce per run")
	f.IntSliceVar(&cfg.RecordSizes, "record-size", cfg.RecordSizes, "record value sizes in bytes (comma list or repeated)")
	f.StringSliceVar(&cfg.Acks, "acks", cfg.Acks, "acks of the producer: 1 or all (comma list or repeated)")
	f.IntSliceVar(&cfg.ReplicationFactors, "replication-factor", cfg.ReplicationFactors, "replication factors of the topics (comma list or repeated)")
	f.IntVar(&cfg.Partitions, "partitions", cfg.Partitions, "partitions of every topic")
	f.Float64Var(&cfg.Throughput, "throughput", cfg.Throughput, "records/s cap per run; -1: unlimited")
	f.StringVar(&cfg.JSONPath, "json", cfg.JSONPath, "file to write every run's figures to as JSON")
	f.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "how long one run (topic creation and produce) may take")
	f.DurationVar(&cfg.Linger, "linger", cfg.Linger, "how long the producer waits to fill a batch (linger.ms); 0, kafka-producer-perf-test's default, sends at once")
	f.IntVar(&cfg.BatchBytes, "batch-size", cfg.BatchBytes, "largest record batch in bytes (batch.size)")
	f.IntVar(&cfg.BrokerGoMaxProcs, "broker-gomaxprocs", cfg.BrokerGoMaxProcs, brokerGoMaxProcsUsage+" (without --bootstrap)")
	f.StringArrayVar(&cfg.Sets, "set", cfg.Sets, "broker property key=value for every broker started without --bootstrap (repeatable)")
	f.StringVar(&cfg.Compression, "compression", cfg.Compression, "compression.type of the producer: none, gzip, snappy, lz4 or zstd; compressed runs send records of random letters that differ from one another, as real records do")
	f.IntVar(&cfg.MaxInFlight, "max-in-flight", cfg.MaxInFlight, "produce requests in flight per broker (max.in.flight.requests.per.connection) of acks=1 runs; acks=all runs are idempotent, with 5")
	return cmd
}

// newBenchConsumeCmd builds `tripod bench consume`.
func newBenchConsumeCmd() *cobra.Command {
	cfg := bench.DefaultConsumeConfig()
	cmd := &cobra.Command{
		Use:   "consume",
		Short: "Measure consumer throughput and the brokers' CPU per GB read, like kafka-consumer-perf-test",
		Long: `Measure how fast a fresh consumer reads a topic from its start, and what
the brokers spend doing it: produce --records records of --record-size
bytes into a topic, then --runs times have a new franz-go consumer read
every record from offset 0 (checked: each once, in order) and print
kafka-consumer-perf-test's figures with the brokers' CPU time (user and
system, from /proc) per GB read.

Without --bootstrap it starts --brokers brokers of this binary on --coord.
--broker-binary A,B starts a cluster of each binary instead, fills each,
and alternates the runs between them (A, B, A, B, ...), so two builds are
compared side by side in one run on a machine whose load drifts.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return bench.Consume(ctx, cfg, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Bootstrap, "bootstrap", cfg.Bootstrap, "HOST:PORT[,HOST:PORT] of an existing cluster; empty: start one")
	f.StringVar(&cfg.Coord, "coord", cfg.Coord, "coordination backend of the cluster started without --bootstrap: raft, zk or etcd")
	f.IntVar(&cfg.Brokers, "brokers", cfg.Brokers, "brokers of the cluster started without --bootstrap")
	f.StringSliceVar(&cfg.BrokerBinaries, "broker-binary", cfg.BrokerBinaries, "tripod executables whose brokers to compare, each on a cluster of its own, the runs alternating (comma list); empty: this binary")
	f.IntVar(&cfg.Records, "records", cfg.Records, "records in the topic, read by every run")
	f.IntVar(&cfg.RecordSize, "record-size", cfg.RecordSize, "record value size in bytes")
	f.IntVar(&cfg.Partitions, "partitions", cfg.Partitions, "partitions of the topic")
	f.IntVar(&cfg.ReplicationFactor, "replication-factor", cfg.ReplicationFactor, "replication factor of the topic")
	f.IntVar(&cfg.Runs, "runs", cfg.Runs, "reads of the whole topic, each by a fresh consumer (per binary)")
	f.IntVar(&cfg.BrokerGoMaxProcs, "broker-gomaxprocs", cfg.BrokerGoMaxProcs, brokerGoMaxProcsUsage+" (without --bootstrap)")
	f.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "how long filling the topic, and each run, may take")
	f.StringVar(&cfg.JSONPath, "json", cfg.JSONPath, "file to write every run's figures to as JSON")
	return cmd
}

// newBenchTxnCmd builds `tripod bench txn`.
func newBenchTxnCmd() *cobra.Command {
	cfg := bench.DefaultTxnConfig()
	cmd := &cobra.Command{
		Use:   "txn",
		Short: "Measure transactions per second, and what read_committed costs a consumer",
		Long: `Measure a transactional producer: --transactions transactions, one at a
time, each of --records-per-txn records of --record-size bytes spread over
every partition and committed, printing transactions/s, records/s and the
commit latency; then the same records through an idempotent producer
without transactions; then the topic read from its start by fresh
consumers at read_uncommitted and read_committed, alternated --runs times,
with the ratio of their MB/s. With --bootstrap it uses that cluster;
without it, it starts --brokers brokers of this binary on --coord.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return bench.Txn(ctx, cfg, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Bootstrap, "bootstrap", cfg.Bootstrap, "HOST:PORT[,HOST:PORT] of an existing cluster; empty: start one")
	f.StringVar(&cfg.Coord, "coord", cfg.Coord, "coordination backend of the cluster started without --bootstrap: raft, zk or etcd")
	f.IntVar(&cfg.Brokers, "brokers", cfg.Brokers, "brokers of the cluster started without --bootstrap")
	f.IntVar(&cfg.Transactions, "transactions", cfg.Transactions, "transactions to commit")
	f.IntVar(&cfg.RecordsPerTxn, "records-per-txn", cfg.RecordsPerTxn, "records per transaction, spread over every partition")
	f.IntVar(&cfg.RecordSize, "record-size", cfg.RecordSize, "record value size in bytes")
	f.IntVar(&cfg.Partitions, "partitions", cfg.Partitions, "partitions of the topic")
	f.IntVar(&cfg.ReplicationFactor, "replication-factor", cfg.ReplicationFactor, "replication factor of the topic")
	f.IntVar(&cfg.Runs, "runs", cfg.Runs, "reads of the topic per isolation level, alternated")
	f.StringVar(&cfg.JSONPath, "json", cfg.JSONPath, "file to write the figures to as JSON")
	f.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "how long the whole benchmark may take")
	f.IntVar(&cfg.BrokerGoMaxProcs, "broker-gomaxprocs", cfg.BrokerGoMaxProcs, brokerGoMaxProcsUsage+" (without --bootstrap)")
	return cmd
}

// newBenchFailoverCmd builds `tripod bench failover`.
func newBenchFailoverCmd() *cobra.Command {
	cfg := bench.DefaultFailoverConfig()
	cmd := &cobra.Command{
		Use:   "failover",
		Short: "Measure how fast each coordination backend recovers from a crashed broker",
		Long: `Measure failover per coordination backend. For every --coord and --partitions
it starts a cluster of --brokers brokers of this binary (separate processes,
all with the same --session-timeout; on raft brokers 1..--voters vote in the
Raft quorum and the others observe; a local ZooKeeper from Debian's
zookeeper package or --zk-connect, an embedded etcd or --etcd-endpoints),
creates a topic with
that many partitions (or --topics topics sharing them evenly),
replication factor 3 and min.insync.replicas=2, and runs an acks=all
producer writing --rate records/s to every partition (or to the first
--produce-partitions, counted over the topics in order), each record
carrying its own sequence number. Then, --runs times per --case and
--failure, it fails a broker and measures, for every partition the broker
led:

  detection       kill -> a live broker's Metadata first shows a partition
                  whose leader, leader epoch or ISR changed (the controller
                  acted), polled every --poll-interval
  election        kill -> the partition's first acknowledgement from a new
                  leader (elected, propagated, and accepting writes)
  unavailability  last acknowledgement from the old leader -> first from
                  the new one, as the client saw it

A partition not written to (--produce-partitions) has recovered when a live
broker's Metadata names its new leader; with --produce-partitions the output
says when that held for every partition the broker led (the controller's
failover done and its UpdateMetadata applied).

Case leader kills the broker leading the most partitions, preferring one that
is not the controller; case controller kills the controller (the partitions it
led count too); case zone puts the brokers in racks az1, az2 and az3 (round
robin, broker.rack), so that every partition has one replica per rack, and
kills every broker of the rack of the broker case leader kills, at once: with
--brokers 6 a zone is two brokers, and min.insync.replicas=2 keeps acks=all
writes going on the two replicas left in the other zones. Failure crash SIGKILLs it (its port then refuses
connections, which the controller's crash probes see at once), pause
SIGSTOPs it until every partition recovered (its session must expire),
cut drops its Kafka and coordination proxies (zk and etcd only). Cases
other than a crash are named with the failure: leader-pause,
controller-cut. Between runs it restarts, resumes or reconnects the broker
and waits until every ISR is full. At the end it reads every partition back and counts the
acknowledged records that are missing; any loss makes the command fail.

--background-load N keeps N CPUs busy in another process (tripod bench spin)
throughout, so that the brokers, the coordination servers and the producer
share the rest, as on a machine with other tenants.

It prints a table (p50/p99/max of each phase in ms), writes every measurement
to DIR/failover.json and a chart to DIR/failover.svg; a progress line goes to
stderr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return bench.Failover(ctx, cfg, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&cfg.Coords, "coord", cfg.Coords, "coordination backends to compare: raft, zk, etcd (comma list)")
	f.IntVar(&cfg.Brokers, "brokers", cfg.Brokers, "brokers in each cluster (the topics keep replication factor 3)")
	f.IntVar(&cfg.Voters, "voters", cfg.Voters, "raft: brokers 1..V vote in the Raft quorum, the others observe (0: every broker; ignored on zk and etcd)")
	f.IntSliceVar(&cfg.Partitions, "partitions", cfg.Partitions, "partition counts of the topic (comma list), one cluster each")
	f.IntVar(&cfg.Topics, "topics", cfg.Topics, "topics the partitions spread over evenly (ZooKeeper holds a topic of at most about 55 000 partitions of 3 replicas)")
	f.IntVar(&cfg.Runs, "runs", cfg.Runs, "kills per case, backend and partition count")
	f.StringSliceVar(&cfg.Cases, "case", cfg.Cases, "what to fail: leader (the broker leading the most partitions), controller, zone (every broker of the leader's rack; brokers in 3 racks) (comma list)")
	f.StringSliceVar(&cfg.Kinds, "failure", cfg.Kinds, "how to fail it: crash (SIGKILL), pause (SIGSTOP past the session timeout), cut (its Kafka and coordination proxies dropped; zk and etcd) (comma list)")
	f.StringVar(&cfg.Out, "out", cfg.Out, "directory for failover.json and failover.svg")
	f.DurationVar(&cfg.SessionTimeout, "session-timeout", cfg.SessionTimeout, "every broker's session timeout (the failure detection time), the same on every backend")
	f.StringVar(&cfg.EtcdEndpoints, "etcd-endpoints", cfg.EtcdEndpoints, "etcd client URLs, comma separated; empty: an embedded etcd")
	f.StringVar(&cfg.ZKConnect, "zk-connect", cfg.ZKConnect, "ZooKeeper HOST:PORT[,HOST:PORT]; empty: a local ZooKeeper from Debian's zookeeper package (its tickTime must allow --session-timeout)")
	f.Float64Var(&cfg.Rate, "rate", cfg.Rate, "records/s the producer writes to each partition (the resolution of the ack times is 1/rate)")
	f.IntVar(&cfg.ProducePartitions, "produce-partitions", cfg.ProducePartitions, "write only to the first N partitions (0: all); the others' failover is when a live broker's Metadata names their new leader")
	f.StringArrayVar(&cfg.Sets, "set", cfg.Sets, "broker property key=value for every broker (repeatable)")
	f.IntVar(&cfg.BrokerGoMaxProcs, "broker-gomaxprocs", cfg.BrokerGoMaxProcs, brokerGoMaxProcsUsage)
	f.IntVar(&cfg.BackgroundLoad, "background-load", cfg.BackgroundLoad, "CPUs another process (tripod bench spin) keeps busy from the first cluster's start to the end, as another tenant of the brokers' machine would; 0: none")
	f.DurationVar(&cfg.ClientBackoff, "client-backoff", cfg.ClientBackoff, "the producer's retry backoff and metadata min age (Kafka's retry.backoff.ms)")
	f.DurationVar(&cfg.PollInterval, "poll-interval", cfg.PollInterval, "how often each live broker's Metadata is read after a kill")
	f.DurationVar(&cfg.RecoverTimeout, "recover-timeout", cfg.RecoverTimeout, "how long after a kill every affected partition may take to acknowledge a write again")
	f.DurationVar(&cfg.ISRTimeout, "isr-timeout", cfg.ISRTimeout, "how long a restarted broker may take until every ISR is full again")
	f.StringVar(&cfg.LogLevel, "broker-log-level", cfg.LogLevel, "brokers' log level: trace, debug, info, warn or error (with --keep, to see what a slow failover waited for)")
	f.BoolVar(&cfg.Keep, "keep", cfg.Keep, "keep the brokers' data and logs (they are always kept when a run fails or loses records)")
	return cmd
}

// newBenchMigrateCmd builds `tripod bench migrate`.
func newBenchMigrateCmd() *cobra.Command {
	cfg := bench.DefaultMigrateConfig()
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Measure what moving a loaded cluster between coordination backends costs its clients",
		Long: `Measure a live migration (tripod migrate) per direction and partition count.
For every --direction FROM:TO and --partitions it starts 3 brokers of this
binary on FROM (a local ZooKeeper from Debian's zookeeper package, an
embedded etcd, or Raft among the brokers), creates a topic with that many
partitions, replication factor 3 and min.insync.replicas=2, and runs an
acks=all producer writing --rate records/s to every partition, while a
probe changes the topic's retention.ms every --probe-interval (a metadata
write through the controller). After --before it runs tripod migrate to a
fresh TO (a new chroot or prefix, or Raft voters on free ports), then lets
the load run --after on TO, and reads every partition back.

It reports, in ms:

  MIGRATION       tripod migrate's start to its end: every broker
                  registered on TO and both sides compared
  WRITES_REFUSED  the longest time without a metadata write acknowledged,
                  among the spans overlapping the migration (the source is
                  frozen from the start of the copy to the switch)
  GAP_BEFORE      the same before the migration: the probe's own cadence
  BEFORE_*, DURING_*, AFTER_*
                  produce latency (send to acks=all acknowledgement) p50,
                  p99 and max of the records acknowledged before, during
                  and after the migration

and the records acknowledged and lost (acknowledged, not read back); any
loss makes the command fail. Every measurement goes to DIR/migrate.json.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return bench.Migrate(ctx, cfg, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&cfg.Directions, "direction", cfg.Directions, "moves to measure, FROM:TO with FROM and TO two of raft, zk, etcd (comma list)")
	f.IntSliceVar(&cfg.Partitions, "partitions", cfg.Partitions, "partition counts of the topic (comma list), one cluster each")
	f.Float64Var(&cfg.Rate, "rate", cfg.Rate, "records/s the producer writes to each partition")
	f.DurationVar(&cfg.Before, "before", cfg.Before, "how long the load runs, measured, before the migration")
	f.DurationVar(&cfg.After, "after", cfg.After, "how long the load runs, measured, after the migration")
	f.DurationVar(&cfg.ProbeInterval, "probe-interval", cfg.ProbeInterval, "how often the probe changes a topic config")
	f.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "how long each migration may take (tripod migrate --timeout)")
	f.DurationVar(&cfg.SessionTimeout, "session-timeout", cfg.SessionTimeout, "every broker's session timeout, the same on every backend")
	f.DurationVar(&cfg.ClientBackoff, "client-backoff", cfg.ClientBackoff, "the producer's retry backoff and metadata min age (Kafka's retry.backoff.ms)")
	f.StringArrayVar(&cfg.Sets, "set", cfg.Sets, "broker property key=value for every broker (repeatable)")
	f.IntVar(&cfg.BrokerGoMaxProcs, "broker-gomaxprocs", cfg.BrokerGoMaxProcs, brokerGoMaxProcsUsage)
	f.StringVar(&cfg.Out, "out", cfg.Out, "directory for migrate.json")
	f.StringVar(&cfg.LogLevel, "broker-log-level", cfg.LogLevel, "brokers' log level: trace, debug, info, warn or error")
	f.BoolVar(&cfg.Keep, "keep", cfg.Keep, "keep the brokers' data and logs (they are always kept when a run fails or loses records)")
	return cmd
}

// newVerifyCmd builds `tripod verify`.
func newVerifyCmd() *cobra.Command {
	cfg := verify.DefaultConfig()
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check a tripod cluster for lost, duplicated and misread records under faults (Jepsen-style)",
		Long: `Check tripod's safety the way Jepsen's Kafka test does. Unless --bootstrap names
an existing cluster, it starts 3 brokers of this binary on --coord (each behind
a cuttable proxy), with min.insync.replicas=2, unclean.leader.election.enable=false
and replication.truncation=fetch, and creates a topic of --partitions
partitions with replication factor 3.

For --duration, --producers write unique values (producer name and sequence)
round robin to every partition at --rate records/s each, every producer through
another broker: idempotent (acks=all), plain (acks=all, not idempotent) and
acks1 (acks=1). --consumers read every partition from its start by assignment.
Meanwhile faults from --faults are injected one at a time, from a schedule drawn
from --seed, each once the cluster is steady (every broker live, every ISR
full), on the leader of a random partition, the controller or a random broker:

  kill     SIGKILL, then start again
  pause    SIGSTOP for longer than --session-timeout, then SIGCONT
  cut      the broker's Kafka proxy cut for longer than --session-timeout
           (clients and followers cannot reach it; its session lives on)
  restart  SIGTERM (a controlled shutdown), then start again
  coord    the ZooKeeper or etcd server stopped and started again (zk and
           etcd only, and only a server this command started)

The run lasts --duration, and longer if need be until every kind in --faults
has been injected once. Then every fault is healed, the cluster waits to be steady, and
a fresh consumer reads every partition from its start to its end offset. The
history is then checked for: lost (acknowledged, missing from the log),
duplicated (one value at two offsets), inconsistent-offsets (two values read at
one offset), non-monotonic (a consumer's offsets going back), skipped (a
consumer stepping over an offset known to hold a value) and wrong-offset
(acknowledged at one offset, read at another), counted per producer kind.
acks1 losses and misplacements, and plain duplicates, are reported but are not
anomalies.

With --workload txn the producers are transactional (txn=2 by default): each
transaction writes 3 records to 3 partitions, every 4th is aborted on purpose.
A consume-transform-produce stage (a consumer group whose transactions write
each record it reads, transformed, to the topic verify-out and commit its
input offsets, every 5th aborted on purpose) runs meanwhile, and the consumers
read read_committed. After the faults, each partition gets an "end" record,
the stage finishes, and both topics are read back read_committed. The checks
add: aborted-read (a read_committed consumer reading an aborted write, G1a),
partial-read (part of a committed transaction, or of one whose commit was
never answered, in the final read), transform-lost (an input record the stage
committed past with no transformation in its output) and transform-duplicated
(an input record transformed twice in its output).

With --migrate-to BACKEND the cluster moves to that backend halfway through
--duration while the workload and the faults go on: verify runs tripod migrate
--to BACKEND on its brokers, to a fresh chroot of the ZooKeeper or a fresh
prefix of the etcd (its own, or --zk-connect, --etcd-endpoints) or to Raft
voters on free ports, and prints the migration's lines as they come. The run
fails if the migration fails or does not finish within the rest of --duration
plus --steady-timeout. verify does not finalize: a broker a fault restarts
starts on --coord and follows the cluster to the target by itself; once the
migration is done the coord fault restarts the target's server (none on raft).

It prints the fault log as it goes, then a table, and writes everything to
--out as JSON. Exit status: 0 when every check is clean, 1 when an anomaly was
found, 2 when the run itself failed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.SeedSet = cmd.Flags().Changed("seed")
			cfg.FaultsSet = cmd.Flags().Changed("faults")
			cfg.ProducersSet = cmd.Flags().Changed("producers")
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return verify.Run(ctx, cfg, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &exitCodeError{code: verify.ExitFailed, err: err}
	})
	f := cmd.Flags()
	f.StringVar(&cfg.Coord, "coord", cfg.Coord, "coordination backend of the cluster it starts: raft, zk or etcd")
	f.BoolVar(&cfg.Racks, "racks", cfg.Racks, "put the brokers in racks az1, az2, az3 with replica.selector.class=RackAwareReplicaSelector, and each consumer in one of them (client.rack): consumers read from followers through the faults")
	f.StringVar(&cfg.MigrateTo, "migrate-to", cfg.MigrateTo, "move the cluster to this coordination backend halfway through --duration (tripod migrate): raft, zk or etcd; empty: stay on --coord")
	f.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long the workload and the faults run")
	f.StringSliceVar(&cfg.Faults, "faults", cfg.Faults, "fault kinds to inject: kill, pause, cut, restart, coord (comma list; empty for none)")
	f.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the fault schedule (default: from the clock; printed so that a run can be replayed)")
	f.IntVar(&cfg.Partitions, "partitions", cfg.Partitions, "partitions of the topic")
	f.StringVar(&cfg.Workload, "workload", cfg.Workload, "what the clients do: records (idempotent, plain and acks1 producers) or txn (transactional producers, a consume-transform-produce stage, read_committed consumers)")
	f.StringSliceVar(&cfg.Producers, "producers", cfg.Producers, "producers per kind, KIND=COUNT with KIND idempotent, plain or acks1; txn with --workload txn (default txn=2) (comma list)")
	f.IntVar(&cfg.Consumers, "consumers", cfg.Consumers, "consumers reading every partition during the run")
	f.Float64Var(&cfg.Rate, "rate", cfg.Rate, "records/s each producer writes, over all partitions")
	f.StringVar(&cfg.Out, "out", cfg.Out, "file the result is written to as JSON")
	f.StringVar(&cfg.Bootstrap, "bootstrap", cfg.Bootstrap, "HOST:PORT[,HOST:PORT] of an existing cluster to check (at least 3 brokers); faults are then left to the user")
	f.StringVar(&cfg.ZKConnect, "zk-connect", cfg.ZKConnect, "with --coord zk: ZooKeeper HOST:PORT[,HOST:PORT] of yours; empty: a local ZooKeeper from Debian's zookeeper package")
	f.StringVar(&cfg.EtcdEndpoints, "etcd-endpoints", cfg.EtcdEndpoints, "with --coord etcd: etcd client URLs of yours, comma separated; empty: an embedded etcd")
	f.DurationVar(&cfg.SessionTimeout, "session-timeout", cfg.SessionTimeout, "every broker's session timeout (failure detection time); pause and cut last longer")
	f.DurationVar(&cfg.SteadyTimeout, "steady-timeout", cfg.SteadyTimeout, "how long the cluster may take to be steady again after a fault")
	f.BoolVar(&cfg.Keep, "keep", cfg.Keep, "keep the brokers' data and logs (always kept when a run fails or finds an anomaly)")
	f.StringVar(&cfg.LogLevel, "broker-log-level", cfg.LogLevel, "brokers' log level: trace, debug, info, warn or error")
	f.StringArrayVar(&cfg.Sets, "set", cfg.Sets, "broker property key=value for every broker, after verify's own (repeatable)")
	return cmd
}

// newBenchOMBCmd builds `tripod bench omb`.
func newBenchOMBCmd() *cobra.Command {
	cfg := bench.DefaultOMBConfig()
	var security clientSecurity
	var duration, warmup time.Duration
	cmd := &cobra.Command{
		Use:   "omb",
		Short: "Run an OpenMessaging Benchmark workload: publish and end-to-end latency, rates, backlog",
		Long: `Run an OpenMessaging Benchmark (OMB) workload file (--workload, OMB's YAML
keys; tripod ships OMB's standard ones in lab/bench/omb/workloads) against
the Kafka-protocol cluster of --bootstrap (tripod, Kafka, Redpanda: the
same file on each compares them), or without it against --brokers brokers
of this binary on --coord that it starts and stops.

It creates the workload's topics (--replication-factor), a consumer group
per subscription with consumerPerSubscription consumers each, reading from
the earliest offset, and producersPerTopic producers per topic (--acks)
sending producerRate messages/s in all, spread evenly (0: as fast as the
cluster acknowledges, at most --max-in-flight unacknowledged per
producer). Each message carries its send time in its first 8 bytes, so
consumers measure the end-to-end latency (receive minus send, one clock).

Every --window (OMB's 10 s) it prints the publish and consume rates,
the backlog (produced minus consumed) and the publish (send to ack) and
end-to-end latencies; after warmupDurationMinutes (OMB's default 1, or
--warmup) it measures testDurationMinutes (or --duration). Then it stops
the producers and waits until every acknowledged message was read. It
prints the aggregated p50, p75, p95, p99, p99.9, p99.99 and max of both
latencies after the warm-up, and writes OMB's TestResult fields as JSON
and a chart of the rates and latencies (SVG) to --out.

With --profile DIR the brokers it starts serve Go's runtime profiles, and
over the test duration it captures every broker's execution trace and CPU
profile and this process's own (the clients) into DIR, for go tool trace
and go tool pprof: a latency spike in the windows shows there as what each
process was doing at the time.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			if cmd.Flags().Changed("duration") {
				cfg.Duration = &duration
			}
			if cmd.Flags().Changed("warmup") {
				cfg.Warmup = &warmup
			}
			opts, err := security.clientOpts()
			if err != nil {
				return err
			}
			cfg.ClientOpts = opts
			return bench.OMB(ctx, cfg, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Workload, "workload", cfg.Workload, "OpenMessaging Benchmark workload file (YAML), e.g. lab/bench/omb/workloads/1-topic-16-partitions-1kb.yaml")
	f.StringVar(&cfg.Bootstrap, "bootstrap", cfg.Bootstrap, "HOST:PORT[,HOST:PORT] of an existing Kafka-protocol cluster; empty: start one")
	f.StringVar(&cfg.Coord, "coord", cfg.Coord, "coordination backend of the cluster started without --bootstrap: raft, zk or etcd; kfake starts franz-go's fake cluster instead (no replication, no disk), for comparison")
	f.IntVar(&cfg.Brokers, "brokers", cfg.Brokers, "brokers of the cluster started without --bootstrap")
	f.IntVar(&cfg.BrokerGoMaxProcs, "broker-gomaxprocs", cfg.BrokerGoMaxProcs, brokerGoMaxProcsUsage+" (without --bootstrap)")
	f.IntVar(&cfg.ReplicationFactor, "replication-factor", cfg.ReplicationFactor, "replication factor of the workload's topics")
	f.StringVar(&cfg.Acks, "acks", cfg.Acks, "acks of the producers: 1 or all")
	f.DurationVar(&duration, "duration", 0, "how long to measure, instead of the workload's testDurationMinutes")
	f.DurationVar(&warmup, "warmup", 0, "how long to warm up, left out of the result, instead of the workload's warmupDurationMinutes (OMB's default 1m); 0: none")
	f.DurationVar(&cfg.Window, "window", cfg.Window, "how often the rates and latencies are sampled (OMB: 10s)")
	f.DurationVar(&cfg.Linger, "linger", cfg.Linger, "how long the producers wait to fill a batch (linger.ms; OMB's Kafka driver: 1ms)")
	f.IntVar(&cfg.BatchBytes, "batch-size", cfg.BatchBytes, "largest record batch in bytes (batch.size; OMB's Kafka driver: 131072)")
	f.IntVar(&cfg.MaxInFlight, "max-in-flight", cfg.MaxInFlight, "unacknowledged messages per producer at producerRate 0 (max rate)")
	f.DurationVar(&cfg.DrainTimeout, "drain-timeout", cfg.DrainTimeout, "how long, after the producers stop, the consumers may take to read every acknowledged message")
	f.StringVar(&cfg.Out, "out", cfg.Out, "directory for the JSON result and the SVG chart")
	f.StringArrayVar(&cfg.Sets, "set", cfg.Sets, "broker property key=value for every broker started without --bootstrap (repeatable)")
	f.Int64Var(&cfg.HeapFloor, "heap-floor", cfg.HeapFloor, "smallest heap in bytes at which this process's garbage collector runs, so that the clients' collections stay out of the latencies they measure; 0, or GOGC set in the environment: Go's default pacing")
	f.StringVar(&cfg.Profile, "profile", cfg.Profile, "directory for the execution traces and CPU profiles of the started brokers and of this process over --duration, and the brokers' heap allocations (broker-N.trace, broker-N.cpu.pprof, broker-N.allocs.pprof, client.*), for go tool trace and go tool pprof; empty: none")
	security.addFlags(cmd)
	return cmd
}

// newBenchSpinCmd builds `tripod bench spin`, the background load of
// `bench failover --background-load`.
func newBenchSpinCmd() *cobra.Command {
	cores := 1
	cmd := &cobra.Command{
		Use:   "spin",
		Short: "Keep CPUs busy until stopped (the load of bench failover --background-load)",
		Long: `Keep --cores CPUs busy hashing until interrupted. bench failover
--background-load runs it beside the brokers; run it yourself to load a
machine while you measure something else.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return bench.Spin(ctx, cores)
		},
	}
	cmd.Flags().IntVar(&cores, "cores", cores, "CPUs to keep busy")
	return cmd
}

// newBenchKfakeCmd builds `tripod bench kfake`, the comparison target of
// `bench produce` and `bench omb --coord kfake`.
func newBenchKfakeCmd() *cobra.Command {
	brokers := 3
	cmd := &cobra.Command{
		Use:   "kfake",
		Short: "Run franz-go's kfake fake cluster on loopback until stopped (the comparison target of --coord kfake)",
		Long: `Run franz-go's kfake, an in-memory Kafka-protocol fake with no
replication and no disk, with --brokers brokers on loopback ports until
interrupted; it prints their addresses, comma separated, on one line.
bench produce and bench omb start it with --coord kfake, so that the same
workload runs against tripod and against the fake from the same command.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return bench.RunKfake(ctx, brokers, cmd.OutOrStdout())
		},
	}
	cmd.Flags().IntVar(&brokers, "brokers", brokers, "brokers of the fake cluster")
	return cmd
}
