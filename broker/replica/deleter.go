package replica

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	tlog "github.com/tripodmq/tripod/replication/log"
)

// dirDeleter removes, one after another off the request path, the log
// directories of deleted replicas: a deletion (StopReplica, a stray
// replica, a reassignment's old replica) only renames a log's directory
// (tlog.Log.Delete), so a topic of tens of thousands of partitions costs
// the controller's request a rename each, and the removal of the files
// no one waits for.
type dirDeleter struct {
	logger hclog.Logger
	mu     sync.Mutex
	queue  []string
	// wake has a token when queue may be non-empty.
	wake chan struct{}
}

func newDirDeleter(logger hclog.Logger) *dirDeleter {
	return &dirDeleter{logger: logger, wake: make(chan struct{}, 1)}
}

// add queues a directory marked for deletion.
func (d *dirDeleter) add(dir string) {
	d.mu.Lock()
	d.queue = append(d.queue, dir)
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// findLeftovers queues what the log dirs hold marked for deletion from
// before this start: a broker that stopped or crashed before removing
// them.
func (d *dirDeleter) findLeftovers(logDirs []string) {
	for _, dir := range logDirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			d.logger.Warn("list log dir for deleted logs failed", "dir", dir, "error", err)
			continue
		}
		for _, e := range entries {
			if e.IsDir() && isDeletedDir(e.Name()) {
				d.add(filepath.Join(dir, e.Name()))
			}
		}
	}
}

// run removes the queued directories until closing closes; what is left
// stays marked on disk, and the next start removes it.
func (d *dirDeleter) run(closing <-chan struct{}) {
	for {
		select {
		case <-closing:
			return
		case <-d.wake:
		}
		start, removed := time.Now(), 0
		for {
			d.mu.Lock()
			if len(d.queue) == 0 {
				d.queue = nil
				d.mu.Unlock()
				break
			}
			dir := d.queue[0]
			d.queue = d.queue[1:]
			d.mu.Unlock()
			if err := os.RemoveAll(dir); err != nil {
				d.logger.Warn("remove deleted log failed", "dir", dir, "error", err)
			} else {
				removed++
			}
			select {
			case <-closing:
				return
			default:
			}
		}
		if removed > 0 {
			d.logger.Debug("deleted logs removed", "logs", removed, "took", time.Since(start).Round(time.Millisecond))
		}
	}
}

// isDeletedDir reports whether a log dir's entry is a log marked for
// deletion, which holds no partition. A partition's own directory ends
// in its number, so no topic's name makes one look marked.
func isDeletedDir(name string) bool { return strings.HasSuffix(name, tlog.DeletedSuffix) }
