package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// newQuorumCmd builds `tripod quorum describe|add-voter|remove-voter`,
// kafka-metadata-quorum.sh for a cluster on embedded Raft: the brokers
// are the quorum's voters and observers (KIP-595), and its voters change
// while it runs (KIP-853). It shares the connection flags of `tripod
// topics`.
func newQuorumCmd() *cobra.Command {
	opts := &topicsOptions{}
	cmd := &cobra.Command{
		Use:   "quorum",
		Short: "Describe the Raft quorum, add and remove its voters (like kafka-metadata-quorum)",
		Long: `Describe the embedded Raft quorum of a cluster on coordination.backend=raft
(its leader, high watermark, voters and observers and how far each lags)
and promote an observer to a voter or demote a voter, printing what
kafka-metadata-quorum prints. A cluster on ZooKeeper or etcd has no quorum
in its brokers: these commands say so. --bootstrap-server is accepted as
another name of --bootstrap.`,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&opts.bootstrap, "bootstrap", "127.0.0.1:9092", "HOST:PORT[,HOST:PORT] of brokers to ask (bootstrap servers)")
	pf.StringVar(&opts.bootstrap, "bootstrap-server", "127.0.0.1:9092", "the same as --bootstrap (kafka-metadata-quorum's name)")
	pf.Lookup("bootstrap-server").Hidden = true
	pf.DurationVar(&opts.timeout, "timeout", 30*time.Second, "how long a command may take")
	opts.security.addFlags(cmd)
	cmd.AddCommand(newQuorumDescribeCmd(opts), newQuorumVoterCmd(opts, true), newQuorumVoterCmd(opts, false))
	return cmd
}

// quorumTopic is the name KRaft gives the quorum's log, the partition
// (0) DescribeQuorum asks about.
const quorumTopic = "__cluster_metadata"

// newQuorumDescribeCmd builds `tripod quorum describe --status |
// --replication [--human-readable]`.
func newQuorumDescribeCmd(opts *topicsOptions) *cobra.Command {
	var status, replication, humanReadable bool
	cmd := &cobra.Command{
		Use:   "describe --status | --replication [--human-readable]",
		Short: "Describe the Raft quorum: a summary (--status) or each member's replication (--replication)",
		Long: `Describe the Raft quorum as its leader sees it, as kafka-metadata-quorum
describe does. --status prints the cluster id, the leader and its epoch,
the high watermark, the largest lag of a voter behind the leader (in
entries and in ms) and the voters (with their brokers' listeners) and
observers. --replication prints a row per member: its log end, its lag,
when the leader last heard from it and when it last had the leader's
whole log (epoch ms, or "N ms ago" with --human-readable; -1 when
never), and whether it leads, follows (a voter) or observes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case status && replication:
				return errors.New("--status and --replication: give one of them, not both")
			case !status && !replication:
				return errors.New("--status or --replication: give one of them")
			case status && humanReadable:
				return errors.New("--human-readable: only with --replication")
			}
			adm, ctx, cancel, err := opts.admin(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			defer adm.Close()
			q, err := describeQuorum(ctx, adm)
			if err != nil {
				return err
			}
			if replication {
				return writeQuorumReplication(cmd.OutOrStdout(), q, humanReadable, time.Now())
			}
			md, err := adm.BrokerMetadata(ctx)
			if err != nil {
				return fmt.Errorf("cluster id: %w", err)
			}
			return writeQuorumStatus(cmd.OutOrStdout(), md.Cluster, q)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&status, "status", false, "a summary of the quorum's state")
	f.BoolVar(&replication, "replication", false, "each voter's and observer's replication")
	f.BoolVar(&humanReadable, "human-readable", false, `with --replication: times as "N ms ago"`)
	return cmd
}

// quorumInfo is a DescribeQuorum answer as the commands print it.
type quorumInfo struct {
	leaderID      int32
	leaderEpoch   int32
	highWatermark int64
	// voters and observers in the answer's order.
	voters, observers []kmsg.DescribeQuorumResponseTopicPartitionReplicaState
	// endpoints are the voters' listeners, "NAME://host:port", by id
	// (DescribeQuorum v2).
	endpoints map[int32][]string
}

// quorumInfoOf reads the quorum's partition out of a DescribeQuorum
// answer, or the error it carries.
func quorumInfoOf(resp *kmsg.DescribeQuorumResponse) (quorumInfo, error) {
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return quorumInfo{}, withMessage(err, resp.ErrorMessage)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if t.Topic != quorumTopic || p.Partition != 0 {
				continue
			}
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return quorumInfo{}, withMessage(err, p.ErrorMessage)
			}
			q := quorumInfo{leaderID: p.LeaderID, leaderEpoch: p.LeaderEpoch, highWatermark: p.HighWatermark,
				voters: p.CurrentVoters, observers: p.Observers, endpoints: map[int32][]string{}}
			for _, n := range resp.Nodes {
				for _, l := range n.Listeners {
					q.endpoints[n.NodeID] = append(q.endpoints[n.NodeID], endpointString(l.Name, l.Host, l.Port))
				}
			}
			return q, nil
		}
	}
	return quorumInfo{}, fmt.Errorf("the answer has no %s-0", quorumTopic)
}

// withMessage is err with the broker's message, when it sent one.
func withMessage(err error, msg *string) error {
	if msg == nil || *msg == "" {
		return err
	}
	return fmt.Errorf("%w: %s", err, *msg)
}

// endpointString formats a listener as Kafka's RaftVoterEndpoint does:
// NAME://host:port, an IPv6 host in brackets.
func endpointString(name, host string, port uint16) string {
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return name + "://" + host + ":" + strconv.Itoa(int(port))
}

// describeQuorum asks the cluster (its controller, which leads the
// quorum) for the quorum.
func describeQuorum(ctx context.Context, adm adminClient) (quorumInfo, error) {
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = quorumTopic
	rt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 0}}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, adm.cl)
	if err != nil {
		return quorumInfo{}, quorumRequestError(ctx, adm, "describe the quorum", req.Key(), err)
	}
	q, err := quorumInfoOf(resp)
	if err != nil {
		return quorumInfo{}, fmt.Errorf("describe the quorum: %w", err)
	}
	return q, nil
}

// quorumRequestError is the error of a quorum request that got no
// answer: when the brokers do not serve the API (a cluster on ZooKeeper
// or etcd), it says so rather than how the client gave up.
func quorumRequestError(ctx context.Context, adm adminClient, what string, key int16, err error) error {
	versions, verr := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, adm.cl)
	if verr == nil && versions.ErrorCode == 0 {
		served := false
		for _, k := range versions.ApiKeys {
			served = served || k.ApiKey == key
		}
		if !served {
			return fmt.Errorf("%s: the brokers do not serve %s: the cluster has no embedded Raft quorum (ZooKeeper and etcd keep their own, and brokers older than the quorum's APIs describe none)",
				what, kmsg.NameForKey(key))
		}
	}
	return fmt.Errorf("%s: %w", what, err)
}

// leaderOf returns the leader's row among the voters.
func (q quorumInfo) leaderOf() (kmsg.DescribeQuorumResponseTopicPartitionReplicaState, error) {
	for _, v := range q.voters {
		if v.ReplicaID == q.leaderID {
			return v, nil
		}
	}
	return kmsg.DescribeQuorumResponseTopicPartitionReplicaState{}, fmt.Errorf("the quorum has no leader among its voters (LeaderId %d): try again once it has elected one", q.leaderID)
}

// writeQuorumStatus prints kafka-metadata-quorum describe --status: the
// largest lag is the voter with the smallest log end (the first of
// equals, the leader's lag being 0), its time lag the leader's last
// caught-up time less its own (-1 when either is unknown).
func writeQuorumStatus(w io.Writer, clusterID string, q quorumInfo) error {
	leader, err := q.leaderOf()
	if err != nil {
		return err
	}
	lagging := q.voters[0]
	for _, v := range q.voters[1:] {
		if v.LogEndOffset < lagging.LogEndOffset {
			lagging = v
		}
	}
	lagMs := int64(-1)
	switch {
	case lagging.ReplicaID == leader.ReplicaID:
		lagMs = 0
	case leader.LastCaughtUpTimestamp >= 0 && lagging.LastCaughtUpTimestamp >= 0:
		lagMs = leader.LastCaughtUpTimestamp - lagging.LastCaughtUpTimestamp
	}
	fmt.Fprintf(w, "ClusterId:              %s\n", clusterID)
	fmt.Fprintf(w, "LeaderId:               %d\n", q.leaderID)
	fmt.Fprintf(w, "LeaderEpoch:            %d\n", q.leaderEpoch)
	fmt.Fprintf(w, "HighWatermark:          %d\n", q.highWatermark)
	fmt.Fprintf(w, "MaxFollowerLag:         %d\n", leader.LogEndOffset-lagging.LogEndOffset)
	fmt.Fprintf(w, "MaxFollowerLagTimeMs:   %d\n", lagMs)
	fmt.Fprintf(w, "CurrentVoters:          %s\n", q.members(q.voters))
	fmt.Fprintf(w, "CurrentObservers:       %s\n", q.members(q.observers))
	return nil
}

// members formats voters or observers as kafka-metadata-quorum does:
// [{"id": 1, "endpoints": ["PLAINTEXT://host:9092"]}, {"id": 4}], the
// directory id left out when it is zero (tripod's always is) and the
// endpoints when none is known.
func (q quorumInfo) members(states []kmsg.DescribeQuorumResponseTopicPartitionReplicaState) string {
	var parts []string
	for _, s := range states {
		var b strings.Builder
		fmt.Fprintf(&b, `{"id": %d`, s.ReplicaID)
		if s.ReplicaDirectoryID != [16]byte{} {
			fmt.Fprintf(&b, `, "directoryId": "%s"`, directoryID(s.ReplicaDirectoryID))
		}
		if eps := q.endpoints[s.ReplicaID]; len(eps) > 0 {
			b.WriteString(`, "endpoints": ["` + strings.Join(eps, `", "`) + `"]`)
		}
		b.WriteString("}")
		parts = append(parts, b.String())
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// directoryID formats a directory id as Kafka's Uuid.toString: URL-safe
// base64 without padding.
func directoryID(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// writeQuorumReplication prints kafka-metadata-quorum describe
// --replication: the leader's row, the other voters' (Follower), the
// observers', in columns padded to their widest cell and ended by a tab
// each, as Kafka's ToolsUtils.prettyPrintTable. With humanReadable a
// time is "N ms ago" before now (0 for a time ahead of this machine's
// clock).
func writeQuorumReplication(w io.Writer, q quorumInfo, humanReadable bool, now time.Time) error {
	leader, err := q.leaderOf()
	if err != nil {
		return err
	}
	rows := [][]string{{"NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp", "Status"}}
	row := func(s kmsg.DescribeQuorumResponseTopicPartitionReplicaState, status string) {
		rows = append(rows, []string{
			strconv.Itoa(int(s.ReplicaID)), directoryID(s.ReplicaDirectoryID), strconv.FormatInt(s.LogEndOffset, 10),
			strconv.FormatInt(leader.LogEndOffset-s.LogEndOffset, 10),
			quorumTime(s.LastFetchTimestamp, humanReadable, now), quorumTime(s.LastCaughtUpTimestamp, humanReadable, now), status,
		})
	}
	row(leader, "Leader")
	for _, v := range q.voters {
		if v.ReplicaID != leader.ReplicaID {
			row(v, "Follower")
		}
	}
	for _, o := range q.observers {
		row(o, "Observer")
	}
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, cell := range r {
			widths[i] = max(widths[i], len(cell))
		}
	}
	for _, r := range rows {
		var b strings.Builder
		for i, cell := range r {
			b.WriteString(cell + strings.Repeat(" ", widths[i]-len(cell)) + "\t")
		}
		fmt.Fprintln(w, b.String())
	}
	return nil
}

// quorumTime formats a DescribeQuorum time in Unix ms: -1 (never) as
// is, else the ms or, humanReadable, how long before now.
func quorumTime(ms int64, humanReadable bool, now time.Time) string {
	if ms < 0 || !humanReadable {
		return strconv.FormatInt(ms, 10)
	}
	return strconv.FormatInt(max(now.UnixMilli()-ms, 0), 10) + " ms ago"
}

// newQuorumVoterCmd builds `tripod quorum add-voter BROKER` (add) or
// `tripod quorum remove-voter BROKER`.
func newQuorumVoterCmd(opts *topicsOptions, add bool) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "remove-voter BROKER",
		Short: "Remove a broker from the voters of the Raft quorum; while it runs it observes",
		Long: `Remove broker BROKER from the voters of the Raft quorum (KIP-853's
RemoveRaftVoter), whether it runs or not: while it runs it stays an
observer, replicating the metadata without a vote. The last voter cannot
be removed. Remove a voter before retiring its broker for good, so that
the quorum does not count a member that will never answer.`,
		Args: cobra.ExactArgs(1),
	}
	if add {
		cmd.Use = "add-voter BROKER"
		cmd.Short = "Make a broker that observes the Raft quorum one of its voters"
		cmd.Long = `Make broker BROKER, an observer of the Raft quorum (a broker started with
--raft-listen and --raft-voters naming the voters), one of its voters
(KIP-853's AddRaftVoter): once it has caught up with the leader's log the
change commits through the quorum. It waits up to --timeout.`
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		id, err := strconv.ParseInt(args[0], 10, 32)
		if err != nil || id < 0 {
			return fmt.Errorf("broker %q: want a broker id, at least 0", args[0])
		}
		adm, ctx, cancel, err := opts.admin(cmd)
		if err != nil {
			return err
		}
		defer cancel()
		defer adm.Close()
		if add {
			err = addVoter(ctx, adm, int32(id), opts.timeout)
		} else {
			err = removeVoter(ctx, adm, int32(id))
		}
		if err != nil {
			return err
		}
		if add {
			fmt.Fprintf(cmd.OutOrStdout(), "Added broker %d to the voters of the Raft quorum.\n", id)
		} else {
			fmt.Fprintf(cmd.OutOrStdout(), "Removed broker %d from the voters of the Raft quorum; while it runs it observes.\n", id)
		}
		return nil
	}
	return cmd
}

// addVoter sends AddRaftVoter for broker id, letting the brokers wait
// a second less than timeout so that their answer arrives in time.
func addVoter(ctx context.Context, adm adminClient, id int32, timeout time.Duration) error {
	req := kmsg.NewPtrAddRaftVoterRequest()
	req.VoterID = id
	req.TimeoutMillis = int32(min(max(timeout-time.Second, time.Second), 10*time.Minute).Milliseconds())
	resp, err := req.RequestWith(ctx, adm.cl)
	if err != nil {
		return quorumRequestError(ctx, adm, fmt.Sprintf("add voter %d", id), req.Key(), err)
	}
	return voterChangeError("add", id, resp.ErrorCode, resp.ErrorMessage)
}

// removeVoter sends RemoveRaftVoter for broker id.
func removeVoter(ctx context.Context, adm adminClient, id int32) error {
	req := kmsg.NewPtrRemoveRaftVoterRequest()
	req.VoterID = id
	resp, err := req.RequestWith(ctx, adm.cl)
	if err != nil {
		return quorumRequestError(ctx, adm, fmt.Sprintf("remove voter %d", id), req.Key(), err)
	}
	return voterChangeError("remove", id, resp.ErrorCode, resp.ErrorMessage)
}

// voterChangeError is the error of an AddRaftVoter ("add") or
// RemoveRaftVoter ("remove") answer for broker id, with what to do about
// the errors an operator meets; nil for none.
func voterChangeError(verb string, id int32, code int16, msg *string) error {
	err := kerr.ErrorForCode(code)
	if err == nil {
		return nil
	}
	var hint string
	switch {
	case errors.Is(err, kerr.DuplicateVoter):
		hint = fmt.Sprintf("broker %d already votes", id)
	case errors.Is(err, kerr.VoterNotFound) && verb == "add":
		hint = fmt.Sprintf("broker %d does not observe the quorum: start it with --raft-listen and --raft-voters naming a voter, and wait until it shows among the observers of `tripod quorum describe --status`", id)
	case errors.Is(err, kerr.VoterNotFound):
		hint = fmt.Sprintf("broker %d is not a voter", id)
	case errors.Is(err, kerr.RequestTimedOut):
		hint = "the quorum did not make the change in time (a voter catching up, another change in progress, or no majority): try again"
	case errors.Is(err, kerr.NotLeaderForPartition):
		hint = "no leader of the quorum could be reached: try again once one is elected"
	}
	err = withMessage(err, msg)
	if hint != "" {
		return fmt.Errorf("%s voter %d: %s: %w", verb, id, hint, err)
	}
	return fmt.Errorf("%s voter %d: %w", verb, id, err)
}
