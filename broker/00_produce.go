package broker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/config"
	"github.com/tripodmq/tripod/broker/kafkaerr"
	"github.com/tripodmq/tripod/broker/replica"
	"github.com/tripodmq/tripod/group"
	tlog "github.com/tripodmq/tripod/replication/log"
	"github.com/tripodmq/tripod/txn"
)

// Produce v0..v11: v0 to v2 carry the legacy message sets (magic 0; magic
// 1 from v2), which are converted to v2 record batches, the only format
// the log stores (convertLegacy); v3 is the first carrying v2 batches;
// v12+ is for transactions v2 and v13+ names topics by ID. librdkafka
// compresses with gzip, snappy or lz4 only for a broker whose Produce
// versions include 0 (even when it sends v3+).
func init() { registerAPI(0, 0, 11, handleProduce) }

// handleProduce appends each partition's batches to its log, stamped with
// the partition's leader epoch; a partition this broker does not lead gets
// NOT_LEADER_OR_FOLLOWER. acks=0 gets no response; acks=1 is answered once
// the leader's log has the batches; acks=-1 (all) once the high watermark
// has passed them, that is once every ISR member has them (R4), or with
// REQUEST_TIMED_OUT at the request's timeout. With fewer in-sync replicas
// than min.insync.replicas an acks=all produce writes nothing and gets
// NOT_ENOUGH_REPLICAS. An append that fails on the disk (ENOSPC, EIO)
// takes the partition's log dir offline and gets KAFKA_STORAGE_ERROR, as
// does every later produce to a replica there. A transaction's batches
// (KIP-98) are appended as any idempotent producer's; they need the
// request's transactional id (which the authorizer checks for WRITE),
// else TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka answers. With
// transaction.partition.verification.enable (KIP-890 part 1), the first
// batch of a producer's transaction on a partition is appended only once
// the transaction coordinator has verified, in the deferred part of the
// request (bounded by its timeout), that the partition is in that
// producer's ongoing transaction (txn_verify.go); otherwise the partition
// gets INVALID_TXN_STATE, INVALID_PRODUCER_EPOCH for a fenced epoch, or
// NOT_ENOUGH_REPLICAS, retriable, without a coordinator. A produce read
// while the connection's previous one still waits to append (tripod reads
// a connection's next request before answering the last, where Kafka
// mutes the connection) appends after it, so a producer's pipelined
// batches keep their order: a later batch that needs no verification
// would otherwise pass an earlier one that waits for it, and be refused
// as out of order.
func handleProduce(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.ProduceRequest)
	resp := r.ResponseKind().(*kmsg.ProduceResponse)
	deadline := time.Now().Add(time.Duration(max(r.TimeoutMillis, 0)) * time.Millisecond)
	// waiting is an acks=all partition: its place in the response and
	// the channel its outcome arrives on.
	type waiting struct {
		topic, partition int
		done             <-chan error
	}
	var waits []waiting
	var verifies []txnVerification
	queue := req.conn.appendsPending()
	for _, rt := range r.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.BaseOffset = -1
			sp.LogAppendTime = -1
			sp.LogStartOffset = -1
			var done <-chan error
			var verify *txnVerification
			sp.ErrorCode, done, verify = b.producePartition(req.conn, r, rt.Topic, rp, &sp, deadline, queue)
			st.Partitions = append(st.Partitions, sp)
			if done != nil {
				waits = append(waits, waiting{topic: len(resp.Topics), partition: len(st.Partitions) - 1, done: done})
			}
			if verify != nil {
				verify.topic, verify.partition = len(resp.Topics), len(st.Partitions)-1
				verifies = append(verifies, *verify)
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	if len(verifies) == 0 {
		if r.Acks == 0 {
			return nil, nil, nil
		}
		if len(waits) == 0 {
			return resp, nil, nil
		}
	}
	// The deferred parts run concurrently: the appends after a
	// verification wait for those of the connection's previous produce
	// that verified, which its pipelined batches follow.
	var appended, previous chan struct{}
	if len(verifies) > 0 {
		appended = make(chan struct{})
		if p := req.conn.txnAppends.Swap(&appended); p != nil {
			previous = *p
		}
	}
	return nil, func(ctx context.Context) kmsg.Response {
		checked := b.verifyProduced(ctx, r, verifies, deadline)
		stopped := false
		if previous != nil {
			select {
			case <-previous:
			case <-ctx.Done():
				stopped = true
			case <-b.closing:
				stopped = true
			}
		}
		if stopped {
			// An append now could pass the previous produce's;
			// the producer retries these.
			for i := range checked {
				if checked[i].code == 0 {
					checked[i].code = kerr.NotLeaderForPartition.Code
				}
			}
		}
		for _, v := range checked {
			sp := &resp.Topics[v.topic].Partitions[v.partition]
			rp := r.Topics[v.topic].Partitions[v.partition]
			if v.code != 0 {
				sp.ErrorCode = v.code
				continue
			}
			var done <-chan error
			sp.ErrorCode, done = b.appendProduced(r, r.Topics[v.topic].Topic, rp, sp, deadline)
			if done != nil {
				waits = append(waits, waiting{topic: v.topic, partition: v.partition, done: done})
			}
		}
		if appended != nil {
			close(appended)
		}
		if r.Acks == 0 {
			return nil
		}
		// The state machine fails a wait at its deadline; the timer is
		// a backstop for a partition removed while waiting.
		backstop := time.NewTimer(time.Until(deadline) + time.Second)
		defer backstop.Stop()
		for _, w := range waits {
			sp := &resp.Topics[w.topic].Partitions[w.partition]
			select {
			case err := <-w.done:
				sp.ErrorCode = replica.AppendErrors.Code(err)
			case <-backstop.C:
				sp.ErrorCode = kerr.RequestTimedOut.Code
			case <-ctx.Done():
				return resp
			case <-b.closing:
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
			}
		}
		return resp
	}, nil
}

// producePartition appends one partition's batches, which arrived on
// connection c, and fills sp; it returns the Kafka error code and, for
// acks=all, the channel on which the outcome of the wait for the high
// watermark arrives; or, for the first batch of a transaction on the
// partition, nothing appended yet and the verification to ask the
// transaction coordinator for before appendProduced. With queue (the
// connection's previous produce has not appended yet) nothing is
// appended either: the batches are returned as queued, for
// appendProduced after the previous produce's appends.
func (b *Broker) producePartition(c *connState, r *kmsg.ProduceRequest, topic string, rp kmsg.ProduceRequestTopicPartition, sp *kmsg.ProduceResponseTopicPartition, deadline time.Time, queue bool) (int16, <-chan error, *txnVerification) {
	if code := b.checkProducerIDs(c, topic, rp.Partition, rp.Records); code != 0 {
		return code, nil, nil
	}
	code, p := b.checkProduced(r, topic, &rp, sp)
	if p == nil {
		return code, nil, nil
	}
	if r.TransactionID != nil && b.cfg.TransactionPartitionVerification {
		if id, epoch, ok := firstTxnBatch(rp.Records); ok && !p.TxnOpen(id) {
			return 0, nil, &txnVerification{tp: txn.TopicPartition{Topic: topic, Partition: rp.Partition}, producerID: id, epoch: epoch}
		}
	}
	if queue {
		return 0, nil, &txnVerification{tp: txn.TopicPartition{Topic: topic, Partition: rp.Partition}, queued: true}
	}
	code, done := b.appendAsLeader(p, r, rp, sp, deadline)
	return code, done, nil
}

// verifyProduced asks the transaction coordinators for verifies, one
// request per producer id and epoch, bounded by ctx and deadline, and
// returns them with their outcome in code (0: verified, to append); a
// queued one needs no verification and is returned as it is.
func (b *Broker) verifyProduced(ctx context.Context, r *kmsg.ProduceRequest, verifies []txnVerification, deadline time.Time) []txnVerification {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	type producer struct {
		id    int64
		epoch int16
	}
	var order []producer
	byProducer := map[producer][]txnVerification{}
	var checked []txnVerification
	for _, v := range verifies {
		if v.queued {
			checked = append(checked, v)
			continue
		}
		k := producer{v.producerID, v.epoch}
		if _, ok := byProducer[k]; !ok {
			order = append(order, k)
		}
		byProducer[k] = append(byProducer[k], v)
	}
	for _, k := range order {
		vs := byProducer[k]
		tps := make([]txn.TopicPartition, len(vs))
		for i, v := range vs {
			tps[i] = v.tp
		}
		for i, code := range b.verifyTxnPartitions(ctx, *r.TransactionID, k.id, k.epoch, tps) {
			vs[i].code = code
			checked = append(checked, vs[i])
		}
	}
	return checked
}

// appendProduced appends a partition's batches once the transaction
// coordinator verified them, as producePartition does, to the partition
// if this broker still leads it.
func (b *Broker) appendProduced(r *kmsg.ProduceRequest, topic string, rp kmsg.ProduceRequestTopicPartition, sp *kmsg.ProduceResponseTopicPartition, deadline time.Time) (int16, <-chan error) {
	p, code := b.replicas.LeaderFor(topic, rp.Partition)
	if p == nil {
		return code, nil
	}
	return b.appendAsLeader(p, r, rp, sp, deadline)
}

// checkProduced checks a partition's batches before their append and
// returns the partition this broker leads, or nil and the error code. A
// legacy message set (Produce v0-v2) is replaced in rp by the v2 batch
// it converts to.
func (b *Broker) checkProduced(r *kmsg.ProduceRequest, topic string, rp *kmsg.ProduceRequestTopicPartition, sp *kmsg.ProduceResponseTopicPartition) (int16, *replica.Partition) {
	if r.Acks != 0 && r.Acks != 1 && r.Acks != -1 {
		return kerr.InvalidRequiredAcks.Code, nil
	}
	if topic == group.OffsetsTopic {
		// Only the group coordinator writes it, in its own schemas.
		return kerr.InvalidTopicException.Code, nil
	}
	p, code := b.replicas.LeaderFor(topic, rp.Partition)
	if p == nil {
		return code, nil
	}
	if len(rp.Records) == 0 {
		return kerr.CorruptMessage.Code, nil
	}
	maxBytes := b.maxMessageBytes(p)
	if len(rp.Records) > maxBytes {
		return kerr.MessageTooLarge.Code, nil
	}
	if r.Version < 3 {
		converted, code := b.convertLegacy(p, rp.Records, maxBytes, sp)
		if code != 0 {
			return code, nil
		}
		rp.Records = converted
	} else if code := b.validateProduced(p, rp.Records, maxBytes, sp); code != 0 {
		return code, nil
	}
	if r.TransactionID == nil && transactional(rp.Records) {
		// Kafka's KafkaApis: transactional records come with the
		// transactional id the authorizer checked (WRITE on it).
		return kerr.TransactionalIDAuthorizationFailed.Code, nil
	}
	return 0, p
}

// appendAsLeader appends a partition's checked batches to p, which this
// broker leads, and fills sp.
func (b *Broker) appendAsLeader(p *replica.Partition, r *kmsg.ProduceRequest, rp kmsg.ProduceRequestTopicPartition, sp *kmsg.ProduceResponseTopicPartition, deadline time.Time) (int16, <-chan error) {
	res, done, err := b.replicas.AppendAsLeader(p, rp.Records, r.Acks == -1, deadline)
	if err != nil {
		if b.replicas.CheckStorage(p, err) {
			return kerr.KafkaStorageError.Code, nil
		}
		code := replica.AppendErrors.Code(err)
		if code == kerr.UnknownServerError.Code {
			b.logger.Error("append failed", "partition", p.Name(), "error", err)
		}
		return code, nil
	}
	sp.BaseOffset = res.BaseOffset
	sp.LogStartOffset = p.Log().StartOffset()
	return 0, done
}

// decompressionFactor bounds what a compressed batch's records may
// decompress to, as a multiple of the topic's max.message.bytes (or the
// broker's message.max.bytes), the bound of the batch as sent: 64 MiB at
// the default of 1 MB. Producers bound a batch before compression
// (franz-go's ProducerBatchMaxBytes, librdkafka's batch.size) or at an
// estimated ratio (the Java producer's batch.size), so a real batch stays
// far below it, and decompressing 64 MiB costs the broker tens of
// milliseconds of one core. A topic whose records compress further
// raises its max.message.bytes.
const decompressionFactor = 64

// validateProduced checks a partition's produced batches to the last
// record before they are appended (log.ValidateProduced, as Kafka's
// LogValidator), on the connection's goroutine with no partition lock
// held. It returns 0 when the batches may be appended, and otherwise the
// Kafka error code, with the reason in sp's ErrorMessage:
//
//   - CORRUPT_MESSAGE for a batch whose framing or CRC-32C fails, or whose
//     compressed payload its codec cannot read;
//   - UNSUPPORTED_COMPRESSION_TYPE for a codec other than none, gzip,
//     snappy, lz4 and zstd;
//   - INVALID_RECORD, as Kafka's LogValidator, for a header a client may
//     not write (record count, control bit, a transactional batch
//     without a producer id and epoch) and for
//     records that do not parse; and for a record without a key on a
//     topic whose cleanup.policy holds compact (Kafka 2.5+, KIP-467),
//     with the record's index in sp's ErrorRecords;
//   - MESSAGE_TOO_LARGE for records that decompress beyond
//     decompressionFactor times maxBytes (a Java producer splits such a
//     batch and retries);
//   - UNSUPPORTED_FOR_MESSAGE_FORMAT for a magic other than 2.
func (b *Broker) validateProduced(p *replica.Partition, records []byte, maxBytes int, sp *kmsg.ProduceResponseTopicPartition) int16 {
	compact, _ := config.CleanupPolicy(p.TopicConfigs())
	err := tlog.ValidateProduced(records, tlog.ProduceValidation{
		Compacted:            compact,
		MaxDecompressedBytes: int64(maxBytes) * decompressionFactor,
	})
	if err == nil {
		return 0
	}
	return b.refuseProduced(p, err, sp)
}

// convertLegacy checks a partition's legacy message set (Produce v0-v2)
// to the last message and converts it to one v2 batch
// (log.ConvertLegacy, as Kafka's LogValidator converts to message format
// 2), which the append then treats as a producer's batch without
// producer id. It returns the batch, or the Kafka error code with the
// reason in sp's ErrorMessage: those of validateProduced, with
// INVALID_RECORD too for a message of magic 2 or a compressed message
// nested in another, and MESSAGE_TOO_LARGE for a batch beyond maxBytes
// once converted.
func (b *Broker) convertLegacy(p *replica.Partition, records []byte, maxBytes int, sp *kmsg.ProduceResponseTopicPartition) ([]byte, int16) {
	compact, _ := config.CleanupPolicy(p.TopicConfigs())
	batch, err := tlog.ConvertLegacy(records, tlog.ProduceValidation{
		Compacted:            compact,
		MaxDecompressedBytes: int64(maxBytes) * decompressionFactor,
	})
	if err == nil && len(batch) > maxBytes {
		err = fmt.Errorf("%w: the converted batch takes %d bytes, max.message.bytes is %d", tlog.ErrRecordTooLarge, len(batch), maxBytes)
	}
	if err != nil {
		return nil, b.refuseProduced(p, err, sp)
	}
	return batch, 0
}

// refuseProduced returns the Kafka error code of a partition's batches
// that failed their check with err, and puts the reason in sp.
func (b *Broker) refuseProduced(p *replica.Partition, err error, sp *kmsg.ProduceResponseTopicPartition) int16 {
	var nullKey *tlog.NullKeyError
	if errors.As(err, &nullKey) {
		msg := "Compacted topic cannot accept message without key in topic partition " + p.Name() + "."
		sp.ErrorMessage = &msg
		sp.ErrorRecords = []kmsg.ProduceResponseTopicPartitionErrorRecord{{RelativeOffset: int32(nullKey.Index), ErrorMessage: &msg}}
		return kerr.InvalidRecord.Code
	}
	msg := err.Error()
	sp.ErrorMessage = &msg
	b.refusedBatches.log(b.logger, "produced batch refused", "partition", p.Name(), "error", err)
	return kafkaerr.Log.Code(err)
}

// maxMessageBytes is the topic's max.message.bytes or the broker's
// message.max.bytes.
func (b *Broker) maxMessageBytes(p *replica.Partition) int {
	if v, ok := p.TopicConfigs()["max.message.bytes"]; ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return int(n)
		}
	}
	return int(p.BrokerConfig().MessageMaxBytes)
}

// transactionalAttr is the transactional bit of a v2 batch's attributes.
const transactionalAttr = 0x10

// transactional reports whether records (validated) hold a batch of a
// transaction.
func transactional(records []byte) bool {
	found := false
	tlog.EachBatch(records, false, func(h tlog.BatchInfo) {
		found = found || h.Attributes&transactionalAttr != 0
	})
	return found
}
