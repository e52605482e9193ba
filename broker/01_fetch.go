package broker

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/fetchsession"
	"github.com/tripodmq/tripod/broker/replica"
	"github.com/tripodmq/tripod/coord"
	tlog "github.com/tripodmq/tripod/replication/log"
)

// Fetch v0..v12: v0 to v3 read the legacy message format (magic 0; magic
// 1 from v2), to which the stored v2 batches are converted
// (downConvertedRead); v4 is the first with v2 record batches and
// isolation levels, v7 the first with incremental fetch sessions
// (KIP-227, broker/fetchsession); v13+ names topics by ID.
func init() { registerAPI(fetchKey, 0, 12, handleFetch) }

// fetchKey is Fetch's api key.
const fetchKey = 1

// maxFetchWait caps max.wait.ms so a client cannot park a request for
// longer than a Kafka broker would let it.
const maxFetchWait = 5 * time.Minute

// handleFetch reads each partition from its fetch offset up to the high
// watermark, or for a read_committed consumer (isolation level 1) up to
// the last stable offset, with the aborted transactions among the records
// read. If fewer than min.bytes are available it waits, woken by appends
// to the requested partitions and moves of their high watermarks (which
// are what moves a last stable offset), until min.bytes are there,
// max.wait.ms passes, or the connection or broker closes.
//
// Follower fetching (KIP-392): a consumer's Fetch v11+ may be answered by
// any replica of a partition, a follower reading up to its own high
// watermark (and last stable offset); with replica.selector.class set,
// the leader answers a consumer whose rack (rack_id) has an in-sync
// follower but not the leader with that follower as PreferredReadReplica
// and no records, as Kafka's ReplicaManager does.
func handleFetch(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.FetchRequest)
	collapseDuplicatePartitions(r)
	// Plaintext: records may go from the segment files to the socket
	// (sendfile), as Kafka sends them.
	req.reads = newFetchReads(req.conn.tls == nil && r.Version >= 4)
	return nil, func(ctx context.Context) kmsg.Response { return b.fetch(ctx, r, req.reads) }, nil
}

// collapseDuplicatePartitions leaves each partition r names once, as
// Kafka's broker reads a Fetch's partitions into a map: a partition named
// again keeps the place of its first mention and takes the fetch
// position and limits of its last, and a topic named again is merged
// into its first mention. A request without duplicates is left as is.
func collapseDuplicatePartitions(r *kmsg.FetchRequest) {
	n := 0
	for _, t := range r.Topics {
		n += len(t.Partitions)
	}
	if n < 2 && len(r.Topics) < 2 {
		return
	}
	seen := make(map[coord.TopicPartition]struct{}, n)
	topics := make(map[string]struct{}, len(r.Topics))
	dup := false
	for _, t := range r.Topics {
		if _, ok := topics[t.Topic]; ok {
			dup = true
		}
		topics[t.Topic] = struct{}{}
		for _, p := range t.Partitions {
			tp := coord.TopicPartition{Topic: t.Topic, Partition: p.Partition}
			if _, ok := seen[tp]; ok {
				dup = true
			}
			seen[tp] = struct{}{}
		}
	}
	if !dup {
		return
	}
	type place struct{ topic, partition int }
	at := make(map[coord.TopicPartition]place, len(seen))
	topicAt := make(map[string]int, len(topics))
	var out []kmsg.FetchRequestTopic
	for _, t := range r.Topics {
		ti, ok := topicAt[t.Topic]
		if !ok {
			ti = len(out)
			topicAt[t.Topic] = ti
			nt := t
			nt.Partitions = nil
			out = append(out, nt)
		}
		for _, p := range t.Partitions {
			tp := coord.TopicPartition{Topic: t.Topic, Partition: p.Partition}
			if pl, ok := at[tp]; ok {
				out[pl.topic].Partitions[pl.partition] = p
				continue
			}
			at[tp] = place{ti, len(out[ti].Partitions)}
			out[ti].Partitions = append(out[ti].Partitions, p)
		}
	}
	r.Topics = out
}

// fetch answers r in its fetch session (a full fetch, or an incremental
// one over the partitions of the session that changed, whose answer keeps
// only what the client has not heard), waiting as handleFetch describes.
func (b *Broker) fetch(ctx context.Context, r *kmsg.FetchRequest, reads *fetchReads) kmsg.Response {
	sr := b.fetchSessions.Begin(r, time.Now())
	if sr.ErrorCode != 0 {
		resp := r.ResponseKind().(*kmsg.FetchResponse)
		resp.SetVersion(r.Version)
		resp.ErrorCode = sr.ErrorCode
		return resp
	}
	resp, short := b.fetchNow(ctx, r, &sr, reads)
	b.fetchSessions.End(sr, resp, short)
	if r.ReplicaID < 0 {
		b.metrics.consumerFetched(resp, reads.slices)
	}
	return resp
}

// fetchNow answers the partitions r names, waiting as handleFetch
// describes. A subset fetch of a session (sr.subset) waits on the
// session's wake-up and adds the partitions that change meanwhile; any
// other watches the partitions r names. It also returns the partitions
// answered without records though records were there to read.
func (b *Broker) fetchNow(ctx context.Context, r *kmsg.FetchRequest, sr *fetchsession.Request, reads *fetchReads) (*kmsg.FetchResponse, map[coord.TopicPartition]struct{}) {
	wait := time.Duration(r.MaxWaitMillis) * time.Millisecond
	wait = min(max(wait, 0), maxFetchWait)
	deadline := time.Now().Add(wait)

	// Register for wake-ups before the first read so that no append
	// between the read and the wait is missed (a session watches its
	// partitions all along).
	var wake <-chan struct{}
	if sr.Subset {
		wake = sr.Session.Wake()
	} else {
		w := make(chan struct{}, 1)
		wake = w
		var watched []*replica.Partition
		for _, rt := range r.Topics {
			for _, rp := range rt.Partitions {
				if p := b.replicas.PartitionFor(rt.Topic, rp.Partition); p != nil {
					p.Watch(w)
					watched = append(watched, p)
				}
			}
		}
		defer func() {
			for _, p := range watched {
				p.Unwatch(w)
			}
		}()
	}

	// A follower's fetch offset is its log end offset: record it once,
	// on arrival, as Kafka's leader does.
	var replicaCodes map[coord.TopicPartition]replica.FetchRefusal
	if r.ReplicaID >= 0 {
		replicaCodes = b.replicas.RecordFollowerFetch(r)
		b.replicas.RecordIdlePositions(sr.Idle, r.ReplicaID)
	}

	var timer *time.Timer
	for {
		reads.release() // those of a read not answered
		resp, bytes, answerNow, short := b.readFetch(r, replicaCodes, reads)
		if answerNow || bytes >= int(r.MinBytes) || !time.Now().Before(deadline) {
			return resp, short
		}
		if timer == nil {
			timer = time.NewTimer(time.Until(deadline))
			defer timer.Stop()
		}
		select {
		case <-wake:
			if sr.Subset && !b.fetchSessions.Extend(*sr, r) {
				continue
			}
		case <-timer.C:
		case <-ctx.Done():
			return resp, short
		case <-b.closing:
			return resp, short
		}
	}
}

// readFetch builds a fetch response from the logs as they are now. It
// returns the response, the record bytes it holds, whether it is to be
// sent at once (a partition carries an error or points the consumer at
// its preferred read replica, as Kafka's fetch does), and the
// partitions answered without records below the offset read up to (the
// response was full, or throttled; nil if none). A
// consumer reads below the high watermark, a read_committed one below the
// last stable offset, and is told of the aborted transactions whose
// records it may have read (AbortedTransactions; null for
// read_uncommitted, as Kafka sends it); a follower (replicaCodes not
// nil) reads up to the log end and gets the errors and diverging epochs
// RecordFollowerFetch found. A consumer's Fetch v11+ is answered by a follower too
// (consumerReplica), and a leader with a replica selector may point it
// at a follower of its rack instead (preferredReadReplica). Reads that
// can be sent from their segment files go into reads' slices (nil: none
// can), and the others into its buffers.
func (b *Broker) readFetch(r *kmsg.FetchRequest, replicaCodes map[coord.TopicPartition]replica.FetchRefusal, reads *fetchReads) (*kmsg.FetchResponse, int, bool, map[coord.TopicPartition]struct{}) {
	resp := r.ResponseKind().(*kmsg.FetchResponse)
	resp.SetVersion(r.Version)
	remaining := int(r.MaxBytes)
	if r.Version < 3 || remaining <= 0 {
		remaining = int(^uint32(0) >> 1)
	}
	// fetch.max.bytes caps every response, whatever the request asks.
	remaining = min(remaining, int(b.cfg.FetchMaxBytes))
	total := 0
	answerNow := false
	var short map[coord.TopicPartition]struct{}
	resp.Topics = make([]kmsg.FetchResponseTopic, 0, len(r.Topics))
	unread := func(tp coord.TopicPartition) {
		if short == nil {
			short = map[coord.TopicPartition]struct{}{}
		}
		short[tp] = struct{}{}
	}
	for _, rt := range r.Topics {
		st := kmsg.NewFetchResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.FetchResponseTopicPartition, 0, len(rt.Partitions))
		for _, rp := range rt.Partitions {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition = rp.Partition
			// An empty record set is sent as zero bytes, not null:
			// librdkafka refuses a null one.
			sp.RecordBatches = []byte{}
			p, code := b.fetchedReplica(r, rt.Topic, rp.Partition, replicaCodes == nil)
			if c, ok := replicaCodes[coord.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}]; ok && p != nil {
				sp.ErrorCode = c.Code
				if c.Diverging {
					sp.DivergingEpoch.Epoch, sp.DivergingEpoch.EndOffset = c.Epoch, c.EndOffset
				}
				sp.HighWatermark = p.HighWatermark()
				sp.LogStartOffset = p.Log().StartOffset()
				answerNow = true
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			if p == nil {
				sp.ErrorCode = code
				sp.HighWatermark = -1
				answerNow = true
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			if code := replica.CheckLeaderEpoch(rp.CurrentLeaderEpoch, p.LeaderEpoch()); r.Version >= 9 && code != 0 {
				sp.ErrorCode = code
				sp.HighWatermark = -1
				answerNow = true
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			hw := p.HighWatermark()
			lso := p.LastStableOffset()
			sp.HighWatermark = hw
			sp.LastStableOffset = lso
			sp.LogStartOffset = p.Log().StartOffset()
			if replicaCodes == nil {
				if id := b.preferredReadReplica(r, p, rp.FetchOffset); id != coord.NoBroker {
					sp.PreferredReadReplica = int32(id)
					answerNow = true
					st.Partitions = append(st.Partitions, sp)
					continue
				}
			}
			upTo := hw
			readCommitted := replicaCodes == nil && r.IsolationLevel == 1
			switch {
			case replicaCodes != nil:
				upTo = p.Log().EndOffset()
			case readCommitted:
				upTo = lso
			}
			// The leader's throttle: a throttled replica out of the ISR
			// gets nothing while the leader's rate is exceeded.
			tp := coord.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}
			throttled := replicaCodes != nil && b.replicas.LeaderThrottles(p, r.ReplicaID)
			if throttled && b.leaderQuota.Exceeded() {
				b.metrics.Throttled("leader", 0, 1)
				if rp.FetchOffset < upTo {
					unread(tp)
				}
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			// The first partition with data may exceed the response
			// limit by one batch so a large batch is never stuck;
			// later ones are skipped once the limit is spent.
			limit := min(int(rp.PartitionMaxBytes), remaining)
			if rp.PartitionMaxBytes <= 0 {
				limit = 0
			}
			if limit > 0 || total == 0 {
				var data []byte
				var slice *tlog.Slice
				var err error
				switch {
				case r.Version < 4 && replicaCodes == nil:
					data, err = downConvertedRead(p.Log(), r.Version, rp.FetchOffset, max(limit, 1), upTo)
				case reads.slices != nil && !readCommitted:
					data, slice, err = p.Log().ReadSliceUpTo(rp.FetchOffset, max(limit, 1), upTo, minSpliceBytes, reads.alloc)
				default:
					data, err = p.Log().ReadUpToInto(rp.FetchOffset, max(limit, 1), upTo, reads.alloc)
				}
				switch {
				case errors.Is(err, tlog.ErrOffsetOutOfRange):
					sp.ErrorCode = kerr.OffsetOutOfRange.Code
					answerNow = true
				case errors.Is(err, tlog.ErrClosed):
					sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
					answerNow = true
				case b.replicas.CheckStorage(p, err):
					sp.ErrorCode = kerr.KafkaStorageError.Code
					answerNow = true
				case errors.Is(err, tlog.ErrUnsupportedCompression):
					// zstd (KIP-110): Kafka answers so a consumer
					// too old to read it.
					sp.ErrorCode = kerr.UnsupportedCompressionType.Code
					answerNow = true
				case err != nil:
					b.logger.Error("read failed", "partition", p.Name(), "offset", rp.FetchOffset, "error", err)
					sp.ErrorCode = kerr.UnknownServerError.Code
					answerNow = true
				case slice != nil:
					reads.slices[tp] = slice
					sp.RecordBatches = spliced
					total += slice.Len
					remaining -= slice.Len
					if throttled {
						b.leaderQuota.Record(slice.Len)
						b.metrics.Throttled("leader", slice.Len, 0)
					}
				case data != nil:
					sp.RecordBatches = data
					total += len(data)
					remaining -= len(data)
					if readCommitted {
						sp.AbortedTransactions = abortedTransactions(p.Log(), rp.FetchOffset, data)
					}
					if throttled {
						b.leaderQuota.Record(len(data))
						b.metrics.Throttled("leader", len(data), 0)
					}
				}
			}
			if len(sp.RecordBatches) == 0 && sp.ErrorCode == 0 && rp.FetchOffset < upTo {
				unread(tp)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, total, answerNow, short
}

// downConvertedRead reads a partition's log l from fetchOffset, as
// ReadUpTo(fetchOffset, limit, upTo) does, for a Fetch of version (0 to
// 3) and returns the records in the legacy format that version reads:
// magic 1 for v2 and v3, magic 0 before (log.DownConvert, as Kafka's
// LazyDownConversionRecords), within limit but for a first message that
// is always whole. A read whose batches all convert to nothing
// (transaction markers) reads on from after them, so that the consumer
// gets the records that follow, as Kafka's does.
func downConvertedRead(l *tlog.Log, version int16, fetchOffset int64, limit int, upTo int64) ([]byte, error) {
	magic := int8(0)
	if version >= 2 {
		magic = 1
	}
	for offset := fetchOffset; ; {
		data, err := l.ReadUpTo(offset, limit, upTo)
		if err != nil || data == nil {
			return data, err
		}
		converted, err := tlog.DownConvert(data, magic, fetchOffset, limit)
		if err != nil || len(converted) > 0 {
			return converted, err
		}
		next, ok := tlog.NextOffset(data)
		if !ok || next <= offset || next >= upTo {
			return nil, nil
		}
		offset = next
	}
}

// abortedTransactions returns, for a read_committed fetch from
// fetchOffset that read data, the aborted transactions whose records data
// may hold (Kafka's collectAbortedTransactions up to the offset after the
// last batch read), as the response lists them: an empty list when there
// are none.
func abortedTransactions(l *tlog.Log, fetchOffset int64, data []byte) []kmsg.FetchResponseTopicPartitionAbortedTransaction {
	out := []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
	end, ok := tlog.NextOffset(data)
	if !ok {
		return out
	}
	for _, a := range l.CollectAbortedTxns(fetchOffset, end) {
		at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
		at.ProducerID, at.FirstOffset = a.ProducerID, a.FirstOffset
		out = append(out, at)
	}
	return out
}

// fetchedReplica returns the replica of a partition that answers a
// fetch, or the error code to answer: the leader, for a follower's
// fetch and a consumer's before v11; any replica this broker holds with
// a leader for a consumer's Fetch v11+ (KIP-392: Kafka's fetchOnlyLeader
// is false once the request carries the client's metadata), else
// NOT_LEADER_OR_FOLLOWER as from a broker that holds none.
func (b *Broker) fetchedReplica(r *kmsg.FetchRequest, topic string, partition int32, consumer bool) (*replica.Partition, int16) {
	if !consumer || r.Version < 11 {
		return b.replicas.LeaderFor(topic, partition)
	}
	p, code := b.replicas.ReplicaFor(topic, partition)
	if p != nil && p.LeaderEpoch() < 0 {
		return nil, kerr.NotLeaderForPartition.Code
	}
	return p, code
}

// preferredReadReplica returns the follower a consumer's Fetch v11+
// should read p from instead of this broker (coord.NoBroker: this
// broker serves it): with replica.selector.class set and this broker
// leading p, an in-sync follower of the consumer's rack when this broker
// is not in it (replica.Manager.PreferredReadReplica).
func (b *Broker) preferredReadReplica(r *kmsg.FetchRequest, p *replica.Partition, fetchOffset int64) coord.BrokerID {
	if r.Version < 11 || r.Rack == "" || b.cfg.ReplicaSelectorClass == "" {
		return coord.NoBroker
	}
	return b.replicas.PreferredReadReplica(p, r.Rack, fetchOffset)
}
