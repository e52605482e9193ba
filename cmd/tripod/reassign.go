package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/controller"
	"github.com/tripodmq/tripod/coord"
)

// fileFromFlag is the value --execute, --verify and --cancel take when
// they are given without one: the file is then --reassignment-json-file
// or the command's argument, as kafka-reassign-partitions takes it.
const fileFromFlag = "--reassignment-json-file"

// reassignOptions are the flags of `tripod reassign`.
type reassignOptions struct {
	topicsOptions
	plan, dryRun, wait, additional bool
	// disableRackAware is --disable-rack-aware: --plan places replicas
	// without the brokers' racks.
	disableRackAware bool
	// throttle is --throttle's bytes/s, -1 when not given.
	throttle                     int64
	execute, verify, cancel      string
	reassignmentFile             string
	topicsToMoveFile, brokerList string
	list                         bool
	drain                        int32
}

// newReassignCmd builds `tripod reassign`, a kafka-reassign-partitions
// for any cluster that has AlterPartitionReassignments and
// ListPartitionReassignments (KIP-455): plan a move of topics onto
// brokers, execute, verify or cancel a reassignment file, list the
// reassignments in progress, and drain every replica off one broker.
func newReassignCmd() *cobra.Command {
	opts := &reassignOptions{}
	cmd := &cobra.Command{
		Use:   "reassign (--plan | --execute FILE | --verify FILE | --cancel FILE | --list | --drain BROKER)",
		Short: "Move partition replicas between brokers (like kafka-reassign-partitions)",
		Long: `Move partition replicas between brokers, as kafka-reassign-partitions does
and with its JSON files:

  --plan (or --generate) --topics-to-move-json-file F --broker-list 1,2,3
      prints the current assignment of the topics in F
      ({"topics":[{"topic":"t"}],"version":1}) and a proposed one that
      spreads their replicas evenly over the brokers listed, keeping
      every replica that can stay; when the brokers listed have racks
      (broker.rack), it places every partition anew as CreateTopics
      does, each replica in another rack while racks remain
      (--disable-rack-aware: without racks);
  --execute FILE  starts the reassignment FILE describes
      ({"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]}),
      printing the current assignment first to roll back with;
  --verify FILE   tells, partition by partition, whether it is completed,
      and exits non-zero while any is in progress or differs;
  --cancel FILE   cancels the reassignments of FILE's partitions in
      progress (their replicas go back to what they were);
  --list          lists the reassignments in progress;
  --drain BROKER  moves every replica off BROKER onto the other live
      brokers, keeping each partition's replication factor, spreading
      the load (--dry-run only prints the plan).

FILE may also be given with --reassignment-json-file. A reassignment
completes in the background as the new replicas catch up; --wait waits
for it. With --wait, --timeout bounds the whole wait.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return opts.run(cmd, args) },
	}
	f := cmd.Flags()
	f.StringVar(&opts.bootstrap, "bootstrap", "127.0.0.1:9092", "HOST:PORT[,HOST:PORT] of brokers to ask (bootstrap servers)")
	f.StringVar(&opts.bootstrap, "bootstrap-server", "127.0.0.1:9092", "the same as --bootstrap (kafka-reassign-partitions' name)")
	f.Lookup("bootstrap-server").Hidden = true
	f.DurationVar(&opts.timeout, "timeout", 30*time.Second, "how long a command may take")
	f.BoolVar(&opts.plan, "plan", false, "propose an assignment of --topics-to-move-json-file's topics over --broker-list")
	f.BoolVar(&opts.plan, "generate", false, "the same as --plan (kafka-reassign-partitions' name)")
	f.StringVar(&opts.execute, "execute", "", "start the reassignment of FILE")
	f.StringVar(&opts.verify, "verify", "", "check whether the reassignment of FILE is completed")
	f.StringVar(&opts.cancel, "cancel", "", "cancel the reassignments of FILE's partitions")
	for _, name := range []string{"execute", "verify", "cancel"} {
		f.Lookup(name).NoOptDefVal = fileFromFlag
	}
	f.StringVar(&opts.reassignmentFile, "reassignment-json-file", "", "the reassignment FILE of --execute, --verify and --cancel")
	f.StringVar(&opts.topicsToMoveFile, "topics-to-move-json-file", "", `--plan's topics: {"topics":[{"topic":"t"}],"version":1}`)
	f.StringVar(&opts.brokerList, "broker-list", "", "--plan's brokers to spread the replicas over: 1,2,3")
	f.BoolVar(&opts.disableRackAware, "disable-rack-aware", false, "with --plan: spread the replicas without the brokers' racks (broker.rack)")
	f.BoolVar(&opts.list, "list", false, "list the reassignments in progress")
	f.Int32Var(&opts.drain, "drain", -1, "move every replica off this broker onto the other live brokers")
	f.BoolVar(&opts.dryRun, "dry-run", false, "with --drain: print the plan, change nothing")
	f.BoolVar(&opts.wait, "wait", false, "with --execute and --drain: wait until the reassignment is completed, printing progress")
	f.BoolVar(&opts.additional, "additional", false, "with --execute: start it although other reassignments are in progress")
	f.Int64Var(&opts.throttle, "throttle", -1, "with --execute and --drain: limit the moved replicas' replication to BYTES/s (leader and follower.replication.throttled.rate); --verify clears it once the reassignment is completed")
	return cmd
}

// run checks the flags, then does what the one mode given asks.
func (o *reassignOptions) run(cmd *cobra.Command, args []string) error {
	flags := cmd.Flags()
	var modes []string
	for _, name := range []string{"plan", "execute", "verify", "cancel", "list", "drain"} {
		if flags.Changed(name) || name == "plan" && flags.Changed("generate") {
			modes = append(modes, "--"+name)
		}
	}
	if len(modes) != 1 {
		return fmt.Errorf("give one of --plan, --execute, --verify, --cancel, --list and --drain (got %d: %s)", len(modes), strings.Join(modes, " "))
	}
	mode := modes[0]
	only := func(flag string, modes ...string) error {
		if flags.Changed(flag) && !slices.Contains(modes, mode) {
			return fmt.Errorf("--%s: only with %s, not with %s", flag, strings.Join(modes, " or "), mode)
		}
		return nil
	}
	for _, check := range []error{
		only("topics-to-move-json-file", "--plan"), only("broker-list", "--plan"), only("disable-rack-aware", "--plan"),
		only("reassignment-json-file", "--execute", "--verify", "--cancel"),
		only("dry-run", "--drain"), only("wait", "--execute", "--drain"), only("additional", "--execute"),
		only("throttle", "--execute", "--drain"),
	} {
		if check != nil {
			return check
		}
	}
	file := ""
	switch mode {
	case "--execute", "--verify", "--cancel":
		file = map[string]string{"--execute": o.execute, "--verify": o.verify, "--cancel": o.cancel}[mode]
		if file == fileFromFlag {
			file = ""
			if len(args) == 1 {
				file, args = args[0], nil
			}
		}
		if file != "" && o.reassignmentFile != "" {
			return fmt.Errorf("%s %s and --reassignment-json-file %s: give the file once", mode, file, o.reassignmentFile)
		}
		if file == "" {
			file = o.reassignmentFile
		}
		if file == "" {
			return fmt.Errorf("%s: needs the reassignment FILE (%s FILE or --reassignment-json-file FILE)", mode, mode)
		}
	}
	if len(args) > 0 {
		return fmt.Errorf("unexpected argument %q", args[0])
	}
	var (
		moves   []move
		topics  []string
		brokers []int32
		err     error
	)
	switch mode {
	case "--plan":
		if o.topicsToMoveFile == "" || o.brokerList == "" {
			return errors.New("--plan: needs --topics-to-move-json-file and --broker-list")
		}
		if topics, err = readTopicsToMove(o.topicsToMoveFile); err != nil {
			return err
		}
		if brokers, err = parseBrokerList(o.brokerList); err != nil {
			return err
		}
	case "--execute", "--verify", "--cancel":
		if moves, err = readReassignment(file); err != nil {
			return err
		}
	case "--drain":
		if o.drain < 0 {
			return fmt.Errorf("--drain %d: want a broker id, 0 or more", o.drain)
		}
	}
	if flags.Changed("throttle") && o.throttle < 1 {
		return fmt.Errorf("--throttle %d: must be at least 1 byte/s", o.throttle)
	}

	adm, ctx, cancel, err := o.admin(cmd)
	if err != nil {
		return err
	}
	defer cancel()
	defer adm.Close()
	w := cmd.OutOrStdout()
	switch mode {
	case "--plan":
		return planTopics(ctx, w, adm, topics, brokers, !o.disableRackAware)
	case "--execute":
		return executeMoves(ctx, w, adm, moves, o.additional, o.wait, o.throttle)
	case "--verify":
		return verifyMoves(ctx, w, adm, moves)
	case "--cancel":
		return cancelMoves(ctx, w, adm, moves)
	case "--list":
		return listOngoing(ctx, w, adm)
	default:
		return drainBroker(ctx, w, adm, o.drain, o.dryRun, o.wait, o.throttle)
	}
}

// topicPartition names one partition.
type topicPartition struct {
	topic     string
	partition int32
}

// String formats tp as Kafka does: "orders-0".
func (tp topicPartition) String() string { return tp.topic + "-" + strconv.Itoa(int(tp.partition)) }

// compare orders partitions by topic, then partition.
func (tp topicPartition) compare(other topicPartition) int {
	if c := strings.Compare(tp.topic, other.topic); c != 0 {
		return c
	}
	return int(tp.partition) - int(other.partition)
}

// move is one partition and its replicas: the target of a reassignment,
// or a current assignment.
type move struct {
	topicPartition
	replicas []int32
}

// sortMoves sorts moves by topic, then partition.
func sortMoves(moves []move) {
	slices.SortFunc(moves, func(a, b move) int { return a.compare(b.topicPartition) })
}

// reassignmentJSON is kafka-reassign-partitions' reassignment file, and
// the assignments it prints:
// {"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any","any"]}]}.
type reassignmentJSON struct {
	Version    int             `json:"version"`
	Partitions []partitionJSON `json:"partitions"`
}

// partitionJSON is one partition of a reassignmentJSON.
type partitionJSON struct {
	Topic     string   `json:"topic"`
	Partition int32    `json:"partition"`
	Replicas  []int32  `json:"replicas"`
	LogDirs   []string `json:"log_dirs"`
}

// formatMoves returns moves as one line of Kafka's reassignment JSON,
// sorted by topic and partition, every log dir "any".
func formatMoves(moves []move) string {
	sorted := slices.Clone(moves)
	sortMoves(sorted)
	doc := reassignmentJSON{Version: 1, Partitions: []partitionJSON{}}
	for _, m := range sorted {
		dirs := make([]string, len(m.replicas))
		for i := range dirs {
			dirs[i] = "any"
		}
		doc.Partitions = append(doc.Partitions, partitionJSON{Topic: m.topic, Partition: m.partition, Replicas: m.replicas, LogDirs: dirs})
	}
	out, _ := json.Marshal(doc) // Strings and numbers always encode.
	return string(out)
}

// readReassignment reads and checks a reassignment file: version 1, some
// partitions, each named once with a topic, a partition of 0 or more and
// replicas (distinct broker ids of 0 or more), and log dirs, when given,
// one per replica and each "any" (tripod places a replica in a log dir of
// its broker's choice).
func readReassignment(path string) ([]move, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reassignment file: %w", err)
	}
	var doc struct {
		Version    *int `json:"version"`
		Partitions []struct {
			Topic     *string  `json:"topic"`
			Partition *int32   `json:"partition"`
			Replicas  []int32  `json:"replicas"`
			LogDirs   []string `json:"log_dirs"`
		} `json:"partitions"`
	}
	if err := decodeJSON(data, &doc); err != nil {
		return nil, fmt.Errorf("reassignment file %s: %w", path, err)
	}
	if doc.Version == nil || *doc.Version != 1 {
		return nil, fmt.Errorf(`reassignment file %s: want "version": 1`, path)
	}
	if len(doc.Partitions) == 0 {
		return nil, fmt.Errorf(`reassignment file %s: "partitions" is empty or missing`, path)
	}
	var moves []move
	seen := map[topicPartition]bool{}
	for i, p := range doc.Partitions {
		if p.Topic == nil || *p.Topic == "" || p.Partition == nil {
			return nil, fmt.Errorf(`reassignment file %s: partitions[%d]: needs "topic" and "partition"`, path, i)
		}
		tp := topicPartition{*p.Topic, *p.Partition}
		if tp.partition < 0 {
			return nil, fmt.Errorf("reassignment file %s: partition %s: the partition must be 0 or more", path, tp)
		}
		if seen[tp] {
			return nil, fmt.Errorf("reassignment file %s: partition %s named twice", path, tp)
		}
		seen[tp] = true
		if len(p.Replicas) == 0 {
			return nil, fmt.Errorf(`reassignment file %s: partition %s: "replicas" is empty or missing`, path, tp)
		}
		for j, id := range p.Replicas {
			if id < 0 {
				return nil, fmt.Errorf("reassignment file %s: partition %s: replica %d is not a broker id", path, tp, id)
			}
			if slices.Contains(p.Replicas[:j], id) {
				return nil, fmt.Errorf("reassignment file %s: partition %s: broker %d named twice in its replicas", path, tp, id)
			}
		}
		if p.LogDirs != nil {
			if len(p.LogDirs) != len(p.Replicas) {
				return nil, fmt.Errorf(`reassignment file %s: partition %s: %d "log_dirs" for %d replicas`, path, tp, len(p.LogDirs), len(p.Replicas))
			}
			for _, dir := range p.LogDirs {
				if dir != "any" {
					return nil, fmt.Errorf(`reassignment file %s: partition %s: log dir %q: only "any" is supported`, path, tp, dir)
				}
			}
		}
		moves = append(moves, move{tp, p.Replicas})
	}
	sortMoves(moves)
	return moves, nil
}

// readTopicsToMove reads --plan's topics file:
// {"topics":[{"topic":"t"}],"version":1}.
func readTopicsToMove(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--topics-to-move-json-file: %w", err)
	}
	var doc struct {
		Version *int `json:"version"`
		Topics  []struct {
			Topic string `json:"topic"`
		} `json:"topics"`
	}
	if err := decodeJSON(data, &doc); err != nil {
		return nil, fmt.Errorf("--topics-to-move-json-file %s: %w", path, err)
	}
	if doc.Version != nil && *doc.Version != 1 {
		return nil, fmt.Errorf(`--topics-to-move-json-file %s: "version" %d, want 1`, path, *doc.Version)
	}
	var topics []string
	for i, t := range doc.Topics {
		if t.Topic == "" {
			return nil, fmt.Errorf(`--topics-to-move-json-file %s: topics[%d]: needs "topic"`, path, i)
		}
		if !slices.Contains(topics, t.Topic) {
			topics = append(topics, t.Topic)
		}
	}
	if len(topics) == 0 {
		return nil, fmt.Errorf(`--topics-to-move-json-file %s: "topics" is empty or missing`, path)
	}
	slices.Sort(topics)
	return topics, nil
}

// decodeJSON decodes one JSON value from data into v, with a message
// that says where the input is wrong.
func decodeJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	err := dec.Decode(v)
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return fmt.Errorf("not JSON: %v (at byte %d)", syntax, syntax.Offset)
	case errors.As(err, &typ):
		return fmt.Errorf("%q is a JSON %s, want %s", typ.Field, typ.Value, typ.Type)
	case errors.Is(err, io.EOF):
		return errors.New("empty, want a JSON object")
	case err != nil:
		return fmt.Errorf("not JSON: %v", err)
	}
	if dec.More() {
		return errors.New("not JSON: more after the first value")
	}
	return nil
}

// parseBrokerList parses --broker-list: broker ids separated by commas.
func parseBrokerList(s string) ([]int32, error) {
	var ids []int32
	for _, part := range strings.Split(s, ",") {
		id, err := strconv.ParseInt(strings.TrimSpace(part), 10, 32)
		if err != nil || id < 0 {
			return nil, fmt.Errorf("--broker-list %q: %q is not a broker id", s, part)
		}
		if slices.Contains(ids, int32(id)) {
			return nil, fmt.Errorf("--broker-list %q: broker %d twice", s, id)
		}
		ids = append(ids, int32(id))
	}
	slices.Sort(ids)
	return ids, nil
}

// clusterView is what a plan starts from: the live brokers and every
// partition's replicas and leader, from a Metadata answer.
type clusterView struct {
	brokers []int32 // live, sorted
	// racks are the live brokers' racks (broker.rack), of those that
	// have one.
	racks  map[int32]string
	topics map[string][]kadm.PartitionDetail
}

// rackAware reports whether every live broker has a rack, so that
// replicas are placed by rack, as the controller places them.
func (v clusterView) rackAware() bool {
	for _, id := range v.brokers {
		if v.racks[id] == "" {
			return false
		}
	}
	return len(v.brokers) > 0
}

// loadCluster reads the cluster's Metadata, asking a broker every time:
// kadm's Metadata may answer from the client's cache, up to its
// metadata.max.age old, which would hide a reassignment's progress.
func loadCluster(ctx context.Context, adm adminClient) (clusterView, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = nil // every topic
	resp, err := req.RequestWith(ctx, adm.cl)
	if err != nil {
		return clusterView{}, fmt.Errorf("metadata: %w", err)
	}
	v := clusterView{topics: map[string][]kadm.PartitionDetail{}, racks: map[int32]string{}}
	for _, b := range resp.Brokers {
		v.brokers = append(v.brokers, b.NodeID)
		if b.Rack != nil && *b.Rack != "" {
			v.racks[b.NodeID] = *b.Rack
		}
	}
	slices.Sort(v.brokers)
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		name := *t.Topic
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			if errors.Is(err, kerr.UnknownTopicOrPartition) {
				continue // deleted as we asked
			}
			return clusterView{}, fmt.Errorf("metadata of topic %s: %w", name, err)
		}
		parts := make([]kadm.PartitionDetail, 0, len(t.Partitions))
		for _, p := range t.Partitions {
			parts = append(parts, kadm.PartitionDetail{Topic: name, Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
				Replicas: p.Replicas, ISR: p.ISR, OfflineReplicas: p.OfflineReplicas, Err: kerr.ErrorForCode(p.ErrorCode)})
		}
		slices.SortFunc(parts, func(a, b kadm.PartitionDetail) int { return int(a.Partition) - int(b.Partition) })
		v.topics[name] = parts
	}
	return v, nil
}

// partition returns the state of tp and whether the cluster has it.
func (v clusterView) partition(tp topicPartition) (kadm.PartitionDetail, bool) {
	parts := v.topics[tp.topic]
	if tp.partition < 0 || int(tp.partition) >= len(parts) || parts[tp.partition].Partition != tp.partition {
		return kadm.PartitionDetail{}, false
	}
	return parts[tp.partition], true
}

// current returns the current replicas of the partitions of moves.
func (v clusterView) current(moves []move) ([]move, error) {
	out := make([]move, 0, len(moves))
	for _, m := range moves {
		p, ok := v.partition(m.topicPartition)
		if !ok {
			return nil, fmt.Errorf("partition %s: %w", m.topicPartition, kerr.UnknownTopicOrPartition)
		}
		out = append(out, move{m.topicPartition, p.Replicas})
	}
	return out, nil
}

// load returns how many replicas, and how many preferred leaderships
// (first replicas), each broker holds over every topic.
func (v clusterView) load() (replicas, leaders map[int32]int) {
	replicas, leaders = map[int32]int{}, map[int32]int{}
	for _, parts := range v.topics {
		for _, p := range parts {
			for i, id := range p.Replicas {
				replicas[id]++
				if i == 0 {
					leaders[id]++
				}
			}
		}
	}
	return replicas, leaders
}

// leastLoaded returns the broker of candidates with the fewest replicas
// by counts, in order (ties go to the lowest id), that partition replicas
// does not hold yet; -1 when every candidate holds it.
func leastLoaded(candidates, replicas []int32, counts ...map[int32]int) int32 {
	best := int32(-1)
	for _, id := range candidates {
		if slices.Contains(replicas, id) {
			continue
		}
		if best < 0 || less(id, best, counts) {
			best = id
		}
	}
	return best
}

// less reports whether broker a is less loaded than b by counts, the
// first count that differs deciding, then the lower id.
func less(a, b int32, counts []map[int32]int) bool {
	for _, c := range counts {
		if c[a] != c[b] {
			return c[a] < c[b]
		}
	}
	return a < b
}

// planSpread proposes, for every partition of current, as many replicas
// over brokers as it has now, spread evenly as Kafka's rack-unaware
// assignment spreads them (every broker within one replica, and one
// preferred leadership, of every other), keeping every current replica
// that can stay within that spread, in its place; new replicas go after
// the kept ones, each to the least loaded broker.
func planSpread(current []move, brokers []int32) ([]move, error) {
	if err := checkFits(current, len(brokers)); err != nil {
		return nil, err
	}
	total := 0
	for _, m := range current {
		total += len(m.replicas)
	}
	replicaCap := (total + len(brokers) - 1) / len(brokers)
	leaderCap := (len(current) + len(brokers) - 1) / len(brokers)
	replicas, leaders := map[int32]int{}, map[int32]int{}
	proposed := make([]move, len(current))
	for i, m := range current {
		var kept []int32
		for _, id := range m.replicas {
			if slices.Contains(brokers, id) && replicas[id] < replicaCap {
				kept = append(kept, id)
				replicas[id]++
			}
		}
		proposed[i] = move{m.topicPartition, kept}
	}
	for i, m := range current {
		for len(proposed[i].replicas) < len(m.replicas) {
			id := leastLoaded(brokers, proposed[i].replicas, replicas, leaders)
			proposed[i].replicas = append(proposed[i].replicas, id)
			replicas[id]++
		}
	}
	// Preferred leaders: a partition keeps its first replica unless that
	// broker already leads its share; then the replica with the fewest
	// leaderships goes first.
	for i := range proposed {
		r := proposed[i].replicas
		if leaders[r[0]] >= leaderCap {
			best := 0
			for j := range r {
				if leaders[r[j]] < leaders[r[best]] {
					best = j
				}
			}
			r[0], r[best] = r[best], r[0]
		}
		leaders[r[0]]++
	}
	return proposed, nil
}

// checkFits fails when a partition of current has more replicas than
// the n brokers of --broker-list.
func checkFits(current []move, n int) error {
	for _, m := range current {
		if len(m.replicas) > n {
			return fmt.Errorf("partition %s has %d replicas and --broker-list only %d brokers", m.topicPartition, len(m.replicas), n)
		}
	}
	return nil
}

// planDrain proposes moving every replica off broker id: each partition
// that has one gets, in its place, the live broker other than id that
// holds the fewest replicas over the cluster (then the fewest preferred
// leaderships), so the load spreads; where id was the preferred leader,
// the replica of the partition that leads the fewest partitions moves
// first, so the leaderships spread too. It
// fails when id is neither live nor holds a replica, or when a
// partition's replication factor is more than the other live brokers.
func planDrain(v clusterView, id int32) ([]move, error) {
	others := slices.DeleteFunc(slices.Clone(v.brokers), func(b int32) bool { return b == id })
	replicas, leaders := v.load()
	if !slices.Contains(v.brokers, id) && replicas[id] == 0 {
		return nil, fmt.Errorf("--drain %d: no such broker: none of the live brokers %s, and it holds no replica", id, joinIDs(v.brokers))
	}
	var moves []move
	for _, name := range sortedTopics(v) {
		for _, p := range v.topics[name] {
			at := slices.Index(p.Replicas, id)
			if at < 0 {
				continue
			}
			tp := topicPartition{name, p.Partition}
			if len(p.Replicas) > len(others) {
				return nil, fmt.Errorf("--drain %d: partition %s has replication factor %d and there are only %d other live brokers (%s)",
					id, tp, len(p.Replicas), len(others), joinIDs(others))
			}
			to := leastLoaded(others, p.Replicas, replicas, leaders)
			target := slices.Clone(p.Replicas)
			target[at] = to
			replicas[to]++
			replicas[id]--
			if at == 0 {
				// The preferred leadership goes to the replica that
				// leads the fewest partitions, which moves first.
				lead := 0
				for i, r := range target {
					if leaders[r] < leaders[target[lead]] {
						lead = i
					}
				}
				leader := target[lead]
				copy(target[1:lead+1], target[:lead])
				target[0] = leader
				leaders[target[0]]++
				leaders[id]--
			}
			moves = append(moves, move{tp, target})
		}
	}
	return moves, nil
}

// sortedTopics returns the names of v's topics, sorted.
func sortedTopics(v clusterView) []string {
	names := make([]string, 0, len(v.topics))
	for name := range v.topics {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// checkBrokers fails, naming the first, when moves name a broker that is
// not live.
func checkBrokers(v clusterView, moves []move) error {
	for _, m := range moves {
		for _, id := range m.replicas {
			if !slices.Contains(v.brokers, id) {
				return fmt.Errorf("partition %s: broker %d is not a live broker (live: %s)", m.topicPartition, id, joinIDs(v.brokers))
			}
		}
	}
	return nil
}

// ongoing returns the reassignments in progress of the partitions tps,
// all when tps is nil, by partition.
func ongoing(ctx context.Context, adm adminClient, tps []topicPartition) (map[topicPartition]kmsg.ListPartitionReassignmentsResponseTopicPartition, error) {
	req := kmsg.NewPtrListPartitionReassignmentsRequest()
	req.TimeoutMillis = 30000
	if tps != nil {
		req.Topics = []kmsg.ListPartitionReassignmentsRequestTopic{}
		for _, tp := range tps {
			if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != tp.topic {
				rt := kmsg.NewListPartitionReassignmentsRequestTopic()
				rt.Topic = tp.topic
				req.Topics = append(req.Topics, rt)
			}
			rt := &req.Topics[len(req.Topics)-1]
			rt.Partitions = append(rt.Partitions, tp.partition)
		}
	}
	resp, err := req.RequestWith(ctx, adm.cl)
	if err != nil {
		return nil, fmt.Errorf("list partition reassignments: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("list partition reassignments: %w%s", err, message(resp.ErrorMessage))
	}
	out := map[topicPartition]kmsg.ListPartitionReassignmentsResponseTopicPartition{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[topicPartition{t.Topic, p.Partition}] = p
		}
	}
	return out, nil
}

// message formats a broker's error message after its error code.
func message(msg *string) string {
	if msg == nil || *msg == "" {
		return ""
	}
	return ": " + *msg
}

// partitionsOf returns the partitions of moves, in order.
func partitionsOf(moves []move) []topicPartition {
	out := make([]topicPartition, len(moves))
	for i, m := range moves {
		out[i] = m.topicPartition
	}
	return out
}

// joinPartitions formats partitions as Kafka does: "t-0,t-1".
func joinPartitions(tps []topicPartition) string {
	s := make([]string, len(tps))
	for i, tp := range tps {
		s[i] = tp.String()
	}
	return strings.Join(s, ",")
}

// planTopics prints the current assignment of topics and a proposed one
// over brokers (kafka-reassign-partitions --generate): with rackAware,
// when the brokers have racks, placed as a new topic's replicas are
// (planRackAware); else spread keeping what can stay (planSpread).
func planTopics(ctx context.Context, w io.Writer, adm adminClient, topics []string, brokers []int32, rackAware bool) error {
	v, err := loadCluster(ctx, adm)
	if err != nil {
		return err
	}
	for _, id := range brokers {
		if !slices.Contains(v.brokers, id) {
			return fmt.Errorf("--broker-list: broker %d is not a live broker (live: %s)", id, joinIDs(v.brokers))
		}
	}
	var current []move
	for _, name := range topics {
		parts, ok := v.topics[name]
		if !ok {
			return fmt.Errorf("topic %s: %w", name, kerr.UnknownTopicOrPartition)
		}
		for _, p := range parts {
			current = append(current, move{topicPartition{name, p.Partition}, p.Replicas})
		}
	}
	racks, err := v.racksOf(brokers, rackAware)
	if err != nil {
		return err
	}
	var proposed []move
	if racks != nil {
		proposed, err = planRackAware(current, racks, rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())))
	} else {
		proposed, err = planSpread(current, brokers)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "Current partition replica assignment\n%s\n\nProposed partition reassignment configuration\n%s\n", formatMoves(current), formatMoves(proposed))
	return nil
}

// racksOf returns the racks (broker.rack) of brokers, by broker, when
// rackAware and every one of them has a rack; nil when !rackAware or none
// has one. When only some have one, it fails, as kafka-reassign-partitions
// does, rather than plan a placement that ignores the racks unasked.
func (v clusterView) racksOf(brokers []int32, rackAware bool) (map[int32]string, error) {
	if !rackAware {
		return nil, nil
	}
	racks := map[int32]string{}
	var without []int32
	for _, id := range brokers {
		if rack := v.racks[id]; rack != "" {
			racks[id] = rack
		} else {
			without = append(without, id)
		}
	}
	switch {
	case len(without) == len(brokers):
		return nil, nil
	case len(without) > 0:
		return nil, fmt.Errorf("--broker-list: not all brokers have rack information (broker.rack), none for %s; give --disable-rack-aware to plan without racks",
			joinIDs(without))
	}
	return racks, nil
}

// planRackAware proposes, for every partition of current, as many
// replicas as it has now over the brokers of racks, placed as the
// controller places a new topic's (controller.AssignReplicasRackAware,
// as Kafka's --generate places them with racks): a partition's replicas
// span as many racks as they can, and the preferred leaders go round
// the racks and brokers. Each topic is placed anew from a start and a
// shift drawn from rnd, as Kafka draws them at random for each topic;
// a partition takes its place in the assignment of its topic's
// partitions at its own replication factor.
func planRackAware(current []move, racks map[int32]string, rnd *rand.Rand) ([]move, error) {
	if err := checkFits(current, len(racks)); err != nil {
		return nil, err
	}
	brokers := make(map[coord.BrokerID]string, len(racks))
	for id, rack := range racks {
		brokers[coord.BrokerID(id)] = rack
	}
	// partitions counts each topic's partitions: its highest plus one.
	partitions := map[string]int{}
	for _, m := range current {
		partitions[m.topic] = max(partitions[m.topic], int(m.partition)+1)
	}
	type seed struct{ start, shift int }
	seeds := map[string]seed{}
	type placement struct {
		topic             string
		replicationFactor int
	}
	placed := map[placement][][]coord.BrokerID{}
	proposed := make([]move, len(current))
	for i, m := range current {
		s, ok := seeds[m.topic]
		if !ok {
			s = seed{rnd.Int(), rnd.Int()}
			seeds[m.topic] = s
		}
		at := placement{m.topic, len(m.replicas)}
		assignment, ok := placed[at]
		if !ok {
			var err error
			assignment, err = controller.AssignReplicasRackAware(brokers, partitions[m.topic], at.replicationFactor, 0, s.start, s.shift)
			if err != nil {
				return nil, fmt.Errorf("topic %s: %w", m.topic, err)
			}
			placed[at] = assignment
		}
		replicas := make([]int32, len(assignment[m.partition]))
		for j, id := range assignment[m.partition] {
			replicas[j] = int32(id)
		}
		proposed[i] = move{m.topicPartition, replicas}
	}
	return proposed, nil
}

// executeMoves starts the reassignment of moves, printing the current
// assignment first to roll back with (kafka-reassign-partitions
// --execute). Unless additional, it refuses to start while other
// reassignments are in progress. Every partition and broker is checked
// before anything is asked. With wait it waits for completion.
func executeMoves(ctx context.Context, w io.Writer, adm adminClient, moves []move, additional, wait bool, throttle int64) error {
	v, err := loadCluster(ctx, adm)
	if err != nil {
		return err
	}
	current, err := v.current(moves)
	if err != nil {
		return err
	}
	if err := checkBrokers(v, moves); err != nil {
		return err
	}
	if !additional {
		busy, err := ongoing(ctx, adm, nil)
		if err != nil {
			return err
		}
		if len(busy) > 0 {
			return fmt.Errorf("reassignments are in progress for %d partition%s (tripod reassign --list): give --additional to start this one as well", len(busy), pluralSuffix(len(busy)))
		}
	}
	return submit(ctx, w, adm, current, moves, wait, throttle)
}

// submit prints the current assignment, starts moves and, with wait,
// waits until they are completed.
func submit(ctx context.Context, w io.Writer, adm adminClient, current, moves []move, wait bool, throttle int64) error {
	fmt.Fprintf(w, "Current partition replica assignment\n\n%s\n\nSave this to use as the --reassignment-json-file option during rollback\n", formatMoves(current))
	if throttle > 0 {
		if err := throttleMoves(ctx, w, adm, current, moves, throttle); err != nil {
			return err
		}
	}
	var req kadm.AlterPartitionAssignmentsReq
	for _, m := range moves {
		req.Assign(m.topic, m.partition, m.replicas)
	}
	res, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		return fmt.Errorf("alter partition reassignments: %w", err)
	}
	var failed []string
	for _, r := range res.Sorted() {
		if r.Err != nil {
			failed = append(failed, fmt.Sprintf("%s-%d: %v%s", r.Topic, r.Partition, r.Err, message(&r.ErrMessage)))
		}
	}
	for _, m := range moves {
		if _, ok := res[m.topic][m.partition]; !ok {
			failed = append(failed, m.topicPartition.String()+": not in the answer")
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("reassignment of %d of %d partitions refused:\n%s", len(failed), len(moves), strings.Join(failed, "\n"))
	}
	fmt.Fprintf(w, "Successfully started partition reassignment%s for %s\n", pluralSuffix(len(moves)), joinPartitions(partitionsOf(moves)))
	if wait {
		return waitMoves(ctx, w, adm, moves)
	}
	return nil
}

// pluralSuffix is "s" unless n is 1.
func pluralSuffix(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// waitMoves waits until no partition of moves is being reassigned and
// the Metadata shows each with its target replicas, all in sync,
// printing how many are still being reassigned whenever that changes.
// An error while it waits (a controller failing over) is retried until
// the context ends.
func waitMoves(ctx context.Context, w io.Writer, adm adminClient, moves []move) error {
	last, lastErr := -1, error(nil)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		moving, settled, err := progress(ctx, adm, moves)
		switch {
		case err != nil:
			lastErr = err
		case moving == 0 && settled:
			fmt.Fprintf(w, "Reassignment of %d partition%s completed.\n", len(moves), pluralSuffix(len(moves)))
			return nil
		case moving != last && moving > 0:
			fmt.Fprintf(w, "Waiting: %d of %d partitions still moving.\n", moving, len(moves))
		}
		if err == nil {
			last = moving
		}
		select {
		case <-ctx.Done():
			if lastErr != nil {
				return fmt.Errorf("waiting for the reassignment to complete (--timeout): %w (last error: %w)", ctx.Err(), lastErr)
			}
			return fmt.Errorf("waiting for the reassignment to complete: %d of %d partitions still moving after --timeout: %w", last, len(moves), ctx.Err())
		case <-tick.C:
		}
	}
}

// progress returns how many partitions of moves are being reassigned
// and, when none is, whether the Metadata shows every one settled on its
// target replicas (a broker learns of a completion a moment after the
// controller).
func progress(ctx context.Context, adm adminClient, moves []move) (moving int, settled bool, err error) {
	busy, err := ongoing(ctx, adm, partitionsOf(moves))
	if err != nil || len(busy) > 0 {
		return len(busy), false, err
	}
	v, err := loadCluster(ctx, adm)
	if err != nil {
		return 0, false, err
	}
	return 0, len(unsettled(v, moves)) == 0, nil
}

// unsettled returns the partitions of moves whose Metadata does not show
// the target replicas, every one in sync.
func unsettled(v clusterView, moves []move) []topicPartition {
	var out []topicPartition
	for _, m := range moves {
		p, ok := v.partition(m.topicPartition)
		if !ok || !slices.Equal(p.Replicas, m.replicas) || !sameSet(p.ISR, m.replicas) {
			out = append(out, m.topicPartition)
		}
	}
	return out
}

// sameSet reports whether a and b hold the same ids, in any order.
func sameSet(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for _, id := range a {
		if !slices.Contains(b, id) {
			return false
		}
	}
	return true
}

// verifyMoves prints, per partition of moves, whether its reassignment
// is completed (kafka-reassign-partitions --verify), and fails while any
// is in progress or ended on other replicas.
func verifyMoves(ctx context.Context, w io.Writer, adm adminClient, moves []move) error {
	busy, err := ongoing(ctx, adm, partitionsOf(moves))
	if err != nil {
		return err
	}
	v, err := loadCluster(ctx, adm)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "Status of partition reassignment:")
	inProgress, differs := 0, 0
	for _, m := range moves {
		p, ok := v.partition(m.topicPartition)
		switch _, moving := busy[m.topicPartition]; {
		case moving:
			fmt.Fprintf(w, "Reassignment of partition %s is still in progress.\n", m.topicPartition)
			inProgress++
		case !ok:
			fmt.Fprintf(w, "Partition %s is not in the cluster.\n", m.topicPartition)
			differs++
		case slices.Equal(p.Replicas, m.replicas):
			fmt.Fprintf(w, "Reassignment of partition %s is completed.\n", m.topicPartition)
		default:
			fmt.Fprintf(w, "There is no active reassignment of partition %s, but replica set is %s rather than %s.\n",
				m.topicPartition, joinIDs(p.Replicas), joinIDs(m.replicas))
			differs++
		}
	}
	if inProgress > 0 || differs > 0 {
		return &exitCodeError{code: 1, err: fmt.Errorf("reassignment not completed: %d of %d partitions in progress, %d on other replicas than the file's", inProgress, len(moves), differs)}
	}
	return clearThrottles(ctx, w, adm, moves)
}

// cancelMoves cancels the reassignments in progress of the partitions of
// moves (kafka-reassign-partitions --cancel): their replicas go back to
// what they were before.
func cancelMoves(ctx context.Context, w io.Writer, adm adminClient, moves []move) error {
	busy, err := ongoing(ctx, adm, partitionsOf(moves))
	if err != nil {
		return err
	}
	var active []topicPartition
	var req kadm.AlterPartitionAssignmentsReq
	for _, tp := range partitionsOf(moves) {
		if _, ok := busy[tp]; ok {
			active = append(active, tp)
			req.CancelAssign(tp.topic, tp.partition)
		}
	}
	if len(active) == 0 {
		fmt.Fprintln(w, "None of the specified partition reassignments are active.")
		return nil
	}
	res, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		return fmt.Errorf("cancel partition reassignments: %w", err)
	}
	var failed []string
	for _, r := range res.Sorted() {
		// A reassignment that completed since it was listed has
		// nothing left to cancel.
		if r.Err != nil && !errors.Is(r.Err, kerr.NoReassignmentInProgress) {
			failed = append(failed, fmt.Sprintf("%s-%d: %v%s", r.Topic, r.Partition, r.Err, message(&r.ErrMessage)))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("cancel of %d of %d partition reassignments refused:\n%s", len(failed), len(active), strings.Join(failed, "\n"))
	}
	fmt.Fprintf(w, "Successfully cancelled partition reassignment%s for: %s\n", pluralSuffix(len(active)), joinPartitions(active))
	return nil
}

// listOngoing prints the reassignments in progress as
// kafka-reassign-partitions --list does.
func listOngoing(ctx context.Context, w io.Writer, adm adminClient) error {
	busy, err := ongoing(ctx, adm, nil)
	if err != nil {
		return err
	}
	if len(busy) == 0 {
		fmt.Fprintln(w, "No partition reassignments found.")
		return nil
	}
	tps := make([]topicPartition, 0, len(busy))
	for tp := range busy {
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, topicPartition.compare)
	fmt.Fprintln(w, "Current partition reassignments:")
	for _, tp := range tps {
		p := busy[tp]
		fmt.Fprintf(w, "%s: replicas: %s.", tp, joinIDs(p.Replicas))
		if len(p.AddingReplicas) > 0 {
			fmt.Fprintf(w, " adding: %s.", joinIDs(p.AddingReplicas))
		}
		if len(p.RemovingReplicas) > 0 {
			fmt.Fprintf(w, " removing: %s.", joinIDs(p.RemovingReplicas))
		}
		fmt.Fprintln(w)
	}
	return nil
}

// drainBroker plans moving every replica off broker id (planDrain),
// prints the plan and, unless dryRun, starts it, refusing while any of
// its partitions is being reassigned already.
func drainBroker(ctx context.Context, w io.Writer, adm adminClient, id int32, dryRun, wait bool, throttle int64) error {
	v, err := loadCluster(ctx, adm)
	if err != nil {
		return err
	}
	moves, err := planDrain(v, id)
	if err != nil {
		return err
	}
	if len(moves) == 0 {
		fmt.Fprintf(w, "Broker %d holds no replica: nothing to move.\n", id)
		return nil
	}
	fmt.Fprintf(w, "Proposed partition reassignment configuration to drain broker %d (%d partition%s)\n%s\n\n",
		id, len(moves), pluralSuffix(len(moves)), formatMoves(moves))
	if dryRun {
		return nil
	}
	busy, err := ongoing(ctx, adm, partitionsOf(moves))
	if err != nil {
		return err
	}
	if len(busy) > 0 {
		var tps []topicPartition
		for tp := range busy {
			tps = append(tps, tp)
		}
		slices.SortFunc(tps, topicPartition.compare)
		return fmt.Errorf("--drain %d: partitions %s are being reassigned already: wait for them (tripod reassign --list) or cancel them", id, joinPartitions(tps))
	}
	current, err := v.current(moves)
	if err != nil {
		return err
	}
	return submit(ctx, w, adm, current, moves, wait, throttle)
}
