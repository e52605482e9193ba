package broker

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/replica"
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

// errLogDirOffline: the replica's log dir is offline, or its log could not
// be opened; Kafka's KAFKA_STORAGE_ERROR.
var errLogDirOffline = errors.New("log dir offline")

// brokerHeartbeatVersion is the BrokerHeartbeat version the broker sends
// and accepts: v1 carries OfflineLogDirs.
const brokerHeartbeatVersion = 1

// isStorageError reports whether err is a failure of the disk under a log
// dir (rather than of the request): a full file system, an I/O error, a
// read-only or over-quota file system.
func isStorageError(err error) bool {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return false
	}
	switch errno {
	case syscall.ENOSPC, syscall.EIO, syscall.EROFS, syscall.EDQUOT:
		return true
	}
	return false
}

// logDir is the log dir holding p's log.
func (p *partition) logDir() string { return filepath.Dir(p.dir) }

// partitionDirOffline reports whether p's log dir is offline, without
// computing the dir while none is (a LeaderAndIsr asks it of every
// partition it names).
func (b *Broker) partitionDirOffline(p *partition) bool {
	return b.anyOffline.Load() && b.dirOffline(p.logDir())
}

// dirOffline reports whether log dir dir is offline.
func (b *Broker) dirOffline(dir string) bool {
	if !b.anyOffline.Load() {
		return false
	}
	b.dirsMu.Lock()
	defer b.dirsMu.Unlock()
	_, ok := b.offlineDirs[dir]
	return ok
}

// offlineDirCount is the number of offline log dirs.
func (b *Broker) offlineDirCount() int {
	b.dirsMu.Lock()
	defer b.dirsMu.Unlock()
	return len(b.offlineDirs)
}

// replicaOffline reports whether this broker's replica of tp is offline:
// its log dir failed, or its log could not be opened.
func (b *Broker) replicaOffline(tp coord.TopicPartition) bool {
	if !b.anyOffline.Load() {
		return false
	}
	b.dirsMu.Lock()
	defer b.dirsMu.Unlock()
	return b.offlineReplicas[tp]
}

// markReplicaOffline records that tp's replica is offline until restart.
func (b *Broker) markReplicaOffline(tp coord.TopicPartition) {
	b.dirsMu.Lock()
	defer b.dirsMu.Unlock()
	b.offlineReplicas[tp] = true
	b.anyOffline.Store(true)
}

// checkStorage takes p's log dir offline when err is a storage error and
// reports whether it was one.
func (b *Broker) checkStorage(p *partition, err error) bool {
	if !isStorageError(err) {
		return false
	}
	b.failLogDir(p.logDir(), err)
	return true
}

// failLogDir takes log dir dir offline because of cause: from now on its
// replicas answer KAFKA_STORAGE_ERROR and no new replica is placed in it.
// It does not block: logDirLoop closes the replicas and tells the
// controller.
func (b *Broker) failLogDir(dir string, cause error) {
	b.dirsMu.Lock()
	if _, ok := b.offlineDirs[dir]; ok {
		b.dirsMu.Unlock()
		return
	}
	b.offlineDirs[dir] = cause
	b.anyOffline.Store(true)
	online := len(b.cfg.LogDirs) - len(b.offlineDirs)
	b.dirsMu.Unlock()
	b.logger.Error("log dir offline: its replicas are closed until the broker restarts", "dir", dir, "error", cause, "online_dirs", online)
	if online == 0 {
		b.logger.Error("every log dir is offline: this broker holds no replica until it restarts")
	}
	select {
	case b.dirFailed <- struct{}{}:
	default:
	}
}

// logDirLoop closes the replicas of log dirs gone offline and tells the
// controller, retrying until a controller has taken the report in. It
// runs until the broker closes.
func (b *Broker) logDirLoop() {
	for {
		select {
		case <-b.closing:
			return
		case <-b.dirFailed:
		}
		b.closeOfflineReplicas()
		for attempt := 1; ; attempt++ {
			err := b.notifyLogDirFailure()
			if err == nil {
				break
			}
			b.logger.Warn("log dir failure not reported to the controller yet; retrying", "attempt", attempt, "error", err)
			t := time.NewTimer(retryBackoff)
			select {
			case <-t.C:
			case <-b.closing:
				t.Stop()
				return
			}
		}
	}
}

// closeOfflineReplicas closes every replica whose log dir is offline,
// failing its waiting acks=all produces with KAFKA_STORAGE_ERROR.
func (b *Broker) closeOfflineReplicas() {
	b.stateMu.Lock()
	defer b.stateMu.Unlock()
	for _, p := range b.allPartitions() {
		if !b.dirOffline(p.logDir()) {
			continue
		}
		tp := coord.TopicPartition{Topic: p.topic, Partition: p.index}
		b.markReplicaOffline(tp)
		p.failAcks(errLogDirOffline)
		b.removeReplica(tp, false)
		b.logger.Warn("replica offline", "partition", tp, "dir", p.logDir())
	}
}

// notifyLogDirFailure tells the controller that this broker has offline
// log dirs: in process when this broker is the controller, else with a
// BrokerHeartbeat listing them (OfflineLogDirs). Between sessions there is
// nothing to tell: the controller asks the next incarnation for its state.
func (b *Broker) notifyLogDirFailure() error {
	epoch := b.currentEpoch()
	if epoch < 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	self := coord.BrokerID(b.cfg.BrokerID)
	if ctrl := b.controller(); ctrl != nil {
		return ctrl.LogDirFailure(ctx, self, epoch)
	}
	req := kmsg.NewPtrBrokerHeartbeatRequest()
	req.SetVersion(brokerHeartbeatVersion)
	req.BrokerID, req.BrokerEpoch, req.CurrentMetadataOffset = b.cfg.BrokerID, epoch, -1
	b.dirsMu.Lock()
	for dir := range b.offlineDirs {
		req.OfflineLogDirs = append(req.OfflineLogDirs, logDirID(dir))
	}
	b.dirsMu.Unlock()
	kresp, err := b.askController(ctx, req)
	if err != nil {
		return err
	}
	code := kresp.(*kmsg.BrokerHeartbeatResponse).ErrorCode
	if code == kerr.StaleBrokerEpoch.Code {
		return nil // the controller asks the next incarnation for its state
	}
	return kerr.ErrorForCode(code)
}

// logDirID names a log dir in OfflineLogDirs: the first 16 bytes of the
// SHA-256 of its path (tripod keeps no directory.id in meta.properties).
func logDirID(dir string) [16]byte {
	sum := sha256.Sum256([]byte(filepath.Clean(dir)))
	var id [16]byte
	copy(id[:], sum[:16])
	return id
}

// placeDir returns the directory for a partition's log: the existing one
// if a log dir holds it, else the online log dir holding the fewest
// partitions (Kafka's placement). A partition found in an offline dir, or
// no online dir at all, is errLogDirOffline.
func (b *Broker) placeDir(topic string, index int32) (string, error) {
	dir := b.partitionDir(topic, index, func(d string) bool { return !b.dirOffline(d) })
	if dir == "" {
		return "", fmt.Errorf("%w: partition %s-%d: no online log dir", errLogDirOffline, topic, index)
	}
	if b.dirOffline(filepath.Dir(dir)) {
		return "", fmt.Errorf("%w: partition %s-%d is in offline log dir %s", errLogDirOffline, topic, index, filepath.Dir(dir))
	}
	return dir, nil
}

// onlineLogDirs returns the log dirs that are not offline.
func (b *Broker) onlineLogDirs() []string {
	return slices.DeleteFunc(slices.Clone(b.cfg.LogDirs), b.dirOffline)
}

// writeHWCheckpoints writes every online log dir's checkpoint: the open
// partitions' high watermarks, and the entries read at start for
// partitions not opened since. A write that fails on the disk takes its
// dir offline.
func (b *Broker) writeHWCheckpoints() error {
	byDir := map[string]map[coord.TopicPartition]int64{}
	for _, d := range b.onlineLogDirs() {
		byDir[d] = map[coord.TopicPartition]int64{}
	}
	open := map[coord.TopicPartition]bool{}
	for _, p := range b.allPartitions() {
		tp := coord.TopicPartition{Topic: p.topic, Partition: p.index}
		open[tp] = true
		if m, ok := byDir[filepath.Dir(p.dir)]; ok {
			m[tp] = p.hw.Load()
		}
	}
	b.hwCkpt.Range(func(tp coord.TopicPartition, dir string, hw int64) {
		if !open[tp] {
			if m, ok := byDir[dir]; ok {
				m[tp] = hw
			}
		}
	})
	var first error
	for d, entries := range byDir {
		err := replica.WriteHWCheckpoint(d, entries)
		if err != nil && isStorageError(err) {
			b.failLogDir(d, err)
		}
		if err != nil && first == nil {
			first = fmt.Errorf("write high watermark checkpoint in %s: %w", d, err)
		}
	}
	return first
}
