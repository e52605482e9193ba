package scenarios

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tripodmq/tripod/internal/cluster"
	"github.com/tripodmq/tripod/internal/etcdserver"
)

// migrateRun is a `tripod migrate --to` running in the background while
// a scenario injects its fault.
type migrateRun struct {
	to     string
	cmd    *exec.Cmd
	out    strings.Builder // written by the command until exited
	exited chan struct{}
	err    error
}

// startMigrate starts `tripod migrate --to to` with the target's flags
// sets on c.
func startMigrate(t *testing.T, c *cluster.Cluster, to string, sets ...string) *migrateRun {
	t.Helper()
	args := append([]string{"migrate", "--to", to}, sets...)
	args = append(args, "--bootstrap", strings.Join(c.Bootstrap(), ","), "--timeout", "3m")
	cmd := exec.Command(env.Binary, args...)
	r := &migrateRun{to: to, cmd: cmd, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &r.out, &r.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start tripod migrate: %v", err)
	}
	go func() {
		r.err = cmd.Wait()
		close(r.exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-r.exited
	})
	return r
}

// wait waits up to timeout for the command to end, and fails the test
// unless it succeeded and printed that every broker is on the target; it
// returns what the command printed.
func (r *migrateRun) wait(t *testing.T, timeout time.Duration) string {
	t.Helper()
	select {
	case <-r.exited:
	case <-time.After(timeout):
		r.cmd.Process.Kill()
		<-r.exited
		t.Fatalf("tripod migrate did not finish within %v:\n%s", timeout, r.out.String())
	}
	out := r.out.String()
	if r.err != nil || !strings.Contains(out, "every broker is on "+r.to) {
		t.Fatalf("tripod migrate: %v\n%s", r.err, out)
	}
	return out
}

// startEtcd starts an etcd of the test's own, closed with the test: a
// target it can stop and start again without disturbing other tests.
func startEtcd(t *testing.T) *etcdserver.Server {
	t.Helper()
	s, err := etcdserver.Start(t.TempDir())
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// controllerTerms follows who was controller when, from the brokers'
// logs (every incarnation's), which record every term won and every
// broker taking a new controller in, as sampling would only in part. A
// broker the test kills goes through kill, which notes when.
type controllerTerms struct {
	c     *cluster.Cluster
	mu    sync.Mutex
	kills map[int32][]time.Time
}

// term is one controller term as a broker's log shows it.
type term struct {
	broker      int32
	incarnation int
	epoch       int64
	won         time.Time
	// ended is the first sign of its end: the controller stopping,
	// the broker leaving the backend for a migration's target, its
	// kill, or its next start. Zero: it is on.
	ended time.Time
}

func (tm term) String() string {
	end := "on"
	if !tm.ended.IsZero() {
		end = tm.ended.Format("15:04:05.000")
	}
	return fmt.Sprintf("broker %d epoch %d [%s, %s]", tm.broker, tm.epoch, tm.won.Format("15:04:05.000"), end)
}

// takenIn is a broker taking in a new controller's metadata: from then
// on it follows that controller and epoch.
type takenIn struct {
	broker      int32
	incarnation int
	controller  int32
	epoch       int64
	at          time.Time
}

// trackControllers starts following c's controllers.
func trackControllers(c *cluster.Cluster) *controllerTerms {
	return &controllerTerms{c: c, kills: map[int32][]time.Time{}}
}

// kill kills broker id with SIGKILL and notes when: a term it held ended
// then. (The signal goes first; reaping the process may take a while on a
// loaded machine.)
func (ct *controllerTerms) kill(id int32) error {
	at := time.Now()
	if err := ct.c.Broker(id).Kill(); err != nil {
		return err
	}
	ct.mu.Lock()
	defer ct.mu.Unlock()
	ct.kills[id] = append(ct.kills[id], at)
	return nil
}

var (
	startLine       = regexp.MustCompile(`^=== tripod cluster: start \d+ of broker \d+ at (\S+): `)
	electedLine     = regexp.MustCompile(`controller elected: this broker is the controller: controller_epoch=(\d+)`)
	stoppedLine     = regexp.MustCompile(`controller stopped\b.*?\b(?:controller_)?epoch=(\d+)`)
	startFailedLine = regexp.MustCompile(`start controller failed; resigning`)
	takenInLine     = regexp.MustCompile(`metadata of a new controller applied: controller=(-?\d+) controller_epoch=(\d+)`)
	switchedLine    = regexp.MustCompile(`switched the coordination backend`)
)

// lineTime returns the time a broker's log line starts with.
func lineTime(line string) (time.Time, bool) {
	f, _, _ := strings.Cut(line, " ")
	at, err := time.Parse("2006-01-02T15:04:05.000Z0700", f)
	return at, err == nil
}

// read returns the terms and take-ins of every broker's log, terms in
// the order they were won.
func (ct *controllerTerms) read(t *testing.T) ([]term, []takenIn) {
	t.Helper()
	var terms []term
	var ins []takenIn
	for _, b := range ct.c.Brokers() {
		data, err := os.ReadFile(b.LogPath)
		if err != nil {
			t.Fatalf("read the log of broker %d: %v", b.ID, err)
		}
		ct.mu.Lock()
		kills := slices.Clone(ct.kills[b.ID])
		ct.mu.Unlock()
		var open []int // indexes into terms of this incarnation's terms on
		// endOpen ends the open terms at the first kill after each was
		// won, or else at before (zero: not at all).
		endOpen := func(before time.Time) {
			for _, i := range open {
				terms[i].ended = before
				for _, k := range kills {
					if k.After(terms[i].won) && (before.IsZero() || k.Before(before)) {
						terms[i].ended = k
						break
					}
				}
			}
			open = nil
		}
		incarnation := 0
		for _, line := range strings.Split(string(data), "\n") {
			if m := startLine.FindStringSubmatch(line); m != nil {
				at, err := time.Parse(time.RFC3339Nano, m[1])
				if err != nil {
					t.Fatalf("broker %d: start line %q: %v", b.ID, line, err)
				}
				endOpen(at)
				incarnation++
				continue
			}
			at, ok := lineTime(line)
			if !ok {
				continue
			}
			if m := electedLine.FindStringSubmatch(line); m != nil {
				epoch, _ := strconv.ParseInt(m[1], 10, 64)
				terms = append(terms, term{broker: b.ID, incarnation: incarnation, epoch: epoch, won: at})
				open = append(open, len(terms)-1)
			} else if m := stoppedLine.FindStringSubmatch(line); m != nil {
				epoch, _ := strconv.ParseInt(m[1], 10, 64)
				open = slices.DeleteFunc(open, func(i int) bool {
					if terms[i].epoch == epoch {
						terms[i].ended = at
						return true
					}
					return false
				})
			} else if startFailedLine.MatchString(line) || switchedLine.MatchString(line) {
				// A controller that could not start, or the broker
				// leaving the backend for the target, ends the term.
				for _, i := range open {
					terms[i].ended = at
				}
				open = nil
			} else if m := takenInLine.FindStringSubmatch(line); m != nil {
				id, _ := strconv.ParseInt(m[1], 10, 32)
				epoch, _ := strconv.ParseInt(m[2], 10, 64)
				ins = append(ins, takenIn{broker: b.ID, incarnation: incarnation, controller: int32(id), epoch: epoch, at: at})
			}
		}
		endOpen(time.Time{})
	}
	slices.SortStableFunc(terms, func(a, b term) int { return a.won.Compare(b.won) })
	return terms, ins
}

// check fails the test unless the brokers' logs show one controller at
// a time: each controller epoch won by one broker; a term won later
// than another has a higher epoch (none goes backwards, across the
// switch to the target either, where epochs start above the source's);
// no term won while another broker's was still on (at the resolution of
// the logs, a millisecond); and every controller a broker took in held
// the epoch it claimed, each broker taking in ever higher epochs. It
// returns the terms, in the order they were won.
func (ct *controllerTerms) check(t *testing.T) []term {
	t.Helper()
	terms, ins := ct.read(t)
	t.Logf("controller terms: %v", terms)
	holder := map[int64]int32{}
	for _, tm := range terms {
		if id, ok := holder[tm.epoch]; ok && id != tm.broker {
			t.Errorf("controller epoch %d was won by brokers %d and %d", tm.epoch, id, tm.broker)
		}
		holder[tm.epoch] = tm.broker
	}
	for i, a := range terms {
		for _, b := range terms[i+1:] {
			if !a.won.Before(b.won) {
				continue // the same millisecond: no order to check
			}
			if b.epoch <= a.epoch {
				t.Errorf("controller epoch went backwards: %v won after %v", b, a)
			}
			if a.broker != b.broker && (a.ended.IsZero() || a.ended.After(b.won)) {
				t.Errorf("two controllers at once: %v won while %v was on", b, a)
			}
		}
	}
	type key struct {
		broker      int32
		incarnation int
	}
	last := map[key]takenIn{}
	for _, in := range ins {
		if id, ok := holder[in.epoch]; !ok || id != in.controller {
			t.Errorf("broker %d took in controller %d with epoch %d at %s, which that broker did not win (won by %d: %v)",
				in.broker, in.controller, in.epoch, in.at.Format("15:04:05.000"), id, ok)
		}
		k := key{in.broker, in.incarnation}
		if prev, ok := last[k]; ok && in.epoch <= prev.epoch {
			t.Errorf("broker %d took in controller epoch %d at %s after epoch %d", in.broker, in.epoch, in.at.Format("15:04:05.000"), prev.epoch)
		}
		last[k] = in
	}
	return terms
}
