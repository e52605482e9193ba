package etcd

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/internal/parallel"
)

// importChunkBytes bounds the keys and values of one import transaction,
// below etcd's default --max-request-bytes (1.5 MiB).
const importChunkBytes = 1 << 20

// importWrite is one put of an import (or the producer id counter's
// delete) with its size in a request.
type importWrite struct {
	op         clientv3.Op
	key, value string
	size       int
}

// Import implements coord.Migrator. A first transaction writes the record
// in phase Importing if there is none and the topics, partition states,
// security and config ranges are empty (etcd compares whole ranges), or,
// when the record is m's in phase Importing (an Import that stopped
// midway) or that of the migration m rolls back in phase Switched (the
// source it returns to), empties those ranges and writes the record
// again. Then the
// snapshot's keys go in transactions of up to maxTxnOps puts and
// importChunkBytes, several at once, each conditional on the record
// being the one written; then the record in phase Imported. The
// partition epochs start afresh (etcd versions of new keys); everything
// else is stored as the snapshot holds it.
func (b *Backend) Import(ctx context.Context, snap *coord.Snapshot, m coord.Migration) error {
	return b.importSnapshot(ctx, snap, m, true)
}

// PreCopy implements coord.Migrator: Import, but the record stays in
// phase Importing.
func (b *Backend) PreCopy(ctx context.Context, snap *coord.Snapshot, m coord.Migration) error {
	return b.importSnapshot(ctx, snap, m, false)
}

// checkImport checks the arguments of an import of snap with the record
// m, and returns m with snap's bases.
func (b *Backend) checkImport(what string, snap *coord.Snapshot, m coord.Migration) (coord.Migration, error) {
	if b.isClosed() {
		return m, fmt.Errorf("%w: %s", coord.ErrClosed, what)
	}
	if m.ID == "" {
		return m, fmt.Errorf("%s: migration without an id", what)
	}
	if snap == nil || snap.Metadata == nil || snap.Security == nil || snap.Configs == nil {
		return m, fmt.Errorf("%s: snapshot without metadata, security or config state", what)
	}
	if m.Bases != (coord.EpochBases{}) && m.Bases != snap.Bases {
		return m, fmt.Errorf("%s: migration %s has bases %+v, its snapshot %+v", what, m.ID, m.Bases, snap.Bases)
	}
	m.Bases = snap.Bases
	return m, nil
}

// importSnapshot is Import, which ends with the record in phase Imported
// when final, and in phase Importing (a pre-copy) when not.
func (b *Backend) importSnapshot(ctx context.Context, snap *coord.Snapshot, m coord.Migration, final bool) error {
	what := "import into " + b.prefix
	m, err := b.checkImport(what, snap, m)
	if err != nil {
		return err
	}
	writes, err := b.importWrites(snap)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	chunks, err := importChunks(writes)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	ctx, cancel := b.withLife(ctx)
	defer cancel()
	if _, err := b.record(ctx); err != nil {
		return err
	}
	modRev, err := b.beginImport(ctx, m)
	if err != nil {
		return err
	}
	return b.writeImport(ctx, what, m, modRev, chunks, final)
}

// ImportChanges implements coord.Migrator. A first transaction writes
// the record of m again in phase Importing with snap's bases, if the
// stored one is m's in phase Importing; then the puts of the keys snap
// adds or changes from base and the deletes of those it lacks go in
// transactions conditional on that record, as Import's, then the record
// in phase Imported.
func (b *Backend) ImportChanges(ctx context.Context, base, snap *coord.Snapshot, m coord.Migration) error {
	what := "import the changes into " + b.prefix
	if base == nil || base.Metadata == nil || base.Security == nil || base.Configs == nil {
		return fmt.Errorf("%s: base snapshot without metadata, security or config state", what)
	}
	m.Bases = coord.EpochBases{}
	m, err := b.checkImport(what, snap, m)
	if err != nil {
		return err
	}
	from, err := b.importWrites(base)
	if err != nil {
		return fmt.Errorf("%s: the base: %w", what, err)
	}
	next, err := b.importWrites(snap)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	chunks, err := importChunks(changedWrites(from, next))
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	ctx, cancel := b.withLife(ctx)
	defer cancel()
	stored, err := b.readRecord(ctx)
	if err != nil {
		return err
	}
	b.storeRecord(stored)
	switch {
	case stored.err != nil:
		return fmt.Errorf("%s: %w", what, stored.err)
	case !stored.ok || stored.m.ID != m.ID || stored.m.Phase != coord.MigrationImporting:
		return fmt.Errorf("%w: %s: the migration record %s holds %+v (present %v), not migration %s importing", coord.ErrExists, what, b.migrationKey(), stored.m, stored.ok, m.ID)
	}
	m.Phase = coord.MigrationImporting
	rev, err := b.putRecordAt(ctx, what, m, stored.modRev)
	if errors.Is(err, coord.ErrVersionMismatch) {
		return fmt.Errorf("%w: %w", coord.ErrExists, err)
	}
	if err != nil {
		return err
	}
	return b.writeImport(ctx, what, m, rev, chunks, true)
}

// putRecordAt writes m as the record, stamped now, if the record's mod
// revision is still modRev, and returns the revision it was written at.
// Errors: ErrVersionMismatch when the record changed; ErrUnavailable.
func (b *Backend) putRecordAt(ctx context.Context, what string, m coord.Migration, modRev int64) (int64, error) {
	m.Updated = time.Now().UTC()
	value, err := json.Marshal(m)
	if err != nil {
		return 0, fmt.Errorf("%s: encode the migration record: %w", what, err)
	}
	key := b.migrationKey()
	resp, err := b.client.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", modRev)).Then(clientv3.OpPut(key, string(value))).Commit()
	if err != nil {
		return 0, b.convertError(err, fmt.Sprintf("%s: record phase %s", what, m.Phase))
	}
	if !resp.Succeeded {
		return 0, fmt.Errorf("%w: %s: the migration record %s changed during the import", coord.ErrVersionMismatch, what, key)
	}
	rev := resp.Header.Revision
	b.storeRecord(&migrationRecord{m: m, ok: true, modRev: rev, rev: rev})
	return rev, nil
}

// changedWrites returns the writes that turn the keys from writes into
// those next writes: next's puts of keys from lacks or holds with
// another value, its deletes, and deletes of the keys from puts and next
// does not.
func changedWrites(from, next []importWrite) []importWrite {
	held := map[string]importWrite{}
	for _, w := range from {
		held[w.key] = w
	}
	var changes []importWrite
	for _, w := range next {
		h, ok := held[w.key]
		delete(held, w.key)
		if !ok || h.op.IsDelete() != w.op.IsDelete() || h.value != w.value || w.op.IsDelete() {
			changes = append(changes, w)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(held)) {
		if !held[k].op.IsDelete() {
			changes = append(changes, importWrite{op: clientv3.OpDelete(k), key: k, size: len(k)})
		}
	}
	return changes
}

// writeImport writes chunks, each in a transaction conditional on the
// record being at modRev, several at once, then, when final, m as the
// record in phase Imported.
func (b *Backend) writeImport(ctx context.Context, what string, m coord.Migration, modRev int64, chunks [][]clientv3.Op, final bool) error {
	key := b.migrationKey()
	err := parallel.FirstError(len(chunks), commitParallel, func(i int) error {
		resp, err := b.client.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", modRev)).Then(chunks[i]...).Commit()
		if err != nil {
			return b.convertError(err, fmt.Sprintf("%s: %d writes", what, len(chunks[i])))
		}
		if !resp.Succeeded {
			return fmt.Errorf("%w: %s: the migration record %s changed during the import", coord.ErrVersionMismatch, what, key)
		}
		return nil
	})
	if err != nil || !final {
		return err
	}
	m.Phase = coord.MigrationImported
	_, err = b.putRecordAt(ctx, what, m, modRev)
	return err
}

// importRanges are the prefixes an Import needs empty, and empties again
// when it is retried: what it writes besides the producer id keys, which
// it overwrites.
func (b *Backend) importRanges() []string {
	return []string{b.topicsPrefix(), b.partitionsPrefix(), b.securityPrefix(), b.configsPrefix()}
}

// beginImport writes m as the record in phase Importing and returns the
// record key's mod revision: if there is no record and the import ranges
// are empty, or if the record is m's in phase Importing, and then the
// ranges are emptied.
func (b *Backend) beginImport(ctx context.Context, m coord.Migration) (int64, error) {
	key := b.migrationKey()
	what := "import into " + b.prefix
	m.Phase = coord.MigrationImporting
	m.Updated = time.Now().UTC()
	value, err := json.Marshal(m)
	if err != nil {
		return 0, fmt.Errorf("%s: encode the migration record: %w", what, err)
	}
	put := clientv3.OpPut(key, string(value))
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)}
	reads := []clientv3.Op{clientv3.OpGet(key)}
	for _, prefix := range b.importRanges() {
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(prefix), "=", 0).WithPrefix())
		reads = append(reads, clientv3.OpGet(prefix, clientv3.WithPrefix(), clientv3.WithCountOnly()))
	}
	for range maxRecordRetries {
		resp, err := b.client.Txn(ctx).If(cmps...).Then(put).Else(reads...).Commit()
		if err != nil {
			return 0, b.convertError(err, what+": record phase importing")
		}
		if resp.Succeeded {
			rev := resp.Header.Revision
			b.storeRecord(&migrationRecord{m: m, ok: true, modRev: rev, rev: rev})
			return rev, nil
		}
		var kv *mvccpb.KeyValue
		if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
			kv = kvs[0]
		}
		stored := b.recordFromKV(kv, resp.Header.Revision)
		b.storeRecord(stored)
		switch {
		case stored.err != nil:
			return 0, fmt.Errorf("%s: %w", what, stored.err)
		case stored.ok && m.RollsBack != "" && stored.m.ID == m.RollsBack && stored.m.Phase == coord.MigrationSwitched:
			// The source of the migration m rolls back: what it holds is
			// replaced by the copy of the target, below.
		case stored.ok && (stored.m.ID != m.ID || stored.m.Phase != coord.MigrationImporting):
			return 0, fmt.Errorf("%w: %s: the migration record %s holds %s in phase %s", coord.ErrExists, what, key, stored.m.ID, stored.m.Phase)
		case !stored.ok:
			for i, prefix := range b.importRanges() {
				if n := resp.Responses[i+1].GetResponseRange().GetCount(); n > 0 {
					return 0, fmt.Errorf("%w: %s: %d keys under %s", coord.ErrExists, what, n, prefix)
				}
			}
			continue // emptied meanwhile: try again
		}
		// The record is m's, from an Import that stopped midway, or the
		// rolled back migration's: empty what it wrote and start again.
		retry := []clientv3.Op{put}
		for _, prefix := range b.importRanges() {
			retry = append(retry, clientv3.OpDelete(prefix, clientv3.WithPrefix()))
		}
		resp, err = b.client.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", stored.modRev)).Then(retry...).Commit()
		if err != nil {
			return 0, b.convertError(err, what+": restart an import that stopped midway")
		}
		if resp.Succeeded {
			rev := resp.Header.Revision
			b.storeRecord(&migrationRecord{m: m, ok: true, modRev: rev, rev: rev})
			b.log.Info("restarting an import that stopped midway", "migration", m.ID)
			return rev, nil
		}
	}
	return 0, fmt.Errorf("%w: %s: the migration record changed %d times in a row", coord.ErrUnavailable, what, maxRecordRetries)
}

// importWrites returns the puts that store snap, after checking what it
// holds as the stores' own writes check it.
func (b *Backend) importWrites(snap *coord.Snapshot) ([]importWrite, error) {
	var writes []importWrite
	add := func(op clientv3.Op, key, value string) {
		writes = append(writes, importWrite{op: op, key: key, value: value, size: len(key) + len(value)})
	}
	put := func(key, value string) { add(clientv3.OpPut(key, value), key, value) }

	md := snap.Metadata
	for _, name := range md.TopicNames() {
		t := md.Topics[name]
		t.Name = name
		value, err := json.Marshal(t)
		if err != nil {
			return nil, fmt.Errorf("encode topic %s: %w", name, err)
		}
		put(b.topicKey(name), string(value))
	}
	tps := make([]coord.TopicPartition, 0, len(md.Partitions))
	for tp := range md.Partitions {
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, func(x, y coord.TopicPartition) int {
		return cmp.Or(cmp.Compare(x.Topic, y.Topic), cmp.Compare(x.Partition, y.Partition))
	})
	for _, tp := range tps {
		st := md.Partitions[tp]
		st.Topic, st.Partition = tp.Topic, tp.Partition
		value, err := encodePartition(st)
		if err != nil {
			return nil, err
		}
		put(b.partitionKey(tp), value)
	}

	sec := snap.Security
	for user, creds := range sec.Users {
		if err := coord.ValidateScramUser(user); err != nil {
			return nil, err
		}
		for _, c := range creds {
			if err := c.Validate(); err != nil {
				return nil, fmt.Errorf("user %q: %w", user, err)
			}
			put(b.scramKey(user, c.Mechanism), coord.FormatScramCredential(c))
		}
	}
	if err := coord.ValidateACLs(sec.ACLs); err != nil {
		return nil, err
	}
	for _, a := range sec.ACLs {
		put(b.aclKey(a), encodeACL(a))
	}

	cfgs := snap.Configs
	for entity, config := range cfgs.Brokers {
		if err := coord.ValidateBrokerEntity(entity); err != nil {
			return nil, err
		}
		if len(config) > 0 {
			value, _ := json.Marshal(config)
			put(b.brokerConfigKey(entity), string(value))
		}
	}
	for entity, quotas := range cfgs.Quotas {
		if err := entity.Validate(); err != nil {
			return nil, err
		}
		if len(quotas) > 0 {
			value, _ := json.Marshal(quotas)
			put(b.quotasPrefix()+entity.String(), string(value))
		}
	}

	// The producer id counter: the stored block ends just below
	// NextProducerID, so the next block starts there.
	blockKey := b.producerIDBlockKey()
	switch next := snap.NextProducerID; {
	case next < 0:
		return nil, fmt.Errorf("next producer id %d: negative", next)
	case next == 0:
		add(clientv3.OpDelete(blockKey), blockKey, "")
	default:
		first := max(0, next-coord.ProducerIDBlockSize)
		block := coord.ProducerIDBlock{Broker: coord.NoBroker, First: first, Size: next - first}
		put(blockKey, encodeProducerIDBlock(block))
	}
	if len(snap.ProducerIDKey) > 0 {
		if err := coord.CheckProducerIDKey("snapshot", snap.ProducerIDKey); err != nil {
			return nil, err
		}
		put(b.producerIDKeyKey(), string(snap.ProducerIDKey))
	}
	return writes, nil
}

// importChunks groups writes into transactions of up to maxTxnOps
// writes and importChunkBytes; ErrTooLarge for one write over that.
func importChunks(writes []importWrite) ([][]clientv3.Op, error) {
	var chunks [][]clientv3.Op
	var cur []clientv3.Op
	size := 0
	for _, w := range writes {
		if w.size > importChunkBytes {
			return nil, fmt.Errorf("%w: %s is %d bytes, over %d", coord.ErrTooLarge, w.op.KeyBytes(), w.size, importChunkBytes)
		}
		if len(cur) == maxTxnOps || size+w.size > importChunkBytes {
			chunks, cur, size = append(chunks, cur), nil, 0
		}
		cur = append(cur, w.op)
		size += w.size
	}
	if len(cur) > 0 {
		chunks = append(chunks, cur)
	}
	return chunks, nil
}
