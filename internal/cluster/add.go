package cluster

import (
	"errors"
	"fmt"
	"strconv"
)

// AddBroker makes and starts one more broker, the next id, as an
// operator adds a broker to a running cluster: on Raft it starts with
// raft.listen its own address and raft.voters naming the brokers that
// started as voters (Config.Voters), so it joins the quorum as an
// observer (`tripod quorum add-voter` makes it a voter); on ZooKeeper or
// etcd it registers as every broker does. Its ports follow
// Config.BasePort when set, else are free ones. It returns once the
// process runs, without waiting for it to serve; a broker that fails to
// start stays in the cluster, its log to read.
func (c *Cluster) AddBroker() (*Broker, error) {
	// The lock is held to the end so that Close, which waits for it,
	// also stops the broker being added.
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return nil, errors.New("add a broker: the cluster is closed")
	}
	i := len(c.brokers)
	if i >= 100 {
		return nil, fmt.Errorf("add broker %d: a cluster has at most 100 brokers", i+1)
	}
	kafkaPorts, raftPorts := make([]string, i+1), make([]string, i+1)
	for j, b := range c.brokers {
		kafkaPorts[j], raftPorts[j] = b.Addr, b.RaftAddr
	}
	if c.cfg.BasePort != 0 {
		kafkaPorts[i] = "127.0.0.1:" + strconv.Itoa(c.cfg.BasePort+i)
		raftPorts[i] = "127.0.0.1:" + strconv.Itoa(c.cfg.BasePort+100+i)
	} else {
		addrs, err := FreeAddrs(2)
		if err != nil {
			return nil, fmt.Errorf("add broker %d: %w", i+1, err)
		}
		kafkaPorts[i], raftPorts[i] = addrs[0], addrs[1]
	}
	var voters []string
	for j := 0; j < c.cfg.voterCount(); j++ {
		voters = append(voters, fmt.Sprintf("%d@%s", j+1, raftPorts[j]))
	}
	made, err := c.makeBrokers(i, kafkaPorts, raftPorts, voters)
	if err != nil {
		for _, b := range made {
			b.closeProxies()
		}
		return nil, fmt.Errorf("add broker %d: %w", i+1, err)
	}
	b := made[0]
	c.brokers = append(c.brokers, b)
	if err := b.Start(); err != nil {
		return b, fmt.Errorf("add broker %d: %w", b.ID, err)
	}
	return b, nil
}

// closeProxies closes the proxies of a broker that never started.
func (b *Broker) closeProxies() {
	for _, p := range []*Proxy{b.Proxy, b.CoordProxy} {
		if p != nil {
			p.Close()
		}
	}
}
