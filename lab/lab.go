// Package lab holds what tripod's lab, `tripod bench` (lab/bench) and
// `tripod verify` (lab/verify), shares: the size of the clusters it
// starts, the coordination servers they run on, waiting until such a
// cluster is steady, and reading a topic's end offsets. It owns no command
// line and prints nothing; the server's code (broker/, `tripod serve`)
// must not import it or anything under it.
package lab

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/internal/cluster"
	"github.com/tripodmq/tripod/internal/etcdserver"
	"github.com/tripodmq/tripod/internal/freeport"
	"github.com/tripodmq/tripod/internal/zkserver"
)

// Brokers is the replication factor of the lab's topics, and the size of
// every cluster it starts unless told otherwise (bench failover --brokers).
const Brokers = 3

// Binary returns the tripod executable whose `serve` the lab's brokers
// run: path, or when it is empty this process's own.
func Binary(path string) (string, error) {
	if path != "" {
		return path, nil
	}
	return os.Executable()
}

// CoordServers starts, on first use, the ZooKeeper and etcd the clusters
// of one benchmark or verify run share; every cluster gets its own chroot
// or prefix. Only its owner's goroutine uses it.
type CoordServers struct {
	// Dir holds the servers' data.
	Dir  string
	zk   *zkserver.Server
	etcd *etcdserver.Server
}

// ZK returns the ZooKeeper it started, or nil.
func (s *CoordServers) ZK() *zkserver.Server { return s.zk }

// Etcd returns the etcd it started, or nil.
func (s *CoordServers) Etcd() *etcdserver.Server { return s.etcd }

// Configure fills cfg's coordination fields for a new cluster named name,
// with the user's servers (zkConnect, etcdEndpoints: comma lists, empty
// for none) or ones it starts.
func (s *CoordServers) Configure(cfg *cluster.Config, zkConnect, etcdEndpoints, name string) error {
	switch cfg.Backend {
	case "zk":
		connect := zkConnect
		if connect == "" {
			if s.zk == nil {
				zcfg := zkserver.DefaultConfig()
				// A 100 ms tick lets ZooKeeper grant session timeouts from 1 s,
				// so every backend runs with the same --session-timeout.
				zcfg.TickTime, zcfg.MinSessionTimeout = 100*time.Millisecond, time.Second
				// As a production ZooKeeper runs (and the Go benchmarks'):
				// fully compiled, with a heap that holds 100 000 partitions'
				// znodes and their watches, all of it from the start. The
				// tests' 256 MiB, C1-only JVM ran out of heap at that scale,
				// and loaded it in 20 s; a heap grown from 16 MiB spent the
				// first 10 000-partition failover collecting.
				zcfg.FullJIT, zcfg.HeapMB, zcfg.FixedHeap = true, 1024, true
				zk, err := zkserver.Start(filepath.Join(s.Dir, "zookeeper"), zcfg)
				if err != nil {
					return fmt.Errorf("start a local zookeeper (Debian package zookeeper): %w", err)
				}
				s.zk = zk
			}
			connect = s.zk.Addr()
		}
		cfg.ZKConnect = strings.TrimSuffix(connect, "/") + "/" + name
	case "etcd":
		if etcdEndpoints != "" {
			cfg.EtcdEndpoints = strings.Split(etcdEndpoints, ",")
		} else {
			if s.etcd == nil {
				etcd, err := etcdserver.Start(filepath.Join(s.Dir, "etcd"))
				if err != nil {
					return fmt.Errorf("start an embedded etcd: %w", err)
				}
				s.etcd = etcd
			}
			cfg.EtcdEndpoints = s.etcd.Endpoints()
		}
		cfg.EtcdPrefix = "/" + name
	}
	return nil
}

// Close stops the servers it started.
func (s *CoordServers) Close() {
	if s.zk != nil {
		s.zk.Close()
	}
	if s.etcd != nil {
		s.etcd.Close()
	}
}

// WaitSteady waits until every broker of c runs and every live broker
// agrees on the controller and on the leader, leader epoch and ISR of each
// partition of topics (partitions each), with every ISR holding every
// replica; it returns one broker's view.
func WaitSteady(ctx context.Context, c *cluster.Cluster, topics []string, partitions int, timeout time.Duration) (*cluster.Metadata, error) {
	var base *cluster.Metadata
	err := cluster.WaitFor(ctx, timeout, func() error {
		base = nil
		brokers := len(c.Brokers())
		if len(c.Live()) != brokers {
			return fmt.Errorf("%d of %d brokers live", len(c.Live()), brokers)
		}
		return c.EveryLive(ctx, func(md *cluster.Metadata) error {
			if len(md.Brokers) != brokers {
				return fmt.Errorf("lists brokers %v, want %d", md.Brokers, brokers)
			}
			if b := c.Broker(md.ControllerID); b == nil || !b.Running() {
				return fmt.Errorf("names controller %d, want a live broker", md.ControllerID)
			}
			for _, topic := range topics {
				if err := md.TopicErrs[topic]; err != nil {
					return fmt.Errorf("topic %s: %w", topic, err)
				}
				parts := md.Partitions[topic]
				if len(parts) != partitions {
					return fmt.Errorf("%d partitions of %s, want %d", len(parts), topic, partitions)
				}
				for i, p := range parts {
					if p.Leader < 0 || len(p.Replicas) == 0 || len(p.ISR) != len(p.Replicas) {
						return fmt.Errorf("partition %s-%d: leader %d, ISR %v, want a leader and every replica of %v in the ISR", topic, p.Partition, p.Leader, p.ISR, p.Replicas)
					}
					if base != nil {
						if bp := base.Partitions[topic][i]; !SamePartitionState(bp, p) {
							return fmt.Errorf("partition %s-%d: leader %d epoch %d ISR %v, broker %d says leader %d epoch %d ISR %v",
								topic, p.Partition, p.Leader, p.LeaderEpoch, p.ISR, base.From, bp.Leader, bp.LeaderEpoch, bp.ISR)
						}
					}
				}
			}
			if base != nil && base.ControllerID != md.ControllerID {
				return fmt.Errorf("names controller %d, broker %d names %d", md.ControllerID, base.From, base.ControllerID)
			}
			if base == nil {
				base = md
			}
			return nil
		}, topics...)
	})
	return base, err
}

// SamePartitionState reports whether a and b agree on leader, leader epoch
// and ISR (in any order).
func SamePartitionState(a, b cluster.Partition) bool {
	if a.Leader != b.Leader || a.LeaderEpoch != b.LeaderEpoch || len(a.ISR) != len(b.ISR) {
		return false
	}
	x, y := slices.Clone(a.ISR), slices.Clone(b.ISR)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

// ListEndOffsets returns each partition's end offset (its high watermark)
// as the partition's leader answers ListOffsets.
func ListEndOffsets(ctx context.Context, seeds []string, topic string, partitions int) (map[int32]int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := range partitions {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = int32(p), -1, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// The client splits the request by partition leader.
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	ends := map[int32]int64{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("partition %d: %w", p.Partition, err)
			}
			ends[p.Partition] = p.Offset
		}
	}
	if len(ends) != partitions {
		return nil, fmt.Errorf("%d end offsets, want %d", len(ends), partitions)
	}
	return ends, nil
}

// CheckBrokerFlags checks the flags every lab command passes to the
// brokers it starts: --broker-log-level must be a level the broker knows
// and each --set a key=value.
func CheckBrokerFlags(logLevel string, sets []string) error {
	if !slices.Contains([]string{"trace", "debug", "info", "warn", "error"}, logLevel) {
		return fmt.Errorf("--broker-log-level %q: must be trace, debug, info, warn or error", logLevel)
	}
	return CheckSets(sets)
}

// CheckSets checks that each --set is a key=value.
func CheckSets(sets []string) error {
	for _, kv := range sets {
		if !strings.Contains(kv, "=") {
			return fmt.Errorf("--set %q: want key=value", kv)
		}
	}
	return nil
}

// MigrationTarget returns the coordination properties of a fresh target
// of backend to for `tripod migrate --set`, as the clusters of Configure
// get them: a new chroot or prefix name on the user's server or the one
// s starts, or, for raft, every broker of brokers voting on a free
// loopback port.
func (s *CoordServers) MigrationTarget(to, zkConnect, etcdEndpoints, name string, brokers []*cluster.Broker) (map[string]string, error) {
	if to == "raft" {
		addrs, err := freeport.Addrs(len(brokers))
		if err != nil {
			return nil, fmt.Errorf("free ports for the raft voters: %w", err)
		}
		voters := make([]string, len(brokers))
		for i, b := range brokers {
			voters[i] = fmt.Sprintf("%d@%s", b.ID, addrs[i])
		}
		return map[string]string{"raft.voters": strings.Join(voters, ",")}, nil
	}
	tc := cluster.Config{Backend: to}
	if err := s.Configure(&tc, zkConnect, etcdEndpoints, name); err != nil {
		return nil, err
	}
	if to == "zk" {
		return map[string]string{"zookeeper.connect": tc.ZKConnect}, nil
	}
	return map[string]string{"etcd.endpoints": strings.Join(tc.EtcdEndpoints, ","), "etcd.prefix": tc.EtcdPrefix}, nil
}

// MigrateArgs returns the arguments of the `tripod migrate` that moves
// the cluster of bootstrap to backend to with the coordination
// properties target, ending itself after timeout.
func MigrateArgs(to string, target map[string]string, bootstrap []string, timeout time.Duration) []string {
	args := []string{"migrate", "--to", to}
	for _, k := range slices.Sorted(maps.Keys(target)) {
		args = append(args, "--set", k+"="+target[k])
	}
	return append(args, "--bootstrap", strings.Join(bootstrap, ","), "--timeout", timeout.String())
}

// Sleep waits d, and reports false when ctx ended first.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
