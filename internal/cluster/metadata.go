package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Metadata is one broker's answer to a Metadata request: what that broker
// believes, not what the cluster agrees on.
type Metadata struct {
	// From is the broker that answered.
	From int32
	// ControllerID is the controller the broker names, -1 when none.
	ControllerID int32
	// Brokers are the live brokers it lists, by id.
	Brokers []int32
	// Racks are the racks of the brokers it lists that have one, by id.
	Racks map[int32]string
	// Partitions holds every partition of the topics asked for (all
	// topics when none were named), by topic then partition.
	Partitions map[string][]Partition
	// TopicErrs holds the error of every topic that had one.
	TopicErrs map[string]error
}

// Partition is one partition's state in a Metadata answer.
type Partition struct {
	Topic       string
	Partition   int32
	Leader      int32 // -1 when the partition has no leader
	LeaderEpoch int32
	Replicas    []int32
	ISR         []int32
	Offline     []int32
	// Err is the partition's error (LEADER_NOT_AVAILABLE with no leader).
	Err error
}

// Partition returns the state of topic/partition and whether it is there.
func (m *Metadata) Partition(topic string, partition int32) (Partition, bool) {
	for _, p := range m.Partitions[topic] {
		if p.Partition == partition {
			return p, true
		}
	}
	return Partition{}, false
}

// LeaderCounts returns how many partitions of topic each broker leads.
func (m *Metadata) LeaderCounts(topic string) map[int32]int {
	counts := map[int32]int{}
	for _, p := range m.Partitions[topic] {
		counts[p.Leader]++
	}
	return counts
}

// LedBy returns the partitions of topic that broker id leads.
func (m *Metadata) LedBy(topic string, id int32) []int32 {
	var out []int32
	for _, p := range m.Partitions[topic] {
		if p.Leader == id {
			out = append(out, p.Partition)
		}
	}
	return out
}

// MetadataFrom asks one broker, at addr, for metadata of topics (every
// topic when none is named). The request goes to that broker only, never
// to another one it names.
func MetadataFrom(ctx context.Context, addr string, topics ...string) (*Metadata, error) {
	return metadataFrom(ctx, addr, nil, topics...)
}

// metadataFrom is MetadataFrom with the client's extra options opts.
func metadataFrom(ctx context.Context, addr string, opts []kgo.Opt, topics ...string) (*Metadata, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.DialTimeout(time.Second)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", addr, err)
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	if len(topics) > 0 {
		for _, t := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(t)
			req.Topics = append(req.Topics, rt)
		}
	} else {
		req.Topics = nil // every topic
	}
	seeds := cl.SeedBrokers()
	if len(seeds) == 0 {
		return nil, fmt.Errorf("metadata from %s: no seed broker", addr)
	}
	kresp, err := seeds[0].Request(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("metadata from %s: %w", addr, err)
	}
	resp := kresp.(*kmsg.MetadataResponse)
	md := &Metadata{
		From:         -1,
		ControllerID: resp.ControllerID,
		Partitions:   map[string][]Partition{},
		TopicErrs:    map[string]error{},
		Racks:        map[int32]string{},
	}
	for _, b := range resp.Brokers {
		md.Brokers = append(md.Brokers, b.NodeID)
		if b.Rack != nil {
			md.Racks[b.NodeID] = *b.Rack
		}
		if fmt.Sprintf("%s:%d", b.Host, b.Port) == addr {
			md.From = b.NodeID
		}
	}
	slices.Sort(md.Brokers)
	for _, t := range resp.Topics {
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			md.TopicErrs[name] = err
		}
		var parts []Partition
		for _, p := range t.Partitions {
			parts = append(parts, Partition{
				Topic:       name,
				Partition:   p.Partition,
				Leader:      p.Leader,
				LeaderEpoch: p.LeaderEpoch,
				Replicas:    p.Replicas,
				ISR:         p.ISR,
				Offline:     p.OfflineReplicas,
				Err:         kerr.ErrorForCode(p.ErrorCode),
			})
		}
		sort.Slice(parts, func(i, j int) bool { return parts[i].Partition < parts[j].Partition })
		md.Partitions[name] = parts
	}
	return md, nil
}

// Metadata asks broker id, and only it, for metadata of topics.
func (c *Cluster) Metadata(ctx context.Context, id int32, topics ...string) (*Metadata, error) {
	b := c.Broker(id)
	if b == nil {
		return nil, fmt.Errorf("metadata from broker %d: no such broker", id)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	md, err := metadataFrom(ctx, b.Addr, b.clientOpts, topics...)
	if err != nil {
		return nil, fmt.Errorf("broker %d: %w", id, err)
	}
	md.From = id
	return md, nil
}

// EveryLive asks every live broker (running, not paused) for metadata of
// topics and calls check on each answer; it returns the first error,
// naming the broker. A broker that exited on its own (not killed or
// stopped) is a Permanent error.
func (c *Cluster) EveryLive(ctx context.Context, check func(*Metadata) error, topics ...string) error {
	if err := c.checkExits(); err != nil {
		return err
	}
	running := c.Live()
	if len(running) == 0 {
		return errors.New("no broker is live")
	}
	for _, b := range running {
		md, err := c.Metadata(ctx, b.ID, topics...)
		if err != nil {
			return err
		}
		if err := check(md); err != nil {
			return fmt.Errorf("metadata from broker %d: %w", b.ID, err)
		}
	}
	return nil
}

// checkExits returns a Permanent error naming the first broker that
// exited on its own, with its log's tail.
func (c *Cluster) checkExits() error {
	for _, b := range c.Brokers() {
		if exited, err := b.Exit(); exited {
			return Permanent(fmt.Errorf("broker %d exited on its own (%v); the tail of its log %s:\n%s", b.ID, err, b.LogPath, b.LogTail(2048)))
		}
	}
	return nil
}

// WaitServing waits until every live broker answers Metadata naming the
// same live controller, or timeout passes. It does not ask that every
// broker list every live broker: brokers learn of one that joins from the
// controller's next UpdateMetadata to them, and with no partition change
// the controller sends none (see the scenarios' report).
func (c *Cluster) WaitServing(ctx context.Context, timeout time.Duration) error {
	return WaitFor(ctx, timeout, func() error {
		controller := int32(-1)
		return c.EveryLive(ctx, func(md *Metadata) error {
			if b := c.Broker(md.ControllerID); b == nil || !b.Running() || b.Paused() {
				return fmt.Errorf("controller %d, want a live broker", md.ControllerID)
			}
			if controller >= 0 && md.ControllerID != controller {
				return fmt.Errorf("controller %d, another broker names %d", md.ControllerID, controller)
			}
			controller = md.ControllerID
			return nil
		})
	})
}

// permanentError is a condition's error that no wait can cure.
type permanentError struct{ error }

func (p permanentError) Unwrap() error { return p.error }

// Permanent wraps err so that WaitFor returns it at once instead of
// waiting on.
func Permanent(err error) error { return permanentError{err} }

// WaitFor calls cond every 100 ms until it returns nil, and returns nil;
// or, when timeout passes or ctx ends first, the last error cond returned;
// or at once an error cond wrapped with Permanent.
func WaitFor(ctx context.Context, timeout time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return nil
		}
		var permanent permanentError
		if errors.As(err, &permanent) {
			return permanent.error
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v: %w", timeout, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// Request sends req to broker id, and only to it, and returns its
// response; tests use it to speak for a controller or a client.
func (c *Cluster) Request(ctx context.Context, id int32, req kmsg.Request) (kmsg.Response, error) {
	b := c.Broker(id)
	if b == nil {
		return nil, fmt.Errorf("request to broker %d: no such broker", id)
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Addr), kgo.RequestRetries(0), kgo.DialTimeout(time.Second)}, b.clientOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("client for broker %d: %w", id, err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("request key %d to broker %d: %w", req.Key(), id, err)
	}
	return resp, nil
}
