package replica

import (
	"errors"
	"time"

	tlog "github.com/tripodmq/tripod/replication/log"

	"github.com/tripodmq/tripod/broker/config"
)

// maxCleanPassesPerRound bounds the passes over one log in a cleaner
// round: a log whose offset map filled is cleaned again at once, up to
// this many times, then waits for the next round like the others.
const maxCleanPassesPerRound = 8

// cleanerLoop is the log cleaner: every log.cleaner.backoff.ms it runs a
// compaction pass over each replica of a topic whose cleanup.policy holds
// compact (leaders and followers alike, each cleaning its own log, as
// Kafka's replicas do). The backoff is read from the live config before
// each wait, so that a dynamic change (IncrementalAlterConfigs) applies
// from the next round without a restart. It ends when the broker closes;
// a pass under way then finishes first.
func (m *Manager) cleanerLoop() {
	backoff := time.NewTimer(m.cleanerBackoff())
	defer backoff.Stop()
	for {
		select {
		case <-m.closing:
			return
		case now := <-backoff.C:
			m.CleanLogs(now)
			backoff.Reset(m.cleanerBackoff())
		}
	}
}

// cleanerBackoff is log.cleaner.backoff.ms as the dynamic broker configs
// make it now.
func (m *Manager) cleanerBackoff() time.Duration {
	if m.dyn == nil {
		return m.cfg.LogCleanerBackoff
	}
	return m.dyn.CurrentConfig().LogCleanerBackoff
}

// CleanLogs runs one cleaner round at now over every compacted replica
// and returns how many passes cleaned something.
func (m *Manager) CleanLogs(now time.Time) int {
	cleaned := 0
	for _, p := range m.Partitions() {
		if compact, _ := config.CleanupPolicy(p.TopicConfigs()); !compact {
			continue
		}
		cfg := m.cfg.CleanConfig(p.TopicConfigs())
		for range maxCleanPassesPerRound {
			select {
			case <-m.closing:
				return cleaned
			default:
			}
			res, err := p.log.CleanBelow(cfg, now, p.LastStableOffset())
			if err != nil {
				if !errors.Is(err, tlog.ErrClosed) {
					m.logger.Error("log cleaning failed", "partition", p.Name(), "error", err)
					m.CheckStorage(p, err)
				}
				break
			}
			if res.Cleaned {
				cleaned++
				m.logger.Debug("log cleaned", "partition", p.Name(), "from", res.FirstDirty, "to", res.CleanedTo,
					"segments", res.SegmentsRewritten, "bytes_before", res.BytesBefore, "bytes_after", res.BytesAfter,
					"records_removed", res.RecordsRemoved, "markers_removed", res.MarkersRemoved)
			}
			if !res.More || res.Abandoned {
				break
			}
		}
	}
	return cleaned
}
