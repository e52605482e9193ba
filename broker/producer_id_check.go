package broker

import (
	"encoding/binary"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tripodmq/tripod/broker/producerid"
)

// batchProducerIDOffset is where a v2 record batch holds its producer id,
// and batchHeaderSize how long its header is.
const (
	batchProducerIDOffset = 43
	batchMagicOffset      = 16
	batchHeaderSize       = 61
)

// checkProducerIDs returns 0 when no batch of records, a partition's part
// of a Produce arriving on connection c, names a producer id (one >= 0)
// that was not handed to c's principal (or, a legacy id, that the
// partition does not know), and otherwise the error the partition is
// answered with: UNKNOWN_PRODUCER_ID (Kafka's answer to a producer id a
// partition does not know; franz-go and Kafka's producer bump their epoch
// and resend, and the application sees no error unless the record's
// delivery timeout passes), or COORDINATOR_LOAD_IN_PROGRESS, retriable,
// while the broker has not read the cluster's producer id key yet.
// Batches without a producer id (-1, not idempotent) pass. It reads only
// the batch headers; batches too short to hold one, or not v2, are left
// to the validation of the batch, which refuses them.
func (b *Broker) checkProducerIDs(c *connState, topic string, partition int32, records []byte) int16 {
	for rest := records; len(rest) >= batchHeaderSize && rest[batchMagicOffset] == 2; {
		id := int64(binary.BigEndian.Uint64(rest[batchProducerIDOffset:]))
		if id >= 0 {
			verdict := b.producerIDs.Verify(c.principal(), &c.producerIDs, id)
			if verdict == producerid.Legacy && b.knowsProducer(topic, partition, id) {
				verdict = producerid.Issued
			}
			switch verdict {
			case producerid.KeyUnknown:
				return kerr.CoordinatorLoadInProgress.Code
			case producerid.Foreign, producerid.Legacy:
				b.refusedProducerIDs.log(b.logger, "produce refused: the producer id was not handed to this principal",
					"principal", c.principal().String(), "remote", c.remote, "producer_id", id, "topic", topic, "partition", partition)
				return kerr.UnknownProducerID.Code
			}
		}
		// A batch's length counts what follows the length field.
		next := 12 + int64(int32(binary.BigEndian.Uint32(rest[8:])))
		if next < batchHeaderSize || next > int64(len(rest)) {
			break
		}
		rest = rest[next:]
	}
	return 0
}

// knowsProducer reports whether the producer state of topic's partition,
// led by this broker, holds producer id id.
func (b *Broker) knowsProducer(topic string, partition int32, id int64) bool {
	p := b.replicas.PartitionFor(topic, partition)
	if p == nil {
		return false
	}
	return p.KnowsProducer(id)
}

// producerIDRefusalLogInterval is how often at most a refused producer id
// is logged.
const producerIDRefusalLogInterval = time.Second
