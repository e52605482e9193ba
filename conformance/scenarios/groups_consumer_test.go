package scenarios

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tripodmq/tripod/internal/cluster"
)

// The consumer-protocol group (KIP-848) with brokers as processes: its
// members, their epochs and assignments are records of the group's
// partition of __consumer_offsets, as its committed offsets are. So when
// the coordinator is killed, the partition's new leader loads the group
// as it was, the members heartbeat on to it, and no acknowledged commit
// is lost.

// consumerSessionTimeout is the consumer-protocol members' session
// (group.consumer.session.timeout.ms): a member that has not heartbeated
// for it is removed. It starts afresh when a new coordinator loads the
// group, and is long enough for the members to find that coordinator on
// a loaded machine.
const consumerSessionTimeout = 6 * time.Second

// consumerGroupSets are the broker properties of the consumer-protocol
// group scenarios: groupSets, __consumer_offsets on every broker, and a
// member session of consumerSessionTimeout with heartbeats as frequent as
// the classic members'.
var consumerGroupSets = append(slices.Clone(groupSets),
	"offsets.topic.replication.factor=3",
	"group.consumer.min.session.timeout.ms=1000",
	"group.consumer.session.timeout.ms="+fmt.Sprint(consumerSessionTimeout.Milliseconds()),
	"group.consumer.min.heartbeat.interval.ms=100",
	"group.consumer.heartbeat.interval.ms="+fmt.Sprint(memberHeartbeat.Milliseconds()),
)

// TestConsumerProtocolGroupCoordinatorFailover: three members of group g,
// franz-go consumers with kgo.ServerSideBalancer (the consumer protocol,
// KIP-848), consume a topic of 6 partitions (replication factor 3) that a
// producer writes continuously, and commit what they processed after
// every poll. __consumer_offsets has a replica on every broker. The
// broker coordinating g is killed with SIGKILL. The partition's new
// leader loads g: the members find it and carry on, the group is Stable
// there (ConsumerGroupDescribe) with the same three members, at an epoch
// no lower, and all six partitions assigned, and the members consume
// records written after the kill and have commits acknowledged again. A
// member session later they still do and are members still, none having
// lost a partition or been given one since the kill: their heartbeats
// reach the new coordinator, and the group goes on as it was. No acknowledged commit is lost:
// the committed offsets read with kadm after the kill are at or after
// those read before it and after every commit acknowledged before it,
// and every assignment resumes at or after the last commit acknowledged
// before it began. Once the producer stops, every record it wrote has
// been consumed, and committed.
func TestConsumerProtocolGroupCoordinatorFailover(t *testing.T) {
	const topic, partitions = "consumed-848", 6
	eachBackend(t, func(t *testing.T, backend string) {
		began := time.Now()
		c := startCluster(t, backend, 3, consumerGroupSets...)
		createTopic(t, c, topic, partitions, 3)
		waitFullISR(t, c, topic, partitions, 3)

		t.Log("step 1: a producer writes numbered records to every partition; members a, b and c consume and commit")
		prod := startNumberedProducer(t, c, topic, partitions)
		prod.waitProgress(t, "before the members start")
		ledger := newCommitLedger()
		var members []*groupMember
		for _, name := range []string{"a", "b", "c"} {
			members = append(members, startGroupMember(t, c, name, topic, ledger, kgo.ServerSideBalancer()))
		}
		waitGroupConsuming(t, settle, "the three members consuming, with commits acknowledged on every partition", partitions, members, func() error {
			return ledger.ackedSince(time.Time{}, partitions)
		})
		victim := groupCoordinatorOf(t, c, groupID, 0)
		waitFullISR(t, c, "__consumer_offsets", 5, 3)
		before := waitConsumerGroupDescribed(t, c, groupID, victim, 3, topic, partitions)
		t.Logf("%s: group formed and committing %v after the start, coordinated by broker %d at epoch %d: %s",
			backend, time.Since(began).Round(time.Millisecond), victim, before.Epoch, describeMembers(members...))

		t.Log("step 2: read the committed offsets with kadm, then SIGKILL the coordinator of g")
		committedBefore := fetchCommitted(t, c, groupID, topic, partitions)
		killedAt := time.Now()
		if err := c.Broker(victim).Kill(); err != nil {
			t.Fatalf("kill coordinator %d: %v", victim, err)
		}
		// Every commit the dead coordinator acknowledged was read by now,
		// or is read later and must survive as well: after the kill the
		// ledger only grows.
		killed := time.Now()
		ackedAtKill := ledger.snapshot()
		producedAtKill := prod.snapshot()
		t.Logf("%s: at the kill: committed (kadm) %v, acknowledged commits %v, produced up to %v", backend, committedBefore, ackedAtKill, producedAtKill)

		t.Log("step 3: the members find the new coordinator and carry on")
		reformBound := sessionTimeout + consumerSessionTimeout + memberRebalanceTimeout + settle
		waitGroupConsuming(t, reformBound, "the group carrying on after the kill", partitions, members, func() error {
			for p := range int32(partitions) {
				got := int64(-1)
				for _, m := range members {
					got = max(got, m.consumedUpTo(p))
				}
				if got <= producedAtKill[p] {
					return fmt.Errorf("%s/%d: consumed up to offset %d, want past %d, produced before the kill", topic, p, got, producedAtKill[p])
				}
			}
			return ledger.ackedSince(killed, partitions)
		})
		carriedOn := time.Since(killedAt)
		newCoordinator := groupCoordinatorOf(t, c, groupID, victim)
		after := waitConsumerGroupDescribed(t, c, groupID, newCoordinator, 3, topic, partitions)
		t.Logf("%s: group carrying on at broker %d %v after the kill (a commit acknowledged again on every partition), epoch %d (%d before); %d assignments since; %s",
			backend, newCoordinator, carriedOn.Round(time.Millisecond), after.Epoch, before.Epoch, assignmentsSince(killedAt, members...), describeMembers(members...))
		if after.Epoch < before.Epoch {
			t.Errorf("group epoch on the new coordinator %d: got %d, want at least %d, the epoch before the kill", newCoordinator, after.Epoch, before.Epoch)
		}
		if got, want := memberIDs(after), memberIDs(before); !slices.Equal(got, want) {
			t.Errorf("members on the new coordinator %d: got %v, want %v, the members before the kill", newCoordinator, got, want)
		}

		t.Log("step 4: the members heartbeat to the new coordinator: a member session later they commit, and are its members, still")
		describedAt := time.Now()
		waitGroupConsuming(t, consumerSessionTimeout+settle, "commits a member session after the group was described on the new coordinator", partitions, members, func() error {
			return ledger.ackedSince(describedAt.Add(consumerSessionTimeout), partitions)
		})
		later := waitConsumerGroupDescribed(t, c, groupID, newCoordinator, 3, topic, partitions)
		if got, want := memberIDs(later), memberIDs(before); !slices.Equal(got, want) {
			t.Errorf("members on the new coordinator %d a member session later: got %v, want %v, the members before the kill", newCoordinator, got, want)
		}
		// A group the new coordinator had not loaded, or members it
		// expired or fenced, would show as partitions lost and assigned
		// anew: the same member ids and epochs can come back from a group
		// formed again.
		if n := assignmentsSince(killedAt, members...); n != 0 {
			t.Errorf("partitions assigned to the members since the kill: got %d, want 0, the group carried on as it was: %s", n, describeMembers(members...))
		}

		t.Log("step 5: no committed offset went back")
		committedAfter := fetchCommitted(t, c, groupID, topic, partitions)
		for p := range int32(partitions) {
			if committedAfter[p] < committedBefore[p] {
				t.Errorf("committed offset of %s/%d on the new coordinator %d: got %d, want at least %d, read before the kill", topic, p, newCoordinator, committedAfter[p], committedBefore[p])
			}
			if want, ok := ackedAtKill[p]; ok && committedAfter[p] < want {
				t.Errorf("committed offset of %s/%d on the new coordinator %d: got %d, want at least %d, acknowledged before the kill", topic, p, newCoordinator, committedAfter[p], want)
			}
		}

		t.Log("step 6: the producer stops; every record it wrote is consumed and committed")
		prod.stop()
		produced := prod.snapshot()
		err := cluster.WaitFor(context.Background(), settle, func() error {
			for p := range int32(partitions) {
				if err := unfetched(p, produced[p], members...); err != nil {
					return err
				}
				if got := ledger.floor(p); got != produced[p]+1 {
					return fmt.Errorf("%s/%d: highest acknowledged commit %d, want %d, past the last record produced", topic, p, got, produced[p]+1)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("waiting for every record produced to be consumed and committed: %v\n%s", err, describeMembers(members...))
		}
		for _, m := range members {
			m.stop()
		}
		checkResumes(t, killedAt, members...)
		final := fetchCommitted(t, c, groupID, topic, partitions)
		for p := range int32(partitions) {
			if want := produced[p] + 1; final[p] != want {
				t.Errorf("committed offset of %s/%d with the members gone: got %d, want %d, past the last record produced", topic, p, final[p], want)
			}
		}
		acked, failed, lastErr := prod.counts()
		failures := 0
		for _, m := range members {
			failures += m.commitFailures()
		}
		t.Logf("%s: %d commits acknowledged (%d failed), %d records produced (%d failed, last error %v), committed at the end %v; carried on %v after the kill; %v in all",
			backend, ledger.count(), failures, acked, failed, lastErr, final, carriedOn.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
	})
}

// assignmentsSince returns how many partitions were assigned to members
// after t0.
func assignmentsSince(t0 time.Time, members ...*groupMember) int {
	n := 0
	for _, m := range members {
		n += m.assignmentsSince(t0)
	}
	return n
}

// memberIDs returns the ids of g's members, sorted.
func memberIDs(g kadm.DescribedConsumerGroup) []string {
	var ids []string
	for _, m := range g.Members {
		ids = append(ids, m.MemberID)
	}
	slices.Sort(ids)
	return ids
}

// waitConsumerGroupDescribed waits until ConsumerGroupDescribe, answered
// by coordinator, says consumer-protocol group is Stable with members
// members, each at the group's epoch and holding its target assignment,
// and together all of topic's partitions 0..partitions-1, each once; it
// returns that description.
func waitConsumerGroupDescribed(t *testing.T, c *cluster.Cluster, group string, coordinator int32, members int, topic string, partitions int) kadm.DescribedConsumerGroup {
	t.Helper()
	ctx := context.Background()
	adm := admin(t, c)
	var g kadm.DescribedConsumerGroup
	err := cluster.WaitFor(ctx, settle, func() error {
		described, err := adm.DescribeConsumerGroups(ctx, group)
		if err != nil {
			return err
		}
		var ok bool
		if g, ok = described[group]; !ok {
			return fmt.Errorf("ConsumerGroupDescribe answered %v, want %s", described.Names(), group)
		}
		if g.Err != nil {
			return g.Err
		}
		if g.State != "Stable" || len(g.Members) != members || g.Coordinator.NodeID != coordinator {
			return fmt.Errorf("got state %s, %d members, coordinator %d; want Stable, %d members, coordinator %d",
				g.State, len(g.Members), g.Coordinator.NodeID, members, coordinator)
		}
		holder := map[int32]string{}
		for _, m := range g.Members {
			assigned, target := m.Assignment.Sorted(), m.TargetAssignment.Sorted()
			if m.MemberEpoch != g.Epoch || fmt.Sprint(assigned) != fmt.Sprint(target) {
				return fmt.Errorf("member %s: epoch %d assigned %v, want the group's epoch %d and its target %v", m.MemberID, m.MemberEpoch, assigned, g.Epoch, target)
			}
			for p := range m.Assignment[topic] {
				if other, ok := holder[p]; ok {
					return fmt.Errorf("%s/%d assigned to both %s and %s", topic, p, other, m.MemberID)
				}
				holder[p] = m.MemberID
			}
		}
		if len(holder) != partitions {
			return fmt.Errorf("partitions %v of %s assigned, want all %d", slices.Sorted(maps.Keys(holder)), topic, partitions)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("ConsumerGroupDescribe %s: %v", group, err)
	}
	return g
}
