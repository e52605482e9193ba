package conformance

import (
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/coord/migration"
)

// MigratedHarness returns a Harness whose clusters started on src and
// were moved to dst as `tripod migrate` moves a cluster. NewCluster opens
// n backends through coord/migration, as brokers configured with src open
// theirs, over a fresh cluster of src and one of dst; registers the n
// brokers on src and commits a topic there through a controller term;
// freezes src, exports it, imports the copy into dst and switches; and
// returns once every backend serves from dst, the brokers' sessions and
// the term on src ended. The cases then register, campaign and commit on
// dst through those same backends, with the epochs and versions dst
// carries over from src (coord.EpochBases), beside the topic copied from
// src.
//
// Backend(i) is broker i+1's migration.Backend; closing it closes dst's
// backend i, as a stopping broker's does. Crash and Heal cut and heal
// its connections to dst (the cluster it serves from); Restart closes it
// and opens dst directly, as a broker restarted after the switch does.
// Its name is "<src>-to-<dst>" and its session timeout dst's.
//
// It is made for the controller cases (RunController, and `tripod
// conformance --migrate-from`). Its clusters are neither a
// ServiceRestarter nor a QuorumLoser, and the backend's own cases that
// expect a fresh namespace (no topic, no producer id key, a created
// partition state at epoch 0) do not hold on them as written: those run
// on dst's harness.
func MigratedHarness(src, dst Harness) Harness {
	return migratedHarness{src: src, dst: dst}
}

type migratedHarness struct{ src, dst Harness }

// Name implements Harness.
func (h migratedHarness) Name() string { return h.src.Name() + "-to-" + h.dst.Name() }

// SessionTimeout implements Harness: the cases run on dst.
func (h migratedHarness) SessionTimeout() time.Duration { return h.dst.SessionTimeout() }

// migratedTopic is the topic NewCluster commits on the source: it
// reaches the cases copied into the target.
const migratedTopic = "migrated"

// NewCluster implements Harness.
func (h migratedHarness) NewCluster(t T, n int) Cluster {
	t.Helper()
	src, dst := h.src.Name(), h.dst.Name()
	if src == dst {
		t.Fatalf("migrated harness: the source and the target are both %s", src)
	}
	c := &migratedCluster{src: src, dst: dst}
	c.sc, c.dc = h.src.NewCluster(t, n), h.dst.NewCluster(t, n)
	c.bes = openMigrating(t, h.src, h.dst, c.sc, c.dc, n)
	// Restart replaces backends: the cleanup closes the ones in use.
	t.Cleanup(c.close)

	// The brokers live on the source, broker 1 its controller, with a
	// topic, and the producer id key they store when they start.
	ctx := withTimeout(t, startupBound(h.src)+startupBound(h.dst))
	sessions := make([]coord.Session, n)
	for i := range n {
		sessions[i] = register(t, c.bes[i], brokerFor(i), startupBound(h.src))
	}
	term, err := c.bes[0].Campaign(ctx, sessions[0])
	if err != nil {
		t.Fatalf("migrated harness: campaign on %s: %v", src, err)
	}
	w := &wonTerm{backend: 0, id: 1, epoch: term.Epoch(), term: term, session: sessions[0], wonAt: time.Now()}
	commit(t, c.bes[0], w, "a topic on "+src, createTopicOp(migratedTopic, 3, min(n, 3), w.epoch))
	if _, err := c.bes[0].ProducerIDKey(ctx, make([]byte, coord.ProducerIDKeySize)); err != nil {
		t.Fatalf("migrated harness: ProducerIDKey on %s: %v", src, err)
	}

	c.switched, _ = migrateTo(t, ctx, c.bes[0], src, dst, "conformance-"+h.Name())
	for i, s := range sessions {
		waitClosed(t, s.Done(), startupBound(h.dst), "migrated harness: the session of broker "+strconv.Itoa(i+1)+" on "+src+" to end at the switch")
		if !errors.Is(s.Err(), coord.ErrSessionExpired) {
			t.Fatalf("migrated harness: the session of broker %d on %s: Err %v after the switch, want ErrSessionExpired", i+1, src, s.Err())
		}
	}
	waitClosed(t, term.Done(), callBound, "migrated harness: the term on "+src+" to end at the switch")
	waitUntil(t, startupBound(h.dst), "migrated harness: every backend to serve from "+dst, func() (bool, string) {
		return servingFrom(c.backends(), dst)
	})
	return c
}

// migratedCluster is n brokers' migration.Backends, moved from the
// cluster sc of src to the cluster dc of dst.
type migratedCluster struct {
	src, dst string
	sc, dc   Cluster
	// switched is the source's record at the switch: what a broker
	// remembers in its data dir (migration.Options.Switched).
	switched coord.Migration

	mu  sync.Mutex
	bes []*migration.Backend
}

// Backend implements Cluster.
func (c *migratedCluster) Backend(i int) coord.Backend {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bes[i]
}

// backends returns the backends in use.
func (c *migratedCluster) backends() []*migration.Backend {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*migration.Backend(nil), c.bes...)
}

// Crash implements Cluster: backend i serves from dc's backend i, whose
// connections to dst are cut; its session on dst expires as a crashed
// broker's does. Its source, which the cluster left, plays no part.
func (c *migratedCluster) Crash(i int) { c.dc.Crash(i) }

// Heal implements Cluster.
func (c *migratedCluster) Heal(i int) { c.dc.Heal(i) }

// Restart implements Cluster as a broker restarted after the switch
// restarts: backend i is closed, which closes dc's backend i, that one is
// opened again (dc.Restart), and broker i+1 opens it through
// coord/migration with the switched record it remembers
// (migration.Options.Switched), which opens the target directly.
func (c *migratedCluster) Restart(t T, i int) {
	t.Helper()
	c.mu.Lock()
	old := c.bes[i]
	c.mu.Unlock()
	if err := old.Close(); err != nil && !errors.Is(err, coord.ErrClosed) {
		t.Errorf("migrated harness: close backend %d: %v", i, err)
	}
	c.dc.Restart(t, i)
	switched := c.switched
	be, err := openMigrationBackend(c.src, c.dst, c.sc, c.dc, i, migration.Options{Switched: &switched})
	if err != nil {
		t.Fatalf("migrated harness: open backend %d after the switch: %v", i, err)
	}
	if be.Name() != c.dst {
		be.Close()
		t.Fatalf("migrated harness: backend %d restarted after the switch serves from %s, want %s", i, be.Name(), c.dst)
	}
	c.mu.Lock()
	c.bes[i] = be
	c.mu.Unlock()
}

// close closes the backends in use, and with them dst's.
func (c *migratedCluster) close() {
	for _, be := range c.backends() {
		be.Close()
	}
}

var _ Cluster = (*migratedCluster)(nil)
