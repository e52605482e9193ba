package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/tripodmq/tripod/conformance"
)

// conformanceFlags are the flags of `tripod conformance`.
type conformanceFlags struct {
	backend        string
	migrateFrom    string
	zkConnect      string
	etcdEndpoints  []string
	sessionTimeout time.Duration
	run            string
	verbose        bool
}

func newConformanceCmd() *cobra.Command {
	var f conformanceFlags
	cmd := &cobra.Command{
		Use:   "conformance --coord zk|etcd|raft [--migrate-from zk|etcd|raft]",
		Short: "Run the coordination conformance suite against a ZooKeeper, an etcd or embedded Raft",
		Long: `Run the conformance suite that every tripod coordination backend passes
against your own service: --coord zk with --zk-connect, --coord etcd with
--etcd-endpoints, or --coord raft (which starts its own 3-node clusters).
Beside the backend's own cases (sessions, election, metadata, watches,
producer ids, availability) it runs the controller's: tripod's controller
standing on your service (leaders spread, a broker or the controller
crashing, controlled shutdown, the preferred-leader rebalance, ...).
With zk and etcd every case works in a fresh namespace (a ZooKeeper chroot
or an etcd prefix under /tripod-conformance) and your service is never
stopped, so the cases that need to stop it report n/a. With raft the cases
that stop Raft nodes run too.

With --migrate-from zk|etcd|raft (another backend than --coord) the
controller's cases run on clusters that started on that backend and were
migrated to --coord, as tripod migrate moves a cluster: the brokers
register there and a topic is written, the source is frozen, copied into
the target and switched, and the cases then run on the target through
the brokers' migrated backends (rows named <from>-to-<to>/Controller/...).
The backend's own cases still run on plain --coord clusters. Give the
flags of both backends: --zk-connect for zk, --etcd-endpoints for etcd.

--run selects cases by a regular expression matched against their names
as the table prints them.

It prints a table of cases, results and durations and exits 1 if any case
failed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, from, err := f.harnesses()
			if err != nil {
				return err
			}
			opts := conformance.RunOptions{MigrateFrom: from}
			if f.run != "" {
				re, err := regexp.Compile(f.run)
				if err != nil {
					return fmt.Errorf("--run %q: %w", f.run, err)
				}
				opts.Match = re.MatchString
			}
			if err := f.reachable(cmd.Context()); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			return runConformance(ctx, h, opts, cmd.OutOrStdout(), cmd.ErrOrStderr(), f.verbose)
		},
	}
	cmd.Flags().StringVar(&f.backend, "coord", "raft", "coordination backend to test: zk, etcd or raft")
	cmd.Flags().StringVar(&f.migrateFrom, "migrate-from", "", "run the controller's cases on clusters migrated to --coord from this backend: zk, etcd or raft")
	cmd.Flags().StringVar(&f.zkConnect, "zk-connect", "", "ZooKeeper connect string host:port[,host:port][/chroot] (with zk as --coord or --migrate-from)")
	cmd.Flags().StringSliceVar(&f.etcdEndpoints, "etcd-endpoints", nil, "etcd client URLs, comma separated, e.g. http://127.0.0.1:2379 (with etcd as --coord or --migrate-from)")
	cmd.Flags().DurationVar(&f.sessionTimeout, "session-timeout", 2*time.Second, "session timeout the backends are opened with (1s..5m); the cases' detection bounds follow it")
	cmd.Flags().StringVar(&f.run, "run", "", "run only the cases whose names match this regular expression")
	cmd.Flags().BoolVarP(&f.verbose, "verbose", "v", false, "print every case's log, not only the failures'")
	return cmd
}

// conformanceBackends are the backends `tripod conformance` tests.
var conformanceBackends = []string{"zk", "etcd", "raft"}

// harnesses validates the flags and returns the harness of --coord and,
// with --migrate-from, that of the backend the controller's cases
// migrate from (nil without).
func (f *conformanceFlags) harnesses() (conformance.Harness, conformance.Harness, error) {
	if f.sessionTimeout < time.Second || f.sessionTimeout > 5*time.Minute {
		return nil, nil, fmt.Errorf("--session-timeout %v: must be between 1s and 5m", f.sessionTimeout)
	}
	if !slices.Contains(conformanceBackends, f.backend) {
		return nil, nil, fmt.Errorf("--coord %q: must be one of %s", f.backend, strings.Join(conformanceBackends, ", "))
	}
	h, err := f.harness(f.backend, "--coord")
	if err != nil {
		return nil, nil, err
	}
	if f.migrateFrom == "" {
		return h, nil, nil
	}
	if !slices.Contains(conformanceBackends, f.migrateFrom) || f.migrateFrom == f.backend {
		return nil, nil, fmt.Errorf("--migrate-from %q: must be one of %s other than --coord %s", f.migrateFrom, strings.Join(conformanceBackends, ", "), f.backend)
	}
	from, err := f.harness(f.migrateFrom, "--migrate-from")
	if err != nil {
		return nil, nil, err
	}
	return h, from, nil
}

// harness returns the harness of backend, which flag names, checking
// the flags that reach it.
func (f *conformanceFlags) harness(backend, flag string) (conformance.Harness, error) {
	switch backend {
	case "zk":
		if f.zkConnect == "" {
			return nil, fmt.Errorf("--zk-connect: required with %s zk (host:port[,host:port][/chroot])", flag)
		}
		return conformance.NewZKHarness(f.zkConnect, nil, f.sessionTimeout), nil
	case "etcd":
		if len(f.etcdEndpoints) == 0 {
			return nil, fmt.Errorf("--etcd-endpoints: required with %s etcd (http://host:port[,...])", flag)
		}
		return conformance.NewEtcdHarness(f.etcdEndpoints, nil, f.sessionTimeout), nil
	}
	return conformance.NewRaftHarness(f.sessionTimeout), nil
}

// preflightTimeout bounds the dial of each server before the suite runs.
const preflightTimeout = 3 * time.Second

// reachable fails fast, naming the flag, when no server of a ZooKeeper
// or etcd the run uses (as --coord or --migrate-from) accepts a TCP
// connection: every case would otherwise fail slowly, one startup
// deadline after another.
func (f *conformanceFlags) reachable(ctx context.Context) error {
	for _, backend := range []string{f.backend, f.migrateFrom} {
		if err := f.reachableBackend(ctx, backend); err != nil {
			return err
		}
	}
	return nil
}

// reachableBackend is reachable for one backend.
func (f *conformanceFlags) reachableBackend(ctx context.Context, backend string) error {
	var flag string
	var addrs []string
	switch backend {
	case "zk":
		flag = "--zk-connect " + f.zkConnect
		hosts, _, _ := strings.Cut(f.zkConnect, "/")
		addrs = strings.Split(hosts, ",")
	case "etcd":
		flag = "--etcd-endpoints " + strings.Join(f.etcdEndpoints, ",")
		for _, endpoint := range f.etcdEndpoints {
			u, err := url.Parse(endpoint)
			if err != nil || u.Host == "" {
				return fmt.Errorf("--etcd-endpoints: endpoint %q: want a URL such as http://127.0.0.1:2379", endpoint)
			}
			addrs = append(addrs, u.Host)
		}
	default:
		return nil
	}
	var errs []error
	for _, addr := range addrs {
		dctx, cancel := context.WithTimeout(ctx, preflightTimeout)
		var d net.Dialer
		conn, err := d.DialContext(dctx, "tcp", strings.TrimSpace(addr))
		cancel()
		if err == nil {
			conn.Close()
			return nil
		}
		errs = append(errs, err)
	}
	return fmt.Errorf("%s: no server reachable: %w", flag, errors.Join(errs...))
}

// runConformance runs the suite against h with opts, printing progress
// to progress and the table and summary to out. It returns an error if
// any case failed.
func runConformance(ctx context.Context, h conformance.Harness, opts conformance.RunOptions, out, progress io.Writer, verbose bool) error {
	what := h.Name()
	fmt.Fprintf(progress, "running the conformance suite against %s (session timeout %v)\n", what, h.SessionTimeout())
	if opts.MigrateFrom != nil {
		what += ", the controller's cases after a migration from " + opts.MigrateFrom.Name()
		fmt.Fprintf(progress, "the controller's cases run on clusters that started on %s and were migrated to %s\n", opts.MigrateFrom.Name(), h.Name())
	}
	results := conformance.RunAllWith(ctx, h, opts, progress)
	counts := writeResults(out, results, verbose)
	if len(results) == 0 {
		return fmt.Errorf("conformance of %s: no case matches --run", what)
	}
	if counts[conformance.OutcomeFail] > 0 {
		return fmt.Errorf("conformance of %s: %d of %d cases failed", what, counts[conformance.OutcomeFail], len(results))
	}
	return nil
}

// writeResults prints the table of results and the summary line, and
// returns how many cases had each outcome.
func writeResults(out io.Writer, results []conformance.Result, verbose bool) map[string]int {
	counts := map[string]int{}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CASE\tRESULT\tDURATION")
	for _, r := range results {
		counts[r.Outcome]++
		fmt.Fprintf(tw, "%s\t%s\t%v\n", r.Case, r.Outcome, r.Duration.Round(10*time.Millisecond))
	}
	tw.Flush()
	for _, r := range results {
		if r.Message == "" || (!verbose && r.Outcome != conformance.OutcomeFail) {
			continue
		}
		fmt.Fprintf(out, "\n%s (%s):\n", r.Case, r.Outcome)
		for _, line := range strings.Split(strings.TrimRight(r.Message, "\n"), "\n") {
			fmt.Fprintf(out, "    %s\n", line)
		}
	}
	fmt.Fprintf(out, "\n%d passed, %d failed, %d n/a\n", counts[conformance.OutcomePass], counts[conformance.OutcomeFail], counts[conformance.OutcomeNotApplicable])
	return counts
}
