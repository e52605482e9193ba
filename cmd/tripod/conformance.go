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
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/tripodmq/tripod/conformance"
)

// conformanceFlags are the flags of `tripod conformance`.
type conformanceFlags struct {
	backend        string
	zkConnect      string
	etcdEndpoints  []string
	sessionTimeout time.Duration
	verbose        bool
}

func newConformanceCmd() *cobra.Command {
	var f conformanceFlags
	cmd := &cobra.Command{
		Use:   "conformance --coord zk|etcd|raft",
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

It prints a table of cases, results and durations and exits 1 if any case
failed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := f.harness()
			if err != nil {
				return err
			}
			if err := f.reachable(cmd.Context()); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			return runConformance(ctx, h, cmd.OutOrStdout(), cmd.ErrOrStderr(), f.verbose)
		},
	}
	cmd.Flags().StringVar(&f.backend, "coord", "raft", "coordination backend to test: zk, etcd or raft")
	cmd.Flags().StringVar(&f.zkConnect, "zk-connect", "", "ZooKeeper connect string host:port[,host:port][/chroot] (with --coord zk)")
	cmd.Flags().StringSliceVar(&f.etcdEndpoints, "etcd-endpoints", nil, "etcd client URLs, comma separated, e.g. http://127.0.0.1:2379 (with --coord etcd)")
	cmd.Flags().DurationVar(&f.sessionTimeout, "session-timeout", 2*time.Second, "session timeout the backends are opened with (1s..5m); the cases' detection bounds follow it")
	cmd.Flags().BoolVarP(&f.verbose, "verbose", "v", false, "print every case's log, not only the failures'")
	return cmd
}

// harness validates the flags and returns the harness they name.
func (f *conformanceFlags) harness() (conformance.Harness, error) {
	if f.sessionTimeout < time.Second || f.sessionTimeout > 5*time.Minute {
		return nil, fmt.Errorf("--session-timeout %v: must be between 1s and 5m", f.sessionTimeout)
	}
	switch f.backend {
	case "zk":
		if f.zkConnect == "" {
			return nil, fmt.Errorf("--zk-connect: required with --coord zk (host:port[,host:port][/chroot])")
		}
		return conformance.NewZKHarness(f.zkConnect, nil, f.sessionTimeout), nil
	case "etcd":
		if len(f.etcdEndpoints) == 0 {
			return nil, fmt.Errorf("--etcd-endpoints: required with --coord etcd (http://host:port[,...])")
		}
		return conformance.NewEtcdHarness(f.etcdEndpoints, nil, f.sessionTimeout), nil
	case "raft":
		return conformance.NewRaftHarness(f.sessionTimeout), nil
	}
	return nil, fmt.Errorf("--coord %q: must be one of zk, etcd, raft", f.backend)
}

// preflightTimeout bounds the dial of each server before the suite runs.
const preflightTimeout = 3 * time.Second

// reachable fails fast, naming the flag, when no server of the given
// ZooKeeper or etcd accepts a TCP connection: every case would otherwise
// fail slowly, one startup deadline after another.
func (f *conformanceFlags) reachable(ctx context.Context) error {
	var flag string
	var addrs []string
	switch f.backend {
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

// runConformance runs the suite against h, printing progress to progress
// and the table and summary to out. It returns an error if any case
// failed.
func runConformance(ctx context.Context, h conformance.Harness, out, progress io.Writer, verbose bool) error {
	fmt.Fprintf(progress, "running the conformance suite against %s (session timeout %v)\n", h.Name(), h.SessionTimeout())
	results := conformance.RunAll(ctx, h, progress)
	counts := writeResults(out, results, verbose)
	if counts[conformance.OutcomeFail] > 0 {
		return fmt.Errorf("conformance of %s: %d of %d cases failed", h.Name(), counts[conformance.OutcomeFail], len(results))
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
