package broker

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	tlog "github.com/tripodmq/tripod/replication/log"
)

// Produce v3..v11: v3 is the first carrying v2 record batches (the only
// format the log stores); v12+ is for transactions v2 and v13+ names
// topics by ID.
func init() { registerAPI(0, 3, 11, handleProduce) }

// handleProduce appends each partition's batches to its log, stamped with
// the partition's leader epoch; a partition this broker does not lead gets
// NOT_LEADER_OR_FOLLOWER. acks=0 gets no response; acks=1 and acks=-1 are
// answered once the leader's log has written the batches (followers do
// not copy data yet).
func handleProduce(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.ProduceRequest)
	resp := r.ResponseKind().(*kmsg.ProduceResponse)
	if r.TransactionID != nil {
		b.logger.Warn("transactional produce refused", "transactional.id", *r.TransactionID, "remote", req.remote)
	}
	for _, rt := range r.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.BaseOffset = -1
			sp.LogAppendTime = -1
			sp.LogStartOffset = -1
			sp.ErrorCode = b.producePartition(r, rt.Topic, rp, &sp)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if r.Acks == 0 {
		return nil, nil, nil
	}
	return resp, nil, nil
}

// producePartition appends one partition's batches and fills sp; it
// returns the Kafka error code.
func (b *Broker) producePartition(r *kmsg.ProduceRequest, topic string, rp kmsg.ProduceRequestTopicPartition, sp *kmsg.ProduceResponseTopicPartition) int16 {
	if r.TransactionID != nil {
		return kerr.TransactionalIDAuthorizationFailed.Code
	}
	if r.Acks != 0 && r.Acks != 1 && r.Acks != -1 {
		return kerr.InvalidRequiredAcks.Code
	}
	p, code := b.leaderFor(topic, rp.Partition)
	if p == nil {
		return code
	}
	if len(rp.Records) == 0 {
		return kerr.CorruptMessage.Code
	}
	if maxBytes := b.maxMessageBytes(p); len(rp.Records) > maxBytes {
		return kerr.MessageTooLarge.Code
	}
	res, err := p.append(rp.Records, p.role().LeaderEpoch)
	if err != nil {
		code := produceErrorCode(err)
		if code == kerr.UnknownServerError.Code {
			b.logger.Error("append failed", "partition", p.name(), "error", err)
		}
		return code
	}
	sp.BaseOffset = res.BaseOffset
	sp.LogStartOffset = p.log.StartOffset()
	return 0
}

// produceErrorCode maps a log error to a Kafka error code.
func produceErrorCode(err error) int16 {
	switch {
	case errors.Is(err, tlog.ErrCorruptMessage):
		return kerr.CorruptMessage.Code
	case errors.Is(err, tlog.ErrUnsupportedMagic):
		return kerr.UnsupportedForMessageFormat.Code
	case errors.Is(err, tlog.ErrRecordTooLarge):
		return kerr.MessageTooLarge.Code
	case errors.Is(err, tlog.ErrClosed):
		return kerr.UnknownTopicOrPartition.Code
	}
	return kerr.UnknownServerError.Code
}

// maxMessageBytes is the topic's max.message.bytes or the broker's
// message.max.bytes.
func (b *Broker) maxMessageBytes(p *partition) int {
	if v, ok := p.configs["max.message.bytes"]; ok {
		if n, err := parseInt(v); err == nil {
			return int(n)
		}
	}
	return int(b.cfg.MessageMaxBytes)
}
