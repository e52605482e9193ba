package replication

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tripodmq/tripod/replication/log"
)

// The harness runs a partition's replicas as state machines over
// in-memory logs, doing the broker's I/O by hand: appends, fetches,
// OffsetForLeaderEpoch, AlterPartition to a model of the controller (which
// checks epochs and elects as controller.ElectLeader does), and the HW
// checkpoint. Time moves only when a test says so.

// record is one record of an in-memory log, stamped with its leader epoch.
type record struct {
	epoch int32
	value string
}

// node is one replica: its state machine, its log and its HW checkpoint,
// which survive a crash; the state machine does not.
type node struct {
	id           ReplicaID
	p            *Partition
	log          []record
	hwCheckpoint int64
	live         bool
}

// epochs returns the node's leader-epoch cache, as replication/log keeps
// it.
func (n *node) epochs() []log.EpochEntry {
	var out []log.EpochEntry
	for i, r := range n.log {
		if len(out) == 0 || out[len(out)-1].Epoch < r.epoch {
			out = append(out, log.EpochEntry{Epoch: r.epoch, StartOffset: int64(i)})
		}
	}
	return out
}

// values returns the node's records' values.
func (n *node) values() []string {
	out := make([]string, len(n.log))
	for i, r := range n.log {
		out[i] = r.value
	}
	return out
}

// cluster is one partition replicated over nodes, with the controller's
// committed state.
type cluster struct {
	t       *testing.T
	cfg     Config
	now     time.Time
	nodes   []*node
	state   State
	unclean bool
	// timeout is the acks=all request timeout.
	timeout time.Duration
	nextAck AckID
	// acked holds the outcome of every settled acks=all produce.
	acked map[AckID]error
	// ackOffset is each acks=all produce's offset.
	ackOffset map[AckID]int64
	// onReady, when set, checks invariants after every drained Ready.
	onReady func(n *node, rd Ready)
	// diverging counts the fetches a leader answered with a diverging
	// epoch (fetch mode).
	diverging int
}

// newCluster starts a partition on replicas 1..size, led by 1, all in the
// ISR.
func newCluster(t *testing.T, cfg Config, size int) *cluster {
	t.Helper()
	c := &cluster{t: t, cfg: cfg, now: time.Unix(1_700_000_000, 0), timeout: 30 * time.Second,
		acked: map[AckID]error{}, ackOffset: map[AckID]int64{}}
	for i := 1; i <= size; i++ {
		c.nodes = append(c.nodes, &node{id: ReplicaID(i), live: true})
		c.state.Replicas = append(c.state.Replicas, ReplicaID(i))
	}
	c.state.ISR = slices.Clone(c.state.Replicas)
	c.state.Leader = 1
	for _, n := range c.nodes {
		c.start(n)
	}
	return c
}

// node returns replica id.
func (c *cluster) node(id ReplicaID) *node { return c.nodes[id-1] }

// leader returns the leader's node, failing the test if there is none.
func (c *cluster) leader() *node {
	c.t.Helper()
	if c.state.Leader == NoReplica {
		c.t.Fatalf("partition has no leader (ISR %v)", c.state.ISR)
	}
	return c.node(c.state.Leader)
}

// start gives a node a fresh state machine and the controller's state.
func (c *cluster) start(n *node) {
	c.t.Helper()
	p, err := New(c.cfg, n.id)
	if err != nil {
		c.t.Fatal(err)
	}
	n.p = p
	n.live = true
	c.tell(n)
}

// tell sends the controller's state to n (LeaderAndIsr) and runs a
// follower's truncation against the leader.
func (c *cluster) tell(n *node) {
	c.t.Helper()
	if c.state.Leader == n.id {
		if err := n.p.BecomeLeader(c.state, int64(len(n.log)), n.hwCheckpoint, c.now); err != nil {
			c.t.Fatalf("replica %d: %v", n.id, err)
		}
		c.drain(n)
		return
	}
	tr, err := n.p.BecomeFollower(c.state, int64(len(n.log)), n.hwCheckpoint, n.epochs())
	if err != nil {
		c.t.Fatalf("replica %d: %v", n.id, err)
	}
	for {
		n.log = n.log[:tr.Offset]
		if tr.Done {
			break
		}
		if c.state.Leader == NoReplica || !c.node(c.state.Leader).live {
			return // asks again once there is a leader
		}
		l := c.node(c.state.Leader)
		epoch, end := EndOffsetForEpoch(l.epochs(), int64(len(l.log)), tr.Epoch)
		if tr, err = n.p.EpochEndOffset(epoch, end); err != nil {
			c.t.Fatalf("replica %d: %v", n.id, err)
		}
	}
	c.drain(n)
}

// drain takes n's Ready and does what it says: checkpoint the HW, send
// the AlterPartition to the controller and the result back, record acks.
func (c *cluster) drain(n *node) {
	c.t.Helper()
	for i := 0; n.p.HasReady(); i++ {
		if i == 100 {
			c.t.Fatalf("replica %d: still ready after 100 rounds (ISR %v, in flight %v)", n.id, n.p.ISR(), n.p.InFlight())
		}
		rd := n.p.Ready()
		if c.onReady != nil {
			c.onReady(n, rd)
		}
		if rd.HighWatermarkChanged {
			n.hwCheckpoint = rd.HighWatermark
		}
		for _, a := range rd.Acks {
			if _, dup := c.acked[a.ID]; dup {
				c.t.Fatalf("ack %d settled twice", a.ID)
			}
			c.acked[a.ID] = a.Err
		}
		if rd.Proposal != nil {
			c.alterPartition(n, *rd.Proposal)
		}
	}
}

// alterPartition is the controller's AlterPartition: it checks the leader
// and partition epochs and commits the ISR.
func (c *cluster) alterPartition(n *node, pr Proposal) {
	c.t.Helper()
	switch {
	case c.state.Leader != n.id || c.state.LeaderEpoch != pr.LeaderEpoch:
		n.p.AlterPartitionFailed(AlterAwaitLeaderAndIsr, c.now)
		return
	case c.state.PartitionEpoch != pr.PartitionEpoch:
		n.p.AlterPartitionFailed(AlterAwaitLeaderAndIsr, c.now)
		return
	}
	for _, id := range pr.ISR {
		if !slices.Contains(c.state.ISR, id) && !c.node(id).live {
			n.p.AlterPartitionFailed(AlterRetry, c.now) // INELIGIBLE_REPLICA
			return
		}
	}
	c.state.ISR = slices.Clone(pr.ISR)
	c.state.PartitionEpoch++
	if err := n.p.AlterPartitionCommitted(c.state.LeaderEpoch, c.state.PartitionEpoch, c.state.ISR, c.now); err != nil {
		c.t.Fatalf("replica %d: %v", n.id, err)
	}
}

// produce appends value at the leader with acks (0, 1 or -1) and returns
// the produce's id (acks=all) and the up-front error.
func (c *cluster) produce(value string, acks int) (AckID, error) {
	c.t.Helper()
	l := c.leader()
	if acks == -1 {
		if err := l.p.CheckAcksAll(); err != nil {
			return 0, err
		}
	}
	l.log = append(l.log, record{epoch: c.state.LeaderEpoch, value: value})
	offset := int64(len(l.log) - 1)
	if err := l.p.Appended(int64(len(l.log)), c.now); err != nil {
		c.t.Fatal(err)
	}
	var id AckID
	if acks == -1 {
		c.nextAck++
		id = c.nextAck
		c.ackOffset[id] = offset
		if err := l.p.Await(id, offset, c.now.Add(c.timeout), c.now); err != nil {
			c.t.Fatal(err)
		}
	}
	c.drain(l)
	return id, nil
}

// fetch has follower id fetch once from the leader, and processes the
// response unless lose is set (the follower dies before reading it).
func (c *cluster) fetch(id ReplicaID, lose bool) {
	c.t.Helper()
	f := c.node(id)
	l := c.leader()
	if !f.live || !l.live {
		c.t.Fatalf("fetch by replica %d (live %t) from %d (live %t)", id, f.live, l.id, l.live)
	}
	offset := int64(len(f.log))
	if c.cfg.Truncation == TruncateFetch && c.diverged(f, l, offset) {
		return
	}
	err := l.p.FollowerFetch(id, offset, -1, c.now)
	if errors.Is(err, ErrOffsetOutOfRange) {
		tr, err := f.p.FetchOutOfRange(int64(len(l.log)))
		if err != nil {
			c.t.Fatal(err)
		}
		f.log = f.log[:tr.Offset]
		return
	}
	if err != nil {
		c.t.Fatal(err)
	}
	c.drain(l)
	if lose {
		return
	}
	f.log = append(f.log, l.log[offset:]...)
	if _, err := f.p.FollowerFetched(int64(len(f.log)), l.p.HighWatermark()); err != nil {
		c.t.Fatal(err)
	}
	c.drain(f)
}

// diverged is the leader's check of a fetch in fetch mode (the epoch of
// the follower's last record, LastFetchedEpoch): when the logs part, the
// leader records nothing and the follower cuts as DivergingEpoch says.
func (c *cluster) diverged(f, l *node, offset int64) bool {
	c.t.Helper()
	fe := f.epochs()
	if len(fe) == 0 {
		return false
	}
	last := fe[len(fe)-1].Epoch
	epoch, end := log.LeaderEndOffsetFor(l.epochs(), int64(len(l.log)), l.p.LeaderEpoch(), l.p.LeaderEpochStartOffset(), last)
	diverges, undefined := FetchDiverges(last, offset, epoch, end)
	if undefined {
		c.t.Fatalf("replica %d at epoch %d offset %d: leader %d cannot tell where epoch %d ends (epochs %v)", f.id, last, offset, l.id, last, l.epochs())
	}
	if !diverges {
		return false
	}
	tr, err := f.p.DivergingEpoch(epoch, end)
	if err != nil {
		c.t.Fatal(err)
	}
	c.diverging++
	f.log = f.log[:tr.Offset]
	c.drain(f)
	return true
}

// replicate has every live follower fetch twice: once for the records and
// once to report its new LEO (and learn the HW).
func (c *cluster) replicate() {
	c.t.Helper()
	for range 2 {
		for _, n := range c.nodes {
			if n.live && n.id != c.state.Leader && c.state.Leader != NoReplica {
				c.fetch(n.id, false)
			}
		}
	}
}

// advance moves time by d and ticks every live leader.
func (c *cluster) advance(d time.Duration) {
	c.t.Helper()
	c.now = c.now.Add(d)
	for _, n := range c.nodes {
		if n.live {
			n.p.Tick(c.now)
			c.drain(n)
		}
	}
}

// kill stops a node as a crash does (its session ends); keep records of
// its log survive (the rest was not flushed). The controller elects as
// controller.ElectLeader and tells the live nodes.
func (c *cluster) kill(id ReplicaID, keep int) {
	c.t.Helper()
	n := c.node(id)
	n.live = false
	n.p = nil
	if keep < len(n.log) {
		n.log = n.log[:keep]
	}
	n.hwCheckpoint = min(n.hwCheckpoint, int64(len(n.log)))
	c.elect()
}

// powerFailure kills every node at once; keep says how many records of
// each node's log survive.
func (c *cluster) powerFailure(keep map[ReplicaID]int) {
	c.t.Helper()
	for _, n := range c.nodes {
		n.live = false
		n.p = nil
		if k, ok := keep[n.id]; ok && k < len(n.log) {
			n.log = n.log[:k]
		}
		n.hwCheckpoint = min(n.hwCheckpoint, int64(len(n.log)))
	}
	c.elect()
}

// restart starts a killed node again (its broker registers; the
// controller may elect it).
func (c *cluster) restart(id ReplicaID) {
	c.t.Helper()
	n := c.node(id)
	n.live = true
	if c.state.Leader == NoReplica {
		c.elect()
	}
	p, err := New(c.cfg, n.id)
	if err != nil {
		c.t.Fatal(err)
	}
	n.p = p
	c.tell(n)
}

// bounce restarts a node faster than its session times out: the
// controller does not notice, and the node gets the current state.
func (c *cluster) bounce(id ReplicaID) {
	c.t.Helper()
	n := c.node(id)
	p, err := New(c.cfg, n.id)
	if err != nil {
		c.t.Fatal(err)
	}
	n.p = p
	c.tell(n)
}

// elect is controller.ElectLeader after a change of the live set; a changed
// leader or ISR is sent to every live node.
func (c *cluster) elect() {
	c.t.Helper()
	live := func(id ReplicaID) bool { return c.node(id).live }
	var liveISR []ReplicaID
	for _, id := range c.state.Replicas {
		if slices.Contains(c.state.ISR, id) && live(id) {
			liveISR = append(liveISR, id)
		}
	}
	leader, isr := NoReplica, c.state.ISR
	switch {
	case len(liveISR) > 0:
		leader, isr = liveISR[0], liveISR
	case c.unclean:
		for _, id := range c.state.Replicas {
			if live(id) {
				leader, isr = id, []ReplicaID{id}
				break
			}
		}
	}
	if leader == c.state.Leader && slices.Equal(isr, c.state.ISR) {
		return
	}
	if leader != c.state.Leader {
		c.state.LeaderEpoch++
	}
	c.state.Leader, c.state.ISR = leader, slices.Clone(isr)
	c.state.PartitionEpoch++
	for _, n := range c.nodes {
		if n.live && n.p != nil {
			c.tell(n)
		}
	}
}

// mustValues fails the test unless replica id's log holds want.
func (c *cluster) mustValues(id ReplicaID, want ...string) {
	c.t.Helper()
	if got := c.node(id).values(); !slices.Equal(got, want) {
		c.t.Fatalf("replica %d log: got %v, want %v", id, got, want)
	}
}

// mustISR fails the test unless the committed ISR (controller and leader)
// is want.
func (c *cluster) mustISR(want ...ReplicaID) {
	c.t.Helper()
	if !slices.Equal(c.state.ISR, want) {
		c.t.Fatalf("controller ISR: got %v, want %v", c.state.ISR, want)
	}
	if got := c.leader().p.ISR(); !slices.Equal(got, want) {
		c.t.Fatalf("leader ISR: got %v, want %v", got, want)
	}
}

// mustAck fails the test unless produce id settled with an error that is
// want (nil: success).
func (c *cluster) mustAck(id AckID, want error) {
	c.t.Helper()
	got, ok := c.acked[id]
	switch {
	case !ok:
		c.t.Fatalf("ack %d (offset %d): still pending, want %v", id, c.ackOffset[id], errString(want))
	case want == nil && got != nil, want != nil && !errors.Is(got, want):
		c.t.Fatalf("ack %d (offset %d): got %v, want %v", id, c.ackOffset[id], errString(got), errString(want))
	}
}

// mustPending fails the test if produce id settled.
func (c *cluster) mustPending(id AckID) {
	c.t.Helper()
	if err, ok := c.acked[id]; ok {
		c.t.Fatalf("ack %d (offset %d): settled with %v, want pending", id, c.ackOffset[id], errString(err))
	}
}

// mustHW fails the test unless replica id's HW is want.
func (c *cluster) mustHW(id ReplicaID, want int64) {
	c.t.Helper()
	if got := c.node(id).p.HighWatermark(); got != want {
		c.t.Fatalf("replica %d HW: got %d, want %d", id, got, want)
	}
}

// errString prints an error or "success".
func errString(err error) string {
	if err == nil {
		return "success"
	}
	return fmt.Sprint(err)
}
