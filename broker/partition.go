package broker

import (
	"fmt"
	"slices"
	"sync"

	"github.com/tripodmq/tripod/coord"
	tlog "github.com/tripodmq/tripod/replication/log"
)

// partition is one replica this broker holds: its log, its role as the
// controller last set it (LeaderAndIsr), and the fetches waiting for it to
// grow. Replication reads the role from here.
type partition struct {
	topic   string
	index   int32
	topicID [16]byte
	log     *tlog.Log
	// configs are the topic's config overrides when the log was opened.
	configs map[string]string

	// roleMu guards state.
	roleMu sync.RWMutex
	// state is the partition's leader, leader epoch, ISR and replicas from
	// the latest LeaderAndIsr accepted for it.
	state coord.PartitionInfo

	// appendMu serialises appends so that offsets and the wake-ups that
	// follow them happen in order.
	appendMu sync.Mutex

	mu      sync.Mutex
	waiters map[chan struct{}]struct{}
}

func newPartition(info coord.PartitionInfo, l *tlog.Log, configs map[string]string) *partition {
	return &partition{topic: info.Topic, index: info.Partition, topicID: info.TopicID, log: l, configs: configs,
		state: info, waiters: make(map[chan struct{}]struct{})}
}

// role returns the partition's current state.
func (p *partition) role() coord.PartitionInfo {
	p.roleMu.RLock()
	defer p.roleMu.RUnlock()
	return p.state
}

// setRole applies a LeaderAndIsr state unless its leader epoch is older
// than the current one; it reports whether it applied.
func (p *partition) setRole(info coord.PartitionInfo) bool {
	p.roleMu.Lock()
	defer p.roleMu.Unlock()
	if info.LeaderEpoch < p.state.LeaderEpoch {
		return false
	}
	info.ISR = slices.Clone(info.ISR)
	info.Replicas = slices.Clone(info.Replicas)
	p.state = info
	return true
}

// leads reports whether broker id leads this partition, and at which
// leader epoch.
func (p *partition) leads(id coord.BrokerID) (bool, int32) {
	st := p.role()
	return st.Leader == id, st.LeaderEpoch
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
