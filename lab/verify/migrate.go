package verify

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tripodmq/tripod/internal/cluster"
	"github.com/tripodmq/tripod/lab"
)

// The outcomes of a run's migration, in the report.
const (
	migrationNotStarted = "not started"
	migrationDone       = "done"
	migrationFailed     = "failed"
	migrationTimedOut   = "timed out"
)

// migrationReport is the run's migration (--migrate-to) in the report.
type migrationReport struct {
	// From and To are the backends it moved the cluster between.
	From string `json:"from"`
	To   string `json:"to"`
	// Target are the target's coordination properties, as given to
	// tripod migrate --set.
	Target map[string]string `json:"target,omitempty"`
	// StartS and EndS are its start and end, in seconds since the run
	// started; EndS is nil when it never ended.
	StartS    float64  `json:"start_s"`
	EndS      *float64 `json:"end_s"`
	DurationS float64  `json:"duration_s"`
	// Outcome is done, failed, timed out or not started.
	Outcome string `json:"outcome"`
	Error   string `json:"error,omitempty"`
	// Output is what tripod migrate printed.
	Output []string `json:"output,omitempty"`
}

// migrationRun is the run's migration: it runs `tripod migrate` on its own
// goroutine (run), which runFaults starts and awaits; the fault runner
// asks it meanwhile which backend the cluster is on (backend).
type migrationRun struct {
	binary string
	// brokers are the cluster's brokers: tripod migrate's bootstrap, and
	// the Raft target's voters.
	brokers []*cluster.Broker
	start   time.Time
	out     io.Writer

	mu     sync.Mutex
	done   bool
	report migrationReport
}

// newMigrationRun returns the migration of c from opts.Coord to
// opts.MigrateTo. A ZooKeeper or etcd target gets a fresh chroot or
// prefix, name, on the server the user named or one servers starts now;
// a Raft target's voters get their ports when the migration starts.
func newMigrationRun(opts *Config, servers *lab.CoordServers, name, binary string, c *cluster.Cluster, start time.Time, out io.Writer) (*migrationRun, error) {
	m := &migrationRun{binary: binary, brokers: c.Brokers(), start: start, out: out,
		report: migrationReport{From: opts.Coord, To: opts.MigrateTo, Outcome: migrationNotStarted}}
	if opts.MigrateTo == "raft" {
		// The voters' ports are taken when the migration starts.
		return m, nil
	}
	target, err := servers.MigrationTarget(opts.MigrateTo, opts.ZKConnect, opts.EtcdEndpoints, name, m.brokers)
	if err != nil {
		return nil, fmt.Errorf("the target of --migrate-to %s: %w", opts.MigrateTo, err)
	}
	m.report.Target = target
	return m, nil
}

// backend returns the backend the cluster is on: the source until the
// migration is done, the target after.
func (m *migrationRun) backend() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done {
		return m.report.To
	}
	return m.report.From
}

// result returns a copy of the migration's report.
func (m *migrationRun) result() *migrationReport {
	m.mu.Lock()
	defer m.mu.Unlock()
	rep := m.report
	rep.Output = slices.Clone(rep.Output)
	return &rep
}

// since returns the seconds since the run started.
func (m *migrationRun) since() float64 { return time.Since(m.start).Seconds() }

// log prints one line of the run's log.
func (m *migrationRun) log(text string) {
	fmt.Fprintf(m.out, "%7.1fs  %-8s %s\n", m.since(), "migrate", text)
}

// run waits until after, then runs `tripod migrate` to the target and
// follows it until it ends, at most timeout. It returns an error when
// the migration failed or did not end within timeout; ctx ending before
// it started is none (the run was interrupted).
func (m *migrationRun) run(ctx context.Context, after, timeout time.Duration) error {
	if !lab.Sleep(ctx, after) {
		return nil
	}
	started := m.since()
	m.mu.Lock()
	m.report.StartS = started
	m.mu.Unlock()
	target := m.report.Target
	if m.report.To == "raft" {
		var err error
		if target, err = (&lab.CoordServers{}).MigrationTarget("raft", "", "", "", m.brokers); err != nil {
			return m.end(err, false)
		}
	}
	bootstrap := make([]string, len(m.brokers))
	for i, b := range m.brokers {
		bootstrap[i] = b.Addr
	}
	args := lab.MigrateArgs(m.report.To, target, bootstrap, timeout)
	m.mu.Lock()
	m.report.Target = target
	m.mu.Unlock()
	m.log(fmt.Sprintf("tripod %s (within %v)", strings.Join(args, " "), timeout))

	// tripod migrate ends itself at --timeout; the kill is for a command
	// that does not.
	cctx, cancel := context.WithTimeout(ctx, timeout+30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, m.binary, args...)
	cmd.WaitDelay = 5 * time.Second
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		pw.Close()
		return m.end(fmt.Errorf("start tripod migrate: %w", err), false)
	}
	// The reader ends when the pipe is closed after the command's end.
	read := make(chan struct{})
	last := ""
	go func() {
		defer close(read)
		s := bufio.NewScanner(pr)
		for s.Scan() {
			line := s.Text()
			m.log(line)
			m.mu.Lock()
			m.report.Output = append(m.report.Output, line)
			m.mu.Unlock()
			last = line
		}
		// Drain what a scanner error left, so that the command never
		// blocks on a full pipe.
		io.Copy(io.Discard, pr)
	}()
	err := cmd.Wait()
	pw.Close()
	<-read
	if err != nil && last != "" {
		err = fmt.Errorf("%w; it printed last: %s", err, last)
	}
	took := time.Duration((m.since() - started) * float64(time.Second))
	switch {
	case err == nil:
		return m.end(nil, false)
	case ctx.Err() != nil:
		return m.end(fmt.Errorf("interrupted: %w", ctx.Err()), false)
	case took >= timeout:
		return m.end(fmt.Errorf("did not finish within %v (the rest of --duration and --steady-timeout): %w", timeout, err), true)
	default:
		return m.end(err, false)
	}
}

// end records the migration's end and outcome, and returns the run's
// error for it.
func (m *migrationRun) end(err error, timedOut bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	at := m.since()
	m.report.EndS, m.report.DurationS = &at, at-m.report.StartS
	switch {
	case err == nil:
		m.done, m.report.Outcome = true, migrationDone
	case timedOut:
		m.report.Outcome = migrationTimedOut
	default:
		m.report.Outcome = migrationFailed
	}
	if err == nil {
		fmt.Fprintf(m.out, "%7.1fs  %-8s %s\n", at, "migrate", fmt.Sprintf("done in %.1fs: the cluster is on %s", m.report.DurationS, m.report.To))
		return nil
	}
	m.report.Error = err.Error()
	fmt.Fprintf(m.out, "%7.1fs  %-8s %s\n", at, "migrate", fmt.Sprintf("%s after %.1fs: %v", strings.ToUpper(m.report.Outcome), m.report.DurationS, err))
	return fmt.Errorf("migration from %s to %s %s: %w", m.report.From, m.report.To, m.report.Outcome, err)
}
