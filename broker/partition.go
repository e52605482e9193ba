package broker

import (
	"fmt"
	"sync"

	tlog "github.com/tripodmq/tripod/replication/log"
)

// partition is one open partition: its log and the fetches waiting for it
// to grow.
type partition struct {
	topic string
	index int32
	log   *tlog.Log

	// appendMu serialises appends so that offsets and the wake-ups that
	// follow them happen in order.
	appendMu sync.Mutex

	mu      sync.Mutex
	waiters map[chan struct{}]struct{}
}

func newPartition(topic string, index int32, l *tlog.Log) *partition {
	return &partition{topic: topic, index: index, log: l, waiters: make(map[chan struct{}]struct{})}
}

// name is the partition's "topic-index" name for logs and errors.
func (p *partition) name() string { return fmt.Sprintf("%s-%d", p.topic, p.index) }

// append appends records as the leader and wakes the fetches waiting on
// this partition.
func (p *partition) append(records []byte, leaderEpoch int32) (tlog.AppendResult, error) {
	p.appendMu.Lock()
	res, err := p.log.Append(records, leaderEpoch)
	p.appendMu.Unlock()
	if err == nil {
		p.wakeAll()
	}
	return res, err
}

// highWatermark is the offset below which consumers may read. With one
// replica it is the log end offset.
func (p *partition) highWatermark() int64 { return p.log.EndOffset() }

// watch registers wake to be signalled (non-blocking send on a buffered
// channel) whenever the partition grows, until unwatch.
func (p *partition) watch(wake chan struct{}) {
	p.mu.Lock()
	p.waiters[wake] = struct{}{}
	p.mu.Unlock()
}

// unwatch removes a channel registered with watch.
func (p *partition) unwatch(wake chan struct{}) {
	p.mu.Lock()
	delete(p.waiters, wake)
	p.mu.Unlock()
}

// wakeAll signals every registered waiter.
func (p *partition) wakeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for w := range p.waiters {
		select {
		case w <- struct{}{}:
		default:
		}
	}
}
