package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker"
	"github.com/tripodmq/tripod/coord"
)

// Keys a broker answers DescribeConfigs for, by name: where it and the
// cluster's migration stand (broker/migration.go).
const (
	migrationBackendKey = "coordination.migration.backend"
	migrationIDKey      = "coordination.migration.id"
	migrationPhaseKey   = "coordination.migration.phase"
	migrationStepKey    = "coordination.migration.step"
	migrationFromKey    = "coordination.migration.from"
	migrationToKey      = "coordination.migration.to"
)

// newMigrateCmd builds `tripod migrate`.
func newMigrateCmd() *cobra.Command {
	opts := &topicsOptions{}
	var (
		to       string
		sets     []string
		rollback bool
		finalize bool
		status   bool
		poll     time.Duration
	)
	cmd := &cobra.Command{
		Use:   "migrate --to zk|etcd|raft --set KEY=VALUE... | --finalize | --rollback | --status",
		Short: "Move a running cluster to another coordination backend",
		Long: `Move a running cluster's metadata and control to another coordination
backend (ZooKeeper, etcd or embedded Raft) while its brokers keep serving
produce and fetch. --to names the target and --set its coordination
properties (zookeeper.connect, etcd.endpoints, raft.voters, ...), which
every broker opens it with, over its own.

The controller freezes its backend (metadata writes get REQUEST_TIMED_OUT
meanwhile, which clients retry), copies it into the target and switches
the brokers, which register there and elect a controller. The command
shows each step and the brokers as they switch, and at the end compares
the cluster as it answered before the switch (topics, partitions, leaders,
ISRs, ACLs, SCRAM users, dynamic broker configs, client quotas) with the
same on the target.

--finalize, once every broker that was live on the source is registered
on the target, retires the source: its record says so, and every broker
remembers it in its data dir, so that a broker started later with the
source's properties refuses to start and names the target. It is the
point of no return. --rollback undoes a migration until then: before
the switch the source takes writes again; after it the controller copies
the target back into the source (what changed on the target since the
switch included) and the brokers return there, which the command follows
and compares as it does a migration.
--status prints where each broker and the migration stand.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			modes := 0
			for _, on := range []bool{to != "", rollback, finalize, status} {
				if on {
					modes++
				}
			}
			if modes != 1 {
				return errors.New("give one of --to, --finalize, --rollback and --status")
			}
			if to == "" && len(sets) > 0 {
				return errors.New("--set: only with --to")
			}
			adm, ctx, cancel, err := opts.admin(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			defer adm.Close()
			out := cmd.OutOrStdout()
			switch {
			case status:
				_, err := printMigrationStatus(ctx, adm, out)
				return err
			case rollback:
				return runRollback(ctx, adm, out, poll)
			case finalize:
				if err := migrationAction(ctx, adm, map[string]string{broker.MigrationActionKey: "finalize"}); err != nil {
					return err
				}
				fmt.Fprintln(out, "migration finalized: the source is retired; a broker started with its properties refuses to start")
				return nil
			}
			target := map[string]string{"coordination.backend": to}
			for _, s := range sets {
				k, v, ok := strings.Cut(s, "=")
				if !ok || !broker.IsCoordinationKey(k) {
					return fmt.Errorf("--set %q: want KEY=VALUE of a coordination property (coordination.*, zookeeper.*, etcd.*, raft.*)", s)
				}
				target[k] = v
			}
			return runMigration(ctx, adm, out, target, poll)
		},
	}
	f := cmd.Flags()
	f.StringVar(&to, "to", "", "the target backend: zk, etcd or raft")
	f.StringArrayVar(&sets, "set", nil, "KEY=VALUE coordination property of the target (repeatable)")
	f.BoolVar(&rollback, "rollback", false, "undo the migration, until it is finalized: back to the source with what changed on the target")
	f.BoolVar(&finalize, "finalize", false, "retire the source once every broker is on the target (no way back after it)")
	f.BoolVar(&status, "status", false, "print where each broker and the migration stand")
	f.DurationVar(&poll, "poll", 200*time.Millisecond, "how often to ask the brokers while migrating")
	f.StringVar(&opts.bootstrap, "bootstrap", "127.0.0.1:9092", "HOST:PORT[,HOST:PORT] of brokers to ask (bootstrap servers)")
	f.DurationVar(&opts.timeout, "timeout", 5*time.Minute, "how long the migration may take")
	opts.security.addFlags(cmd)
	return cmd
}

// migrationAction sends a migration action to the controller, again
// while it fails in a way worth retrying (no controller, the controller
// moved or did not answer) until ctx ends.
func migrationAction(ctx context.Context, adm adminClient, keys map[string]string) error {
	for {
		err := migrationActionOnce(ctx, adm, keys)
		var ke *kerr.Error
		if err == nil || (errors.As(err, &ke) && !ke.Retriable) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (gave up: %w)", err, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// migrationActionOnce sends a migration action to the controller once.
func migrationActionOnce(ctx context.Context, adm adminClient, keys map[string]string) error {
	meta, err := brokersNow(ctx, adm)
	if err != nil {
		return fmt.Errorf("find the controller: %w", err)
	}
	if meta.ControllerID < 0 {
		return fmt.Errorf("%w: the cluster has no controller now", kerr.NotController)
	}
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeBroker, strconv.Itoa(int(meta.ControllerID))
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = k, kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(keys[k])
		res.Configs = append(res.Configs, c)
	}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, adm.cl.Broker(int(meta.ControllerID)))
	if err != nil {
		return fmt.Errorf("ask the controller (broker %d): %w", meta.ControllerID, err)
	}
	if len(resp.Resources) != 1 {
		return fmt.Errorf("the controller answered %d resources, want 1", len(resp.Resources))
	}
	if r := resp.Resources[0]; r.ErrorCode != 0 {
		if r.ErrorMessage != nil {
			return fmt.Errorf("%w: %s", kerr.ErrorForCode(r.ErrorCode), *r.ErrorMessage)
		}
		return kerr.ErrorForCode(r.ErrorCode)
	}
	return nil
}

// brokerMigration is where one broker stands.
type brokerMigration struct {
	id                      int32
	backend, mid, phase, st string
	// from and to are the backends of the migration of the record.
	from, to string
}

// migrationStatus asks every broker where it stands.
func migrationStatus(ctx context.Context, adm adminClient) ([]brokerMigration, error) {
	meta, err := brokersNow(ctx, adm)
	if err != nil {
		return nil, err
	}
	var out []brokerMigration
	for _, b := range meta.Brokers {
		req := kmsg.NewPtrDescribeConfigsRequest()
		res := kmsg.NewDescribeConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeBroker, strconv.Itoa(int(b.NodeID))
		res.ConfigNames = []string{migrationBackendKey, migrationIDKey, migrationPhaseKey, migrationStepKey, migrationFromKey, migrationToKey}
		req.Resources = append(req.Resources, res)
		bm := brokerMigration{id: b.NodeID, backend: "?"}
		resp, err := req.RequestWith(ctx, adm.cl.Broker(int(b.NodeID)))
		if err == nil && len(resp.Resources) == 1 {
			for _, c := range resp.Resources[0].Configs {
				v := ""
				if c.Value != nil {
					v = *c.Value
				}
				switch c.Name {
				case migrationBackendKey:
					bm.backend = v
				case migrationIDKey:
					bm.mid = v
				case migrationPhaseKey:
					bm.phase = v
				case migrationStepKey:
					bm.st = v
				case migrationFromKey:
					bm.from = v
				case migrationToKey:
					bm.to = v
				}
			}
		}
		out = append(out, bm)
	}
	slices.SortFunc(out, func(a, b brokerMigration) int { return int(a.id - b.id) })
	return out, nil
}

// brokersNow asks a broker for the live brokers and the controller. The
// client's cached metadata will not do: a migration fences and brings
// back brokers and moves the controller within seconds, and a broker
// fenced once stays missing from the cache until it expires.
func brokersNow(ctx context.Context, adm adminClient) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{}
	return req.RequestWith(ctx, adm.cl)
}

// printMigrationStatus prints a row per broker.
func printMigrationStatus(ctx context.Context, adm adminClient, out io.Writer) ([]brokerMigration, error) {
	st, err := migrationStatus(ctx, adm)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "%-8s %-8s %-40s %-12s %s\n", "BROKER", "BACKEND", "MIGRATION", "PHASE", "STEP")
	for _, b := range st {
		fmt.Fprintf(out, "%-8d %-8s %-40s %-12s %s\n", b.id, b.backend, dash(b.mid), dash(b.phase), dash(b.st))
	}
	return st, nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// runRollback rolls back the cluster's migration: before the switch the
// source takes writes again; after it (the brokers on the target, not
// finalized) the target is copied back into the source and the brokers
// return there, which it follows as a migration.
func runRollback(ctx context.Context, adm adminClient, out io.Writer, poll time.Duration) error {
	brokers, err := migrationStatus(ctx, adm)
	if err != nil {
		return fmt.Errorf("ask the brokers: %w", err)
	}
	action := map[string]string{broker.MigrationActionKey: "rollback"}
	for _, b := range brokers {
		if b.phase == string(coord.MigrationImported) && b.to != "" && strings.HasPrefix(b.backend, b.to) {
			// Switched: back to the source, as a migration.
			return followMigration(ctx, adm, out, b.from, brokers, poll, func() error {
				if err := migrationAction(ctx, adm, action); err != nil {
					return fmt.Errorf("roll back the migration: %w", err)
				}
				fmt.Fprintf(out, "rollback to %s started: %s is copied, then frozen for what changed meanwhile (metadata writes wait then)\n", b.from, b.to)
				return nil
			})
		}
	}
	if err := migrationAction(ctx, adm, action); err != nil {
		return err
	}
	fmt.Fprintln(out, "migration rolled back: the source takes writes again")
	return nil
}

// runMigration starts a migration to target and follows it until every
// broker uses the target, then compares the cluster before and after.
func runMigration(ctx context.Context, adm adminClient, out io.Writer, target map[string]string, poll time.Duration) error {
	to := target["coordination.backend"]
	brokers, err := migrationStatus(ctx, adm)
	if err != nil {
		return fmt.Errorf("ask the brokers: %w", err)
	}
	from := "from"
	if len(brokers) > 0 {
		from = brokers[0].backend
	}
	return followMigration(ctx, adm, out, to, brokers, poll, func() error {
		if err := migrationAction(ctx, adm, actionKeys(from, target)); err != nil {
			return fmt.Errorf("start the migration: %w", err)
		}
		fmt.Fprintf(out, "migration to %s started: the source is copied, then frozen for what changed meanwhile (metadata writes wait then)\n", to)
		return nil
	})
}

// followMigration starts a migration to backend to with start, follows
// it until every one of brokers uses to, and compares the cluster as it
// answered once the source was frozen with the same on to.
func followMigration(ctx context.Context, adm adminClient, out io.Writer, to string, brokers []brokerMigration, poll time.Duration, start func() error) error {
	if err := start(); err != nil {
		return err
	}
	began := time.Now()
	// The source takes writes while it is pre-copied, and is frozen for
	// what changed since: from then on what the cluster answers stays as
	// it is until the switch (the target's controller changes leaders
	// and ISRs, which are not compared). It is read once the source is
	// seen frozen or a broker switched, beside the progress, which a
	// broker that does not answer would hold up.
	var before migratedView
	var berr error
	var described chan struct{}
	describe := func() {
		if described != nil {
			return
		}
		described = make(chan struct{})
		go func() {
			defer close(described)
			// A broker restarting or cut off meanwhile fails a request:
			// asked again, as the view after the switch is.
			for {
				before, berr = describeMigrated(ctx, adm)
				if berr == nil || ctx.Err() != nil {
					return
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(poll):
				}
			}
		}()
	}
	last := ""
	for {
		st, err := migrationStatus(ctx, adm)
		if err == nil {
			switched, step, phase := 0, "", ""
			for _, b := range st {
				if b.backend == to {
					switched++
				}
				if b.st != "" {
					step = b.st
				}
				if b.phase != "" && !strings.HasPrefix(b.backend, to) {
					// A broker still on the source reads its record.
					phase = b.phase
				}
			}
			line := fmt.Sprintf("%s %d/%d brokers on %s; source %s; controller: %s", bar(switched, len(brokers)), switched, len(brokers), to, dash(phase), dash(step))
			if line != last {
				fmt.Fprintf(out, "%6.1fs %s\n", time.Since(began).Seconds(), line)
				last = line
			}
			if switched > 0 || phase == string(coord.MigrationFrozen) || phase == string(coord.MigrationSwitched) {
				describe()
			}
			if switched >= len(brokers) {
				break
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the migration did not finish within --timeout: %w (tripod migrate --status shows where it stands)", ctx.Err())
		case <-time.After(poll):
		}
	}
	fmt.Fprintf(out, "every broker is on %s after %.1fs\n", to, time.Since(began).Seconds())
	describe()
	<-described
	if berr != nil {
		return fmt.Errorf("describe the cluster before the switch: %w", berr)
	}
	var after migratedView
	var aerr error
	for {
		after, aerr = describeMigrated(ctx, adm)
		if aerr == nil && len(after.diff(before)) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			if aerr != nil {
				return fmt.Errorf("describe the cluster after the switch: %w", aerr)
			}
			for _, d := range after.diff(before) {
				fmt.Fprintln(out, "differs:", d)
			}
			return errors.New("the cluster on the target differs from the source")
		case <-time.After(poll):
		}
	}
	fmt.Fprintf(out, "compared: %s\n", after.summary())
	return nil
}

// actionKeys returns the keys that start a migration from the backend
// from to target, named so that the controller takes a start asked again
// as the same one.
func actionKeys(from string, target map[string]string) map[string]string {
	keys := map[string]string{broker.MigrationActionKey: "start",
		broker.MigrationIDKey: fmt.Sprintf("%s-to-%s-%d", strings.Fields(from)[0], target["coordination.backend"], time.Now().UnixMilli())}
	for k, v := range target {
		keys[broker.MigrationTargetPrefix+k] = v
	}
	return keys
}

// bar draws done of total as a bar of 20.
func bar(done, total int) string {
	n := 0
	if total > 0 {
		n = 20 * done / total
	}
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", 20-n) + "]"
}

// migratedView is what the cluster answers of the metadata a migration
// moves, as lines to compare.
type migratedView struct {
	partitions map[string]string
	acls       []string
	users      []string
	configs    map[string]string
	quotas     []string
}

// describeCluster reads the cluster's view through the Kafka protocol.
func describeMigrated(ctx context.Context, adm adminClient) (migratedView, error) {
	v := migratedView{partitions: map[string]string{}, configs: map[string]string{}}
	topics, err := adm.ListTopicsWithInternal(ctx)
	if err != nil {
		return v, fmt.Errorf("topics: %w", err)
	}
	for _, t := range topics {
		if t.Err != nil {
			return v, fmt.Errorf("topic %s: %w", t.Topic, t.Err)
		}
		for _, p := range t.Partitions {
			// Leaders and ISRs go on changing once the target's
			// controller runs; the assignment is what was copied.
			v.partitions[fmt.Sprintf("%s-%d", t.Topic, p.Partition)] = fmt.Sprintf("replicas %v", p.Replicas)
		}
	}
	acls, err := adm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().Deny().AllowHosts().DenyHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
	if err == nil {
		for _, r := range acls {
			for _, d := range r.Described {
				v.acls = append(v.acls, fmt.Sprintf("%v:%v:%s %s %v %v from %s", d.Type, d.Pattern, d.Name, d.Principal, d.Permission, d.Operation, d.Host))
			}
		}
	} else if !errors.Is(err, kerr.SecurityDisabled) {
		return v, fmt.Errorf("ACLs: %w", err)
	}
	slices.Sort(v.acls)
	users, err := adm.DescribeUserSCRAMs(ctx)
	if err == nil {
		for u, d := range users {
			for _, c := range d.CredInfos {
				v.users = append(v.users, fmt.Sprintf("%s %v %d", u, c.Mechanism, c.Iterations))
			}
		}
	}
	slices.Sort(v.users)
	rcs, err := adm.DescribeBrokerConfigs(ctx)
	if err != nil {
		return v, fmt.Errorf("broker configs: %w", err)
	}
	for _, rc := range rcs {
		for _, c := range rc.Configs {
			if c.Source == kmsg.ConfigSourceDynamicDefaultBrokerConfig {
				v.configs[c.Key] = c.MaybeValue()
			}
		}
	}
	quotas, err := adm.DescribeClientQuotas(ctx, false, nil)
	if err != nil {
		return v, fmt.Errorf("client quotas: %w", err)
	}
	for _, q := range quotas {
		for _, val := range q.Values {
			v.quotas = append(v.quotas, fmt.Sprintf("%v %s=%v", q.Entity, val.Key, val.Value))
		}
	}
	slices.Sort(v.quotas)
	return v, nil
}

// diff returns what differs between v and o.
func (v migratedView) diff(o migratedView) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(o.partitions)) {
		if v.partitions[k] != o.partitions[k] {
			out = append(out, fmt.Sprintf("partition %s: %q, was %q", k, v.partitions[k], o.partitions[k]))
		}
	}
	for k := range v.partitions {
		if _, ok := o.partitions[k]; !ok {
			out = append(out, "partition "+k+": new")
		}
	}
	same := func(what string, a, b []string) {
		if !slices.Equal(a, b) {
			out = append(out, fmt.Sprintf("%s: %v, was %v", what, a, b))
		}
	}
	same("ACLs", v.acls, o.acls)
	same("SCRAM users", v.users, o.users)
	same("client quotas", v.quotas, o.quotas)
	if !maps.Equal(v.configs, o.configs) {
		out = append(out, fmt.Sprintf("dynamic broker configs: %v, was %v", v.configs, o.configs))
	}
	return out
}

// summary counts what v holds.
func (v migratedView) summary() string {
	return fmt.Sprintf("%d partitions and their replicas, %d ACLs, %d SCRAM credentials, %d dynamic broker configs, %d client quotas: the same on both sides",
		len(v.partitions), len(v.acls), len(v.users), len(v.configs), len(v.quotas))
}
