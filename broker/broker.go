// Package broker is tripod's Kafka-protocol server: the TCP listener, the
// Kafka framing, one handler per API (00_produce.go, 01_fetch.go, ...), the
// topic catalogue and the partitions' logs. It speaks the protocol through
// franz-go's kmsg and stores records through replication/log; it owns no
// replication decisions (those belong to replication/) and no coordination
// (coord/). For now it is a single broker that leads every partition.
package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	tlog "github.com/tripodmq/tripod/replication/log"
)

// Broker is a running Kafka-protocol server. New starts it; Close stops it.
type Broker struct {
	cfg     Config
	logger  hclog.Logger
	catalog Catalog
	ln      net.Listener

	// advertisedHost and advertisedPort are what Metadata tells clients.
	advertisedHost string
	advertisedPort int32

	// adminMu serialises topic creation and deletion, which write the
	// catalogue and open or delete logs without holding topicsMu.
	adminMu sync.Mutex
	// topicsMu guards topics.
	topicsMu sync.RWMutex
	topics   map[string]*topicState

	producerIDs *producerIDAllocator
	// dirLocks hold each log dir's lock file while the broker runs.
	dirLocks []*os.File

	closeOnce sync.Once
	closing   chan struct{}
	// wg counts every goroutine the broker owns: the accept loop, the
	// background loop, and every connection's goroutines.
	wg sync.WaitGroup
}

// topicState is a topic's catalogue entry and its open partitions.
type topicState struct {
	meta       Topic
	partitions []*partition
}

// New opens the catalogue and every partition log under cfg.LogDirs, binds
// the listener and starts serving. logger may be nil (no logging).
func New(cfg Config, logger hclog.Logger) (*Broker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid broker config: %w", err)
	}
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	if err := os.MkdirAll(cfg.LogDirs[0], 0o755); err != nil {
		return nil, fmt.Errorf("create log.dirs directory %s: %w", cfg.LogDirs[0], err)
	}
	catalog, err := OpenLocalCatalog(cfg.LogDirs[0])
	if err != nil {
		return nil, err
	}
	return NewWithCatalog(cfg, catalog, logger)
}

// NewWithCatalog is New with the topic catalogue supplied by the caller.
func NewWithCatalog(cfg Config, catalog Catalog, logger hclog.Logger) (*Broker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid broker config: %w", err)
	}
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	b := &Broker{
		cfg:     cfg,
		logger:  logger,
		catalog: catalog,
		topics:  make(map[string]*topicState),
		closing: make(chan struct{}),
	}
	locks, err := lockLogDirs(cfg.LogDirs)
	if err != nil {
		return nil, err
	}
	b.dirLocks = locks
	ids, err := openProducerIDAllocator(cfg.LogDirs[0])
	if err != nil {
		b.unlockLogDirs()
		return nil, err
	}
	b.producerIDs = ids
	if err := b.openTopics(context.Background()); err != nil {
		b.closeLogs()
		b.unlockLogDirs()
		return nil, err
	}
	host, port, _ := splitListener("listeners", cfg.Listeners)
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		b.closeLogs()
		b.unlockLogDirs()
		return nil, fmt.Errorf("listen on listeners %s: %w", cfg.Listeners, err)
	}
	b.ln = ln
	b.advertisedHost, b.advertisedPort = advertised(cfg, ln.Addr().(*net.TCPAddr))
	b.logger.Info("broker listening", "addr", ln.Addr().String(), "broker.id", cfg.BrokerID,
		"advertised", net.JoinHostPort(b.advertisedHost, strconv.Itoa(int(b.advertisedPort))))

	b.wg.Add(2)
	go func() {
		defer b.wg.Done()
		b.acceptLoop()
	}()
	go func() {
		defer b.wg.Done()
		b.backgroundLoop()
	}()
	return b, nil
}

// advertised returns the host and port clients should use.
func advertised(cfg Config, bound *net.TCPAddr) (string, int32) {
	if cfg.AdvertisedListeners != "" {
		h, p, _ := splitListener("advertised.listeners", cfg.AdvertisedListeners)
		if p == 0 {
			p = bound.Port
		}
		return h, int32(p)
	}
	host := bound.IP.String()
	if bound.IP.IsUnspecified() {
		if name, err := os.Hostname(); err == nil {
			host = name
		}
	}
	return host, int32(bound.Port)
}

// Addr is the address the broker listens on.
func (b *Broker) Addr() net.Addr { return b.ln.Addr() }

// Close stops accepting, closes every connection, waits for every goroutine
// the broker started, then flushes and closes the partition logs.
func (b *Broker) Close() error {
	var err error
	b.closeOnce.Do(func() {
		close(b.closing)
		err = b.ln.Close()
		b.wg.Wait()
		if cerr := b.closeLogs(); cerr != nil {
			err = cerr
		}
		b.unlockLogDirs()
		b.logger.Info("broker closed")
	})
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// closeLogs flushes and closes every open partition log.
func (b *Broker) closeLogs() error {
	b.topicsMu.Lock()
	defer b.topicsMu.Unlock()
	var first error
	for _, ts := range b.topics {
		for _, p := range ts.partitions {
			if err := p.log.Close(); err != nil && first == nil {
				first = fmt.Errorf("close log of %s-%d: %w", p.topic, p.index, err)
			}
		}
	}
	b.topics = make(map[string]*topicState)
	return first
}

// acceptLoop accepts connections until the listener closes.
func (b *Broker) acceptLoop() {
	for {
		nc, err := b.ln.Accept()
		if err != nil {
			select {
			case <-b.closing:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			b.logger.Error("accept failed", "error", err)
			return
		}
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			b.serveConn(nc)
		}()
	}
}

// backgroundLoop enforces retention every log.retention.check.interval.ms
// and, when log.flush.interval.ms is set, flushes the logs on that period.
func (b *Broker) backgroundLoop() {
	retention := time.NewTicker(b.cfg.LogRetentionCheckInterval)
	defer retention.Stop()
	var flushC <-chan time.Time
	if b.cfg.LogFlushInterval > 0 {
		flush := time.NewTicker(b.cfg.LogFlushInterval)
		defer flush.Stop()
		flushC = flush.C
	}
	for {
		select {
		case <-b.closing:
			return
		case now := <-retention.C:
			for _, p := range b.allPartitions() {
				n, err := p.log.EnforceRetention(now)
				if err != nil && !errors.Is(err, tlog.ErrClosed) {
					b.logger.Error("enforce retention failed", "partition", p.name(), "error", err)
				}
				if n > 0 {
					b.logger.Info("retention deleted segments", "partition", p.name(), "segments", n, "log_start_offset", p.log.StartOffset())
				}
			}
		case <-flushC:
			for _, p := range b.allPartitions() {
				if err := p.log.Flush(); err != nil && !errors.Is(err, tlog.ErrClosed) {
					b.logger.Error("flush failed", "partition", p.name(), "error", err)
				}
			}
		}
	}
}

// allPartitions returns every open partition.
func (b *Broker) allPartitions() []*partition {
	b.topicsMu.RLock()
	defer b.topicsMu.RUnlock()
	var out []*partition
	for _, ts := range b.topics {
		out = append(out, ts.partitions...)
	}
	return out
}

// partitionFor returns the open partition, or nil if the topic or
// partition does not exist.
func (b *Broker) partitionFor(topic string, index int32) *partition {
	b.topicsMu.RLock()
	defer b.topicsMu.RUnlock()
	ts, ok := b.topics[topic]
	if !ok || index < 0 || int(index) >= len(ts.partitions) {
		return nil
	}
	return ts.partitions[index]
}

// topic returns a topic's catalogue entry.
func (b *Broker) topic(name string) (Topic, bool) {
	b.topicsMu.RLock()
	defer b.topicsMu.RUnlock()
	ts, ok := b.topics[name]
	if !ok {
		return Topic{}, false
	}
	return ts.meta, true
}

// topicList returns every topic's catalogue entry, sorted by name.
func (b *Broker) topicList() []Topic {
	b.topicsMu.RLock()
	defer b.topicsMu.RUnlock()
	out := make([]Topic, 0, len(b.topics))
	for _, ts := range b.topics {
		out = append(out, ts.meta)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// openTopics opens the logs of every topic in the catalogue and removes
// partition directories that belong to no topic (left by a crash between
// a catalogue deletion and the log deletion).
func (b *Broker) openTopics(ctx context.Context) error {
	topics, err := b.catalog.Topics(ctx)
	if err != nil {
		return fmt.Errorf("load topic catalog: %w", err)
	}
	b.topicsMu.Lock()
	defer b.topicsMu.Unlock()
	for _, t := range topics {
		ts, err := b.openTopic(t)
		if err != nil {
			return err
		}
		b.topics[t.Name] = ts
	}
	b.removeStrayPartitionDirsLocked()
	return nil
}

// partitionDirPattern matches a partition directory name: topic-partition.
var partitionDirPattern = regexp.MustCompile(`^(.+)-([0-9]+)$`)

// removeStrayPartitionDirsLocked deletes partition directories of topics
// that the catalogue no longer holds.
func (b *Broker) removeStrayPartitionDirsLocked() {
	for _, dir := range b.cfg.LogDirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			m := partitionDirPattern.FindStringSubmatch(e.Name())
			if !e.IsDir() || m == nil || checkTopicName(m[1]) != nil {
				continue
			}
			n, _ := strconv.Atoi(m[2])
			if ts, ok := b.topics[m[1]]; ok && n < len(ts.partitions) {
				continue
			}
			path := filepath.Join(dir, e.Name())
			if !holdsSegments(path) {
				continue
			}
			b.logger.Warn("removing partition directory of a deleted topic", "dir", path)
			if err := os.RemoveAll(path); err != nil {
				b.logger.Error("remove stray partition directory failed", "dir", path, "error", err)
			}
		}
	}
}

// segmentFileName matches a log segment's file name.
var segmentFileName = regexp.MustCompile(`^[0-9]{20}\.log$`)

// holdsSegments reports whether dir holds log segment files, so that only
// directories that are partition logs are ever removed.
func holdsSegments(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if !e.IsDir() && segmentFileName.MatchString(e.Name()) {
			return true
		}
	}
	return false
}

// openTopic opens (creating if needed) the logs of t's partitions. It
// touches no broker state.
func (b *Broker) openTopic(t Topic) (*topicState, error) {
	ts := &topicState{meta: t}
	lc := b.cfg.logConfig(t.Configs)
	for i := int32(0); i < t.Partitions; i++ {
		dir := b.partitionDir(t.Name, i)
		l, err := tlog.Open(dir, lc)
		if err != nil {
			for _, p := range ts.partitions {
				p.log.Close()
			}
			return nil, fmt.Errorf("open log of %s-%d in %s: %w", t.Name, i, dir, err)
		}
		ts.partitions = append(ts.partitions, newPartition(t.Name, i, l))
	}
	return ts, nil
}

// partitionDir returns the directory of a partition's log: the existing
// one if any log dir holds it, else the log dir holding the fewest
// partitions.
func (b *Broker) partitionDir(topic string, index int32) string {
	name := fmt.Sprintf("%s-%d", topic, index)
	if len(b.cfg.LogDirs) == 1 {
		return filepath.Join(b.cfg.LogDirs[0], name)
	}
	best, bestCount := "", -1
	for _, d := range b.cfg.LogDirs {
		path := filepath.Join(d, name)
		if _, err := os.Stat(path); err == nil {
			return path
		}
		entries, _ := os.ReadDir(d)
		count := 0
		for _, e := range entries {
			if e.IsDir() {
				count++
			}
		}
		if bestCount < 0 || count < bestCount {
			best, bestCount = d, count
		}
	}
	return filepath.Join(best, name)
}

// createTopic records t in the catalogue and opens its partitions.
// Produces and fetches on other topics go on meanwhile.
func (b *Broker) createTopic(ctx context.Context, t Topic) error {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	if _, ok := b.topic(t.Name); ok {
		return fmt.Errorf("create topic %s: %w", t.Name, ErrTopicExists)
	}
	select {
	case <-b.closing:
		return fmt.Errorf("create topic %s: broker closing", t.Name)
	default:
	}
	if err := b.catalog.CreateTopic(ctx, t); err != nil {
		return err
	}
	ts, err := b.openTopic(t)
	if err != nil {
		if derr := b.catalog.DeleteTopic(context.WithoutCancel(ctx), t.Name); derr != nil {
			b.logger.Error("undo catalog entry failed", "topic", t.Name, "error", derr)
		}
		return err
	}
	b.topicsMu.Lock()
	b.topics[t.Name] = ts
	b.topicsMu.Unlock()
	b.logger.Info("created topic", "topic", t.Name, "partitions", t.Partitions, "configs", t.Configs)
	return nil
}

// deleteTopic removes the topic from the catalogue and deletes its logs;
// fetches waiting on its partitions are woken.
func (b *Broker) deleteTopic(ctx context.Context, name string) error {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	b.topicsMu.RLock()
	ts, ok := b.topics[name]
	b.topicsMu.RUnlock()
	if !ok {
		return fmt.Errorf("delete topic %s: %w", name, ErrUnknownTopic)
	}
	if err := b.catalog.DeleteTopic(ctx, name); err != nil {
		return err
	}
	b.topicsMu.Lock()
	delete(b.topics, name)
	b.topicsMu.Unlock()
	for _, p := range ts.partitions {
		if err := p.log.Delete(); err != nil {
			b.logger.Error("delete partition log failed", "partition", p.name(), "error", err)
		}
		p.wakeAll()
	}
	b.logger.Info("deleted topic", "topic", name)
	return nil
}

// autoCreate creates topic with the default partition count if it does
// not exist yet. It returns the topic's entry.
func (b *Broker) autoCreate(ctx context.Context, name string) (Topic, error) {
	t := Topic{Name: name, ID: newTopicID(), Partitions: b.cfg.NumPartitions, ReplicationFactor: 1}
	err := b.createTopic(ctx, t)
	if err != nil && !errors.Is(err, ErrTopicExists) {
		return Topic{}, err
	}
	got, ok := b.topic(name)
	if !ok {
		return Topic{}, fmt.Errorf("auto-create topic %s: %w", name, ErrUnknownTopic)
	}
	return got, nil
}

// lockFileName is the lock file a broker holds in each of its log dirs.
const lockFileName = ".lock"

// lockLogDirs creates each log dir and takes an exclusive flock on its
// lock file, so that two brokers never share a directory. The kernel drops
// the locks when the process dies, so a crashed broker never blocks its
// successor.
func lockLogDirs(dirs []string) ([]*os.File, error) {
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
			f.Close()
			release()
			return nil, fmt.Errorf("log.dirs %s is in use by another broker (lock %s): %w", d, path, err)
		}
		locks = append(locks, f)
	}
	return locks, nil
}

// unlockLogDirs releases the log dir locks.
func (b *Broker) unlockLogDirs() {
	for _, f := range b.dirLocks {
		f.Close()
	}
	b.dirLocks = nil
}
