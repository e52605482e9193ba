package replica

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/tripodmq/tripod/coord"
)

// ErrLogDirOffline: the replica's log dir is offline, or its log could not
// be opened; Kafka's KAFKA_STORAGE_ERROR.
var ErrLogDirOffline = errors.New("log dir offline")

// IsStorageError reports whether err is a failure of the disk under a log
// dir (rather than of the request): a full file system, an I/O error, a
// read-only or over-quota file system.
func IsStorageError(err error) bool {
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

// LogDirs is the state of a broker's log dirs (log.dirs): the lock held on
// each while the broker runs, the dirs gone offline with the error that
// took each, and the replicas offline until restart (in an offline dir,
// or whose log could not be opened). Both last until restart. It is safe
// for concurrent use; while everything is online its queries take no lock,
// so that the produce and fetch paths, which ask of every partition, do
// not contend. The zero LogDirs holds no dir and locks none.
type LogDirs struct {
	dirs  []string
	locks []*os.File

	// mu guards offline and offlineReplicas; anyOffline is set with the
	// first entry of either.
	mu              sync.Mutex
	offline         map[string]error
	offlineReplicas map[coord.TopicPartition]bool
	anyOffline      atomic.Bool
	// failed is signalled (never blocking) by Announce.
	failed chan struct{}
}

// OpenLogDirs creates and locks each of dirs (LockLogDirs), all online.
func OpenLogDirs(dirs []string) (*LogDirs, error) {
	locks, err := LockLogDirs(dirs)
	if err != nil {
		return nil, err
	}
	return &LogDirs{dirs: dirs, locks: locks, failed: make(chan struct{}, 1)}, nil
}

// Unlock releases the log dirs' locks; a second call does nothing.
func (d *LogDirs) Unlock() {
	for _, f := range d.locks {
		f.Close()
	}
	d.locks = nil
}

// Offline reports whether log dir dir is offline.
func (d *LogDirs) Offline(dir string) bool {
	if !d.anyOffline.Load() {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.offline[dir]
	return ok
}

// PartitionDirOffline reports whether the log dir holding partition
// directory partitionDir is offline, without computing the dir while none
// is (a LeaderAndIsr asks it of every partition it names).
func (d *LogDirs) PartitionDirOffline(partitionDir string) bool {
	return d.anyOffline.Load() && d.Offline(filepath.Dir(partitionDir))
}

// OfflineCount is the number of offline log dirs.
func (d *LogDirs) OfflineCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.offline)
}

// OfflineDirs returns the offline log dirs, in no order.
func (d *LogDirs) OfflineDirs() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]string, 0, len(d.offline))
	for dir := range d.offline {
		out = append(out, dir)
	}
	return out
}

// Online returns the log dirs that are not offline, in log.dirs order.
func (d *LogDirs) Online() []string {
	return slices.DeleteFunc(slices.Clone(d.dirs), d.Offline)
}

// ReplicaOffline reports whether the replica of tp is offline: its log
// dir failed, or its log could not be opened.
func (d *LogDirs) ReplicaOffline(tp coord.TopicPartition) bool {
	if !d.anyOffline.Load() {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.offlineReplicas[tp]
}

// MarkReplicaOffline records that tp's replica is offline until restart.
func (d *LogDirs) MarkReplicaOffline(tp coord.TopicPartition) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.offlineReplicas == nil {
		d.offlineReplicas = map[coord.TopicPartition]bool{}
	}
	d.offlineReplicas[tp] = true
	d.anyOffline.Store(true)
}

// Fail takes log dir dir offline because of cause. It reports false when
// dir was offline already, and how many log dirs are still online. The
// caller then calls Announce.
func (d *LogDirs) Fail(dir string, cause error) (failed bool, online int) {
	d.mu.Lock()
	if _, ok := d.offline[dir]; ok {
		d.mu.Unlock()
		return false, 0
	}
	if d.offline == nil {
		d.offline = map[string]error{}
	}
	d.offline[dir] = cause
	d.anyOffline.Store(true)
	online = len(d.dirs) - len(d.offline)
	d.mu.Unlock()
	return true, online
}

// Announce makes Failed receive a value (once for any number of calls
// before it is received); it never blocks.
func (d *LogDirs) Announce() {
	select {
	case d.failed <- struct{}{}:
	default:
	}
}

// Failed receives a value after Announce: log dirs went offline.
func (d *LogDirs) Failed() <-chan struct{} { return d.failed }

// Place returns the directory for a partition's log: the existing one if a
// log dir holds it, else the online log dir holding the fewest partitions
// (Kafka's placement). A partition found in an offline dir, or no online
// dir at all, is ErrLogDirOffline.
func (d *LogDirs) Place(topic string, index int32) (string, error) {
	dir := d.partitionDir(topic, index, func(dir string) bool { return !d.Offline(dir) })
	if dir == "" {
		return "", fmt.Errorf("%w: partition %s-%d: no online log dir", ErrLogDirOffline, topic, index)
	}
	if d.Offline(filepath.Dir(dir)) {
		return "", fmt.Errorf("%w: partition %s-%d is in offline log dir %s", ErrLogDirOffline, topic, index, filepath.Dir(dir))
	}
	return dir, nil
}

// partitionDir returns the directory of a partition's log: the existing
// one if any log dir holds it, else the log dir holding the fewest
// partitions among those usable reports true for; "" if there is none.
func (d *LogDirs) partitionDir(topic string, index int32, usable func(dir string) bool) string {
	name := fmt.Sprintf("%s-%d", topic, index)
	if len(d.dirs) == 1 {
		return filepath.Join(d.dirs[0], name)
	}
	best, bestCount := "", -1
	for _, dir := range d.dirs {
		path := filepath.Join(dir, name)
		if _, err := os.Stat(path); err == nil {
			return path
		}
		if !usable(dir) {
			continue
		}
		entries, _ := os.ReadDir(dir)
		count := 0
		for _, e := range entries {
			if e.IsDir() && !isDeletedDir(e.Name()) {
				count++
			}
		}
		if bestCount < 0 || count < bestCount {
			best, bestCount = dir, count
		}
	}
	if best == "" {
		return ""
	}
	return filepath.Join(best, name)
}

// lockFileName is the lock file a broker holds in each of its log dirs.
const lockFileName = ".lock"

// LockLogDirs creates each log dir and takes an exclusive flock on its
// lock file, so that two brokers never share a directory. The kernel drops
// the locks when the process dies, so a crashed broker never blocks its
// successor.
func LockLogDirs(dirs []string) ([]*os.File, error) {
	var locks []*os.File
	release := func() {
		for _, f := range locks {
			f.Close()
		}
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			release()
			return nil, fmt.Errorf("create log.dirs directory %s: %w", d, err)
		}
		path := filepath.Join(d, lockFileName)
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			release()
			return nil, fmt.Errorf("open lock file %s: %w", path, err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			holder, _ := os.ReadFile(path)
			f.Close()
			release()
			return nil, fmt.Errorf("log.dirs %s is in use by another broker process (pid %s, lock %s): %w",
				d, strings.TrimSpace(string(holder)), path, err)
		}
		// The lock file names its holder, so that a second broker on the
		// same directory can say which process holds it.
		if err := f.Truncate(0); err == nil {
			_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		}
		locks = append(locks, f)
	}
	return locks, nil
}
