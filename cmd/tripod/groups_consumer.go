package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/tripodmq/tripod/internal/offsetreset"
)

// consumerProtocolGroups describes names with ConsumerGroupDescribe
// (KIP-848) and returns the groups of the consumer protocol, and the
// other names (classic groups, or groups the coordinator does not have),
// in their order. A cluster that does not answer ConsumerGroupDescribe
// has none.
func consumerProtocolGroups(ctx context.Context, adm adminClient, names []string) ([]kadm.DescribedConsumerGroup, []string) {
	described, _ := adm.DescribeConsumerGroups(ctx, names...)
	var modern []kadm.DescribedConsumerGroup
	var rest []string
	for _, name := range names {
		if g, ok := described[name]; ok && g.Err == nil && g.State != "Dead" {
			modern = append(modern, g)
			continue
		}
		rest = append(rest, name)
	}
	return modern, rest
}

// writeConsumerGroupStates prints describe --state of consumer-protocol
// groups, with Kafka 4's columns for them.
func writeConsumerGroupStates(out io.Writer, groups []kadm.DescribedConsumerGroup) error {
	if len(groups) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tCOORDINATOR (ID)\tASSIGNMENT-STRATEGY\tSTATE\tGROUP-EPOCH\tTARGET-ASSIGNMENT-EPOCH\t#MEMBERS")
	for _, g := range groups {
		coordinator := fmt.Sprintf("%s:%d (%d)", g.Coordinator.Host, g.Coordinator.Port, g.Coordinator.NodeID)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\n", g.Group, coordinator, orDash(g.AssignorName), orDash(g.State),
			g.Epoch, g.AssignmentEpoch, len(g.Members))
	}
	return tw.Flush()
}

// writeConsumerGroupMembers prints describe --members of
// consumer-protocol groups; --verbose adds each member's epoch, its
// current and target assignments, and UPGRADED: true for a member of the
// consumer protocol, false for a classic member of the group (one that
// joined with JoinGroup, KIP-848's online migration), as Kafka 4's
// kafka-consumer-groups.sh shows it (KIP-1099).
func writeConsumerGroupMembers(out io.Writer, groups []kadm.DescribedConsumerGroup, verbose bool) error {
	blocks := &blockWriter{out: out}
	for _, g := range groups {
		if len(g.Members) == 0 {
			continue
		}
		tw := blocks.table()
		header := "GROUP\tCONSUMER-ID\tHOST\tCLIENT-ID\t#PARTITIONS"
		if verbose {
			header += "\tCURRENT-EPOCH\tCURRENT-ASSIGNMENT\tTARGET-EPOCH\tTARGET-ASSIGNMENT\tUPGRADED"
		}
		fmt.Fprintln(tw, header)
		for _, m := range g.Members {
			current := m.Assignment.Sorted()
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d", g.Group, orDash(m.MemberID), orDash(m.ClientHost), orDash(m.ClientID), countPartitions(current))
			if verbose {
				fmt.Fprintf(tw, "\t%d\t%s\t%d\t%s\t%s", m.MemberEpoch, formatAssignment(current), g.AssignmentEpoch, formatAssignment(m.TargetAssignment.Sorted()), upgraded(m.MemberType))
			}
			fmt.Fprintln(tw)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// writeConsumerGroupOffsets prints describe's default table of
// consumer-protocol groups: each partition assigned or committed, its
// committed and end offsets, lag and consumer, then each member with
// nothing assigned.
func writeConsumerGroupOffsets(ctx context.Context, out io.Writer, adm adminClient, groups []kadm.DescribedConsumerGroup) error {
	blocks := &blockWriter{out: out}
	var errs []error
	for _, g := range groups {
		fetched, err := adm.FetchOffsets(ctx, g.Group)
		if err != nil {
			errs = append(errs, fmt.Errorf("fetch offsets of group %s: %w", g.Group, err))
			continue
		}
		committed := offsetreset.Committed(fetched)
		type tp struct {
			topic     string
			partition int32
		}
		owner := map[tp]kadm.ConsumerGroupMember{}
		parts := map[tp]bool{}
		topics := map[string]bool{}
		for _, m := range g.Members {
			for t, ps := range m.Assignment {
				for p := range ps {
					owner[tp{t, p}] = m
					parts[tp{t, p}] = true
					topics[t] = true
				}
			}
		}
		committed.Each(func(o kadm.Offset) {
			parts[tp{o.Topic, o.Partition}] = true
			topics[o.Topic] = true
		})
		names := make([]string, 0, len(topics))
		for t := range topics {
			names = append(names, t)
		}
		ends, err := adm.ListEndOffsets(ctx, names...)
		if err != nil && len(ends) == 0 {
			errs = append(errs, fmt.Errorf("end offsets of group %s's topics: %w", g.Group, err))
			continue
		}
		sorted := make([]tp, 0, len(parts))
		for p := range parts {
			sorted = append(sorted, p)
		}
		sort.Slice(sorted, func(i, j int) bool {
			if sorted[i].topic != sorted[j].topic {
				return sorted[i].topic < sorted[j].topic
			}
			return sorted[i].partition < sorted[j].partition
		})
		tw := blocks.table()
		fmt.Fprintln(tw, "GROUP\tTOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG\tCONSUMER-ID\tHOST\tCLIENT-ID")
		consuming := map[string]bool{}
		for _, p := range sorted {
			current, end, lag := "-", "-", "-"
			c, hasCommit := committed.Lookup(p.topic, p.partition)
			if hasCommit && c.At >= 0 {
				current = strconv.FormatInt(c.At, 10)
			}
			e, hasEnd := ends.Lookup(p.topic, p.partition)
			if hasEnd && e.Err == nil {
				end = strconv.FormatInt(e.Offset, 10)
				// As in Kafka, a partition without a committed offset
				// has no lag.
				if current != "-" {
					lag = strconv.FormatInt(max(e.Offset-c.At, 0), 10)
				}
			}
			consumer, host, client := "-", "-", "-"
			if m, ok := owner[p]; ok {
				consumer, host, client = orDash(m.MemberID), orDash(m.ClientHost), orDash(m.ClientID)
				consuming[m.MemberID] = true
			}
			fmt.Fprintln(tw, strings.Join([]string{g.Group, p.topic, strconv.Itoa(int(p.partition)), current, end, lag, consumer, host, client}, "\t"))
		}
		for _, m := range g.Members {
			if !consuming[m.MemberID] {
				fmt.Fprintln(tw, strings.Join([]string{g.Group, "-", "-", "-", "-", "-", orDash(m.MemberID), orDash(m.ClientHost), orDash(m.ClientID)}, "\t"))
			}
		}
		if err := tw.Flush(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// countPartitions counts the partitions of an assignment.
func countPartitions(assigned kadm.TopicsList) int {
	n := 0
	for _, t := range assigned {
		n += len(t.Partitions)
	}
	return n
}

// upgraded is the UPGRADED column of a member of type memberType
// (ConsumerGroupDescribe v1): whether it uses the consumer protocol, "-"
// when the broker does not say.
func upgraded(memberType int8) string {
	switch memberType {
	case 0:
		return "false"
	case 1:
		return "true"
	}
	return "-"
}
