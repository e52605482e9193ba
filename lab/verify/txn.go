package verify

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tripodmq/tripod/internal/cluster"
	history "github.com/tripodmq/tripod/internal/verify"
)

// The transaction workload (--workload txn): transactional producers
// write transactions of txnRecords records, each to the next partition,
// aborting every txnAbortEvery-th on purpose; a consume-transform-produce
// stage (franz-go's GroupTransactSession) reads the topic read_committed
// and writes each record, transformed, to the output topic in a
// transaction that also commits its input offsets, aborting every
// transformAbortEvery-th round on purpose; the consumers read
// read_committed. At the end every partition of both topics gets a plain
// "end" record, after which the final reads stop.
const (
	txnRecords          = 3
	txnAbortEvery       = 4
	transformAbortEvery = 5
	// txnTimeout is every transactional client's transaction.timeout.ms:
	// a transaction its producer left open is aborted by the coordinator
	// after it, so the final reads wait at most that long for it.
	txnTimeout = 10 * time.Second
	// endValue is the value of the records that close each partition.
	endValue = "end"
)

// txnClientOpts are the options of a transactional client named name.
func txnClientOpts(name, txnID string, seeds []string) []kgo.Opt {
	return append(verifyClientOpts(name, seeds),
		kgo.TransactionalID(txnID),
		kgo.TransactionTimeout(txnTimeout),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProduceRequestTimeout(5*time.Second),
		kgo.RequestTimeoutOverhead(5*time.Second),
	)
}

// runTxn is run for a transactional producer: transactions of txnRecords
// records at rate records/s in total, until stop is closed. A transaction
// whose commit failed is of unknown outcome; the client is then replaced
// by a new one with the same transactional id, which fences the old one
// and has the coordinator abort whatever it left open.
func (p *verifyProducer) runTxn(ctx context.Context, stop <-chan struct{}, partitions int, rate float64) {
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	seq := 0
	for n := 1; ; n++ {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		default:
		}
		id := fmt.Sprintf("%s#%d", p.name, n)
		if err := p.client.BeginTransaction(); err != nil {
			p.noteErr(id, err)
			p.renew()
			continue
		}
		var mine []int
		failed := false
		var wg sync.WaitGroup
		stopped := false
		for range txnRecords {
			select {
			case <-stop:
				stopped = true
			case <-ctx.Done():
				stopped = true
			case <-tick.C:
			}
			if stopped {
				break
			}
			w := history.Write{Producer: p.name, Value: fmt.Sprintf("%s-%06d", p.name, seq), Partition: int32(seq % partitions), Txn: id}
			seq++
			p.mu.Lock()
			i := len(p.writes)
			p.writes = append(p.writes, w)
			p.mu.Unlock()
			mine = append(mine, i)
			wg.Add(1)
			p.client.Produce(ctx, &kgo.Record{Partition: w.Partition, Value: []byte(w.Value)}, func(r *kgo.Record, err error) {
				defer wg.Done()
				p.mu.Lock()
				defer p.mu.Unlock()
				if err != nil {
					failed = true
					p.failed++
					if p.firstErr == nil {
						p.firstErr = fmt.Errorf("%s: %w", w.Value, err)
					}
					return
				}
				p.writes[i].Offset = r.Offset
			})
		}
		commit := !stopped && n%txnAbortEvery != 0
		outcome := p.endTxn(ctx, id, commit, &wg, &failed)
		p.mu.Lock()
		p.txns = append(p.txns, history.Txn{ID: id, Outcome: outcome})
		if outcome == history.Committed {
			for _, i := range mine {
				p.writes[i].Acked = true
			}
		}
		p.mu.Unlock()
		if stopped {
			return
		}
	}
}

// endTxn ends the open transaction, committing when commit and no record
// of it failed, once every record was answered, and returns its outcome.
func (p *verifyProducer) endTxn(ctx context.Context, id string, commit bool, wg *sync.WaitGroup, failed *bool) history.TxnOutcome {
	ctx, cancel := context.WithTimeout(ctx, 3*txnTimeout)
	defer cancel()
	if commit {
		if err := p.client.Flush(ctx); err != nil {
			commit = false
		}
	} else {
		_ = p.client.AbortBufferedRecords(ctx)
	}
	wg.Wait()
	p.mu.Lock()
	commit = commit && !*failed
	p.mu.Unlock()
	err := p.client.EndTransaction(ctx, kgo.TransactionEndTry(commit))
	if err == nil {
		if commit {
			return history.Committed
		}
		return history.Aborted
	}
	p.noteErr(id, err)
	outcome := history.Aborted
	if commit && !errors.Is(err, kerr.OperationNotAttempted) {
		outcome = history.Unknown
	}
	// The client's advice: an unconfirmed commit, or an abortable
	// error, is retried as an abort; anything else, or a failed abort,
	// needs a new client.
	if err := p.client.EndTransaction(ctx, kgo.TryAbort); err != nil {
		p.renew()
	}
	return outcome
}

// noteErr counts an error of a transaction that is not a record's.
func (p *verifyProducer) noteErr(id string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.txnErrors++
	if p.firstErr == nil {
		p.firstErr = fmt.Errorf("transaction %s: %w", id, err)
	}
}

// renew replaces the client by a new one with the same transactional id.
func (p *verifyProducer) renew() {
	p.client.Close()
	cl, err := kgo.NewClient(p.opts...)
	if err != nil {
		// Options that built a client once build it again.
		panic(fmt.Sprintf("verify: transactional client %s: %v", p.name, err))
	}
	p.client = cl
}

// verifyTransform is the consume-transform-produce stage: a
// GroupTransactSession reading the input topic read_committed and writing
// "x-VALUE-ROUND" for each record VALUE to the same partition of the
// output topic, in a transaction with the offsets it consumed. Each
// session's reads are one consumer of the input history (a session
// rewinds to the committed offsets after an abort, which is not a
// non-monotonic read); its writes and transactions the output history's.
// Only its run goroutine touches it until run returns.
type verifyTransform struct {
	name, in, out string
	seeds         []string
	partitions    int

	writes   []history.Write
	txns     []history.Txn
	sessions []history.Consumer
	// done holds, per partition, the input offset after the last record
	// of a committed round.
	done     map[int32]int64
	errs     int
	firstErr error
}

// transformGroup is the stage's consumer group and transactional id.
const transformGroup = "verify-transform"

// newSession returns a session of the stage, and starts a new consumer
// in the input history for its reads.
func (x *verifyTransform) newSession() (*kgo.GroupTransactSession, error) {
	opts := append(txnClientOpts(x.name, transformGroup, x.seeds),
		kgo.ConsumerGroup(transformGroup), kgo.ConsumeTopics(x.in),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(500*time.Millisecond), kgo.SessionTimeout(10*time.Second),
		kgo.DefaultProduceTopic(x.out), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	s, err := kgo.NewGroupTransactSession(opts...)
	if err != nil {
		return nil, fmt.Errorf("transform %s: %w", x.name, err)
	}
	// A session after the first starts where the group committed.
	x.sessions = append(x.sessions, history.Consumer{Name: fmt.Sprintf("%s#%d", x.name, len(x.sessions)+1), ReadCommitted: true,
		Resumed: len(x.sessions) > 0})
	return s, nil
}

// finished reports whether every partition's committed rounds reached
// ends (the offsets after each partition's "end" record).
func (x *verifyTransform) finished(ends map[int32]int64) bool {
	if ends == nil {
		return false
	}
	for p, end := range ends {
		if x.done[p] < end {
			return false
		}
	}
	return true
}

// run transforms until ends (set once the producers stopped and every
// input partition got its "end" record) are all committed past, or ctx
// ends. A round whose end failed starts a new session, which resumes
// from the offsets the group committed.
func (x *verifyTransform) run(ctx context.Context, ends func() map[int32]int64) {
	x.done = map[int32]int64{}
	s, err := x.newSession()
	if err != nil {
		x.firstErr = err
		return
	}
	defer func() { s.Close() }()
	for round := 1; ctx.Err() == nil && !x.finished(ends()); {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := s.PollFetches(pctx)
		cancel()
		reader := &x.sessions[len(x.sessions)-1]
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				x.errs++
			}
		})
		if fs.NumRecords() == 0 {
			continue
		}
		id := fmt.Sprintf("%s#%d", x.name, round)
		if err := s.Begin(); err != nil {
			x.fail(id, err)
			s.Close()
			if s, err = x.newSession(); err != nil {
				x.fail(id, err)
				return
			}
			continue
		}
		var mine []int
		reached := map[int32]int64{}
		// mu guards x.writes against the promises while records are
		// added; wg counts the promises, failed says one failed.
		var mu sync.Mutex
		var wg sync.WaitGroup
		failed := false
		fs.EachRecord(func(r *kgo.Record) {
			reader.Reads = append(reader.Reads, history.Read{Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
			reached[r.Partition] = max(reached[r.Partition], r.Offset+1)
			if isEnd(string(r.Value)) {
				return
			}
			w := history.Write{Producer: x.name, Value: fmt.Sprintf("x-%s-%d", r.Value, round), Partition: r.Partition, Txn: id, Source: string(r.Value)}
			mu.Lock()
			i := len(x.writes)
			x.writes = append(x.writes, w)
			mu.Unlock()
			mine = append(mine, i)
			wg.Add(1)
			s.Produce(ctx, &kgo.Record{Partition: w.Partition, Value: []byte(w.Value)}, func(rec *kgo.Record, err error) {
				defer wg.Done()
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed = true
					return
				}
				x.writes[i].Offset = rec.Offset
			})
		})
		abort := round%transformAbortEvery == 0
		round++
		// A round with a record that failed must not commit: its input
		// offsets would be committed without that output (franz-go
		// commits what was written when asked to; its own ETL test ends
		// with TryCommit only when no promise failed).
		if !abort {
			if err := s.Client().Flush(ctx); err != nil {
				abort = true
			}
		}
		wg.Wait()
		mu.Lock()
		abort = abort || failed
		mu.Unlock()
		ectx, cancel := context.WithTimeout(ctx, 3*txnTimeout)
		committed, err := s.End(ectx, kgo.TransactionEndTry(!abort))
		cancel()
		mu.Lock()
		outcome := history.Aborted
		switch {
		case err != nil:
			outcome = history.Unknown
		case committed:
			outcome = history.Committed
			for _, i := range mine {
				x.writes[i].Acked = true
			}
			for p, o := range reached {
				x.done[p] = max(x.done[p], o)
			}
		}
		mu.Unlock()
		x.txns = append(x.txns, history.Txn{ID: id, Outcome: outcome})
		if err != nil || !committed {
			// After an abort the session rewinds to what it knows was
			// committed; a new session asks the group, which is the
			// truth after an end of unknown outcome.
			if err != nil {
				x.fail(id, err)
			}
			s.Close()
			if s, err = x.newSession(); err != nil {
				x.fail(id, err)
				return
			}
		}
	}
}

// fail counts an error of the stage.
func (x *verifyTransform) fail(id string, err error) {
	x.errs++
	if x.firstErr == nil {
		x.firstErr = fmt.Errorf("transform round %s: %w", id, err)
	}
}

// writeEnds writes a plain "end" record to each partition of topic with
// an idempotent acks=all producer and returns, per partition, the offset
// after it, and the writes for the topic's history.
func writeEnds(ctx context.Context, topic string, partitions int, seeds []string) (map[int32]int64, []history.Write, error) {
	cl, err := kgo.NewClient(append(verifyClientOpts("verify-end", seeds),
		kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordDeliveryTimeout(time.Minute))...)
	if err != nil {
		return nil, nil, err
	}
	defer cl.Close()
	ends := map[int32]int64{}
	var writes []history.Write
	for p := range int32(partitions) {
		r := &kgo.Record{Partition: p, Value: []byte(endValue + "-" + strconv.Itoa(int(p)))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			return nil, nil, fmt.Errorf("the end record of %s-%d: %w", topic, p, err)
		}
		ends[p] = r.Offset + 1
		writes = append(writes, history.Write{Producer: "end", Value: string(r.Value), Partition: p, Acked: true, Offset: r.Offset})
	}
	return ends, writes, nil
}

// readCommittedTo is the final read of a transaction workload's topic: a
// fresh read_committed consumer reads every partition from its start
// until it has read at ends[p]-1, the partition's "end" record, which it
// reaches once every transaction before it is decided.
func readCommittedTo(ctx context.Context, name, topic string, ends map[int32]int64, seeds []string, timeout time.Duration) (*verifyConsumer, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := newVerifyConsumer(name, topic, len(ends), seeds, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return nil, err
	}
	defer c.client.Close()
	remaining := map[int32]bool{}
	for p := range ends {
		remaining[p] = true
	}
	for len(remaining) > 0 {
		c.poll(ctx, func(r *kgo.Record) {
			if r.Offset+1 >= ends[r.Partition] {
				delete(remaining, r.Partition)
			}
		})
		if ctx.Err() != nil {
			return c, fmt.Errorf("final read of %s: %d partitions not read to their end record within %v", topic, len(remaining), timeout)
		}
	}
	return c, nil
}

// committedOffsets returns the transform group's committed offsets of
// topic.
func committedOffsets(ctx context.Context, topic string, seeds []string) (map[int32]int64, error) {
	cl, err := kgo.NewClient(verifyClientOpts("verify-admin", seeds)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var out map[int32]int64
	err = cluster.WaitFor(ctx, time.Minute, func() error {
		resps, err := kadm.NewClient(cl).FetchOffsets(ctx, transformGroup)
		if err != nil {
			return err
		}
		if err := resps.Error(); err != nil {
			return err
		}
		out = map[int32]int64{}
		resps.Each(func(o kadm.OffsetResponse) {
			if o.Topic == topic {
				out[o.Partition] = o.At
			}
		})
		return nil
	})
	return out, err
}

// runTxns is run's workload for --workload txn: the transactional
// producers, the transform stage and read_committed consumers while the
// faults run, then the "end" records, the transform's last rounds and the
// final reads of both topics, checked into r.report.Result (the input
// topic) and r.report.Transform (the output topic).
func (r *verifyRun) runTxns(ctx context.Context, runner *faultRunner) error {
	opts := r.opts
	out := r.topic + "-out"
	if err := r.createTopicNamed(ctx, out); err != nil {
		return err
	}
	producers, consumers, err := r.newClients(kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	defer func() {
		for _, p := range producers {
			p.client.Close()
		}
	}()
	if err != nil {
		return err
	}
	x := &verifyTransform{name: "x", in: r.topic, out: out, seeds: r.seeds[len(r.seeds)-1], partitions: opts.Partitions}
	var endsMu sync.Mutex
	var inputEnds map[int32]int64
	ends := func() map[int32]int64 {
		endsMu.Lock()
		defer endsMu.Unlock()
		return inputEnds
	}

	stopProducing := make(chan struct{})
	consumeCtx, stopConsuming := context.WithCancel(ctx)
	defer stopConsuming()
	// The transform stops once it has committed past the end records, or
	// after a bound on the time that takes.
	transformCtx, stopTransform := context.WithCancel(ctx)
	defer stopTransform()
	var producing, consuming, transforming sync.WaitGroup
	for _, p := range producers {
		producing.Add(1)
		go func() {
			defer producing.Done()
			p.run(ctx, stopProducing, opts.Partitions, opts.Rate)
		}()
	}
	for _, c := range consumers {
		consuming.Add(1)
		go func() {
			defer consuming.Done()
			c.run(consumeCtx)
		}()
	}
	transforming.Add(1)
	go func() {
		defer transforming.Done()
		x.run(transformCtx, ends)
	}()
	stopWorkload := sync.OnceFunc(func() {
		close(stopProducing)
		producing.Wait()
		stopTransform()
		transforming.Wait()
		stopConsuming()
		consuming.Wait()
	})
	defer stopWorkload()

	runErr := r.runFaults(ctx, runner)
	close(stopProducing)
	producing.Wait()
	stopProducing = make(chan struct{}) // stopWorkload closes this one
	if ctx.Err() != nil {
		runErr = errors.Join(runErr, fmt.Errorf("interrupted: %w", ctx.Err()))
	}

	in := history.History{}
	outH := history.History{Producers: []history.Producer{{Name: x.name, Kind: history.Transactional}, {Name: "end", Kind: history.Idempotent}}}
	var finalIn, finalOut *verifyConsumer
	if runErr == nil {
		fmt.Fprintf(r.out, "%7.1fs  producers stopped; the transform finishes, then every partition is read back\n", time.Since(r.start).Seconds())
		runErr = r.waitSteady(ctx)
	}
	if runErr == nil {
		e, writes, err := writeEnds(ctx, r.topic, opts.Partitions, r.allSeeds)
		if err != nil {
			runErr = err
		} else {
			in.Writes = append(in.Writes, writes...)
			endsMu.Lock()
			inputEnds = e
			endsMu.Unlock()
		}
	}
	if runErr == nil {
		// The transform's rounds end by themselves once past the ends.
		done := make(chan struct{})
		go func() {
			transforming.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(r.opts.SteadyTimeout):
			runErr = fmt.Errorf("the transform did not commit past the end records within --steady-timeout %v", r.opts.SteadyTimeout)
		case <-ctx.Done():
		}
	}
	stopWorkload()
	if runErr == nil {
		var err error
		if finalIn, err = readCommittedTo(ctx, "final", r.topic, inputEnds, r.allSeeds, 2*time.Minute); err != nil {
			runErr = err
		}
	}
	if runErr == nil {
		e, writes, err := writeEnds(ctx, out, opts.Partitions, r.allSeeds)
		if err != nil {
			runErr = err
		} else {
			outH.Writes = append(outH.Writes, writes...)
			if finalOut, err = readCommittedTo(ctx, "final", out, e, r.allSeeds, 2*time.Minute); err != nil {
				runErr = err
			}
		}
	}

	in.Producers = append(in.Producers, history.Producer{Name: "end", Kind: history.Idempotent})
	for _, p := range producers {
		writes, rep := p.report()
		in.Producers = append(in.Producers, history.Producer{Name: p.name, Kind: p.kind})
		in.Writes = append(in.Writes, writes...)
		p.mu.Lock()
		in.Txns = append(in.Txns, p.txns...)
		p.mu.Unlock()
		r.report.Producers = append(r.report.Producers, rep)
	}
	for _, c := range consumers {
		in.Consumers = append(in.Consumers, history.Consumer{Name: c.name, Reads: c.reads, ReadCommitted: true})
		r.report.Consumers = append(r.report.Consumers, verifyConsumerReport{Name: c.name, Reads: len(c.reads), FetchErrors: c.errs})
	}
	in.Consumers = append(in.Consumers, x.sessions...)
	outH.Writes = append(outH.Writes, x.writes...)
	outH.Txns = x.txns
	if x.firstErr != nil {
		r.note(fmt.Sprintf("transform: %d errors, the first: %v", x.errs, x.firstErr))
	}
	if finalIn != nil && finalOut != nil && runErr == nil {
		in.Consumers = append(in.Consumers, history.Consumer{Name: finalIn.name, Final: true, ReadCommitted: true, Reads: finalIn.reads})
		outH.Consumers = append(outH.Consumers, history.Consumer{Name: finalOut.name, Final: true, ReadCommitted: true, Reads: finalOut.reads})
		r.report.Consumers = append(r.report.Consumers, verifyConsumerReport{Name: finalIn.name, Reads: len(finalIn.reads), FetchErrors: finalIn.errs})
		committed, err := committedOffsets(ctx, r.topic, r.allSeeds)
		if err != nil {
			runErr = fmt.Errorf("the transform's committed offsets: %w", err)
		}
		for _, rd := range finalIn.reads {
			if rd.Offset < committed[rd.Partition] && !isEnd(rd.Value) {
				outH.Sources = append(outH.Sources, rd.Value)
			}
		}
	}
	res := history.Check(in)
	r.report.Result = &res
	tres := history.Check(outH)
	r.report.Transform = &tres
	if runErr == nil && res.Acked.Transactional == 0 {
		runErr = errors.New("no transaction committed: the cluster never accepted the workload")
	}
	if runErr == nil && tres.Acked.Transactional == 0 {
		runErr = errors.New("the transform committed no transaction")
	}
	return runErr
}

// isEnd reports whether value is an "end" record's.
func isEnd(value string) bool {
	return len(value) > len(endValue) && value[:len(endValue)+1] == endValue+"-"
}
