package scenarios

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/internal/cluster"
)

// The group coordinator with brokers as processes: the coordinator of a
// group is the leader of its partition of __consumer_offsets, a commit is
// acknowledged once every in-sync replica has it, and a broker that
// becomes the leader of such a partition loads its groups and offsets
// from it. So the coordinator's crash, or the whole cluster's restart,
// loses no acknowledged commit.

// groupSets are the broker properties of the group scenarios: a small
// __consumer_offsets (quick to create), no initial rebalance delay, and a
// minimum session timeout low enough for memberSessionTimeout.
var groupSets = []string{
	"offsets.topic.num.partitions=5",
	"group.initial.rebalance.delay.ms=0",
	"group.min.session.timeout.ms=1000",
}

// The group members' timing: the coordinator expires a member that has
// not heartbeated for memberSessionTimeout, and a rebalance waits up to
// memberRebalanceTimeout for every member to rejoin.
const (
	memberSessionTimeout   = 3 * time.Second
	memberRebalanceTimeout = 5 * time.Second
	memberHeartbeat        = 300 * time.Millisecond
)

// groupID is the consumer group of the scenarios.
const groupID = "g"

// TestGroupCoordinatorFailover: two members of group g consume a topic
// of 4 partitions (replication factor 3) that a producer writes
// continuously, and commit what they processed after every poll. The
// broker coordinating g is killed with SIGKILL. Within the brokers'
// session timeout, the members' session and rebalance timeouts and a
// margin, the group is re-formed on a new coordinator: both members hold
// partitions, together all of them, consume records written after the
// kill and have commits acknowledged again; DescribeGroups names the new
// coordinator, Stable, 2 members. No acknowledged commit is lost: the new
// coordinator's OffsetFetch is at or after every commit acknowledged
// before the kill, and every assignment resumes at or after the last
// commit acknowledged before it began. Then one member leaves, the other
// takes over its partitions there too, and the killed broker rejoins.
func TestGroupCoordinatorFailover(t *testing.T) {
	const topic, partitions = "consumed", 4
	eachBackend(t, func(t *testing.T, backend string) {
		began := time.Now()
		c := startCluster(t, backend, 3, groupSets...)
		createTopic(t, c, topic, partitions, 3)
		waitFullISR(t, c, topic, partitions, 3)

		t.Log("step 1: a producer writes numbered records to every partition; members a and b consume and commit")
		prod := startNumberedProducer(t, c, topic, partitions)
		prod.waitProgress(t, "before the members start")
		ledger := newCommitLedger()
		a := startGroupMember(t, c, "a", topic, ledger)
		b := startGroupMember(t, c, "b", topic, ledger)
		waitGroupConsuming(t, settle, "both members consuming, with commits acknowledged on every partition", partitions, []*groupMember{a, b}, func() error {
			return ledger.ackedSince(time.Time{}, partitions)
		})
		t.Logf("%s: group formed and committing %v after the start: %s", backend, time.Since(began).Round(time.Millisecond), describeMembers(a, b))

		t.Log("step 2: SIGKILL the coordinator of g")
		victim := groupCoordinatorOf(t, c, groupID, 0)
		t.Logf("%s: broker %d coordinates %s (controller %d)", backend, victim, groupID, controller(t, c))
		killedAt := time.Now()
		if err := c.Broker(victim).Kill(); err != nil {
			t.Fatalf("kill coordinator %d: %v", victim, err)
		}
		// Every commit the dead coordinator acknowledged was read by now,
		// or is read later and must survive as well: after the kill the
		// ledger only grows.
		killed := time.Now()
		beforeKill := ledger.snapshot()
		producedAtKill := prod.snapshot()
		t.Logf("%s: at the kill: acknowledged commits %v, produced up to %v", backend, beforeKill, producedAtKill)

		t.Log("step 3: the group re-forms on a new coordinator and carries on")
		reformBound := sessionTimeout + memberSessionTimeout + memberRebalanceTimeout + settle
		waitGroupConsuming(t, reformBound, "the group re-formed after the kill", partitions, []*groupMember{a, b}, func() error {
			for p := range int32(partitions) {
				if got := max(a.consumedUpTo(p), b.consumedUpTo(p)); got <= producedAtKill[p] {
					return fmt.Errorf("%s/%d: consumed up to offset %d, want past %d, produced before the kill", topic, p, got, producedAtKill[p])
				}
			}
			return ledger.ackedSince(killed, partitions)
		})
		reformed := time.Since(killedAt)
		newCoordinator := groupCoordinatorOf(t, c, groupID, victim)
		t.Logf("%s: group re-formed on broker %d %v after the kill (first commit acknowledged again on every partition); %d assignments since; %s",
			backend, newCoordinator, reformed.Round(time.Millisecond), a.assignmentsSince(killedAt)+b.assignmentsSince(killedAt), describeMembers(a, b))

		waitDescribed(t, c, groupID, newCoordinator, 2)
		got := fetchCommitted(t, c, groupID, topic, partitions)
		for p := range int32(partitions) {
			if want, ok := beforeKill[p]; ok && got[p] < want {
				t.Errorf("committed offset of %s/%d on the new coordinator %d: got %d, want at least %d, acknowledged before the kill", topic, p, newCoordinator, got[p], want)
			}
		}

		t.Log("step 4: member b leaves; a takes over its partitions where b's commits left them")
		leftAt := time.Now()
		b.stop()
		waitGroupConsuming(t, memberRebalanceTimeout+settle, "member a holding every partition after b left", partitions, []*groupMember{a}, func() error {
			if n := a.assignmentsSince(leftAt); n == 0 {
				return fmt.Errorf("member a: no assignment since b left")
			}
			return a.waitingFirstFetch()
		})
		t.Logf("%s: member a holds every partition %v after b left", backend, time.Since(leftAt).Round(time.Millisecond))

		t.Log("step 5: no assignment resumed before a commit acknowledged before it began")
		a.stop()
		prod.stop()
		checkResumes(t, killedAt, a, b)
		final := fetchCommitted(t, c, groupID, topic, partitions)
		for p, want := range ledger.snapshot() {
			if final[p] < want {
				t.Errorf("committed offset of %s/%d with the members gone: got %d, want at least %d, the highest acknowledged", topic, p, final[p], want)
			}
		}

		t.Logf("step 6: restart broker %d", victim)
		if err := c.Broker(victim).Start(); err != nil {
			t.Fatalf("start broker %d: %v", victim, err)
		}
		waitRejoined(t, c, victim, topic)
		acked, failed, lastErr := prod.counts()
		t.Logf("%s: %d commits acknowledged (%d failed), %d records produced (%d failed, last error %v), committed at the end %v; re-formed %v after the kill; %v in all",
			backend, ledger.count(), a.commitFailures()+b.commitFailures(), acked, failed, lastErr, final, reformed.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
	})
}

// TestGroupOffsetsSurviveRestart: one member of group g consumes a topic
// of 4 partitions holding 10+5p records in partition p and commits them
// all, then leaves. The whole cluster is stopped (SIGTERM) and started
// again; the offsets fetched back, loaded from __consumer_offsets on
// disk, are the ones committed.
func TestGroupOffsetsSurviveRestart(t *testing.T) {
	const topic, partitions = "restarted-group", 4
	eachBackend(t, func(t *testing.T, backend string) {
		began := time.Now()
		c := startCluster(t, backend, 3, groupSets...)
		createTopic(t, c, topic, partitions, 3)
		cl := kafkaClient(t, c)
		want := map[int32]int64{}
		for p := range int32(partitions) {
			n := 10 + 5*int(p)
			produceValues(t, cl, topic, p, values("p"+strconv.Itoa(int(p)), n)...)
			want[p] = int64(n)
		}

		t.Log("step 1: member a consumes every record and commits")
		ledger := newCommitLedger()
		a := startGroupMember(t, c, "a", topic, ledger)
		err := cluster.WaitFor(context.Background(), settle, func() error {
			if got := ledger.snapshot(); !maps.Equal(got, want) {
				return fmt.Errorf("acknowledged commits %v (member a: %s), want %v", got, a.describe(), want)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("waiting for member a to commit every record: %v", err)
		}
		a.stop()
		before := fetchCommitted(t, c, groupID, topic, partitions)
		if !maps.Equal(before, want) {
			t.Fatalf("committed offsets before the restart: got %v, want %v", before, want)
		}

		t.Log("step 2: stop every broker (SIGTERM) and start them again")
		if err := c.Stop(settle); err != nil {
			t.Fatalf("stop the cluster: %v", err)
		}
		restartedAt := time.Now()
		for _, b := range c.Brokers() {
			if err := b.Start(); err != nil {
				t.Fatalf("start %v: %v", b, err)
			}
		}
		if err := c.WaitServing(context.Background(), settle); err != nil {
			t.Fatalf("cluster after the restart: %v", err)
		}

		t.Log("step 3: the committed offsets are fetched back unchanged")
		after := fetchCommitted(t, c, groupID, topic, partitions)
		if !maps.Equal(after, want) {
			t.Errorf("committed offsets after the restart: got %v, want %v", after, want)
		}
		t.Logf("%s: committed %v fetched back %v after the restart; %v in all",
			backend, after, time.Since(restartedAt).Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
	})
}

// commitLedger holds the commits of a group that the coordinator
// acknowledged, whichever member made them. Its methods are safe for
// concurrent use.
type commitLedger struct {
	mu sync.Mutex
	// highest is the highest acknowledged committed offset per
	// partition, and lastAt when the latest commit of it was
	// acknowledged.
	highest map[int32]int64
	lastAt  map[int32]time.Time
	acks    int
}

func newCommitLedger() *commitLedger {
	return &commitLedger{highest: map[int32]int64{}, lastAt: map[int32]time.Time{}}
}

// acked records that a commit of offset to partition was acknowledged.
func (l *commitLedger) acked(partition int32, offset int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if o, ok := l.highest[partition]; !ok || offset > o {
		l.highest[partition] = offset
	}
	l.lastAt[partition] = time.Now()
	l.acks++
}

// floor returns the highest acknowledged commit of partition, or -1.
func (l *commitLedger) floor(partition int32) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if o, ok := l.highest[partition]; ok {
		return o
	}
	return -1
}

// snapshot returns the highest acknowledged commit of every partition.
func (l *commitLedger) snapshot() map[int32]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.highest)
}

// count returns how many partition commits were acknowledged.
func (l *commitLedger) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.acks
}

// ackedSince returns an error naming a partition of 0..partitions-1
// with no commit acknowledged after t0.
func (l *commitLedger) ackedSince(t0 time.Time, partitions int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for p := range int32(partitions) {
		if at, ok := l.lastAt[p]; !ok || !at.After(t0) {
			return fmt.Errorf("partition %d: no commit acknowledged since %s (highest %v)", p, t0.Format("15:04:05.000"), l.highest)
		}
	}
	return nil
}

// groupMember is one member of group groupID: a kgo client that polls,
// processes (notes what it fetched), commits what it fetched and only
// then lets a rebalance go on (BlockRebalanceOnPoll), so that its commits
// are of partitions it owns. Commits the coordinator acknowledged go to
// a ledger shared by the members. Its goroutine ends with stop, which the
// test's cleanup calls too.
type groupMember struct {
	name    string
	cl      *kgo.Client
	ledger  *commitLedger
	logPath string
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	stopped sync.Once

	mu sync.Mutex
	// owned are the partitions the member holds; pending the ones of
	// them whose first record since they were assigned is not fetched
	// yet.
	owned   map[int32]bool
	pending map[int32]*resume
	resumes []*resume
	// consumed is the highest offset fetched per partition, and
	// fetchedOffsets every offset fetched per partition.
	consumed       map[int32]int64
	fetchedOffsets map[int32]map[int64]bool
	commitErrs     int
	lastCommitErr  error
	lastFetchErr   error
	leaveErr       error
}

// resume is one partition's assignment to a member: when it began, the
// highest commit acknowledged by then, the committed offset the member
// resumed from and the offset of the first record it fetched.
type resume struct {
	member     string
	partition  int32
	assignedAt time.Time
	floor      int64
	from       int64 // -1 until the member's offsets are fetched
	first      int64 // -1 until a record is fetched
}

// startGroupMember starts member name of groupID consuming topic; opts
// come after the member's own options (kgo.ServerSideBalancer makes it a
// member of a consumer-protocol group, KIP-848).
func startGroupMember(t *testing.T, c *cluster.Cluster, name, topic string, ledger *commitLedger, opts ...kgo.Opt) *groupMember {
	t.Helper()
	m := &groupMember{
		name: name, ledger: ledger,
		logPath:        filepath.Join(c.Config().Dir, "member-"+name+".log"),
		owned:          map[int32]bool{},
		pending:        map[int32]*resume{},
		consumed:       map[int32]int64{},
		fetchedOffsets: map[int32]map[int64]bool{},
	}
	logFile, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("log of member %s: %v", name, err)
	}
	m.cl, err = kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(c.Bootstrap()...),
		kgo.ConsumerGroup(groupID),
		kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.SessionTimeout(memberSessionTimeout),
		kgo.RebalanceTimeout(memberRebalanceTimeout),
		kgo.HeartbeatInterval(memberHeartbeat),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(m.assigned),
		kgo.OnPartitionsRevoked(m.revoked),
		kgo.OnPartitionsLost(m.revoked),
		kgo.AdjustFetchOffsetsFn(m.resumeFrom),
		kgo.MetadataMinAge(100 * time.Millisecond),
		kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
		kgo.WithLogger(kgo.BasicLogger(logFile, kgo.LogLevelInfo, func() string {
			return time.Now().Format("15:04:05.000 ")
		})),
	}, opts...)...)
	if err != nil {
		logFile.Close()
		t.Fatalf("member %s: %v", name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	m.wg.Add(1)
	go m.run(ctx)
	t.Cleanup(func() {
		m.stop()
		logFile.Close()
		if t.Failed() {
			t.Logf("--- member %s: %s; its client's log %s ---\n%s", name, m.describe(), m.logPath, tail(m.logPath, 8<<10))
		}
	})
	return m
}

// run polls, notes the records and commits them until ctx ends.
func (m *groupMember) run(ctx context.Context) {
	defer m.wg.Done()
	for {
		fetches := m.cl.PollFetches(ctx)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			m.cl.AllowRebalance()
			return
		}
		fetches.EachError(func(_ string, _ int32, err error) { m.noteFetchErr(err) })
		next := map[string]map[int32]kgo.EpochOffset{}
		fetches.EachRecord(func(r *kgo.Record) {
			m.fetched(r)
			if next[r.Topic] == nil {
				next[r.Topic] = map[int32]kgo.EpochOffset{}
			}
			next[r.Topic][r.Partition] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1}
		})
		if len(next) > 0 {
			m.commit(ctx, next)
		}
		m.cl.AllowRebalance()
	}
}

// commit commits offsets and records in the ledger every partition the
// coordinator acknowledged. It gives up after the rebalance timeout: the
// member holds up rebalances meanwhile.
func (m *groupMember) commit(ctx context.Context, offsets map[string]map[int32]kgo.EpochOffset) {
	ctx, cancel := context.WithTimeout(ctx, memberRebalanceTimeout)
	defer cancel()
	m.cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			m.noteCommitErr(err)
			return
		}
		sent := map[int32]int64{}
		for _, rt := range req.Topics {
			for _, rp := range rt.Partitions {
				sent[rp.Partition] = rp.Offset
			}
		}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					m.noteCommitErr(fmt.Errorf("partition %d: %w", rp.Partition, err))
					continue
				}
				if o, ok := sent[rp.Partition]; ok {
					m.ledger.acked(rp.Partition, o)
				}
			}
		}
	})
}

// assigned notes a new assignment of partitions with the highest
// acknowledged commit of each: kgo calls it before it fetches the
// group's offsets for them.
func (m *groupMember) assigned(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	for _, ps := range assigned {
		for _, p := range ps {
			r := &resume{member: m.name, partition: p, assignedAt: now, floor: m.ledger.floor(p), from: -1, first: -1}
			m.owned[p] = true
			m.pending[p] = r
			m.resumes = append(m.resumes, r)
		}
	}
}

// revoked forgets partitions revoked or lost.
func (m *groupMember) revoked(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ps := range revoked {
		for _, p := range ps {
			delete(m.owned, p)
			delete(m.pending, p)
		}
	}
}

// resumeFrom notes the offsets the member resumes from: the group's
// committed offsets as the coordinator answered them, or the start where
// none was.
func (m *groupMember) resumeFrom(_ context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ps := range offsets {
		for p, o := range ps {
			if r := m.pending[p]; r != nil {
				r.from = o.EpochOffset().Offset
			}
		}
	}
	return offsets, nil
}

// fetched notes a record the member fetched.
func (m *groupMember) fetched(r *kgo.Record) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if pr := m.pending[r.Partition]; pr != nil {
		pr.first = r.Offset
		delete(m.pending, r.Partition)
	}
	if o, ok := m.consumed[r.Partition]; !ok || r.Offset > o {
		m.consumed[r.Partition] = r.Offset
	}
	if m.fetchedOffsets[r.Partition] == nil {
		m.fetchedOffsets[r.Partition] = map[int64]bool{}
	}
	m.fetchedOffsets[r.Partition][r.Offset] = true
}

func (m *groupMember) noteFetchErr(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lastFetchErr = err
}

func (m *groupMember) noteCommitErr(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.commitErrs++
	m.lastCommitErr = err
}

// stop ends the member's polling, leaves the group (waiting up to the
// rebalance timeout for the coordinator's answer) and closes its client.
// Stopping twice is a no-op.
func (m *groupMember) stop() {
	m.stopped.Do(func() {
		m.cancel()
		m.wg.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), memberRebalanceTimeout)
		defer cancel()
		err := m.cl.LeaveGroupContext(ctx)
		m.mu.Lock()
		m.leaveErr = err
		m.mu.Unlock()
		m.cl.Close()
	})
}

// ownedPartitions returns the partitions the member holds, sorted.
func (m *groupMember) ownedPartitions() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.owned))
}

// consumedUpTo returns the highest offset of partition the member
// fetched, or -1.
func (m *groupMember) consumedUpTo(partition int32) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if o, ok := m.consumed[partition]; ok {
		return o
	}
	return -1
}

// unfetched returns an error naming the first offset of 0..upTo in
// partition that none of members fetched, and how many such there are.
func unfetched(partition int32, upTo int64, members ...*groupMember) error {
	first, missing := int64(-1), 0
	for o := int64(0); o <= upTo; o++ {
		if !slices.ContainsFunc(members, func(m *groupMember) bool { return m.hasFetched(partition, o) }) {
			if first < 0 {
				first = o
			}
			missing++
		}
	}
	if missing > 0 {
		return fmt.Errorf("partition %d: %d of offsets 0..%d fetched by no member, the first %d", partition, missing, upTo, first)
	}
	return nil
}

// hasFetched reports whether the member fetched offset of partition.
func (m *groupMember) hasFetched(partition int32, offset int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.fetchedOffsets[partition][offset]
}

// assignmentsSince returns how many partitions were assigned to the
// member after t0.
func (m *groupMember) assignmentsSince(t0 time.Time) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, r := range m.resumes {
		if r.assignedAt.After(t0) {
			n++
		}
	}
	return n
}

// waitingFirstFetch returns an error naming the partitions assigned to
// the member from which it has fetched no record yet.
func (m *groupMember) waitingFirstFetch() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.pending) > 0 {
		return fmt.Errorf("member %s: no record fetched yet from partitions %v since they were assigned", m.name, slices.Sorted(maps.Keys(m.pending)))
	}
	return nil
}

// allResumes returns the member's assignments so far.
func (m *groupMember) allResumes() []resume {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]resume, len(m.resumes))
	for i, r := range m.resumes {
		out[i] = *r
	}
	return out
}

func (m *groupMember) commitFailures() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.commitErrs
}

// describe says what the member holds and what went wrong last.
func (m *groupMember) describe() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return fmt.Sprintf("owns %v, consumed up to %v, %d assignments, %d failed commits (last %v), last fetch error %v, leave error %v",
		slices.Sorted(maps.Keys(m.owned)), m.consumed, len(m.resumes), m.commitErrs, m.lastCommitErr, m.lastFetchErr, m.leaveErr)
}

// describeMembers describes every member, for the test's log.
func describeMembers(members ...*groupMember) string {
	var parts []string
	for _, m := range members {
		parts = append(parts, "member "+m.name+": "+m.describe())
	}
	return strings.Join(parts, "; ")
}

// waitGroupConsuming waits up to timeout until members hold, together
// and without overlap, every partition of 0..partitions-1, each member
// some, and cond passes; it fails the test naming what was awaited.
func waitGroupConsuming(t *testing.T, timeout time.Duration, what string, partitions int, members []*groupMember, cond func() error) {
	t.Helper()
	err := cluster.WaitFor(context.Background(), timeout, func() error {
		holder := map[int32]string{}
		for _, m := range members {
			owned := m.ownedPartitions()
			if len(owned) == 0 {
				return fmt.Errorf("member %s holds no partition", m.name)
			}
			for _, p := range owned {
				if other, ok := holder[p]; ok {
					return fmt.Errorf("partition %d held by both %s and %s", p, other, m.name)
				}
				holder[p] = m.name
			}
		}
		for p := range int32(partitions) {
			if _, ok := holder[p]; !ok {
				return fmt.Errorf("partition %d held by no member (%v)", p, holder)
			}
		}
		return cond()
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v\n%s", what, err, describeMembers(members...))
	}
}

// checkResumes fails the test for every assignment of the members that
// resumed before the last commit acknowledged before it began: a record
// fetched there again is the sign of an acknowledged commit lost.
func checkResumes(t *testing.T, killedAt time.Time, members ...*groupMember) {
	t.Helper()
	var checked, afterKill int
	for _, m := range members {
		for _, r := range m.allResumes() {
			if r.first < 0 {
				continue // Revoked before it fetched anything.
			}
			checked++
			when := "before the kill"
			if r.assignedAt.After(killedAt) {
				afterKill++
				when = "after the kill"
			}
			if r.first < r.floor || (r.from >= 0 && r.from < r.floor) {
				t.Errorf("member %s, partition %d assigned at %s (%s): resumed from committed offset %d and fetched first offset %d, want both at least %d, the highest commit acknowledged by then",
					r.member, r.partition, r.assignedAt.Format("15:04:05.000"), when, r.from, r.first, r.floor)
			}
		}
	}
	t.Logf("%d assignments checked, %d of them after the kill", checked, afterKill)
}

// groupCoordinatorOf waits until every live broker names the same live
// coordinator of group, other than not (0 for any), and returns it. Each
// broker is asked directly, so no client's cached coordinator answers.
func groupCoordinatorOf(t *testing.T, c *cluster.Cluster, group string, not int32) int32 {
	t.Helper()
	ctx := context.Background()
	var id int32
	err := cluster.WaitFor(ctx, sessionTimeout+settle, func() error {
		id = -1
		for _, b := range c.Live() {
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.CoordinatorKey, req.CoordinatorKeys = group, []string{group}
			resp, err := c.Request(ctx, b.ID, req)
			if err != nil {
				return err
			}
			r := resp.(*kmsg.FindCoordinatorResponse)
			node, code := r.NodeID, r.ErrorCode
			if len(r.Coordinators) > 0 {
				node, code = r.Coordinators[0].NodeID, r.Coordinators[0].ErrorCode
			}
			if err := kerr.ErrorForCode(code); err != nil {
				return fmt.Errorf("FindCoordinator %s to broker %d: %w", group, b.ID, err)
			}
			if nb := c.Broker(node); nb == nil || !nb.Running() || node == not {
				return fmt.Errorf("broker %d names coordinator %d of %s, want a live broker other than %d", b.ID, node, group, not)
			}
			if id >= 0 && node != id {
				return fmt.Errorf("broker %d names coordinator %d of %s, another broker %d", b.ID, node, group, id)
			}
			id = node
		}
		return nil
	})
	if err != nil {
		t.Fatalf("waiting for every live broker to name the coordinator of %s: %v", group, err)
	}
	return id
}

// waitDescribed waits until DescribeGroups says group is Stable with
// members members on coordinator.
func waitDescribed(t *testing.T, c *cluster.Cluster, group string, coordinator int32, members int) {
	t.Helper()
	ctx := context.Background()
	adm := admin(t, c)
	err := cluster.WaitFor(ctx, settle, func() error {
		described, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			return err
		}
		g, ok := described[group]
		if !ok {
			return fmt.Errorf("DescribeGroups answered %v, want %s", slices.Collect(maps.Keys(described)), group)
		}
		if g.Err != nil {
			return g.Err
		}
		if g.State != "Stable" || len(g.Members) != members || g.Coordinator.NodeID != coordinator {
			return fmt.Errorf("got state %s, %d members, coordinator %d; want Stable, %d members, coordinator %d",
				g.State, len(g.Members), g.Coordinator.NodeID, members, coordinator)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("DescribeGroups %s: %v", group, err)
	}
}

// fetchCommitted returns the committed offset of every partition of
// topic in group, as the group's coordinator answers OffsetFetch (-1
// where none is), retrying while it loads or moves.
func fetchCommitted(t *testing.T, c *cluster.Cluster, group, topic string, partitions int) map[int32]int64 {
	t.Helper()
	ctx := context.Background()
	adm := admin(t, c)
	var out map[int32]int64
	err := cluster.WaitFor(ctx, sessionTimeout+settle, func() error {
		resps, err := adm.FetchOffsets(ctx, group)
		var kafkaErr *kerr.Error
		if errors.As(err, &kafkaErr) && !kafkaErr.Retriable && !errors.Is(err, kerr.NotCoordinator) {
			return cluster.Permanent(err)
		}
		if err != nil {
			return err // A broker gone, or one retriable code.
		}
		out = map[int32]int64{}
		for p := range int32(partitions) {
			o, ok := resps.Lookup(topic, p)
			if !ok {
				out[p] = -1
				continue
			}
			if o.Err != nil {
				return fmt.Errorf("%s/%d: %w", topic, p, o.Err)
			}
			out[p] = o.At
		}
		return nil
	})
	if err != nil {
		t.Fatalf("OffsetFetch of %s: %v", group, err)
	}
	return out
}

// numberedProducer writes numbered records to every partition of a
// topic, one at a time per partition, through an idempotent acks=all
// client, and remembers the highest acknowledged offset of each. Its
// goroutines end with stop, which the test's cleanup calls too.
type numberedProducer struct {
	cl         *kgo.Client
	partitions int
	done       chan struct{}
	wg         sync.WaitGroup
	stopOnce   sync.Once

	mu      sync.Mutex
	highest map[int32]int64
	acked   int
	failed  int
	lastErr error
}

// numberedPace is how often the producer writes to each partition.
const numberedPace = 20 * time.Millisecond

func startNumberedProducer(t *testing.T, c *cluster.Cluster, topic string, partitions int) *numberedProducer {
	t.Helper()
	p := &numberedProducer{cl: kafkaClient(t, c), partitions: partitions, done: make(chan struct{}), highest: map[int32]int64{}}
	for partition := range int32(partitions) {
		p.wg.Add(1)
		go p.run(topic, partition)
	}
	t.Cleanup(p.stop) // Runs before the client closes.
	return p
}

func (p *numberedProducer) run(topic string, partition int32) {
	defer p.wg.Done()
	tick := time.NewTicker(numberedPace)
	defer tick.Stop()
	for seq := 0; ; seq++ {
		select {
		case <-p.done:
			return
		case <-tick.C:
		}
		rec := &kgo.Record{Topic: topic, Partition: partition, Value: []byte(strconv.Itoa(int(partition)) + "-" + strconv.Itoa(seq))}
		// No cancellation: an idempotent record in flight is settled by
		// its ack or its delivery timeout.
		err := p.cl.ProduceSync(context.Background(), rec).FirstErr()
		p.mu.Lock()
		if err != nil {
			p.failed++
			p.lastErr = err
		} else {
			p.acked++
			if o, ok := p.highest[partition]; !ok || rec.Offset > o {
				p.highest[partition] = rec.Offset
			}
		}
		p.mu.Unlock()
	}
}

// stop ends the writes and waits for the records in flight.
func (p *numberedProducer) stop() {
	p.stopOnce.Do(func() {
		close(p.done)
		p.wg.Wait()
	})
}

// snapshot returns the highest acknowledged offset of every partition.
func (p *numberedProducer) snapshot() map[int32]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.highest)
}

func (p *numberedProducer) counts() (acked, failed int, lastErr error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.acked, p.failed, p.lastErr
}

// waitProgress waits until every partition has an acknowledged record.
func (p *numberedProducer) waitProgress(t *testing.T, when string) {
	t.Helper()
	err := cluster.WaitFor(context.Background(), sessionTimeout+settle, func() error {
		p.mu.Lock()
		defer p.mu.Unlock()
		for partition := range int32(p.partitions) {
			if _, ok := p.highest[partition]; !ok {
				return fmt.Errorf("partition %d: no record acknowledged (%d acknowledged in all, %d failed, last error %v)", partition, p.acked, p.failed, p.lastErr)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("producer %s: %v", when, err)
	}
}

// tail returns up to the last n bytes of the file at path.
func tail(path string, n int64) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	if int64(len(data)) > n {
		data = data[int64(len(data))-n:]
	}
	return string(data)
}
