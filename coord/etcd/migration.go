package etcd

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tripodmq/tripod/coord"
)

// The migration record (coord.Migrator) is one key, <prefix>/migration,
// holding the coord.Migration as JSON. Every write the record can refuse
// is a transaction that compares the record key's mod revision with the
// one the backend last saw (guardedTxn): SetMigration changes that
// revision, so a write that raced a freeze either landed before it or
// fails, and is then tried again against the new record, or refused.
//
// The backend reads the record once, at the first call that needs it,
// and then follows it with a watch of its own (recordWatch), so the
// bases it raises epochs and versions by cost no read per call.

// migrationRecord is the record as the backend last saw it.
type migrationRecord struct {
	m  coord.Migration
	ok bool // a record is stored
	// modRev is the key's mod revision, 0 while there is none: what the
	// refused writes compare.
	modRev int64
	// rev is the revision this view is current at: a later view replaces
	// it, an older one does not.
	rev int64
	// err is set when the stored value does not decode: writes fail
	// with it rather than guess the phase.
	err error
}

// refuses reports whether the record refuses the writes it guards.
func (r *migrationRecord) refuses() bool { return r.ok && r.m.Phase.Refuses() }

// maxRecordRetries bounds how many record changes one guarded write
// outlasts.
const maxRecordRetries = 100

func (b *Backend) migrationKey() string { return b.prefix + "/migration" }

// recordFromKV decodes the record key as read at revision rev (kv nil:
// absent).
func (b *Backend) recordFromKV(kv *mvccpb.KeyValue, rev int64) *migrationRecord {
	r := &migrationRecord{rev: rev}
	if kv == nil {
		return r
	}
	r.ok, r.modRev, r.rev = true, kv.ModRevision, max(rev, kv.ModRevision)
	if err := json.Unmarshal(kv.Value, &r.m); err != nil {
		r.err = fmt.Errorf("decode migration record %s: %w", kv.Key, err)
	}
	return r
}

// storeRecord makes r the backend's view of the record unless it holds
// a newer one already, and wakes the watches that raise by the bases
// when the record changed.
func (b *Backend) storeRecord(r *migrationRecord) {
	for {
		cur := b.rec.Load()
		if cur != nil && cur.rev >= r.rev {
			return
		}
		if b.rec.CompareAndSwap(cur, r) {
			if cur == nil || cur.modRev != r.modRev {
				b.recChanged.Notify()
			}
			return
		}
	}
}

// bases returns the epoch bases of the record the backend holds (zero
// before it is read: callers read it first with record).
func (b *Backend) bases() coord.EpochBases {
	if r := b.rec.Load(); r != nil {
		return r.m.Bases
	}
	return coord.EpochBases{}
}

// record returns the backend's view of the record, reading it the first
// time and then following it (recordWatch).
func (b *Backend) record(ctx context.Context) (*migrationRecord, error) {
	if r := b.rec.Load(); r != nil {
		return r, nil
	}
	b.recMu.Lock()
	defer b.recMu.Unlock()
	if r := b.rec.Load(); r != nil {
		return r, nil
	}
	r, err := b.readRecord(ctx)
	if err != nil {
		return nil, err
	}
	b.goOwned(func() { b.recordWatch(r.rev) })
	return r, nil
}

// readRecord reads the record from etcd and stores it.
func (b *Backend) readRecord(ctx context.Context) (*migrationRecord, error) {
	key := b.migrationKey()
	resp, err := b.client.Get(ctx, key)
	if err != nil {
		return nil, b.convertError(err, key)
	}
	var kv *mvccpb.KeyValue
	if len(resp.Kvs) > 0 {
		kv = resp.Kvs[0]
	}
	r := b.recordFromKV(kv, resp.Header.Revision)
	b.storeRecord(r)
	return b.rec.Load(), nil
}

// recordWatch keeps the backend's view of the record current from
// revision rev on, until the backend closes.
func (b *Backend) recordWatch(rev int64) {
	key := b.migrationKey()
	f := &follower[struct{}]{
		key: key,
		end: key + "\x00",
		load: func(ctx context.Context, _ coord.EpochBases) (int64, error) {
			r, err := b.readRecord(ctx)
			if err != nil {
				return 0, err
			}
			return r.rev, nil
		},
		apply: func(ev *clientv3.Event) {
			if ev.Type == mvccpb.DELETE {
				b.storeRecord(&migrationRecord{rev: ev.Kv.ModRevision})
				return
			}
			b.storeRecord(b.recordFromKV(ev.Kv, ev.Kv.ModRevision))
		},
		state: func() (struct{}, bool) { return struct{}{}, false },
	}
	follow(b.life, b, "migration record", f, rev, make(chan struct{}, 1))
}

// writableRecord returns the record a guarded write compares against,
// or an error wrapping coord.ErrMigrated when it refuses the write; a
// view that refuses is read again first, as a rollback may have
// followed it.
func (b *Backend) writableRecord(ctx context.Context, what string) (*migrationRecord, error) {
	r, err := b.record(ctx)
	if err != nil {
		return nil, err
	}
	if r.refuses() || r.err != nil {
		if r, err = b.readRecord(ctx); err != nil {
			return nil, err
		}
	}
	if r.err != nil {
		return nil, fmt.Errorf("%s: %w", what, r.err)
	}
	if r.refuses() {
		return nil, fmt.Errorf("%w: %s: migration %s is %s", coord.ErrMigrated, what, r.m.ID, r.m.Phase)
	}
	return r, nil
}

// guardedTxn commits If(cmps) Then(then) Else(els) unless the record
// refuses it: the record key's mod revision is compared too, last, so
// that a transaction failing on cmps costs etcd nothing more. own tells
// from els's answers whether cmps failed (nil: there are none); when they
// did not, the record changed: it is read again and the transaction
// tried against the new one, or refused with coord.ErrMigrated. A
// transaction failed on cmps is returned as is.
func (b *Backend) guardedTxn(ctx context.Context, what string, cmps []clientv3.Cmp, then, els []clientv3.Op,
	own func(resp *clientv3.TxnResponse) bool) (*clientv3.TxnResponse, error) {
	key := b.migrationKey()
	for range maxRecordRetries {
		r, err := b.writableRecord(ctx, what)
		if err != nil {
			return nil, err
		}
		guard := clientv3.Compare(clientv3.ModRevision(key), "=", r.modRev)
		resp, err := b.client.Txn(ctx).
			If(append(cmps[:len(cmps):len(cmps)], guard)...).
			Then(then...).
			Else(els...).
			Commit()
		if err != nil {
			return nil, b.convertError(err, what)
		}
		if resp.Succeeded || (own != nil && own(resp)) {
			return resp, nil
		}
		stored, err := b.readRecord(ctx)
		if err != nil {
			return nil, err
		}
		if stored.modRev == r.modRev {
			return resp, nil // cmps failed after all; the caller tells why
		}
	}
	return nil, fmt.Errorf("%w: %s: the migration record changed %d times in a row", coord.ErrUnavailable, what, maxRecordRetries)
}

// Migration implements coord.Migrator.
func (b *Backend) Migration(ctx context.Context) (coord.Migration, bool, error) {
	if b.isClosed() {
		return coord.Migration{}, false, fmt.Errorf("%w: migration record", coord.ErrClosed)
	}
	ctx, cancel := b.withLife(ctx)
	defer cancel()
	r, err := b.readRecord(ctx)
	if err != nil {
		return coord.Migration{}, false, err
	}
	if r.err != nil {
		return coord.Migration{}, false, r.err
	}
	return r.m, r.ok, nil
}

// SetMigration implements coord.Migrator: a transaction that puts m if
// the record key's mod revision is still the one of the record read and
// found to be prev. It returns the revision it wrote at raised by the
// largest of the broker, controller and version bases: above every
// broker epoch, controller epoch and Version reported before. The bases
// never go down: a field of m.Bases below the stored one keeps the
// stored one, so that the epochs the backend reported stay below what it
// reports next (a target that becomes a source keeps its bases).
func (b *Backend) SetMigration(ctx context.Context, prev *coord.Migration, m coord.Migration) (int64, error) {
	key := b.migrationKey()
	what := "set migration record " + key
	if b.isClosed() {
		return 0, fmt.Errorf("%w: %s", coord.ErrClosed, what)
	}
	ctx, cancel := b.withLife(ctx)
	defer cancel()
	if _, err := b.record(ctx); err != nil {
		return 0, err
	}
	r, err := b.readRecord(ctx)
	if err != nil {
		return 0, err
	}
	for range maxRecordRetries {
		if err := matchRecord(r, prev, key); err != nil {
			return 0, err
		}
		m := m
		m.Bases = maxBases(m.Bases, r.m.Bases)
		m.Updated = time.Now().UTC()
		value, err := json.Marshal(m)
		if err != nil {
			return 0, fmt.Errorf("%s: encode: %w", what, err)
		}
		resp, err := b.client.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", r.modRev)).
			Then(clientv3.OpPut(key, string(value))).
			Else(clientv3.OpGet(key)).
			Commit()
		if err != nil {
			return 0, b.convertError(err, what)
		}
		if resp.Succeeded {
			rev := resp.Header.Revision
			b.storeRecord(&migrationRecord{m: m, ok: true, modRev: rev, rev: rev})
			return rev + max(m.Bases.Broker, m.Bases.Controller, m.Bases.Version), nil
		}
		var kv *mvccpb.KeyValue
		if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
			kv = kvs[0]
		}
		r = b.recordFromKV(kv, resp.Header.Revision)
		b.storeRecord(r)
	}
	return 0, fmt.Errorf("%w: %s: changed %d times in a row", coord.ErrUnavailable, what, maxRecordRetries)
}

// matchRecord checks that r is prev (nil: that there is no record).
func matchRecord(r *migrationRecord, prev *coord.Migration, key string) error {
	switch {
	case r.err != nil:
		return r.err
	case prev == nil && r.ok:
		return fmt.Errorf("%w: migration record %s: holds %s in phase %s, want none", coord.ErrVersionMismatch, key, r.m.ID, r.m.Phase)
	case prev != nil && !r.ok:
		return fmt.Errorf("%w: migration record %s: none, want %s in phase %s", coord.ErrVersionMismatch, key, prev.ID, prev.Phase)
	case prev != nil && (r.m.ID != prev.ID || r.m.Phase != prev.Phase):
		return fmt.Errorf("%w: migration record %s: holds %s in phase %s, want %s in phase %s",
			coord.ErrVersionMismatch, key, r.m.ID, r.m.Phase, prev.ID, prev.Phase)
	}
	return nil
}

func maxBases(a, b coord.EpochBases) coord.EpochBases {
	return coord.EpochBases{Broker: max(a.Broker, b.Broker), Controller: max(a.Controller, b.Controller),
		Partition: max(a.Partition, b.Partition), Version: max(a.Version, b.Version)}
}

// WatchMigration implements coord.Migrator.
func (b *Backend) WatchMigration(ctx context.Context) (<-chan coord.MigrationRecord, error) {
	key := b.migrationKey()
	var current *migrationRecord
	var sent *coord.MigrationRecord
	f := &follower[coord.MigrationRecord]{
		key: key,
		end: key + "\x00",
		load: func(ctx context.Context, _ coord.EpochBases) (int64, error) {
			r, err := b.readRecord(ctx)
			if err != nil {
				return 0, err
			}
			current = r
			return r.rev, nil
		},
		apply: func(ev *clientv3.Event) {
			if ev.Type == mvccpb.DELETE {
				current = &migrationRecord{rev: ev.Kv.ModRevision}
				return
			}
			current = b.recordFromKV(ev.Kv, ev.Kv.ModRevision)
		},
		state: func() (coord.MigrationRecord, bool) {
			if current.err != nil {
				b.log.Warn("skipping unreadable migration record", "key", key, "error", current.err)
				return coord.MigrationRecord{}, false
			}
			v := coord.MigrationRecord{Migration: current.m, OK: current.ok}
			if sent != nil && sent.OK == v.OK && sameMigration(sent.Migration, v.Migration) {
				return v, false
			}
			sent = &v
			return v, true
		},
	}
	return startWatch(ctx, b, "migration record", f)
}

// sameMigration reports whether a and b are the same record.
func sameMigration(a, b coord.Migration) bool {
	if a.ID != b.ID || a.From != b.From || a.To != b.To || a.Phase != b.Phase || a.Bases != b.Bases ||
		!a.Updated.Equal(b.Updated) || len(a.Target) != len(b.Target) {
		return false
	}
	for k, v := range a.Target {
		if w, ok := b.Target[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// NextProducerID implements coord.Migrator: where the block after the
// stored one starts.
func (b *Backend) NextProducerID(ctx context.Context) (int64, error) {
	key := b.producerIDBlockKey()
	what := "next producer id at " + key
	if b.isClosed() {
		return 0, fmt.Errorf("%w: %s", coord.ErrClosed, what)
	}
	ctx, cancel := b.withLife(ctx)
	defer cancel()
	resp, err := b.client.Get(ctx, key)
	if err != nil {
		return 0, b.convertError(err, what)
	}
	var kv *mvccpb.KeyValue
	if len(resp.Kvs) > 0 {
		kv = resp.Kvs[0]
	}
	block, err := nextProducerIDBlock(kv, coord.NoBroker)
	if err != nil {
		return 0, err
	}
	return block.First, nil
}
