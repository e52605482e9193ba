package verify

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/tripodmq/tripod/internal/cluster"
	"github.com/tripodmq/tripod/internal/etcdserver"
	"github.com/tripodmq/tripod/internal/zkserver"
	"github.com/tripodmq/tripod/lab"
)

// FaultKinds lists the faults `tripod verify` injects, in --faults
// order: kill (SIGKILL, then start again), pause (SIGSTOP past the session
// timeout, then SIGCONT), cut (the broker's Kafka proxy cut past the
// session timeout, then healed), restart (SIGTERM, a controlled shutdown,
// then start again) and coord (the ZooKeeper or etcd server stopped, then
// started again).
var FaultKinds = []string{"kill", "pause", "cut", "restart", "coord"}

// verifyFaultTargets are the brokers a broker fault may hit: the leader of
// a random partition, the controller, or a random broker.
var verifyFaultTargets = []string{"leader", "controller", "broker"}

// plannedFault is one fault of a schedule, before its target is resolved
// against the cluster's state.
type plannedFault struct {
	// Kind is one of FaultKinds.
	Kind string
	// Target is one of verifyFaultTargets (unused by coord).
	Target string
	// Pick chooses the partition (leader) or the broker (broker).
	Pick int
	// Wait is the quiet time between a steady cluster and the injection.
	Wait time.Duration
	// Hold is how long the fault lasts before it is healed.
	Hold time.Duration
}

// faultPlan draws a fault schedule from a seed: the same seed, kinds and
// session timeout give the same faults in the same order. Faults come in
// rounds, each a shuffle of every kind, so that every kind is injected
// once in the first len(kinds) faults.
type faultPlan struct {
	rng            *rand.Rand
	kinds          []string
	sessionTimeout time.Duration
	round          []string
}

// newFaultPlan returns the plan of seed over kinds (at least one).
func newFaultPlan(seed uint64, kinds []string, sessionTimeout time.Duration) *faultPlan {
	return &faultPlan{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), kinds: kinds, sessionTimeout: sessionTimeout}
}

// between returns a duration drawn uniformly from [lo, hi).
func (p *faultPlan) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(p.rng.Int64N(int64(hi-lo)))
}

// next returns the schedule's next fault.
func (p *faultPlan) next() plannedFault {
	if len(p.round) == 0 {
		p.round = append([]string(nil), p.kinds...)
		p.rng.Shuffle(len(p.round), func(i, j int) { p.round[i], p.round[j] = p.round[j], p.round[i] })
	}
	f := plannedFault{Kind: p.round[0]}
	p.round = p.round[1:]
	f.Target = verifyFaultTargets[p.rng.IntN(len(verifyFaultTargets))]
	f.Pick = p.rng.IntN(1 << 20)
	f.Wait = p.between(500*time.Millisecond, 2*time.Second)
	switch f.Kind {
	case "pause", "cut":
		// Longer than the session timeout, so that the broker is declared
		// dead (pause) or its followers and clients give up on it (cut).
		f.Hold = p.sessionTimeout + p.between(500*time.Millisecond, 2*time.Second)
	default:
		f.Hold = p.between(200*time.Millisecond, 1500*time.Millisecond)
	}
	return f
}

// faultRecord is one fault as injected, for the report.
type faultRecord struct {
	// Kind is one of FaultKinds.
	Kind string `json:"kind"`
	// Target names what was hit: "broker 2 (leader of verify-3)",
	// "zookeeper".
	Target string `json:"target"`
	// Broker is the broker hit, 0 for coord.
	Broker int32 `json:"broker,omitempty"`
	// AtS is the injection time, in seconds since the run started.
	AtS float64 `json:"at_s"`
	// HealedAtS is the heal time, nil when it was never healed.
	HealedAtS *float64 `json:"healed_at_s"`
	// Error says what went wrong injecting or healing it, if anything.
	Error string `json:"error,omitempty"`
}

// faultRunner injects a schedule's faults into its own cluster, one at a
// time, each once the cluster is steady; only the command's goroutine uses
// it.
type faultRunner struct {
	c *cluster.Cluster
	// kinds are the fault kinds that apply to this run.
	kinds []string
	// backend returns the coordination backend the cluster is on, which
	// a migration changes: the coord fault restarts its server.
	backend    func() string
	zk         *zkserver.Server   // the ZooKeeper it may restart, or nil
	etcd       *etcdserver.Server // the etcd it may restart, or nil
	topic      string
	partitions int
	start      time.Time
	// steadyTimeout bounds each wait for a steady cluster.
	steadyTimeout time.Duration
	out           io.Writer
	faults        []faultRecord
	// drawn counts the faults drawn from the plan, injected or skipped
	// (a coord fault while the cluster is on a backend without a server
	// to restart).
	drawn int
}

// since returns the seconds since the run started.
func (r *faultRunner) since() float64 { return time.Since(r.start).Seconds() }

// log prints one line of the fault log.
func (r *faultRunner) log(at float64, what, text string) {
	fmt.Fprintf(r.out, "%7.1fs  %-8s %s\n", at, what, text)
}

// run injects plan's faults until the duration is over, healing the
// fault in course when it ends, and at least until every kind has been
// injected once (the plan's first round), so that a short run or a slow
// cluster still sees each kind. It returns an error when the cluster is
// not steady within steadyTimeout or a fault cannot be healed; ctx or
// the duration ending is no error.
func (r *faultRunner) run(ctx, duration context.Context, plan *faultPlan) error {
	for {
		// Until the first round is done the faults run under ctx alone.
		fctx := ctx
		if r.drawn >= len(r.kinds) {
			fctx = duration
		}
		if fctx.Err() != nil {
			return nil
		}
		base, err := lab.WaitSteady(fctx, r.c, []string{r.topic}, r.partitions, r.steadyTimeout)
		if fctx.Err() != nil {
			return nil
		}
		if err != nil {
			return fmt.Errorf("cluster not steady before fault %d (every broker live, every ISR full, all agreeing): %w", len(r.faults)+1, err)
		}
		f := plan.next()
		r.drawn++
		if !lab.Sleep(fctx, f.Wait) {
			return nil
		}
		if err := r.inject(fctx, f, base); err != nil {
			return err
		}
	}
}

// victim resolves a broker fault's target against base.
func (r *faultRunner) victim(f plannedFault, base *cluster.Metadata) (int32, string) {
	switch f.Target {
	case "leader":
		parts := base.Partitions[r.topic]
		if len(parts) > 0 {
			p := parts[f.Pick%len(parts)]
			if p.Leader > 0 {
				return p.Leader, fmt.Sprintf("leader of %s-%d", r.topic, p.Partition)
			}
		}
	case "controller":
		if base.ControllerID > 0 {
			return base.ControllerID, "controller"
		}
	}
	brokers := r.c.Brokers()
	return brokers[f.Pick%len(brokers)].ID, "random"
}

// inject injects f, holds it (shorter when ctx ends) and heals it. Heals
// run to their end whatever ctx does.
func (r *faultRunner) inject(ctx context.Context, f plannedFault, base *cluster.Metadata) error {
	rec := faultRecord{Kind: f.Kind}
	var hit, heal func() error
	var healText string
	if f.Kind == "coord" {
		backend := r.backend()
		switch {
		case backend == "zk" && r.zk != nil:
			rec.Target = "zookeeper " + r.zk.Addr()
			hit, heal = r.zk.Stop, r.zk.Start
		case backend == "etcd" && r.etcd != nil:
			rec.Target = "etcd " + r.etcd.Endpoints()[0]
			hit, heal = r.etcd.Stop, r.etcd.Restart
		default:
			// The cluster is on a backend (before or after a migration)
			// whose server is not this run's to restart.
			r.log(r.since(), "skip", "coord: "+coordSkipReason(backend))
			return nil
		}
		healText = rec.Target + " started again"
	} else {
		id, why := r.victim(f, base)
		b := r.c.Broker(id)
		rec.Broker, rec.Target = id, fmt.Sprintf("broker %d (%s)", id, why)
		switch f.Kind {
		case "kill":
			hit, heal, healText = b.Kill, b.Start, "restarted"
		case "pause":
			hit, heal, healText = b.Pause, b.Resume, "resumed"
		case "cut":
			if b.Proxy == nil {
				return fmt.Errorf("fault cut: broker %d has no proxy", id)
			}
			hit = func() error { b.Proxy.Cut(); return nil }
			heal = func() error { b.Proxy.Heal(); return nil }
			healText = "reconnected"
		case "restart":
			hit = func() error { return b.Stop(30 * time.Second) }
			heal, healText = b.Start, "started again"
		default:
			return fmt.Errorf("fault %q: unknown kind", f.Kind)
		}
		healText = fmt.Sprintf("broker %d %s", id, healText)
	}
	rec.AtS = r.since()
	r.log(rec.AtS, f.Kind, rec.Target)
	if err := hit(); err != nil {
		// A fault that went wrong (a broker that exited with an error on
		// SIGTERM) is noted; the heal still brings the cluster back.
		rec.Error = err.Error()
		r.log(r.since(), "note", fmt.Sprintf("%s: %v", f.Kind, err))
	}
	lab.Sleep(ctx, f.Hold)
	err := heal()
	healed := r.since()
	if err != nil {
		if rec.Error != "" {
			rec.Error += "; "
		}
		rec.Error += err.Error()
		r.faults = append(r.faults, rec)
		return fmt.Errorf("heal %s of %s: %w", f.Kind, rec.Target, err)
	}
	rec.HealedAtS = &healed
	r.faults = append(r.faults, rec)
	r.log(healed, "heal", healText)
	return nil
}

// coordSkipReason says why the coord fault does not apply while the
// cluster is on backend.
func coordSkipReason(backend string) string {
	if backend == "raft" {
		return "the cluster is on raft, whose coordination servers are the brokers (kill, pause and restart hit them)"
	}
	return "the cluster is on " + backend + ", whose server is yours (--zk-connect, --etcd-endpoints): verify does not restart it"
}
