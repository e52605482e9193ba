package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
)

// The replication throttle of a reassignment, as kafka-reassign-partitions
// --throttle sets it: the dynamic broker configs
// leader.replication.throttled.rate and follower.replication.throttled.rate
// (bytes/s) on every broker of the moved partitions, old and new, and the
// topic configs leader.replication.throttled.replicas (the replicas the
// partition has now, which the new ones copy from) and
// follower.replication.throttled.replicas (the replicas being added),
// appended to what the topics have; partitions the file leaves where they
// are are not throttled. In-sync replicas are never throttled,
// so producers keep their replication while the new replicas catch up.
// --verify clears them all once every partition of the file is moved.

const (
	leaderRateKey       = "leader.replication.throttled.rate"
	followerRateKey     = "follower.replication.throttled.rate"
	leaderReplicasKey   = "leader.replication.throttled.replicas"
	followerReplicasKey = "follower.replication.throttled.replicas"
)

// throttleMoves sets the throttle of moves from current at rate bytes/s.
func throttleMoves(ctx context.Context, w io.Writer, adm adminClient, current, moves []move, rate int64) error {
	before := map[topicPartition][]int32{}
	for _, m := range current {
		before[m.topicPartition] = m.replicas
	}
	leaders, followers := map[string][]string{}, map[string][]string{}
	var brokers []int32
	for _, m := range moves {
		old := before[m.topicPartition]
		if slices.Equal(old, m.replicas) {
			continue // not moving
		}
		for _, id := range old {
			leaders[m.topic] = append(leaders[m.topic], fmt.Sprintf("%d:%d", m.partition, id))
		}
		for _, id := range m.replicas {
			if !slices.Contains(old, id) {
				followers[m.topic] = append(followers[m.topic], fmt.Sprintf("%d:%d", m.partition, id))
			}
		}
		brokers = append(append(brokers, old...), m.replicas...)
	}
	slices.Sort(brokers)
	brokers = slices.Compact(brokers)
	value := strconv.FormatInt(rate, 10)
	res, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: leaderRateKey, Value: &value},
		{Op: kadm.SetConfig, Name: followerRateKey, Value: &value},
	}, brokers...)
	if err := configsError("set the throttle rate on the brokers", res, err); err != nil {
		return err
	}
	for _, topic := range sortedKeys(leaders, followers) {
		var alter []kadm.AlterConfig
		if l := strings.Join(leaders[topic], ","); l != "" {
			alter = append(alter, kadm.AlterConfig{Op: kadm.AppendConfig, Name: leaderReplicasKey, Value: &l})
		}
		if f := strings.Join(followers[topic], ","); f != "" {
			alter = append(alter, kadm.AlterConfig{Op: kadm.AppendConfig, Name: followerReplicasKey, Value: &f})
		}
		res, err := adm.AlterTopicConfigs(ctx, alter, topic)
		if err := configsError("set the throttled replicas of topic "+topic, res, err); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "Warning: You must run --verify periodically, until the reassignment completes, to ensure the throttle is removed.\n")
	fmt.Fprintf(w, "The inter-broker throttle limit was set to %d B/s\n", rate)
	return nil
}

// clearThrottles removes what throttleMoves set for moves' topics, and
// the throttle rates from every live broker.
func clearThrottles(ctx context.Context, w io.Writer, adm adminClient, moves []move) error {
	v, err := loadCluster(ctx, adm)
	if err != nil {
		return err
	}
	brokers := slices.Clone(v.brokers)
	slices.Sort(brokers)
	res, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.DeleteConfig, Name: leaderRateKey}, {Op: kadm.DeleteConfig, Name: followerRateKey},
	}, brokers...)
	if err := configsError("clear the throttle rate on the brokers", res, err); err != nil {
		return err
	}
	fmt.Fprintf(w, "Clearing broker-level throttles on brokers %s\n", joinIDs(brokers))
	var topics []string
	for _, m := range moves {
		if !slices.Contains(topics, m.topic) {
			topics = append(topics, m.topic)
		}
	}
	slices.Sort(topics)
	for _, topic := range topics {
		res, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
			{Op: kadm.DeleteConfig, Name: leaderReplicasKey}, {Op: kadm.DeleteConfig, Name: followerReplicasKey},
		}, topic)
		if err := configsError("clear the throttled replicas of topic "+topic, res, err); err != nil {
			return err
		}
		fmt.Fprintf(w, "Clearing topic-level throttles on topic %s\n", topic)
	}
	return nil
}

// configsError is the first error of an AlterConfigs call, or nil.
func configsError(what string, res kadm.AlterConfigsResponses, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	var errs []error
	for _, r := range res {
		if r.Err != nil {
			errs = append(errs, fmt.Errorf("%s: %s: %w%s", what, r.Name, r.Err, message(&r.ErrMessage)))
		}
	}
	return errors.Join(errs...)
}

// sortedKeys returns the keys of the maps, sorted, each once.
func sortedKeys(ms ...map[string][]string) []string {
	var keys []string
	for _, m := range ms {
		for k := range m {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys)
	return keys
}
