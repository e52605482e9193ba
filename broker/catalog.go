package broker

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"sync"
)

// Errors returned by a Catalog.
var (
	// ErrTopicExists is returned by CreateTopic for a name already taken
	// (Kafka TOPIC_ALREADY_EXISTS).
	ErrTopicExists = errors.New("topic already exists")
	// ErrUnknownTopic is returned for a topic the catalogue does not hold
	// (Kafka UNKNOWN_TOPIC_OR_PARTITION).
	ErrUnknownTopic = errors.New("unknown topic")
)

// Topic is a catalogue entry: a topic's identity, shape and configs.
type Topic struct {
	// Name is the topic name.
	Name string `json:"name"`
	// ID is the topic's UUID, fixed at creation (Metadata v10+).
	ID [16]byte `json:"id"`
	// Partitions is the number of partitions, numbered 0..Partitions-1.
	Partitions int32 `json:"partitions"`
	// ReplicationFactor is the number of replicas of each partition.
	ReplicationFactor int16 `json:"replication_factor"`
	// Configs are the topic-level overrides (segment.bytes, retention.ms,
	// ...); keys absent here take the broker's defaults.
	Configs map[string]string `json:"configs,omitempty"`
}

// Catalog is the broker's topic catalogue: which topics exist, with how
// many partitions and which configs. LocalCatalog keeps it in a file in the
// data directory; a coordination-backed catalogue replaces it when the
// controller arrives. Implementations are safe for concurrent use.
type Catalog interface {
	// CreateTopic adds t. It returns ErrTopicExists if the name is taken.
	// It blocks until the entry is durable; ctx bounds the wait.
	CreateTopic(ctx context.Context, t Topic) error
	// DeleteTopic removes the named topic. It returns ErrUnknownTopic if it
	// does not exist. It blocks until the removal is durable.
	DeleteTopic(ctx context.Context, name string) error
	// Topics returns every topic, sorted by name. The result is the
	// caller's to modify.
	Topics(ctx context.Context) ([]Topic, error)
}

// LocalCatalog is a Catalog persisted as one JSON file, rewritten
// atomically (temporary file, fsync, rename, directory fsync) on every
// change.
type LocalCatalog struct {
	path string

	mu     sync.Mutex
	topics map[string]Topic
}

// catalogFile is the catalogue's file name inside the data directory.
const catalogFile = "topics.json"

// catalogState is the on-disk form of a LocalCatalog.
type catalogState struct {
	Version int     `json:"version"`
	Topics  []Topic `json:"topics"`
}

// OpenLocalCatalog opens the catalogue kept in dir, creating an empty one
// if none exists.
func OpenLocalCatalog(dir string) (*LocalCatalog, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create catalog dir %s: %w", dir, err)
	}
	c := &LocalCatalog{path: filepath.Join(dir, catalogFile), topics: make(map[string]Topic)}
	data, err := os.ReadFile(c.path)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read catalog %s: %w", c.path, err)
	}
	var st catalogState
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("parse catalog %s: %w", c.path, err)
	}
	for _, t := range st.Topics {
		c.topics[t.Name] = t
	}
	return c, nil
}

// CreateTopic implements Catalog.
func (c *LocalCatalog) CreateTopic(ctx context.Context, t Topic) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.topics[t.Name]; ok {
		return fmt.Errorf("create topic %s: %w", t.Name, ErrTopicExists)
	}
	t.Configs = maps.Clone(t.Configs)
	next := maps.Clone(c.topics)
	next[t.Name] = t
	if err := c.persist(next); err != nil {
		return fmt.Errorf("create topic %s: %w", t.Name, err)
	}
	c.topics = next
	return nil
}

// DeleteTopic implements Catalog.
func (c *LocalCatalog) DeleteTopic(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.topics[name]; !ok {
		return fmt.Errorf("delete topic %s: %w", name, ErrUnknownTopic)
	}
	next := maps.Clone(c.topics)
	delete(next, name)
	if err := c.persist(next); err != nil {
		return fmt.Errorf("delete topic %s: %w", name, err)
	}
	c.topics = next
	return nil
}

// Topics implements Catalog.
func (c *LocalCatalog) Topics(ctx context.Context) ([]Topic, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Topic, 0, len(c.topics))
	for _, t := range c.topics {
		t.Configs = maps.Clone(t.Configs)
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// persist writes topics to the catalogue file atomically.
func (c *LocalCatalog) persist(topics map[string]Topic) error {
	st := catalogState{Version: 1}
	for _, t := range topics {
		st.Topics = append(st.Topics, t)
	}
	sort.Slice(st.Topics, func(i, j int) bool { return st.Topics[i].Name < st.Topics[j].Name })
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("encode catalog: %w", err)
	}
	return writeFileAtomic(c.path, data)
}

// writeFileAtomic replaces path with data so that a crash leaves either the
// old or the new content, never a mix.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("sync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("rename %s to %s: %w", tmp.Name(), path, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}

// newTopicID returns a random version-4 UUID.
func newTopicID() [16]byte {
	var id [16]byte
	_, _ = rand.Read(id[:])
	id[6] = id[6]&0x0f | 0x40
	id[8] = id[8]&0x3f | 0x80
	return id
}
