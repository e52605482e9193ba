package broker

import (
	"github.com/tripodmq/tripod/broker/replica"
)

// txnMarkerWritten is called by WriteTxnMarkers after the marker ending
// producerID's transaction, commit or abort, was written and replicated
// (acks=all) on p, a partition of __consumer_offsets this broker leads:
// the group coordinator materialises or drops the transaction's pending
// offsets (those TxnOffsetCommit wrote for producerID), as Kafka's
// GroupCoordinator.scheduleHandleTxnCompletion does. It runs on the
// WriteTxnMarkers request's own goroutine, once per partition and
// marker, and must not block for long.
func (b *Broker) txnMarkerWritten(p *replica.Partition, producerID int64, commit bool) {
	b.groups.txnCompleted(p.Index(), producerID, commit)
}
