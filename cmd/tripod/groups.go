package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tripodmq/tripod/internal/offsetreset"
)

// newGroupsCmd builds `tripod groups list|describe|delete|reset-offsets|
// delete-offsets`, a small kafka-consumer-groups for any Kafka-protocol
// cluster. It shares the connection flags of `tripod topics`; the
// options type is topics' so both connect the same way.
func newGroupsCmd() *cobra.Command {
	opts := &topicsOptions{}
	cmd := &cobra.Command{
		Use:   "groups",
		Short: "List, describe, delete consumer groups and reset their offsets (like kafka-consumer-groups)",
		Long: `List, describe and delete consumer groups, reset their committed offsets
and delete them, printing what kafka-consumer-groups prints under Kafka's
column names. --bootstrap-server is accepted as another name of
--bootstrap.`,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&opts.bootstrap, "bootstrap", "127.0.0.1:9092", "HOST:PORT[,HOST:PORT] of brokers to ask (bootstrap servers)")
	pf.StringVar(&opts.bootstrap, "bootstrap-server", "127.0.0.1:9092", "the same as --bootstrap (kafka-consumer-groups' name)")
	pf.Lookup("bootstrap-server").Hidden = true
	pf.DurationVar(&opts.timeout, "timeout", 30*time.Second, "how long a command may take")
	opts.security.addFlags(cmd)
	cmd.AddCommand(newGroupsListCmd(opts), newGroupsDescribeCmd(opts), newGroupsDeleteCmd(opts),
		newGroupsResetOffsetsCmd(opts), newGroupsDeleteOffsetsCmd(opts))
	return cmd
}

// groupStates are the group states a broker reports, as Kafka spells
// them; --state takes them in any case.
var groupStates = []string{"PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty", "Assigning", "Reconciling"}

// parseStates checks list's --state values and returns them spelled as
// the broker reports them.
func parseStates(values []string) ([]string, error) {
	var states []string
	for _, v := range values {
		for _, s := range strings.Split(v, ",") {
			s = strings.TrimSpace(s)
			i := slices.IndexFunc(groupStates, func(known string) bool { return strings.EqualFold(known, s) })
			if i < 0 {
				return nil, fmt.Errorf("--state %q: %q is not a group state; want some of %s", v, s, strings.Join(groupStates, ", "))
			}
			if !slices.Contains(states, groupStates[i]) {
				states = append(states, groupStates[i])
			}
		}
	}
	return states, nil
}

// isConsumerGroup reports whether a listed group is a consumer group, the
// groups kafka-consumer-groups shows: protocol type "consumer", or none
// yet (a group that only has committed offsets).
func isConsumerGroup(g kadm.ListedGroup) bool {
	return g.ProtocolType == "consumer" || g.ProtocolType == ""
}

// listConsumerGroups lists the cluster's consumer groups in the given
// states (any state when none is given), sorted by name. A listing some
// brokers did not answer returns the groups the others did and the error.
func listConsumerGroups(ctx context.Context, adm adminClient, states []string) ([]kadm.ListedGroup, error) {
	listed, err := adm.ListGroups(ctx, states...)
	if err != nil && len(listed) == 0 {
		return nil, err
	}
	var groups []kadm.ListedGroup
	for _, g := range listed.Sorted() {
		// A broker older than ListGroups v4 ignores the filter.
		if !isConsumerGroup(g) || len(states) > 0 && g.State != "" && !slices.Contains(states, g.State) {
			continue
		}
		groups = append(groups, g)
	}
	return groups, err
}

// newGroupsListCmd builds `tripod groups list [--state STATE,...]`.
func newGroupsListCmd(opts *topicsOptions) *cobra.Command {
	var states []string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the consumer groups, one name a line",
		Long: `List the consumer groups, one name a line, as kafka-consumer-groups
--list does. With --state only the groups in those states are listed, in
columns GROUP and STATE.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			filter, err := parseStates(states)
			if err != nil {
				return err
			}
			adm, ctx, cancel, err := opts.admin(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			defer adm.Close()
			groups, err := listConsumerGroups(ctx, adm, filter)
			out := cmd.OutOrStdout()
			if len(filter) == 0 {
				for _, g := range groups {
					fmt.Fprintln(out, g.Group)
				}
			} else {
				tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "GROUP\tSTATE")
				for _, g := range groups {
					fmt.Fprintf(tw, "%s\t%s\n", g.Group, orDash(g.State))
				}
				tw.Flush()
			}
			if err != nil {
				return fmt.Errorf("list groups: %w", err)
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&states, "state", nil, "list only groups in these states, comma separated (Stable, Empty, PreparingRebalance, CompletingRebalance, Dead)")
	return cmd
}

// newGroupsDescribeCmd builds `tripod groups describe GROUP... | --all-groups`.
func newGroupsDescribeCmd(opts *topicsOptions) *cobra.Command {
	var allGroups, members, state, verbose bool
	cmd := &cobra.Command{
		Use:   "describe GROUP... | --all-groups",
		Short: "Describe consumer groups: their offsets and lag, members or state",
		Long: `Describe consumer groups as kafka-consumer-groups --describe does: a table
per group of its partitions with columns GROUP TOPIC PARTITION
CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID ("-" where
there is no value: no committed offset, no member consuming the
partition). A group without active members shows its committed offsets;
a note on stderr says it has none, or that the group is rebalancing.

--members prints its members instead (GROUP CONSUMER-ID HOST CLIENT-ID
#PARTITIONS, and ASSIGNMENT with --verbose); --state prints its
coordinator, assignment strategy, state and member count.

A group of the consumer protocol (KIP-848, group.protocol=consumer) is
described as Kafka 4's tool describes one: --state adds GROUP-EPOCH and
TARGET-ASSIGNMENT-EPOCH, and --members --verbose prints each member's
CURRENT-EPOCH, CURRENT-ASSIGNMENT, TARGET-EPOCH and TARGET-ASSIGNMENT.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case allGroups && len(args) > 0:
				return fmt.Errorf("--all-groups: give it without GROUP arguments")
			case !allGroups && len(args) == 0:
				return fmt.Errorf("describe: name a GROUP or give --all-groups")
			case members && state:
				return fmt.Errorf("--members and --state: give one at most")
			case verbose && !members:
				return fmt.Errorf("--verbose: give it with --members")
			}
			adm, ctx, cancel, err := opts.admin(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			defer adm.Close()
			names := uniq(args)
			if allGroups {
				groups, err := listConsumerGroups(ctx, adm, nil)
				if err != nil {
					return fmt.Errorf("list groups for --all-groups: %w", err)
				}
				for _, g := range groups {
					names = append(names, g.Group)
				}
				if len(names) == 0 {
					return nil
				}
			}
			out, notes := cmd.OutOrStdout(), cmd.ErrOrStderr()
			// KIP-848 groups are described with ConsumerGroupDescribe,
			// the others (classic groups) with DescribeGroups.
			modern, names := consumerProtocolGroups(ctx, adm, names)
			var modernErr error
			switch {
			case state:
				modernErr = writeConsumerGroupStates(out, modern)
			case members:
				modernErr = writeConsumerGroupMembers(out, modern, verbose)
			default:
				modernErr = writeConsumerGroupOffsets(ctx, out, adm, modern)
			}
			if len(names) == 0 {
				return modernErr
			}
			if members || state {
				described, err := adm.DescribeGroups(ctx, names...)
				if err != nil && len(described) == 0 {
					return fmt.Errorf("describe groups: %w", err)
				}
				if state {
					return errors.Join(modernErr, writeGroupStates(out, notes, names, described, err))
				}
				return errors.Join(modernErr, writeGroupMembers(out, notes, names, described, verbose, err))
			}
			lags, err := adm.Lag(ctx, names...)
			if err != nil {
				return errors.Join(modernErr, fmt.Errorf("describe groups: %w", err))
			}
			return errors.Join(modernErr, writeGroupOffsets(out, notes, names, lags))
		},
	}
	f := cmd.Flags()
	f.BoolVar(&allGroups, "all-groups", false, "describe every consumer group")
	f.BoolVar(&members, "members", false, "print the groups' members")
	f.BoolVar(&state, "state", false, "print the groups' coordinator, assignment strategy, state and member count")
	f.BoolVar(&verbose, "verbose", false, "with --members: print each member's assigned partitions")
	return cmd
}

// errGroupNotFound is what describe says of a group the coordinator does
// not have: it reports the group Dead.
var errGroupNotFound = errors.New("consumer group does not exist")

// describeError returns why group cannot be described, or nil: its
// describe error, or errGroupNotFound when it is Dead.
func describeError(group, state string, err error) error {
	switch {
	case err != nil:
		return fmt.Errorf("describe group %s: %w", group, err)
	case state == "Dead":
		return fmt.Errorf("describe group %s: %w", group, errGroupNotFound)
	}
	return nil
}

// noteState writes to notes what kafka-consumer-groups tells of a group
// in its state: that it has no active members, or is rebalancing.
func noteState(notes io.Writer, group, state string) {
	switch state {
	case "Empty":
		fmt.Fprintf(notes, "Consumer group '%s' has no active members.\n", group)
	case "PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling":
		fmt.Fprintf(notes, "Warning: Consumer group '%s' is rebalancing.\n", group)
	}
}

// blockWriter separates the tables of several groups by a blank line.
type blockWriter struct {
	out     io.Writer
	written bool
}

// table starts a table for the next group and returns its tabwriter.
func (b *blockWriter) table() *tabwriter.Writer {
	if b.written {
		fmt.Fprintln(b.out)
	}
	b.written = true
	return tabwriter.NewWriter(b.out, 0, 4, 2, ' ', 0)
}

// writeGroupOffsets prints describe's default table per group, in the
// order named, and returns the errors of the groups it could not
// describe.
func writeGroupOffsets(out, notes io.Writer, names []string, lags kadm.DescribedGroupLags) error {
	var errs []error
	blocks := &blockWriter{out: out}
	for _, name := range names {
		l, ok := lags[name]
		if !ok {
			errs = append(errs, fmt.Errorf("describe group %s: not in the response", name))
			continue
		}
		err := describeError(name, l.State, l.DescribeErr)
		if err == nil && l.FetchErr != nil {
			err = fmt.Errorf("fetch offsets of group %s: %w", name, l.FetchErr)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		noteState(notes, name, l.State)
		rows := offsetRows(name, l)
		if len(rows) == 0 {
			continue
		}
		tw := blocks.table()
		fmt.Fprintln(tw, "GROUP\tTOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG\tCONSUMER-ID\tHOST\tCLIENT-ID")
		for _, row := range rows {
			fmt.Fprintln(tw, strings.Join(row, "\t"))
		}
		tw.Flush()
	}
	return errors.Join(errs...)
}

// offsetRows returns a group's rows of describe's default table: one per
// partition assigned or committed, by topic and partition, then one per
// member with no partition assigned.
func offsetRows(group string, l kadm.DescribedGroupLag) [][]string {
	var rows [][]string
	consuming := map[string]bool{}
	for _, pl := range l.Lag.Sorted() {
		current, end, lag := "-", "-", "-"
		if pl.Commit.At >= 0 {
			current = strconv.FormatInt(pl.Commit.At, 10)
		}
		if pl.End.Err == nil {
			end = strconv.FormatInt(pl.End.Offset, 10)
		}
		// As in Kafka, a partition without a committed offset has no lag.
		if pl.Err == nil && pl.Commit.At >= 0 {
			lag = strconv.FormatInt(pl.Lag, 10)
		}
		consumer, host, client := "-", "-", "-"
		if m := pl.Member; m != nil {
			consumer, host, client = orDash(m.MemberID), orDash(m.ClientHost), orDash(m.ClientID)
			consuming[m.MemberID] = true
		}
		rows = append(rows, []string{group, pl.Topic, strconv.Itoa(int(pl.Partition)), current, end, lag, consumer, host, client})
	}
	for _, m := range l.Members {
		if !consuming[m.MemberID] {
			rows = append(rows, []string{group, "-", "-", "-", "-", "-", orDash(m.MemberID), orDash(m.ClientHost), orDash(m.ClientID)})
		}
	}
	return rows
}

// writeGroupMembers prints describe --members per group, in the order
// named; listErr is the error of groups DescribeGroups could not reach.
func writeGroupMembers(out, notes io.Writer, names []string, described kadm.DescribedGroups, verbose bool, listErr error) error {
	blocks := &blockWriter{out: out}
	return eachDescribed(notes, names, described, listErr, func(name string, g kadm.DescribedGroup) {
		if len(g.Members) == 0 {
			return
		}
		tw := blocks.table()
		header := "GROUP\tCONSUMER-ID\tHOST\tCLIENT-ID\t#PARTITIONS"
		if verbose {
			header += "\tASSIGNMENT"
		}
		fmt.Fprintln(tw, header)
		for _, m := range g.Members {
			assigned := assignedPartitions(m)
			n := 0
			for _, tp := range assigned {
				n += len(tp.Partitions)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d", name, orDash(m.MemberID), orDash(m.ClientHost), orDash(m.ClientID), n)
			if verbose {
				fmt.Fprintf(tw, "\t%s", formatAssignment(assigned))
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
	})
}

// eachDescribed calls fn with each named group of described, in order,
// after the group's notice; a group missing from the answer or described
// with an error is skipped, and the errors are returned joined.
func eachDescribed(notes io.Writer, names []string, described kadm.DescribedGroups, listErr error, fn func(name string, g kadm.DescribedGroup)) error {
	var errs []error
	for _, name := range names {
		g, ok := described[name]
		if !ok {
			errs = append(errs, missingGroupError(name, listErr))
			continue
		}
		if err := describeError(name, g.State, g.Err); err != nil {
			errs = append(errs, err)
			continue
		}
		noteState(notes, name, g.State)
		fn(name, g)
	}
	return errors.Join(errs...)
}

// assignedPartitions returns the partitions a consumer group member is
// assigned, by topic; none for a member of another protocol.
func assignedPartitions(m kadm.DescribedGroupMember) kadm.TopicsList {
	assignment, ok := m.Assigned.AsConsumer()
	if !ok {
		return nil
	}
	var set kadm.TopicsSet
	for _, t := range assignment.Topics {
		set.Add(t.Topic, t.Partitions...)
	}
	return set.Sorted()
}

// formatAssignment formats an assignment as kafka-consumer-groups
// --members --verbose does: "t(0,1),u(2)", "-" when empty.
func formatAssignment(assigned kadm.TopicsList) string {
	var parts []string
	for _, tp := range assigned {
		ps := make([]string, len(tp.Partitions))
		for i, p := range tp.Partitions {
			ps[i] = strconv.Itoa(int(p))
		}
		parts = append(parts, tp.Topic+"("+strings.Join(ps, ",")+")")
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ",")
}

// writeGroupStates prints describe --state per group, in one table.
func writeGroupStates(out, notes io.Writer, names []string, described kadm.DescribedGroups, listErr error) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	header := false
	err := eachDescribed(notes, names, described, listErr, func(name string, g kadm.DescribedGroup) {
		if !header {
			fmt.Fprintln(tw, "GROUP\tCOORDINATOR (ID)\tASSIGNMENT-STRATEGY\tSTATE\t#MEMBERS")
			header = true
		}
		coordinator := fmt.Sprintf("%s:%d (%d)", g.Coordinator.Host, g.Coordinator.Port, g.Coordinator.NodeID)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", name, coordinator, orDash(g.Protocol), orDash(g.State), len(g.Members))
	})
	tw.Flush()
	return err
}

// missingGroupError is the error of a group missing from a describe
// response: the request's error when there is one.
func missingGroupError(group string, err error) error {
	if err != nil {
		return fmt.Errorf("describe group %s: %w", group, err)
	}
	return fmt.Errorf("describe group %s: not in the response", group)
}

// newGroupsDeleteCmd builds `tripod groups delete GROUP...`.
func newGroupsDeleteCmd(opts *topicsOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "delete GROUP...",
		Short: "Delete consumer groups and their committed offsets",
		Long: `Delete consumer groups (DeleteGroups) and their committed offsets. A group
with active members is not deleted: the broker answers NON_EMPTY_GROUP.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			adm, ctx, cancel, err := opts.admin(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			defer adm.Close()
			names := uniq(args)
			resps, err := adm.DeleteGroups(ctx, names...)
			if err != nil && len(resps) == 0 {
				return fmt.Errorf("delete groups: %w", err)
			}
			var deleted []string
			failed := map[string]error{}
			for _, name := range names {
				r, ok := resps[name]
				switch {
				case !ok && err != nil:
					failed[name] = err
				case !ok:
					failed[name] = errors.New("not in the response")
				case r.Err != nil && r.ErrMessage != "":
					failed[name] = fmt.Errorf("%w: %s", r.Err, r.ErrMessage)
				case r.Err != nil:
					failed[name] = r.Err
				default:
					deleted = append(deleted, name)
				}
			}
			out := cmd.OutOrStdout()
			if len(failed) == 0 {
				fmt.Fprintf(out, "Deletion of requested consumer groups (%s) was successful.\n", quoteAll(deleted))
				return nil
			}
			fmt.Fprintln(out, "Deletion of some consumer groups failed:")
			for _, name := range names {
				if err := failed[name]; err != nil {
					fmt.Fprintf(out, "* Group '%s' could not be deleted due to: %v\n", name, err)
				}
			}
			if len(deleted) > 0 {
				fmt.Fprintf(out, "\nThese consumer groups were deleted successfully: %s\n", quoteAll(deleted))
			}
			return fmt.Errorf("delete groups: %d of %d could not be deleted", len(failed), len(names))
		},
	}
}

// partitionSpec is one --topic T[:P,P] of reset-offsets and
// delete-offsets: a topic and the partitions named, none for all.
type partitionSpec struct {
	topic      string
	partitions []int32
}

// parsePartitionSpecs parses --topic values, T or T:P,P,...
func parsePartitionSpecs(values []string) ([]partitionSpec, error) {
	var specs []partitionSpec
	for _, v := range values {
		topic, list, hasList := strings.Cut(v, ":")
		topic = strings.TrimSpace(topic)
		if topic == "" {
			return nil, fmt.Errorf("--topic %q: want TOPIC or TOPIC:PARTITION,PARTITION", v)
		}
		spec := partitionSpec{topic: topic}
		if hasList {
			for _, s := range strings.Split(list, ",") {
				p, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
				if err != nil || p < 0 {
					return nil, fmt.Errorf("--topic %q: %q is not a partition number", v, s)
				}
				spec.partitions = append(spec.partitions, int32(p))
			}
		}
		specs = append(specs, spec)
	}
	return specs, nil
}

// resolvePartitions returns the partitions the specs name: those listed,
// or, for a topic given alone, those committed for it when committed is
// given and has some, else every partition of the topic. A topic or
// partition the cluster does not have is an error.
func resolvePartitions(ctx context.Context, adm adminClient, specs []partitionSpec, committed kadm.TopicsSet) (kadm.TopicsSet, error) {
	set := kadm.TopicsSet{}
	var toDescribe []string
	for _, s := range specs {
		switch {
		case len(s.partitions) > 0:
			set.Add(s.topic, s.partitions...)
			toDescribe = append(toDescribe, s.topic)
		case len(committed[s.topic]) > 0:
			for p := range committed[s.topic] {
				set.Add(s.topic, p)
			}
		default:
			toDescribe = append(toDescribe, s.topic)
		}
	}
	if len(toDescribe) == 0 {
		return set, nil
	}
	toDescribe = uniq(toDescribe)
	topics, err := adm.ListTopics(ctx, toDescribe...)
	if err != nil {
		return nil, fmt.Errorf("describe topics %s: %w", strings.Join(toDescribe, ", "), err)
	}
	for _, s := range specs {
		if !slices.Contains(toDescribe, s.topic) {
			continue
		}
		td, ok := topics[s.topic]
		if !ok {
			return nil, fmt.Errorf("topic %s: %w", s.topic, kerr.UnknownTopicOrPartition)
		}
		if td.Err != nil {
			return nil, fmt.Errorf("topic %s: %w", s.topic, td.Err)
		}
		if len(s.partitions) == 0 {
			set.Add(s.topic, td.Partitions.Numbers()...)
			continue
		}
		for _, p := range s.partitions {
			if _, ok := td.Partitions[p]; !ok {
				return nil, fmt.Errorf("topic %s has no partition %d (it has %d)", s.topic, p, len(td.Partitions))
			}
		}
	}
	return set, nil
}

// newGroupsResetOffsetsCmd builds `tripod groups reset-offsets GROUP`.
func newGroupsResetOffsetsCmd(opts *topicsOptions) *cobra.Command {
	var (
		topicFlags           []string
		allTopics            bool
		toEarliest, toLatest bool
		toOffset, shiftBy    int64
		toDatetime           string
		execute, dryRun      bool
	)
	cmd := &cobra.Command{
		Use:   "reset-offsets GROUP (--topic TOPIC[:P,P] | --all-topics) (--to-earliest | --to-latest | --to-offset N | --shift-by N | --to-datetime TIME) [--execute]",
		Short: "Reset a consumer group's committed offsets",
		Long: `Reset a consumer group's committed offsets, as kafka-consumer-groups
--reset-offsets does, for the partitions of --topic (repeatable;
TOPIC:P,P names partitions) or of every topic the group has committed
offsets for (--all-topics), to the log start (--to-earliest), the log end
(--to-latest), an offset (--to-offset N), the committed offset moved by N
(--shift-by N, negative goes back) or the first record at or after a time
(--to-datetime, RFC 3339: 2024-05-01T12:00:00Z). Offsets past either end
of the log are moved to that end.

Without --execute it prints the plan (GROUP TOPIC PARTITION NEW-OFFSET)
and changes nothing. With --execute it commits the new offsets, which
works only while the group has no active members: stop its consumers
first.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f := cmd.Flags()
			sc := offsetreset.Scenario{ToEarliest: toEarliest, ToLatest: toLatest}
			var given []string
			for _, name := range []string{"to-earliest", "to-latest", "to-offset", "shift-by", "to-datetime"} {
				if f.Changed(name) {
					given = append(given, "--"+name)
				}
			}
			switch {
			case len(given) == 0:
				return fmt.Errorf("reset-offsets: give one of --to-earliest, --to-latest, --to-offset, --shift-by, --to-datetime")
			case len(given) > 1:
				return fmt.Errorf("%s: give only one of them", strings.Join(given, ", "))
			case allTopics && len(topicFlags) > 0:
				return fmt.Errorf("--topic and --all-topics: give one, not both")
			case !allTopics && len(topicFlags) == 0:
				return fmt.Errorf("reset-offsets: give --topic TOPIC[:P,P] or --all-topics")
			case execute && dryRun:
				return fmt.Errorf("--execute and --dry-run: give one, not both")
			}
			if f.Changed("to-offset") {
				if toOffset < 0 {
					return fmt.Errorf("--to-offset %d: must be at least 0", toOffset)
				}
				sc.ToOffset = &toOffset
			}
			if f.Changed("shift-by") {
				sc.ShiftBy = &shiftBy
			}
			if f.Changed("to-datetime") {
				t, err := time.Parse(time.RFC3339Nano, toDatetime)
				if err != nil {
					return fmt.Errorf("--to-datetime %q: want an RFC 3339 time such as 2024-05-01T12:00:00Z", toDatetime)
				}
				sc.ToDatetime = &t
			}
			specs, err := parsePartitionSpecs(topicFlags)
			if err != nil {
				return err
			}
			adm, ctx, cancel, err := opts.admin(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			defer adm.Close()
			return resetOffsets(ctx, cmd, adm, args[0], specs, allTopics, sc, execute, dryRun)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&topicFlags, "topic", nil, "topic to reset, TOPIC or TOPIC:P,P for some partitions (repeatable)")
	f.BoolVar(&allTopics, "all-topics", false, "reset every topic the group has committed offsets for")
	f.BoolVar(&toEarliest, "to-earliest", false, "reset to the log start offset")
	f.BoolVar(&toLatest, "to-latest", false, "reset to the log end offset")
	f.Int64Var(&toOffset, "to-offset", 0, "reset to this offset")
	f.Int64Var(&shiftBy, "shift-by", 0, "move the committed offset by this many (negative: back)")
	f.StringVar(&toDatetime, "to-datetime", "", "reset to the first record at or after this RFC 3339 time")
	f.BoolVar(&execute, "execute", false, "commit the new offsets (default: print the plan only)")
	f.BoolVar(&dryRun, "dry-run", false, "print the plan only (the default)")
	return cmd
}

// resetOffsets plans, prints and with execute commits the new offsets of
// group's partitions: those of specs, or with allTopics those it has
// committed offsets for.
func resetOffsets(ctx context.Context, cmd *cobra.Command, adm adminClient, group string, specs []partitionSpec, allTopics bool, sc offsetreset.Scenario, execute, dryRun bool) error {
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return fmt.Errorf("describe group %s: %w", group, err)
	}
	g := described[group]
	if g.Err != nil {
		return fmt.Errorf("describe group %s: %w", group, g.Err)
	}
	inactive := offsetreset.Inactive(g.State)
	if execute && !inactive {
		return fmt.Errorf("reset offsets of group %s: assignments can only be reset if the group is inactive, but the current state is %s", group, g.State)
	}
	fetched, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return fmt.Errorf("fetch offsets of group %s: %w", group, err)
	}
	committed := offsetreset.Committed(fetched)
	var partitions kadm.TopicsSet
	if allTopics {
		partitions = committed.TopicsSet()
		if len(partitions) == 0 {
			return fmt.Errorf("reset offsets of group %s: --all-topics: the group has no committed offsets; name partitions with --topic", group)
		}
	} else if partitions, err = resolvePartitions(ctx, adm, specs, nil); err != nil {
		return fmt.Errorf("reset offsets of group %s: %w", group, err)
	}
	out, notes := cmd.OutOrStdout(), cmd.ErrOrStderr()
	plan, planNotes, err := offsetreset.Plan(ctx, adm.Client, partitions, committed, sc)
	for _, note := range planNotes {
		fmt.Fprintln(notes, note)
	}
	if err != nil {
		return fmt.Errorf("reset offsets of group %s: %w", group, err)
	}
	if !execute {
		writeResetPlan(out, group, plan)
		switch {
		case !inactive:
			fmt.Fprintf(notes, "Warning: consumer group '%s' is %s: --execute would be refused until it has no active members.\n", group, g.State)
		case !dryRun:
			fmt.Fprintln(notes, "Dry run: no offsets were changed; add --execute to commit them.")
		}
		return nil
	}
	resps, err := adm.CommitOffsets(ctx, group, plan)
	if err != nil {
		return fmt.Errorf("commit offsets of group %s: %w", group, err)
	}
	var errs []error
	for _, r := range resps.Sorted() {
		if r.Err == nil {
			continue
		}
		err := fmt.Errorf("commit offset %d of %s[%d] for group %s: %w", r.At, r.Topic, r.Partition, group, r.Err)
		if offsetreset.IsActiveMemberError(r.Err) {
			err = fmt.Errorf("%w (the group has active members now; offsets can be reset only while it has none)", err)
		}
		errs = append(errs, err)
		plan.Delete(r.Topic, r.Partition)
	}
	if len(plan) > 0 {
		writeResetPlan(out, group, plan)
	}
	return errors.Join(errs...)
}

// writeResetPlan prints reset-offsets' table.
func writeResetPlan(out io.Writer, group string, plan kadm.Offsets) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tTOPIC\tPARTITION\tNEW-OFFSET")
	for _, o := range plan.Sorted() {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", group, o.Topic, o.Partition, o.At)
	}
	tw.Flush()
}

// newGroupsDeleteOffsetsCmd builds `tripod groups delete-offsets GROUP
// --topic TOPIC[:P,P]`.
func newGroupsDeleteOffsetsCmd(opts *topicsOptions) *cobra.Command {
	var topicFlags []string
	cmd := &cobra.Command{
		Use:   "delete-offsets GROUP --topic TOPIC[:P,P]...",
		Short: "Delete a consumer group's committed offsets of some partitions",
		Long: `Delete a consumer group's committed offsets of the partitions of --topic
(repeatable; TOPIC:P,P names partitions, TOPIC alone every partition the
group has an offset for) with OffsetDelete, and print each partition's
status. The broker refuses partitions of a topic the group's members
consume (GROUP_SUBSCRIBED_TO_TOPIC).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(topicFlags) == 0 {
				return fmt.Errorf("delete-offsets: give --topic TOPIC[:P,P]")
			}
			specs, err := parsePartitionSpecs(topicFlags)
			if err != nil {
				return err
			}
			adm, ctx, cancel, err := opts.admin(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			defer adm.Close()
			group := args[0]
			fetched, err := adm.FetchOffsets(ctx, group)
			if err != nil {
				return fmt.Errorf("fetch offsets of group %s: %w", group, err)
			}
			partitions, err := resolvePartitions(ctx, adm, specs, offsetreset.Committed(fetched).TopicsSet())
			if err != nil {
				return fmt.Errorf("delete offsets of group %s: %w", group, err)
			}
			resps, err := adm.DeleteOffsets(ctx, group, partitions)
			if err != nil {
				return fmt.Errorf("delete offsets of group %s: %w", group, err)
			}
			return writeDeleteOffsets(cmd.OutOrStdout(), group, partitions, resps)
		},
	}
	cmd.Flags().StringArrayVar(&topicFlags, "topic", nil, "topic whose offsets to delete, TOPIC or TOPIC:P,P (repeatable)")
	return cmd
}

// writeDeleteOffsets prints delete-offsets' result as kafka-consumer-groups
// does, a line when every partition's offset was deleted, then a table
// TOPIC PARTITION STATUS; it returns an error when some were not.
func writeDeleteOffsets(out io.Writer, group string, partitions kadm.TopicsSet, resps kadm.DeleteOffsetsResponses) error {
	type status struct {
		topic     string
		partition int32
		err       error
	}
	var statuses []status
	failed := 0
	for _, tp := range partitions.Sorted() {
		for _, p := range tp.Partitions {
			err, ok := resps.Lookup(tp.Topic, p)
			if !ok {
				err = errors.New("not in the response")
			}
			if err != nil {
				failed++
			}
			statuses = append(statuses, status{tp.Topic, p, err})
		}
	}
	if failed == 0 {
		fmt.Fprintf(out, "Request succeeded for deleting offsets with topic %s group %s\n\n", strings.Join(partitions.Topics(), ", "), group)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tSTATUS")
	for _, s := range statuses {
		result := "Successful"
		if s.err != nil {
			result = "Error: " + s.err.Error()
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\n", s.topic, s.partition, result)
	}
	tw.Flush()
	if failed > 0 {
		return fmt.Errorf("delete offsets of group %s: %d of %d partitions failed", group, failed, len(statuses))
	}
	return nil
}

// orDash returns s, or "-" when s is empty, as kafka-consumer-groups
// prints a missing value.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// quoteAll formats names as kafka-consumer-groups does: 'a', 'b'.
func quoteAll(names []string) string {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = "'" + n + "'"
	}
	return strings.Join(quoted, ", ")
}

// uniq returns names without repeats, in their first order.
func uniq(names []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}
