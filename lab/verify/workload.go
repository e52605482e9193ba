package verify

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tripodmq/tripod/internal/cluster"
	history "github.com/tripodmq/tripod/internal/verify"
	"github.com/tripodmq/tripod/lab"
)

// verifyClientOpts are the options every client of `tripod verify` shares:
// quick dials, so that a cut broker is given up on fast, and Kafka's Java
// client's 100 ms retry backoff.
func verifyClientOpts(name string, seeds []string) []kgo.Opt {
	return []kgo.Opt{
		kgo.ClientID(name),
		kgo.SeedBrokers(seeds...),
		kgo.DialTimeout(time.Second),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
		kgo.MetadataMinAge(250 * time.Millisecond),
	}
}

// verifyProducer is one producer of the workload. It writes the values
// "NAME-SEQUENCE" round robin to every partition at a bounded rate and
// records every write: sent, then acknowledged at an offset or failed. Its
// produce loop is owned by the command (run ends when stop is closed); the
// client's promises update writes under mu.
type verifyProducer struct {
	name   string
	kind   history.Kind
	seeds  []string
	client *kgo.Client
	// opts build client, again when a transactional one is replaced.
	opts []kgo.Opt

	mu       sync.Mutex
	writes   []history.Write
	failed   int
	firstErr error
	// txns are a transactional producer's transactions, and txnErrors
	// counts the errors of their ends.
	txns      []history.Txn
	txnErrors int
}

// newVerifyProducer returns a producer of kind to topic through seeds.
func newVerifyProducer(name string, kind history.Kind, topic string, seeds []string) (*verifyProducer, error) {
	opts := append(verifyClientOpts(name, seeds),
		kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.MaxBufferedRecords(2000),
		kgo.ProduceRequestTimeout(5*time.Second),
		kgo.RecordDeliveryTimeout(20*time.Second),
	)
	switch kind {
	case history.Idempotent:
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case history.Plain:
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite())
	case history.AcksOne:
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case history.Transactional:
		opts = append(txnClientOpts(name, "verify-"+name, seeds), kgo.DefaultProduceTopic(topic),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MaxBufferedRecords(2000))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("producer %s: %w", name, err)
	}
	return &verifyProducer{name: name, kind: kind, seeds: seeds, client: cl, opts: opts}, nil
}

// run writes rate records/s in total, round robin over partitions, until
// stop is closed. Records live on ctx (the run's), not on stop, so that
// those sent keep their chance to be acknowledged. A full buffer fails a
// write at once rather than blocking the loop.
func (p *verifyProducer) run(ctx context.Context, stop <-chan struct{}, partitions int, rate float64) {
	if p.kind == history.Transactional {
		p.runTxn(ctx, stop, partitions, rate)
		return
	}
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	for seq := 0; ; seq++ {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		w := history.Write{Producer: p.name, Value: fmt.Sprintf("%s-%06d", p.name, seq), Partition: int32(seq % partitions)}
		p.mu.Lock()
		i := len(p.writes)
		p.writes = append(p.writes, w)
		p.mu.Unlock()
		p.client.TryProduce(ctx, &kgo.Record{Partition: w.Partition, Value: []byte(w.Value)}, func(r *kgo.Record, err error) {
			p.mu.Lock()
			defer p.mu.Unlock()
			if err != nil {
				p.failed++
				if p.firstErr == nil {
					p.firstErr = fmt.Errorf("%s: %w", w.Value, err)
				}
				return
			}
			p.writes[i].Acked, p.writes[i].Offset = true, r.Offset
		})
	}
}

// finish waits up to timeout for every write sent to be acknowledged or
// failed, then closes the client, which fails what is left.
func (p *verifyProducer) finish(ctx context.Context, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	p.client.Flush(ctx)
	p.client.Close()
}

// report returns the producer's writes and its figures for the report.
func (p *verifyProducer) report() ([]history.Write, verifyProducerReport) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := verifyProducerReport{Name: p.name, Kind: p.kind, Seeds: p.seeds, Attempted: len(p.writes), Failed: p.failed}
	for _, w := range p.writes {
		if w.Acked {
			r.Acked++
		}
	}
	if p.firstErr != nil {
		r.FirstError = p.firstErr.Error()
	}
	return append([]history.Write(nil), p.writes...), r
}

// verifyConsumer reads every partition from its start by assignment and
// records every record in the order polled. Only its run goroutine touches
// reads until run returns.
type verifyConsumer struct {
	name   string
	client *kgo.Client
	reads  []history.Read
	errs   int
}

// newVerifyConsumer returns a consumer of every partition of topic, with
// extra client options.
func newVerifyConsumer(name, topic string, partitions int, seeds []string, extra ...kgo.Opt) (*verifyConsumer, error) {
	offsets := map[int32]kgo.Offset{}
	for p := range partitions {
		offsets[int32(p)] = kgo.NewOffset().AtStart()
	}
	opts := append(verifyClientOpts(name, seeds),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchMaxWait(500*time.Millisecond),
	)
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("consumer %s: %w", name, err)
	}
	return &verifyConsumer{name: name, client: cl}, nil
}

// run polls until ctx ends, then closes the client.
func (c *verifyConsumer) run(ctx context.Context) {
	defer c.client.Close()
	for ctx.Err() == nil {
		c.poll(ctx, nil)
	}
}

// poll polls once and records what it got; it calls each, when not nil,
// for every record.
func (c *verifyConsumer) poll(ctx context.Context, each func(*kgo.Record)) {
	fetches := c.client.PollFetches(ctx)
	fetches.EachError(func(_ string, _ int32, err error) {
		if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			c.errs++ // Retriable; the client retries.
		}
	})
	fetches.EachRecord(func(r *kgo.Record) {
		c.reads = append(c.reads, history.Read{Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
		if each != nil {
			each(r)
		}
	})
}

// ackedEnds returns, per partition, the offset after the last record an
// acks=all producer (idempotent or plain) had acknowledged: the least end
// offset the final read must reach.
func ackedEnds(producers []*verifyProducer) map[int32]int64 {
	ends := map[int32]int64{}
	for _, p := range producers {
		if p.kind == history.AcksOne {
			continue
		}
		writes, _ := p.report()
		for _, w := range writes {
			if w.Acked && w.Offset+1 > ends[w.Partition] {
				ends[w.Partition] = w.Offset + 1
			}
		}
	}
	return ends
}

// endsWait bounds how long the final read waits for the end offsets to
// reach what acks=all producers were acknowledged.
const endsWait = 30 * time.Second

// readAll is the final read: a fresh consumer reads every partition of
// topic from its start to its end offset (ListOffsets latest), within
// timeout. The end offset is the high watermark, which a leader elected
// moments before still raises to what its followers have: the read waits
// (up to endsWait) until every end offset reaches minEnds, the
// acknowledged acks=all writes, and then reads to the ends it last saw,
// so a write that is really gone still shows as lost.
func readAll(ctx context.Context, topic string, partitions int, seeds []string, minEnds map[int32]int64, timeout time.Duration) (*verifyConsumer, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var ends map[int32]int64
	err := cluster.WaitFor(ctx, timeout, func() error {
		var err error
		ends, err = lab.ListEndOffsets(ctx, seeds, topic, partitions)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	_ = cluster.WaitFor(ctx, endsWait, func() error {
		latest, err := lab.ListEndOffsets(ctx, seeds, topic, partitions)
		if err != nil {
			return err
		}
		ends = latest
		for p, min := range minEnds {
			if ends[p] < min {
				return fmt.Errorf("partition %d: end offset %d below the acknowledged %d", p, ends[p], min)
			}
		}
		return nil
	})
	c, err := newVerifyConsumer("final", topic, partitions, seeds)
	if err != nil {
		return nil, err
	}
	defer c.client.Close()
	remaining := map[int32]bool{}
	for p, end := range ends {
		if end > 0 {
			remaining[p] = true
		}
	}
	for len(remaining) > 0 {
		c.poll(ctx, func(r *kgo.Record) {
			if r.Offset+1 >= ends[r.Partition] {
				delete(remaining, r.Partition)
			}
		})
		if ctx.Err() != nil {
			return c, fmt.Errorf("final read of %s: %d partitions not read to their end offset within %v", topic, len(remaining), timeout)
		}
	}
	return c, nil
}
