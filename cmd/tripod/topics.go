package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/internal/createtopics"
)

// topicsOptions are the flags every `tripod topics` subcommand shares,
// and `tripod groups`, `users` and `acls` too: the brokers to ask, how
// long to wait, and how to authenticate to them.
type topicsOptions struct {
	bootstrap string
	timeout   time.Duration
	security  clientSecurity
}

// newTopicsCmd builds `tripod topics create|list|describe|delete|
// delete-records`, a small kafka-topics (and kafka-delete-records) for any
// Kafka-protocol cluster.
func newTopicsCmd() *cobra.Command {
	opts := &topicsOptions{}
	cmd := &cobra.Command{
		Use:   "topics",
		Short: "Create, list, describe and delete topics, and delete their oldest records (like kafka-topics)",
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&opts.bootstrap, "bootstrap", "127.0.0.1:9092", "HOST:PORT[,HOST:PORT] of brokers to ask (bootstrap servers)")
	pf.DurationVar(&opts.timeout, "timeout", 30*time.Second, "how long a command may take")
	opts.security.addFlags(cmd)
	cmd.AddCommand(newTopicsCreateCmd(opts), newTopicsListCmd(opts), newTopicsDescribeCmd(opts), newTopicsDeleteCmd(opts),
		newTopicsDeleteRecordsCmd(opts), newTopicsAlterCmd(opts))
	return cmd
}

// adminClient is a kadm client that keeps its kgo client for raw requests.
type adminClient struct {
	*kadm.Client
	cl *kgo.Client
}

// admin returns a client on the bootstrap servers, authenticated as the
// security flags say, and a context bounded by the timeout; the caller
// closes the client and cancels the context.
func (o *topicsOptions) admin(cmd *cobra.Command) (adminClient, context.Context, context.CancelFunc, error) {
	var seeds []string
	for _, s := range strings.Split(o.bootstrap, ",") {
		if s = strings.TrimSpace(s); s != "" {
			seeds = append(seeds, s)
		}
	}
	if len(seeds) == 0 {
		return adminClient{}, nil, nil, fmt.Errorf("--bootstrap %q: want HOST:PORT[,HOST:PORT]", o.bootstrap)
	}
	security, err := o.security.clientOpts()
	if err != nil {
		return adminClient{}, nil, nil, err
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, security...)...)
	if err != nil {
		return adminClient{}, nil, nil, fmt.Errorf("client for --bootstrap %s: %w", o.bootstrap, err)
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
	return adminClient{Client: kadm.NewClient(cl), cl: cl}, ctx, cancel, nil
}

// newTopicsCreateCmd builds `tripod topics create NAME`.
func newTopicsCreateCmd(opts *topicsOptions) *cobra.Command {
	var (
		partitions int32
		rf         int16
		configs    []string
		assignment string
	)
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a topic",
		Long: `Create a topic with --partitions and --replication-factor (-1: the
broker's defaults), or with a manual --replica-assignment in kafka-topics'
form: partitions separated by commas, their replicas by colons, the
preferred leader first ("1:2,2:3,3:1").`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg := map[string]string{}
			for _, kv := range configs {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || strings.TrimSpace(k) == "" {
					return fmt.Errorf("--config %q: must be key=value", kv)
				}
				cfg[strings.TrimSpace(k)] = v
			}
			var manual [][]int32
			if assignment != "" {
				var err error
				if manual, err = parseAssignment(assignment); err != nil {
					return err
				}
				if cmd.Flags().Changed("partitions") || cmd.Flags().Changed("replication-factor") {
					return fmt.Errorf("--replica-assignment: give it without --partitions and --replication-factor")
				}
			}
			adm, ctx, cancel, err := opts.admin(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			defer adm.Close()
			topic := createtopics.Topic{Name: args[0], Partitions: partitions, ReplicationFactor: rf, Configs: cfg, Assignment: manual}
			if manual != nil {
				topic.Partitions, topic.ReplicationFactor = -1, -1
			}
			if err := createtopics.Create(ctx, adm.cl, topic); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Created topic %s.\n", args[0])
			return nil
		},
	}
	f := cmd.Flags()
	f.Int32Var(&partitions, "partitions", -1, "number of partitions (-1: num.partitions of the broker)")
	f.Int16Var(&rf, "replication-factor", -1, "replicas per partition (-1: default.replication.factor of the broker)")
	f.StringArrayVar(&configs, "config", nil, "topic config key=value (repeatable)")
	f.StringVar(&assignment, "replica-assignment", "", `manual assignment, "1:2,2:3": partitions by commas, replicas by colons`)
	return cmd
}

// parseAssignment parses kafka-topics' --replica-assignment.
func parseAssignment(s string) ([][]int32, error) {
	var out [][]int32
	for i, part := range strings.Split(s, ",") {
		var replicas []int32
		for _, r := range strings.Split(part, ":") {
			id, err := strconv.ParseInt(strings.TrimSpace(r), 10, 32)
			if err != nil || id < 0 {
				return nil, fmt.Errorf("--replica-assignment %q: partition %d: %q is not a broker id", s, i, r)
			}
			replicas = append(replicas, int32(id))
		}
		out = append(out, replicas)
	}
	return out, nil
}

// newTopicsListCmd builds `tripod topics list`.
func newTopicsListCmd(opts *topicsOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the topics, one name a line",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			adm, ctx, cancel, err := opts.admin(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			defer adm.Close()
			topics, err := adm.ListTopics(ctx)
			if err != nil {
				return fmt.Errorf("list topics: %w", err)
			}
			for _, name := range topics.Names() {
				fmt.Fprintln(cmd.OutOrStdout(), name)
			}
			return nil
		},
	}
}

// newTopicsDescribeCmd builds `tripod topics describe [NAME...]`.
func newTopicsDescribeCmd(opts *topicsOptions) *cobra.Command {
	var brokers bool
	cmd := &cobra.Command{
		Use:   "describe [NAME...]",
		Short: "Describe topics (every topic when none is named), one line per partition",
		Long: `Describe topics as kafka-topics does: a line per topic with its partition
count, replication factor and configs set on it, then a line per
partition with its leader (none when it has none), replicas, ISR and,
when any, offline replicas.

With --brokers it first prints a line per live broker as Kafka's tools
(kafka-broker-api-versions) name a broker, with its rack (broker.rack,
null when it has none): "127.0.0.1:9092 (id: 1 rack: az1)".`,
		RunE: func(cmd *cobra.Command, args []string) error {
			adm, ctx, cancel, err := opts.admin(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			defer adm.Close()
			if brokers {
				md, err := adm.BrokerMetadata(ctx)
				if err != nil {
					return fmt.Errorf("describe brokers: %w", err)
				}
				for _, b := range md.Brokers {
					fmt.Fprintln(cmd.OutOrStdout(), brokerNode(b))
				}
			}
			topics, err := adm.ListTopics(ctx, args...)
			if err != nil {
				return fmt.Errorf("describe topics: %w", err)
			}
			configs := map[string][]string{}
			if names := topics.Names(); len(names) > 0 {
				// Configs are a nicety: a broker without DescribeConfigs
				// still gets its partitions described.
				if rcs, err := adm.DescribeTopicConfigs(ctx, names...); err == nil {
					for _, rc := range rcs {
						for _, c := range rc.Configs {
							if c.Source == kmsg.ConfigSourceDynamicTopicConfig {
								configs[rc.Name] = append(configs[rc.Name], c.Key+"="+c.MaybeValue())
							}
						}
						sort.Strings(configs[rc.Name])
					}
				}
			}
			for _, name := range args {
				if _, ok := topics[name]; !ok {
					return fmt.Errorf("describe topic %s: %w", name, kerr.UnknownTopicOrPartition)
				}
			}
			for _, td := range topics.Sorted() {
				if td.Err != nil {
					return fmt.Errorf("describe topic %s: %w", td.Topic, td.Err)
				}
				writeTopic(cmd.OutOrStdout(), td, configs[td.Topic])
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&brokers, "brokers", false, "first print a line per live broker with its address and rack")
	return cmd
}

// brokerNode formats a broker as Kafka's Node.toString does, which its
// tools print: "host:port (id: 1 rack: az1)", rack null when it has none.
func brokerNode(b kadm.BrokerDetail) string {
	rack := "null"
	if b.Rack != nil {
		rack = *b.Rack
	}
	return fmt.Sprintf("%s (id: %d rack: %s)", net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))), b.NodeID, rack)
}

// writeTopic prints a topic the way kafka-topics --describe does.
func writeTopic(w io.Writer, td kadm.TopicDetail, configs []string) {
	parts := td.Partitions.Sorted()
	rf := 0
	if len(parts) > 0 {
		rf = len(parts[0].Replicas)
	}
	fmt.Fprintf(w, "Topic: %s\tPartitionCount: %d\tReplicationFactor: %d\tConfigs: %s\n",
		td.Topic, len(parts), rf, strings.Join(configs, ","))
	for _, p := range parts {
		leader := "none"
		if p.Leader >= 0 {
			leader = strconv.Itoa(int(p.Leader))
		}
		fmt.Fprintf(w, "\tTopic: %s\tPartition: %d\tLeader: %s\tReplicas: %s\tIsr: %s",
			td.Topic, p.Partition, leader, joinIDs(p.Replicas), joinIDs(p.ISR))
		if len(p.OfflineReplicas) > 0 {
			fmt.Fprintf(w, "\tOffline: %s", joinIDs(p.OfflineReplicas))
		}
		fmt.Fprintln(w)
	}
}

// joinIDs formats broker ids as kafka-topics does: "2,3,1".
func joinIDs(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(int(id))
	}
	return strings.Join(s, ",")
}

// newTopicsDeleteCmd builds `tripod topics delete NAME...`.
func newTopicsDeleteCmd(opts *topicsOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME...",
		Short: "Delete topics",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			adm, ctx, cancel, err := opts.admin(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			defer adm.Close()
			resps, err := adm.DeleteTopics(ctx, args...)
			if err != nil {
				return fmt.Errorf("delete topics: %w", err)
			}
			for _, name := range args {
				r, ok := resps[name]
				if !ok {
					return fmt.Errorf("delete topic %s: not in the response", name)
				}
				if r.Err != nil {
					return fmt.Errorf("delete topic %s: %w", name, r.Err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Deleted topic %s.\n", name)
			}
			return nil
		},
	}
}

// newTopicsDeleteRecordsCmd builds `tripod topics delete-records NAME
// --partition P --offset O`: Kafka's DeleteRecords, as
// kafka-delete-records does it for one partition.
func newTopicsDeleteRecordsCmd(opts *topicsOptions) *cobra.Command {
	var (
		partition int32
		offset    int64
	)
	cmd := &cobra.Command{
		Use:   "delete-records NAME --partition P --offset O",
		Short: "Delete a partition's records below an offset (-1: the high watermark)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if partition < 0 {
				return fmt.Errorf("--partition %d: want a partition index, at least 0", partition)
			}
			if offset < -1 {
				return fmt.Errorf("--offset %d: want an offset, or -1 for the high watermark", offset)
			}
			adm, ctx, cancel, err := opts.admin(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			defer adm.Close()
			name := args[0]
			offsets := kadm.Offsets{}
			offsets.Add(kadm.Offset{Topic: name, Partition: partition, At: offset})
			resps, err := adm.DeleteRecords(ctx, offsets)
			if err != nil {
				return fmt.Errorf("delete records of %s-%d: %w", name, partition, err)
			}
			r, ok := resps.Lookup(name, partition)
			if !ok {
				return fmt.Errorf("delete records of %s-%d: not in the response", name, partition)
			}
			if r.Err != nil {
				return fmt.Errorf("delete records of %s-%d below offset %d: %w", name, partition, offset, r.Err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Deleted records of %s-%d: the partition now starts at offset %d.\n", name, partition, r.LowWatermark)
			return nil
		},
	}
	f := cmd.Flags()
	f.Int32Var(&partition, "partition", 0, "the partition whose records to delete")
	f.Int64Var(&offset, "offset", 0, "delete the records below this offset; -1 is the high watermark (every committed record)")
	cmd.MarkFlagRequired("offset")
	return cmd
}
