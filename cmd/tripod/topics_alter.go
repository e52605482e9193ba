package main

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kerr"
)

// newTopicsAlterCmd builds `tripod topics alter NAME --replication-factor
// N`, which changes a topic's replication factor by a partition
// reassignment.
func newTopicsAlterCmd(opts *topicsOptions) *cobra.Command {
	var (
		rf   int
		wait bool
	)
	cmd := &cobra.Command{
		Use:   "alter NAME --replication-factor N",
		Short: "Change a topic's replication factor",
		Long: `Change a topic's replication factor to N (1 to the number of live
brokers) by reassigning its partitions, as kafka-reassign-partitions
would with a file written by hand. Raising it adds replicas on the live
brokers that hold the fewest (of the topic, then of the cluster), never
two on one broker; lowering it drops replicas from the end of each
partition's replica list, never its current leader. When every live
broker has a rack (broker.rack), a replica added goes to a rack the
partition has none in while there is one, and a replica dropped is one
whose rack holds another of the partition's replicas first. The current
assignment is printed first to roll back with (tripod reassign
--execute). The new replicas catch up in the background; --wait waits
until they are in sync, printing progress (--timeout bounds the wait).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("replication-factor") {
				return fmt.Errorf("topics alter %s: --replication-factor N is needed", args[0])
			}
			adm, ctx, cancel, err := opts.admin(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			defer adm.Close()
			return alterReplicationFactor(ctx, cmd.OutOrStdout(), adm, args[0], rf, wait)
		},
	}
	f := cmd.Flags()
	f.IntVar(&rf, "replication-factor", 0, "the new number of replicas of every partition")
	f.BoolVar(&wait, "wait", false, "wait until every partition has its new replicas in sync, printing progress")
	return cmd
}

// alterReplicationFactor reassigns every partition of topic to rf
// replicas (planReplicationFactor) and, with wait, waits until they are
// in sync. It refuses while a partition of the topic is being
// reassigned.
func alterReplicationFactor(ctx context.Context, w io.Writer, adm adminClient, topic string, rf int, wait bool) error {
	v, err := loadCluster(ctx, adm)
	if err != nil {
		return err
	}
	moves, err := planReplicationFactor(v, topic, rf)
	if err != nil {
		return err
	}
	if len(moves) == 0 {
		fmt.Fprintf(w, "Topic %s already has replication factor %d.\n", topic, rf)
		return nil
	}
	busy, err := ongoing(ctx, adm, partitionsOf(moves))
	if err != nil {
		return err
	}
	if len(busy) > 0 {
		return fmt.Errorf("topics alter %s: %d of its partitions are being reassigned: wait for them (tripod reassign --list) or cancel them", topic, len(busy))
	}
	current, err := v.current(moves)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "Changing the replication factor of topic %s to %d: %d partition%s to reassign.\n", topic, rf, len(moves), pluralSuffix(len(moves)))
	return submit(ctx, w, adm, current, moves, wait, -1)
}

// planReplicationFactor returns the reassignment that gives every
// partition of topic rf replicas, leaving out the partitions that have
// that many already. A partition that needs more gets, one at a time,
// the live broker it lacks that holds the fewest replicas of the topic,
// then of the cluster (the lowest id on a tie); one that needs fewer
// drops them from the end of its replica list, skipping its leader.
// When every live broker has a rack, racks come first, as in the
// controller's placement (KIP-36): a replica added goes to a rack the
// partition has no replica in while there is one, and a replica dropped
// is one whose rack holds another replica of the partition while there
// is one. Errors name rf and its range: 1 to the number of live brokers.
func planReplicationFactor(v clusterView, topic string, rf int) ([]move, error) {
	parts, ok := v.topics[topic]
	if !ok {
		return nil, fmt.Errorf("topic %s: %w", topic, kerr.UnknownTopicOrPartition)
	}
	if rf < 1 || rf > len(v.brokers) {
		return nil, fmt.Errorf("--replication-factor %d: must be between 1 and %d, the number of live brokers (%s)", rf, len(v.brokers), joinIDs(v.brokers))
	}
	inTopic := map[int32]int{}
	for _, p := range parts {
		for _, id := range p.Replicas {
			inTopic[id]++
		}
	}
	inCluster, _ := v.load()
	var moves []move
	for _, p := range parts {
		replicas := slices.Clone(p.Replicas)
		switch {
		case len(replicas) < rf:
			for len(replicas) < rf {
				id := leastLoaded(v.rackCandidates(replicas), replicas, inTopic, inCluster)
				replicas = append(replicas, id)
				inTopic[id]++
				inCluster[id]++
			}
		case len(replicas) > rf:
			for len(replicas) > rf {
				i := v.dropIndex(replicas, p.Leader)
				if i < 0 {
					break
				}
				inTopic[replicas[i]]--
				inCluster[replicas[i]]--
				replicas = slices.Delete(replicas, i, i+1)
			}
		default:
			continue
		}
		moves = append(moves, move{topicPartition{topic, p.Partition}, replicas})
	}
	return moves, nil
}

// rackCandidates returns the live brokers a partition of replicas may
// grow onto: with racks (rackAware), those in racks that hold none of
// its replicas, when any such broker lacks a replica; else every live
// broker.
func (v clusterView) rackCandidates(replicas []int32) []int32 {
	if !v.rackAware() {
		return v.brokers
	}
	held := map[string]bool{}
	for _, id := range replicas {
		if r := v.racks[id]; r != "" {
			held[r] = true
		}
	}
	var out []int32
	for _, id := range v.brokers {
		if !held[v.racks[id]] && !slices.Contains(replicas, id) {
			out = append(out, id)
		}
	}
	if len(out) == 0 {
		return v.brokers
	}
	return out
}

// dropIndex returns the index of the replica a partition of replicas led
// by leader drops next: the last one other than the leader, and with
// racks (rackAware) the last whose rack holds another of its replicas
// when there is one; -1 when only the leader is left.
func (v clusterView) dropIndex(replicas []int32, leader int32) int {
	if v.rackAware() {
		inRack := map[string]int{}
		for _, id := range replicas {
			if r := v.racks[id]; r != "" {
				inRack[r]++
			}
		}
		for i := len(replicas) - 1; i >= 0; i-- {
			if r := v.racks[replicas[i]]; replicas[i] != leader && r != "" && inRack[r] > 1 {
				return i
			}
		}
	}
	for i := len(replicas) - 1; i >= 0; i-- {
		if replicas[i] != leader {
			return i
		}
	}
	return -1
}
