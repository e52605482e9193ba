package replica

import (
	"context"
	"crypto/sha256"
	"fmt"
	"path/filepath"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/coord"
)

// This file is Kafka's KIP-112 for tripod: a log dir whose disk fails (an
// I/O error, ENOSPC when it fills) goes offline on its own, not the whole
// broker. Its replicas are closed and answer KAFKA_STORAGE_ERROR, the
// broker keeps its session and its other dirs, and the controller is told
// (a BrokerHeartbeat carrying the offline dirs, or in process on the
// controller broker); the controller then asks the broker for its
// replicas' state with a LeaderAndIsr, learns the offline ones from the
// KAFKA_STORAGE_ERROR answers and moves their leaderships. A restart
// opens every dir again.

// BrokerHeartbeatVersion is the BrokerHeartbeat version the broker sends
// and accepts: v1 carries OfflineLogDirs.
const BrokerHeartbeatVersion = 1

// LogDir is the log dir holding p's log.
func (p *Partition) LogDir() string { return filepath.Dir(p.dir) }

// CheckStorage takes p's log dir offline when err is a storage error and
// reports whether it was one.
func (m *Manager) CheckStorage(p *Partition, err error) bool {
	if !IsStorageError(err) {
		return false
	}
	m.FailLogDir(p.LogDir(), err)
	return true
}

// FailLogDir takes log dir dir offline because of cause: from now on its
// replicas answer KAFKA_STORAGE_ERROR and no new replica is placed in it.
// It does not block: logDirLoop closes the replicas and tells the
// controller.
func (m *Manager) FailLogDir(dir string, cause error) {
	failed, online := m.logDirs.Fail(dir, cause)
	if !failed {
		return
	}
	m.logger.Error("log dir offline: its replicas are closed until the broker restarts", "dir", dir, "error", cause, "online_dirs", online)
	if online == 0 {
		m.logger.Error("every log dir is offline: this broker holds no replica until it restarts")
	}
	m.logDirs.Announce()
}

// logDirReportBackoff is the wait between two attempts to report a log
// dir failure to the controller.
const logDirReportBackoff = 250 * time.Millisecond

// logDirLoop closes the replicas of log dirs gone offline and tells the
// controller, retrying until a controller has taken the report in. It
// runs until the broker closes.
func (m *Manager) logDirLoop() {
	for {
		select {
		case <-m.closing:
			return
		case <-m.logDirs.Failed():
		}
		m.closeOfflineReplicas()
		for attempt := 1; ; attempt++ {
			err := m.notifyLogDirFailure()
			if err == nil {
				break
			}
			m.logger.Warn("log dir failure not reported to the controller yet; retrying", "attempt", attempt, "error", err)
			t := time.NewTimer(logDirReportBackoff)
			select {
			case <-t.C:
			case <-m.closing:
				t.Stop()
				return
			}
		}
	}
}

// closeOfflineReplicas closes every replica whose log dir is offline,
// failing its waiting acks=all produces with KAFKA_STORAGE_ERROR.
func (m *Manager) closeOfflineReplicas() {
	m.stateMu.Lock()
	defer m.stateMu.Unlock()
	for _, p := range m.Partitions() {
		if !m.logDirs.Offline(p.LogDir()) {
			continue
		}
		tp := coord.TopicPartition{Topic: p.topic, Partition: p.index}
		m.logDirs.MarkReplicaOffline(tp)
		p.failAcks(ErrLogDirOffline)
		m.removeReplica(tp, false)
		m.logger.Warn("replica offline", "partition", tp, "dir", p.LogDir())
	}
}

// notifyLogDirFailure tells the controller that this broker has offline
// log dirs: in process when this broker is the controller, else with a
// BrokerHeartbeat listing them (OfflineLogDirs). Between sessions there is
// nothing to tell: the controller asks the next incarnation for its state.
func (m *Manager) notifyLogDirFailure() error {
	epoch := m.member.CurrentEpoch()
	if epoch < 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	self := coord.BrokerID(m.cfg.BrokerID)
	if ctrl := m.member.Controller(); ctrl != nil {
		return ctrl.LogDirFailure(ctx, self, epoch)
	}
	req := kmsg.NewPtrBrokerHeartbeatRequest()
	req.SetVersion(BrokerHeartbeatVersion)
	req.BrokerID, req.BrokerEpoch, req.CurrentMetadataOffset = m.cfg.BrokerID, epoch, -1
	for _, dir := range m.logDirs.OfflineDirs() {
		req.OfflineLogDirs = append(req.OfflineLogDirs, LogDirID(dir))
	}
	kresp, err := m.member.AskController(ctx, req)
	if err != nil {
		return err
	}
	code := kresp.(*kmsg.BrokerHeartbeatResponse).ErrorCode
	if code == kerr.StaleBrokerEpoch.Code {
		return nil // the controller asks the next incarnation for its state
	}
	return kerr.ErrorForCode(code)
}

// LogDirID names a log dir in OfflineLogDirs: the first 16 bytes of the
// SHA-256 of its path (tripod keeps no directory.id in meta.properties).
func LogDirID(dir string) [16]byte {
	sum := sha256.Sum256([]byte(filepath.Clean(dir)))
	var id [16]byte
	copy(id[:], sum[:16])
	return id
}

// WriteHWCheckpoints writes every online log dir's checkpoint: the open
// partitions' high watermarks, and the entries read at start for
// partitions not opened since; durably at shutdown only (see
// WriteHWCheckpoint). A write that fails on the disk takes its dir
// offline.
func (m *Manager) WriteHWCheckpoints(durable bool) error {
	byDir := map[string]map[coord.TopicPartition]int64{}
	for _, d := range m.logDirs.Online() {
		byDir[d] = map[coord.TopicPartition]int64{}
	}
	open := map[coord.TopicPartition]bool{}
	for _, p := range m.Partitions() {
		tp := coord.TopicPartition{Topic: p.topic, Partition: p.index}
		open[tp] = true
		if m, ok := byDir[filepath.Dir(p.dir)]; ok {
			m[tp] = p.hw.Load()
		}
	}
	m.hwCkpt.Range(func(tp coord.TopicPartition, dir string, hw int64) {
		if !open[tp] {
			if m, ok := byDir[dir]; ok {
				m[tp] = hw
			}
		}
	})
	var first error
	for d, entries := range byDir {
		err := WriteHWCheckpoint(d, entries, durable)
		if err != nil && IsStorageError(err) {
			m.FailLogDir(d, err)
		}
		if err != nil && first == nil {
			first = fmt.Errorf("write high watermark checkpoint in %s: %w", d, err)
		}
	}
	return first
}
