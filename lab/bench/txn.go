package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tripodmq/tripod/internal/createtopics"
)

// TxnConfig is what `tripod bench txn` measures, and how.
type TxnConfig struct {
	// Bootstrap is HOST:PORT[,HOST:PORT] of an existing cluster; empty:
	// the benchmark starts Brokers brokers on Coord.
	Bootstrap string
	Coord     string
	Brokers   int
	// Transactions of RecordsPerTxn records of RecordSize bytes each,
	// spread over Partitions partitions of a topic of ReplicationFactor.
	Transactions      int
	RecordsPerTxn     int
	RecordSize        int
	Partitions        int
	ReplicationFactor int
	// Runs is how many times each isolation level reads the topic, the
	// two alternated.
	Runs int
	// JSONPath is the file the figures are written to; empty for none.
	JSONPath string
	// Timeout bounds the whole benchmark.
	Timeout time.Duration
	// BrokerGoMaxProcs and Binary are as `tripod bench produce`'s.
	BrokerGoMaxProcs int
	Binary           string
}

// DefaultTxnConfig returns the defaults of `tripod bench txn`: 100
// records of 1 KiB per transaction over 6 partitions, replication factor 3.
func DefaultTxnConfig() TxnConfig {
	return TxnConfig{
		Coord: "raft", Brokers: 3,
		Transactions: 300, RecordsPerTxn: 100, RecordSize: 1024,
		Partitions: 6, ReplicationFactor: 3, Runs: 3,
		Timeout: 10 * time.Minute,
	}
}

// validate names the first bad flag.
func (o *TxnConfig) validate() error {
	switch {
	case o.Bootstrap == "" && !slices.Contains([]string{"raft", "zk", "etcd"}, o.Coord):
		return fmt.Errorf("--coord %q: must be raft, zk or etcd", o.Coord)
	case o.Bootstrap == "" && (o.Brokers < 1 || o.Brokers > 9):
		return fmt.Errorf("--brokers %d: must be between 1 and 9", o.Brokers)
	case o.Transactions < 1:
		return fmt.Errorf("--transactions %d: must be at least 1", o.Transactions)
	case o.RecordsPerTxn < 1 || o.RecordsPerTxn > 100000:
		return fmt.Errorf("--records-per-txn %d: must be between 1 and 100000", o.RecordsPerTxn)
	case o.RecordSize < 1 || o.RecordSize > 1<<20:
		return fmt.Errorf("--record-size %d: must be between 1 and 1048576", o.RecordSize)
	case o.Partitions < 1 || o.Partitions > 10000:
		return fmt.Errorf("--partitions %d: must be between 1 and 10000", o.Partitions)
	case o.ReplicationFactor < 1 || o.Bootstrap == "" && o.ReplicationFactor > o.Brokers:
		return fmt.Errorf("--replication-factor %d: must be between 1 and the brokers (%d)", o.ReplicationFactor, o.Brokers)
	case o.Runs < 1 || o.Runs > 20:
		return fmt.Errorf("--runs %d: must be between 1 and 20", o.Runs)
	case o.Timeout <= 0:
		return fmt.Errorf("--timeout %v: must be above 0", o.Timeout)
	}
	return nil
}

// txnResult is what `tripod bench txn` measured.
type txnResult struct {
	Topic             string  `json:"topic"`
	Partitions        int     `json:"partitions"`
	ReplicationFactor int     `json:"replication_factor"`
	RecordSize        int     `json:"record_size"`
	RecordsPerTxn     int     `json:"records_per_txn"`
	Transactions      int     `json:"transactions"`
	TxnPerSec         float64 `json:"txn_per_sec"`
	TxnRecordsPerSec  float64 `json:"txn_records_per_sec"`
	TxnMBPerSec       float64 `json:"txn_mb_per_sec"`
	TxnP50Ms          float64 `json:"txn_p50_ms"`
	TxnP99Ms          float64 `json:"txn_p99_ms"`
	// IdempotentRecordsPerSec is the same records by an idempotent
	// producer without transactions, in the same run.
	IdempotentRecordsPerSec float64 `json:"idempotent_records_per_sec"`
	// ReadCommittedMBPerSec and ReadUncommittedMBPerSec are each
	// isolation level's reads of the whole topic, alternated.
	ReadCommittedMBPerSec   []float64 `json:"read_committed_mb_per_sec"`
	ReadUncommittedMBPerSec []float64 `json:"read_uncommitted_mb_per_sec"`
	BrokerGoMaxProcs        int       `json:"broker_gomaxprocs,omitempty"`
}

// Txn runs `tripod bench txn`: transactions per second of a transactional
// producer (each transaction RecordsPerTxn records over every partition,
// committed), the same records through an idempotent producer, then the
// topic read from its start by fresh consumers at read_committed and
// read_uncommitted, alternated, Runs times each.
func Txn(ctx context.Context, cfg TxnConfig, out io.Writer) error {
	opts := &cfg
	if err := opts.validate(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	pc := &ProduceConfig{Bootstrap: opts.Bootstrap, Coord: opts.Coord, Brokers: opts.Brokers, BrokerGoMaxProcs: opts.BrokerGoMaxProcs, Binary: opts.Binary}
	target, err := benchCluster(ctx, pc, out)
	if err != nil {
		return err
	}
	defer target.stop()
	seeds := target.seeds
	runID := time.Now().UnixNano()
	res := txnResult{Topic: fmt.Sprintf("bench-txn-%d", runID), Partitions: opts.Partitions, ReplicationFactor: opts.ReplicationFactor,
		RecordSize: opts.RecordSize, RecordsPerTxn: opts.RecordsPerTxn, Transactions: opts.Transactions, BrokerGoMaxProcs: pc.startedBrokerProcs()}
	payload := benchPayloads(opts.RecordSize, "none")[0]

	admin, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return err
	}
	defer admin.Close()
	plain := res.Topic + "-idempotent"
	for _, topic := range []string{res.Topic, plain} {
		if err := createtopics.Create(ctx, admin, createtopics.Topic{Name: topic, Partitions: int32(opts.Partitions), ReplicationFactor: int16(opts.ReplicationFactor)}); err != nil {
			return err
		}
		if err := waitTopicLeaders(ctx, seeds[0], topic, opts.Partitions); err != nil {
			return err
		}
	}

	// Transactions: one producer, one transaction at a time, as an
	// exactly-once stage runs them.
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(res.Topic), kgo.TransactionalID(fmt.Sprintf("bench-txn-%d", runID)),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		return err
	}
	defer cl.Close()
	durations := make([]time.Duration, 0, opts.Transactions)
	start := time.Now()
	for n := range opts.Transactions {
		began := time.Now()
		if err := cl.BeginTransaction(); err != nil {
			return fmt.Errorf("transaction %d: begin: %w", n, err)
		}
		if err := produceAll(ctx, cl, opts.RecordsPerTxn, opts.Partitions, payload); err != nil {
			return fmt.Errorf("transaction %d: %w", n, err)
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			return fmt.Errorf("transaction %d: commit: %w", n, err)
		}
		durations = append(durations, time.Since(began))
	}
	secs := time.Since(start).Seconds()
	records := opts.Transactions * opts.RecordsPerTxn
	res.TxnPerSec = float64(opts.Transactions) / secs
	res.TxnRecordsPerSec = float64(records) / secs
	res.TxnMBPerSec = float64(records) * float64(opts.RecordSize) / (1 << 20) / secs
	slices.Sort(durations)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	res.TxnP50Ms = ms(durations[len(durations)/2])
	res.TxnP99Ms = ms(durations[min(len(durations)*99/100, len(durations)-1)])
	fmt.Fprintf(out, "%d transactions of %d records of %d B over %d partitions: %.1f transactions/s, %.1f records/s (%.2f MB/s), commit p50 %.1f ms, p99 %.1f ms\n",
		opts.Transactions, opts.RecordsPerTxn, opts.RecordSize, opts.Partitions, res.TxnPerSec, res.TxnRecordsPerSec, res.TxnMBPerSec, res.TxnP50Ms, res.TxnP99Ms)

	// The same records, idempotent, without transactions.
	idem, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(plain), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		return err
	}
	start = time.Now()
	err = produceAll(ctx, idem, records, opts.Partitions, payload)
	idem.Close()
	if err != nil {
		return fmt.Errorf("idempotent produce: %w", err)
	}
	res.IdempotentRecordsPerSec = float64(records) / time.Since(start).Seconds()
	fmt.Fprintf(out, "the same %d records idempotent, without transactions: %.1f records/s\n", records, res.IdempotentRecordsPerSec)

	// Both isolation levels read the whole transactional topic,
	// alternated so that they share the machine's moments alike.
	bytes := float64(records) * float64(opts.RecordSize) / (1 << 20)
	for range opts.Runs {
		for _, committed := range []bool{false, true} {
			d, err := consumeAll(ctx, seeds, res.Topic, records, committed)
			if err != nil {
				return err
			}
			if committed {
				res.ReadCommittedMBPerSec = append(res.ReadCommittedMBPerSec, bytes/d.Seconds())
			} else {
				res.ReadUncommittedMBPerSec = append(res.ReadUncommittedMBPerSec, bytes/d.Seconds())
			}
		}
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "RUN\tREAD_UNCOMMITTED(MB/s)\tREAD_COMMITTED(MB/s)\tRATIO\t")
	for i := range opts.Runs {
		u, c := res.ReadUncommittedMBPerSec[i], res.ReadCommittedMBPerSec[i]
		fmt.Fprintf(tw, "%d\t%.1f\t%.1f\t%.2f\t\n", i+1, u, c, c/u)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return writeJSONFlag(opts.JSONPath, res)
}

// produceAll writes n records of payload round robin over partitions and
// waits until each is acknowledged.
func produceAll(ctx context.Context, cl *kgo.Client, n, partitions int, payload []byte) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for i := range n {
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Partition: int32(i % partitions), Value: payload}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return firstErr
}

// consumeAll reads topic from its start with a fresh consumer until it has
// read records records, and returns how long that took.
func consumeAll(ctx context.Context, seeds []string, topic string, records int, committed bool) (time.Duration, error) {
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(iso), kgo.FetchMaxBytes(64<<20), kgo.FetchMaxPartitionBytes(16<<20))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	start := time.Now()
	got := 0
	for got < records {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("read %s: %d of %d records: %w", topic, got, records, err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.Canceled) {
				ferr = err
			}
		})
		if ferr != nil {
			return 0, fmt.Errorf("read %s: %w", topic, ferr)
		}
		got += fs.NumRecords()
	}
	return time.Since(start), nil
}
