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
)

// newTransactionsCmd builds `tripod transactions list|describe|
// describe-producers|find-hanging|abort`, kafka-transactions.sh (KIP-664)
// for any Kafka-protocol cluster, with its columns. It shares the
// connection flags of `tripod topics`.
func newTransactionsCmd() *cobra.Command {
	opts := &topicsOptions{}
	cmd := &cobra.Command{
		Use:   "transactions",
		Short: "List, describe and abort transactions, find hanging ones (like kafka-transactions)",
		Long: `List and describe the cluster's transactional ids, describe a partition's
producers, find transactions left open on a partition after their
coordinator forgot them (hanging transactions, which hold back every
read_committed consumer of the partition), and abort one, printing what
kafka-transactions prints under Kafka's column names. --bootstrap-server
is accepted as another name of --bootstrap.`,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&opts.bootstrap, "bootstrap", "127.0.0.1:9092", "HOST:PORT[,HOST:PORT] of brokers to ask (bootstrap servers)")
	pf.StringVar(&opts.bootstrap, "bootstrap-server", "127.0.0.1:9092", "the same as --bootstrap (kafka-transactions' name)")
	pf.Lookup("bootstrap-server").Hidden = true
	pf.DurationVar(&opts.timeout, "timeout", 30*time.Second, "how long a command may take")
	opts.security.addFlags(cmd)
	cmd.AddCommand(newTxnListCmd(opts), newTxnDescribeCmd(opts), newTxnDescribeProducersCmd(opts),
		newTxnFindHangingCmd(opts), newTxnAbortCmd(opts))
	return cmd
}

// txnStates are the transaction states, as Kafka spells them.
var txnStates = []string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}

// newTxnListCmd builds `tripod transactions list [--state S,...]
// [--producer-id ID,...]`.
func newTxnListCmd(opts *topicsOptions) *cobra.Command {
	var states []string
	var producerIDs []int64
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the transactional ids every coordinator holds",
		Long: `List the transactional ids the cluster's transaction coordinators hold, in
kafka-transactions' columns TransactionalId, Coordinator, ProducerId and
TransactionState, sorted by transactional id. --state and --producer-id
keep only those (ListTransactions' filters).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var filter []string
			for _, v := range states {
				for _, s := range strings.Split(v, ",") {
					i := slices.IndexFunc(txnStates, func(known string) bool { return strings.EqualFold(known, strings.TrimSpace(s)) })
					if i < 0 {
						return fmt.Errorf("--state %q: %q is not a transaction state; want some of %s", v, s, strings.Join(txnStates, ", "))
					}
					filter = append(filter, txnStates[i])
				}
			}
			adm, ctx, cancel, err := opts.admin(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			defer adm.Close()
			listed, err := adm.ListTransactions(ctx, producerIDs, filter)
			if err != nil && len(listed) == 0 {
				return fmt.Errorf("list transactions: %w", err)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TransactionalId\tCoordinator\tProducerId\tTransactionState")
			for _, l := range listed.Sorted() {
				fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", l.TxnID, l.Coordinator, l.ProducerID, l.State)
			}
			if ferr := tw.Flush(); ferr != nil {
				return ferr
			}
			if err != nil {
				return fmt.Errorf("some brokers did not answer, the list above is theirs only: %w", err)
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&states, "state", nil, "list only transactions in these states ("+strings.Join(txnStates, ", ")+")")
	cmd.Flags().Int64SliceVar(&producerIDs, "producer-id", nil, "list only transactions of these producer ids")
	return cmd
}

// newTxnDescribeCmd builds `tripod transactions describe
// --transactional-id ID`.
func newTxnDescribeCmd(opts *topicsOptions) *cobra.Command {
	var id string
	cmd := &cobra.Command{
		Use:   "describe",
		Short: "Describe one transactional id as its coordinator holds it",
		Long: `Describe one transactional id as its coordinator holds it, in
kafka-transactions' columns: CoordinatorId, TransactionalId, ProducerId,
ProducerEpoch, TransactionState, TransactionTimeoutMs,
CurrentTransactionStartTimeMs, TransactionDurationMs (None when no
transaction is open) and TopicPartitions.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if id == "" {
				return errors.New("--transactional-id: required")
			}
			adm, ctx, cancel, err := opts.admin(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			defer adm.Close()
			described, err := adm.DescribeTransactions(ctx, id)
			if err != nil {
				return fmt.Errorf("describe transaction %q: %w", id, err)
			}
			d, ok := described[id]
			if !ok {
				return fmt.Errorf("describe transaction %q: no coordinator answered for it", id)
			}
			if d.Err != nil {
				return fmt.Errorf("describe transaction %q: %w", id, d.Err)
			}
			return printDescribedTxn(cmd.OutOrStdout(), d, time.Now())
		},
	}
	cmd.Flags().StringVar(&id, "transactional-id", "", "the transactional id to describe")
	return cmd
}

// printDescribedTxn prints d in kafka-transactions describe's columns.
func printDescribedTxn(w io.Writer, d kadm.DescribedTransaction, now time.Time) error {
	start, duration := "None", "None"
	if d.StartTimestamp >= 0 {
		start = strconv.FormatInt(d.StartTimestamp, 10)
		duration = strconv.FormatInt(max(0, now.UnixMilli()-d.StartTimestamp), 10)
	}
	var parts []string
	for _, tp := range d.Topics.Sorted() {
		for _, p := range tp.Partitions {
			parts = append(parts, fmt.Sprintf("%s-%d", tp.Topic, p))
		}
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CoordinatorId\tTransactionalId\tProducerId\tProducerEpoch\tTransactionState\tTransactionTimeoutMs\tCurrentTransactionStartTimeMs\tTransactionDurationMs\tTopicPartitions")
	fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%s\t%d\t%s\t%s\t%s\n", d.Coordinator, d.TxnID, d.ProducerID, d.ProducerEpoch, d.State,
		d.TimeoutMillis, start, duration, strings.Join(parts, ","))
	return tw.Flush()
}

// partitionFlags are the --topic and --partition of the commands that
// look at one partition.
type partitionFlags struct {
	topic     string
	partition int32
}

// add registers the flags on cmd.
func (f *partitionFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.topic, "topic", "", "the topic")
	cmd.Flags().Int32Var(&f.partition, "partition", -1, "the partition")
}

// check names the flag missing.
func (f *partitionFlags) check() error {
	switch {
	case f.topic == "":
		return errors.New("--topic: required")
	case f.partition < 0:
		return fmt.Errorf("--partition %d: required, 0 or more", f.partition)
	}
	return nil
}

// describeProducers returns the producers the leader of topic's partition
// holds.
func describeProducers(ctx context.Context, adm adminClient, topic string, partition int32) ([]kadm.DescribedProducer, error) {
	set := kadm.TopicsSet{}
	set.Add(topic, partition)
	described, err := adm.DescribeProducers(ctx, set)
	if err != nil {
		return nil, fmt.Errorf("describe producers of %s-%d: %w", topic, partition, err)
	}
	dp, ok := described[topic].Partitions[partition]
	if !ok {
		return nil, fmt.Errorf("describe producers of %s-%d: the partition is not in the answer", topic, partition)
	}
	if dp.Err != nil {
		return nil, fmt.Errorf("describe producers of %s-%d: %w", topic, partition, dp.Err)
	}
	return dp.ActiveProducers.Sorted(), nil
}

// newTxnDescribeProducersCmd builds `tripod transactions
// describe-producers --topic T --partition P`.
func newTxnDescribeProducersCmd(opts *topicsOptions) *cobra.Command {
	var pf partitionFlags
	cmd := &cobra.Command{
		Use:   "describe-producers",
		Short: "Describe the producers a partition's leader holds",
		Long: `Describe the producers a partition's leader holds, in kafka-transactions'
columns ProducerId, ProducerEpoch, LatestCoordinatorEpoch, LastSequence,
LastTimestamp and CurrentTransactionStartOffset (None when the producer
has no open transaction on the partition).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := pf.check(); err != nil {
				return err
			}
			adm, ctx, cancel, err := opts.admin(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			defer adm.Close()
			producers, err := describeProducers(ctx, adm, pf.topic, pf.partition)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ProducerId\tProducerEpoch\tLatestCoordinatorEpoch\tLastSequence\tLastTimestamp\tCurrentTransactionStartOffset")
			for _, p := range producers {
				fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%s\n", p.ProducerID, p.ProducerEpoch, p.CoordinatorEpoch, p.LastSequence,
					p.LastTimestamp, offsetOrNone(p.CurrentTxnStartOffset))
			}
			return tw.Flush()
		},
	}
	pf.add(cmd)
	return cmd
}

// offsetOrNone prints an offset, None for -1.
func offsetOrNone(o int64) string {
	if o < 0 {
		return "None"
	}
	return strconv.FormatInt(o, 10)
}

// hangingTxn is an open transaction on a partition that its coordinator
// does not hold open there.
type hangingTxn struct {
	topic     string
	partition int32
	producer  kadm.DescribedProducer
}

// newTxnFindHangingCmd builds `tripod transactions find-hanging
// --broker-id N [--topic T [--partition P]] [--max-transaction-timeout M]`.
func newTxnFindHangingCmd(opts *topicsOptions) *cobra.Command {
	var (
		broker  int32
		topic   string
		part    int32
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "find-hanging",
		Short: "Find transactions open on partitions that their coordinator does not hold open",
		Long: `Find hanging transactions, as kafka-transactions find-hanging does: on the
partitions a broker leads (--broker-id) or on one topic (--topic, one
partition with --partition), the producers with a transaction open for
longer than --max-transaction-timeout (transaction.max.timeout.ms, 15
minutes by default) whose transactional id's coordinator does not hold
that transaction open on that partition. Columns: Topic, Partition,
ProducerId, ProducerEpoch, CoordinatorEpoch, StartOffset, LastTimestamp
and Duration(min). Abort one with 'tripod transactions abort'.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if broker < 0 && topic == "" {
				return errors.New("--broker-id or --topic: one is required")
			}
			if timeout <= 0 {
				return fmt.Errorf("--max-transaction-timeout %v: want more than 0", timeout)
			}
			adm, ctx, cancel, err := opts.admin(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			defer adm.Close()
			hanging, err := findHanging(ctx, adm, broker, topic, part, timeout, time.Now())
			if err != nil {
				return err
			}
			now := time.Now()
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "Topic\tPartition\tProducerId\tProducerEpoch\tCoordinatorEpoch\tStartOffset\tLastTimestamp\tDuration(min)")
			for _, h := range hanging {
				p := h.producer
				fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", h.topic, h.partition, p.ProducerID, p.ProducerEpoch,
					p.CoordinatorEpoch, p.CurrentTxnStartOffset, p.LastTimestamp, now.Sub(time.UnixMilli(p.LastTimestamp))/time.Minute)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().Int32Var(&broker, "broker-id", -1, "look at the partitions this broker leads")
	cmd.Flags().StringVar(&topic, "topic", "", "look at this topic's partitions")
	cmd.Flags().Int32Var(&part, "partition", -1, "with --topic, only this partition")
	cmd.Flags().DurationVar(&timeout, "max-transaction-timeout", 15*time.Minute, "the cluster's transaction.max.timeout.ms: a transaction open for longer may be hanging")
	return cmd
}

// findHanging returns the hanging transactions on the partitions broker
// leads (broker >= 0) or of topic (partition >= 0: only that one).
func findHanging(ctx context.Context, adm adminClient, broker int32, topic string, partition int32, timeout time.Duration, now time.Time) ([]hangingTxn, error) {
	md, err := adm.Metadata(ctx)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	set := kadm.TopicsSet{}
	for _, t := range md.Topics.Sorted() {
		if topic != "" && t.Topic != topic {
			continue
		}
		for _, p := range t.Partitions.Sorted() {
			if (broker < 0 || p.Leader == broker) && (partition < 0 || p.Partition == partition) {
				set.Add(t.Topic, p.Partition)
			}
		}
	}
	if len(set) == 0 {
		return nil, nil
	}
	described, err := adm.DescribeProducers(ctx, set)
	if err != nil {
		return nil, fmt.Errorf("describe producers: %w", err)
	}
	var candidates []hangingTxn
	var ids []int64
	for _, t := range described.Sorted() {
		for _, p := range t.Partitions.Sorted() {
			if p.Err != nil {
				return nil, fmt.Errorf("describe producers of %s-%d: %w", p.Topic, p.Partition, p.Err)
			}
			for _, dp := range p.ActiveProducers.Sorted() {
				if dp.CurrentTxnStartOffset < 0 || now.Sub(time.UnixMilli(dp.LastTimestamp)) < timeout {
					continue
				}
				candidates = append(candidates, hangingTxn{topic: p.Topic, partition: p.Partition, producer: dp})
				ids = append(ids, dp.ProducerID)
			}
		}
	}
	if len(candidates) == 0 {
		return nil, nil
	}
	listed, err := adm.ListTransactions(ctx, ids, nil)
	if err != nil {
		return nil, fmt.Errorf("list transactions of the open producers: %w", err)
	}
	byProducer := map[int64]string{}
	var txnIDs []string
	for _, l := range listed.Sorted() {
		byProducer[l.ProducerID] = l.TxnID
		txnIDs = append(txnIDs, l.TxnID)
	}
	var txns kadm.DescribedTransactions
	if len(txnIDs) > 0 {
		if txns, err = adm.DescribeTransactions(ctx, txnIDs...); err != nil {
			return nil, fmt.Errorf("describe the open producers' transactions: %w", err)
		}
	}
	var hanging []hangingTxn
	for _, c := range candidates {
		if id, ok := byProducer[c.producer.ProducerID]; ok {
			d := txns[id]
			if d.Err == nil && d.ProducerID == c.producer.ProducerID && d.ProducerEpoch == c.producer.ProducerEpoch &&
				d.State == "Ongoing" && hasPartition(d.Topics, c.topic, c.partition) {
				continue // its coordinator holds it open: it will end
			}
		}
		hanging = append(hanging, c)
	}
	return hanging, nil
}

// hasPartition reports whether set holds topic's partition.
func hasPartition(set kadm.TopicsSet, topic string, partition int32) bool {
	_, ok := set[topic][partition]
	return ok
}

// newTxnAbortCmd builds `tripod transactions abort --topic T --partition P
// (--start-offset O | --producer-id ID --producer-epoch E
// --coordinator-epoch C)`.
func newTxnAbortCmd(opts *topicsOptions) *cobra.Command {
	var (
		pf          partitionFlags
		startOffset int64
		producerID  int64
		epoch       int32
		coordEpoch  int32
	)
	cmd := &cobra.Command{
		Use:   "abort",
		Short: "Abort an open transaction on one partition (a hanging one)",
		Long: `Abort an open transaction on one partition by writing its abort marker
there, as kafka-transactions abort does: name the transaction by the
offset it started at (--start-offset, found with find-hanging or
describe-producers), or by --producer-id, --producer-epoch and
--coordinator-epoch. Needs CLUSTER_ACTION on the cluster: it is the
coordinator's WriteTxnMarkers, sent by hand.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := pf.check(); err != nil {
				return err
			}
			byOffset := startOffset >= 0
			if byOffset == (producerID >= 0) {
				return errors.New("--start-offset, or --producer-id with --producer-epoch and --coordinator-epoch: exactly one is required")
			}
			if !byOffset && (epoch < 0 || epoch > 32767 || coordEpoch < 0) {
				return fmt.Errorf("--producer-epoch %d and --coordinator-epoch %d: want 0..32767 and 0 or more with --producer-id", epoch, coordEpoch)
			}
			adm, ctx, cancel, err := opts.admin(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			defer adm.Close()
			m := kadm.TxnMarkers{ProducerID: producerID, ProducerEpoch: int16(epoch), CoordinatorEpoch: coordEpoch, Topics: kadm.TopicsSet{}}
			if byOffset {
				producers, err := describeProducers(ctx, adm, pf.topic, pf.partition)
				if err != nil {
					return err
				}
				i := slices.IndexFunc(producers, func(p kadm.DescribedProducer) bool { return p.CurrentTxnStartOffset == startOffset })
				if i < 0 {
					return fmt.Errorf("no producer of %s-%d has a transaction open at offset %d (see describe-producers)", pf.topic, pf.partition, startOffset)
				}
				p := producers[i]
				m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch = p.ProducerID, p.ProducerEpoch, p.CoordinatorEpoch
			}
			m.Topics.Add(pf.topic, pf.partition)
			resps, err := adm.WriteTxnMarkers(ctx, m)
			if err != nil {
				return fmt.Errorf("write the abort marker: %w", err)
			}
			for _, r := range resps {
				for _, t := range r.Topics {
					for _, p := range t.Partitions {
						if p.Err != nil {
							return fmt.Errorf("write the abort marker to %s-%d: %w", p.Topic, p.Partition, p.Err)
						}
					}
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Aborted the transaction of producer %d (epoch %d) on %s-%d\n", m.ProducerID, m.ProducerEpoch, pf.topic, pf.partition)
			return nil
		},
	}
	pf.add(cmd)
	cmd.Flags().Int64Var(&startOffset, "start-offset", -1, "the offset the transaction to abort started at on the partition")
	cmd.Flags().Int64Var(&producerID, "producer-id", -1, "the producer id of the transaction to abort")
	cmd.Flags().Int32Var(&epoch, "producer-epoch", -1, "its producer epoch")
	cmd.Flags().Int32Var(&coordEpoch, "coordinator-epoch", -1, "its coordinator epoch")
	return cmd
}
