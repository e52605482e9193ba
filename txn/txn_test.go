package txn

import (
	"errors"
	"math"
	"reflect"
	"testing"
)

var limits = Limits{MaxTimeoutMs: 900_000, ExpirationMs: 604_800_000}

// store completes t on m as the broker does once t is stored.
func store(t *testing.T, m *Metadata, tr Transit) {
	t.Helper()
	if err := m.Complete(tr); err != nil {
		t.Fatalf("complete %v: %v", tr.State, err)
	}
}

// initialized returns the Metadata of "app" after its first InitProducerId
// completed: producer 1000 at epoch 0, Empty.
func initialized(t *testing.T) *Metadata {
	t.Helper()
	m := New("app", 1000, 60_000, 0)
	d, err := m.InitProducerID(limits, 60_000, NoProducerID, NoProducerEpoch, NoProducerID, 1)
	if err != nil || d.Code != 0 {
		t.Fatalf("first InitProducerId: %+v %v", d, err)
	}
	store(t, m, d.Transit)
	return m
}

// ongoing returns initialized's Metadata with a transaction open on a-0
// and b-1.
func ongoing(t *testing.T) *Metadata {
	t.Helper()
	m := initialized(t)
	code, tr, err := m.AddPartitions(1000, 0, []TopicPartition{{"b", 1}, {"a", 0}}, 10)
	if err != nil || code != 0 || tr == nil {
		t.Fatalf("AddPartitions: %d %+v %v", code, tr, err)
	}
	store(t, m, *tr)
	return m
}

// TestCanFollow checks the state table against Kafka's
// TransactionState.validPreviousStates, pair by pair.
func TestCanFollow(t *testing.T) {
	kafka := map[State][]State{
		Empty:             {Empty, CompleteCommit, CompleteAbort},
		Ongoing:           {Ongoing, Empty, CompleteCommit, CompleteAbort},
		PrepareCommit:     {Ongoing},
		PrepareAbort:      {Ongoing, PrepareEpochFence},
		CompleteCommit:    {PrepareCommit},
		CompleteAbort:     {PrepareAbort},
		Dead:              {Empty, CompleteAbort, CompleteCommit},
		PrepareEpochFence: {Ongoing},
	}
	for to := Empty; to <= PrepareEpochFence; to++ {
		for from := Empty; from <= PrepareEpochFence; from++ {
			want := false
			for _, p := range kafka[to] {
				want = want || p == from
			}
			if got := CanFollow(from, to); got != want {
				t.Errorf("%v after %v: got %v, want %v", to, from, got, want)
			}
		}
	}
	if got := PrepareEpochFence.String(); got != "PrepareEpochFence" {
		t.Errorf("state 7's name: got %q, want PrepareEpochFence", got)
	}
}

// TestInitProducerID walks InitProducerId's answers (KIP-98, KIP-360):
// a new id starts at epoch 0, a new producer bumps the epoch, a producer
// naming its current epoch bumps it and keeps the old one, the retry of
// that bump gets the same epoch, any other id or epoch is fenced, an
// open transaction is fenced and aborted first, a transaction ending is
// retried, and the timeout is bounded.
func TestInitProducerID(t *testing.T) {
	type want struct {
		code        Code
		id          int64
		epoch, last int16
		abortFirst  bool
	}
	for _, c := range []struct {
		name          string
		m             func(*testing.T) *Metadata
		timeoutMs     int32
		expectedID    int64
		expectedEpoch int16
		want          want
	}{
		{"a new producer", initialized, 60_000, -1, -1, want{id: 1000, epoch: 1, last: NoProducerEpoch}},
		{"the producer at its epoch (KIP-360)", initialized, 60_000, 1000, 0, want{id: 1000, epoch: 1, last: 0}},
		{"another producer id", initialized, 60_000, 999, 0, want{code: ProducerFenced}},
		{"an older epoch", func(t *testing.T) *Metadata {
			m := initialized(t)
			d, _ := m.InitProducerID(limits, 60_000, -1, -1, -1, 2)
			store(t, m, d.Transit)
			d, _ = m.InitProducerID(limits, 60_000, -1, -1, -1, 3)
			store(t, m, d.Transit)
			return m
		}, 60_000, 1000, 0, want{code: ProducerFenced}},
		{"the retry of a bump", func(t *testing.T) *Metadata {
			m := initialized(t)
			d, _ := m.InitProducerID(limits, 60_000, 1000, 0, -1, 2)
			store(t, m, d.Transit)
			return m
		}, 60_000, 1000, 0, want{id: 1000, epoch: 1, last: 0}},
		{"an open transaction", ongoing, 60_000, -1, -1, want{id: 1000, epoch: 1, last: NoProducerEpoch, abortFirst: true}},
		{"a transaction committing", func(t *testing.T) *Metadata {
			m := ongoing(t)
			_, tr, _ := m.EndTxn(1000, 0, true, 20)
			store(t, m, *tr)
			return m
		}, 60_000, -1, -1, want{code: ConcurrentTransactions}},
		{"a change pending", func(t *testing.T) *Metadata {
			m := initialized(t)
			if _, _, err := m.AddPartitions(1000, 0, []TopicPartition{{"a", 0}}, 10); err != nil {
				t.Fatal(err)
			}
			return m
		}, 60_000, -1, -1, want{code: ConcurrentTransactions}},
		{"a timeout above transaction.max.timeout.ms", initialized, 900_001, -1, -1, want{code: InvalidTransactionTimeout}},
		{"no timeout", initialized, 0, -1, -1, want{code: InvalidTransactionTimeout}},
	} {
		m := c.m(t)
		d, err := m.InitProducerID(limits, c.timeoutMs, c.expectedID, c.expectedEpoch, NoProducerID, 100)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		got := want{code: d.Code, abortFirst: d.AbortFirst}
		if d.Code == 0 {
			got.id, got.epoch, got.last = d.Transit.ProducerID, d.Transit.ProducerEpoch, d.Transit.LastProducerEpoch
		}
		if got != c.want {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
}

// TestInitProducerIDRotatesAnExhaustedEpoch: at the last epoch the
// transactional id gets a new producer id at epoch 0, keeping the old
// epoch when the producer named it, and the retry of that rotation gets
// the new id as it stands.
func TestInitProducerIDRotatesAnExhaustedEpoch(t *testing.T) {
	m := initialized(t)
	m.ProducerEpoch = math.MaxInt16 - 1
	d, err := m.InitProducerID(limits, 60_000, 1000, math.MaxInt16-1, NoProducerID, 5)
	if err != nil || !d.NeedProducerID {
		t.Fatalf("exhausted epoch without a new id: got %+v %v, want a request for one", d, err)
	}
	d, err = m.InitProducerID(limits, 60_000, 1000, math.MaxInt16-1, 2000, 5)
	if err != nil || d.Code != 0 || d.Transit.ProducerID != 2000 || d.Transit.ProducerEpoch != 0 || d.Transit.LastProducerEpoch != math.MaxInt16-1 {
		t.Fatalf("rotation: got %+v %v, want producer 2000 at epoch 0, last epoch %d", d, err, math.MaxInt16-1)
	}
	store(t, m, d.Transit)
	if m.LastProducerID != 1000 {
		t.Errorf("last producer id after the rotation: got %d, want 1000", m.LastProducerID)
	}
	d, err = m.InitProducerID(limits, 60_000, 1000, math.MaxInt16-1, NoProducerID, 6)
	if err != nil || d.Code != 0 || d.Transit.ProducerID != 2000 || d.Transit.ProducerEpoch != 0 {
		t.Fatalf("the rotation's retry: got %+v %v, want producer 2000 at epoch 0", d, err)
	}
}

// TestTransaction follows one transaction: partitions added open it (its
// start is the first add), a partition already in it is answered at once,
// EndTxn(commit) prepares the commit with every partition, the complete
// state empties it, and a retried EndTxn of the same outcome succeeds.
func TestTransaction(t *testing.T) {
	m := ongoing(t)
	if m.State != Ongoing || m.StartMs != 10 || !reflect.DeepEqual(m.SortedPartitions(), []TopicPartition{{"a", 0}, {"b", 1}}) {
		t.Fatalf("after AddPartitions: %+v", m)
	}
	if code, tr, err := m.AddPartitions(1000, 0, []TopicPartition{{"a", 0}}, 11); code != 0 || tr != nil || err != nil {
		t.Fatalf("a partition already added: got %d %+v %v, want an answer at once", code, tr, err)
	}
	code, tr, err := m.AddPartitions(1000, 0, []TopicPartition{{"c", 2}}, 12)
	if code != 0 || err != nil || tr == nil {
		t.Fatalf("another partition: %d %v", code, err)
	}
	store(t, m, *tr)
	if m.StartMs != 10 || len(m.Partitions) != 3 {
		t.Fatalf("after a second add: start %d, %d partitions, want 10 and 3", m.StartMs, len(m.Partitions))
	}
	code, tr, err = m.EndTxn(1000, 0, true, 20)
	if code != 0 || err != nil || tr == nil || tr.State != PrepareCommit || len(tr.Partitions) != 3 {
		t.Fatalf("EndTxn commit: %d %+v %v", code, tr, err)
	}
	store(t, m, *tr)
	done, err := m.PrepareComplete(30)
	if err != nil || done.State != CompleteCommit {
		t.Fatalf("complete: %+v %v", done, err)
	}
	store(t, m, done)
	if m.State != CompleteCommit || len(m.Partitions) != 0 || m.LastUpdateMs != 30 {
		t.Fatalf("after the commit: %+v", m)
	}
	if code, tr, err := m.EndTxn(1000, 0, true, 31); code != 0 || tr != nil || err != nil {
		t.Errorf("a retried commit: got %d %+v %v, want success at once", code, tr, err)
	}
	if code, _, _ := m.EndTxn(1000, 0, false, 31); code != InvalidTxnState {
		t.Errorf("an abort after the commit: got %d, want INVALID_TXN_STATE", code)
	}
	// The next transaction starts anew.
	code, tr, _ = m.AddPartitions(1000, 0, []TopicPartition{{"z", 0}}, 40)
	if code != 0 || tr == nil || tr.StartMs != 40 {
		t.Fatalf("the next transaction: %d %+v", code, tr)
	}
}

// TestEndTxn answers EndTxn in every state, and for the wrong producer.
func TestEndTxn(t *testing.T) {
	preparing := func(commit bool) func(*testing.T) *Metadata {
		return func(t *testing.T) *Metadata {
			m := ongoing(t)
			_, tr, _ := m.EndTxn(1000, 0, commit, 20)
			store(t, m, *tr)
			return m
		}
	}
	for _, c := range []struct {
		name    string
		m       func(*testing.T) *Metadata
		id      int64
		epoch   int16
		commit  bool
		code    Code
		prepare State
	}{
		{"commit an open transaction", ongoing, 1000, 0, true, 0, PrepareCommit},
		{"abort an open transaction", ongoing, 1000, 0, false, 0, PrepareAbort},
		{"another producer id", ongoing, 999, 0, true, InvalidProducerIDMapping, 0},
		{"a fenced epoch", ongoing, 1000, 1, true, ProducerFenced, 0},
		{"commit with no transaction", initialized, 1000, 0, true, InvalidTxnState, 0},
		{"commit while committing", preparing(true), 1000, 0, true, ConcurrentTransactions, 0},
		{"abort while committing", preparing(true), 1000, 0, false, InvalidTxnState, 0},
		{"abort while aborting", preparing(false), 1000, 0, false, ConcurrentTransactions, 0},
	} {
		m := c.m(t)
		code, tr, err := m.EndTxn(c.id, c.epoch, c.commit, 50)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if code != c.code || (c.prepare != 0) != (tr != nil) || (tr != nil && tr.State != c.prepare) {
			t.Errorf("%s: got code %d, transit %+v; want code %d, transit to %v", c.name, code, tr, c.code, c.prepare)
		}
	}
}

// TestAddPartitionsRefusals: the wrong producer, a change pending and an
// ending transaction are refused.
func TestAddPartitionsRefusals(t *testing.T) {
	m := ongoing(t)
	tps := []TopicPartition{{"x", 0}}
	if code, _, _ := m.AddPartitions(7, 0, tps, 20); code != InvalidProducerIDMapping {
		t.Errorf("another producer id: got %d, want INVALID_PRODUCER_ID_MAPPING", code)
	}
	if code, _, _ := m.AddPartitions(1000, 3, tps, 20); code != ProducerFenced {
		t.Errorf("another epoch: got %d, want PRODUCER_FENCED", code)
	}
	_, tr, _ := m.EndTxn(1000, 0, false, 20)
	if code, _, _ := m.AddPartitions(1000, 0, tps, 21); code != ConcurrentTransactions {
		t.Errorf("while the abort is stored: got %d, want CONCURRENT_TRANSACTIONS", code)
	}
	store(t, m, *tr)
	if code, _, _ := m.AddPartitions(1000, 0, tps, 22); code != ConcurrentTransactions {
		t.Errorf("while the markers are written: got %d, want CONCURRENT_TRANSACTIONS", code)
	}
	if code := m.VerifyPartition(1000, 0, TopicPartition{"a", 0}); code != InvalidTxnState {
		t.Errorf("a late write to the aborting transaction: got %d, want INVALID_TXN_STATE", code)
	}
}

// TestVerifyPartition answers the leaders' check of KIP-890 part 1.
func TestVerifyPartition(t *testing.T) {
	m := ongoing(t)
	for _, c := range []struct {
		name  string
		id    int64
		epoch int16
		tp    TopicPartition
		want  Code
	}{
		{"a partition of the open transaction", 1000, 0, TopicPartition{"a", 0}, 0},
		{"a partition not added", 1000, 0, TopicPartition{"a", 9}, InvalidTxnState},
		{"a fenced epoch", 1000, 1, TopicPartition{"a", 0}, ProducerFenced},
		{"another producer", 5, 0, TopicPartition{"a", 0}, InvalidProducerIDMapping},
	} {
		if got := m.VerifyPartition(c.id, c.epoch, c.tp); got != c.want {
			t.Errorf("%s: got %d, want %d", c.name, got, c.want)
		}
	}
}

// TestFenceAndAbort: fencing an open transaction bumps the epoch (the old
// producer's EndTxn is then PRODUCER_FENCED) and aborts with it; if the
// abort's store fails, the epoch stays bumped and the next fence does
// not bump it again.
func TestFenceAndAbort(t *testing.T) {
	m := ongoing(t)
	tr, err := m.PrepareFenceAndAbort(100)
	if err != nil || tr.State != PrepareAbort || tr.ProducerEpoch != 1 || len(tr.Partitions) != 2 {
		t.Fatalf("fence: %+v %v", tr, err)
	}
	if code, _, _ := m.EndTxn(1000, 0, true, 101); code != ProducerFenced {
		t.Errorf("the fenced producer's commit: got %d, want PRODUCER_FENCED", code)
	}
	m.Abandon()
	tr, err = m.PrepareFenceAndAbort(102)
	if err != nil || tr.ProducerEpoch != 1 {
		t.Fatalf("fence after a failed abort: got %+v %v, want epoch 1 kept", tr, err)
	}
	store(t, m, tr)
	done, _ := m.PrepareComplete(103)
	store(t, m, done)
	if m.State != CompleteAbort || m.ProducerEpoch != 1 {
		t.Fatalf("after the fenced abort: %+v", m)
	}
	// The new producer's retry now bumps to its own epoch.
	d, err := m.InitProducerID(limits, 60_000, -1, -1, -1, 104)
	if err != nil || d.Code != 0 || d.Transit.ProducerEpoch != 2 {
		t.Fatalf("the new producer's InitProducerId: %+v %v", d, err)
	}
}

// TestCompleteRefusesWhatDoesNotFollow: a Transit that is not the pending
// one, or that changes what its state may not, is refused and changes
// nothing; with no transition pending nothing completes.
func TestCompleteRefusesWhatDoesNotFollow(t *testing.T) {
	m := ongoing(t)
	before := *m
	var ise *IllegalStateError
	if err := m.Complete(Transit{State: PrepareCommit}); !errors.As(err, &ise) {
		t.Errorf("nothing pending: got %v, want an IllegalStateError", err)
	}
	tr, _ := m.PrepareAbortOrCommit(PrepareCommit, 20)
	bad := tr
	bad.ProducerEpoch = 5
	if err := m.Complete(bad); !errors.As(err, &ise) {
		t.Errorf("another epoch: got %v, want an IllegalStateError", err)
	}
	bad = tr
	bad.Partitions = bad.Partitions[:1]
	if err := m.Complete(bad); !errors.As(err, &ise) {
		t.Errorf("other partitions: got %v, want an IllegalStateError", err)
	}
	if m.State != before.State || m.ProducerEpoch != before.ProducerEpoch || len(m.Partitions) != 2 {
		t.Errorf("after refused completes: %+v", m)
	}
	if _, err := m.PrepareAddPartitions(nil, 21); !errors.As(err, &ise) {
		t.Errorf("a second prepare while one is pending: got %v, want an IllegalStateError", err)
	}
	store(t, m, tr)
}

// TestTimedOutAndExpired: an open transaction times out after its
// transaction.timeout.ms from its start; an id with no transaction open
// expires transactional.id.expiration.ms after its last change.
func TestTimedOutAndExpired(t *testing.T) {
	m := ongoing(t)
	if m.TimedOut(10 + 60_000) {
		t.Error("timed out at its deadline, want only after it")
	}
	if !m.TimedOut(10 + 60_001) {
		t.Error("not timed out after its deadline")
	}
	if m.Expired(limits, 1<<40) {
		t.Error("an open transaction expired")
	}
	e := initialized(t)
	if e.Expired(limits, 1+limits.ExpirationMs-1) || !e.Expired(limits, 1+limits.ExpirationMs) {
		t.Error("expiry not at transactional.id.expiration.ms after the last change")
	}
	tr, err := e.PrepareDead()
	if err != nil || RecordValue(tr) != nil {
		t.Errorf("the expired id's record: got %v %v, want a tombstone", RecordValue(tr), err)
	}
}

// TestRecordsRoundTrip: the stored record of every transition restores
// the metadata it was completed into, partitions grouped by topic.
func TestRecordsRoundTrip(t *testing.T) {
	m := ongoing(t)
	id, err := DecodeKey(RecordKey("app"))
	if err != nil || id != "app" {
		t.Fatalf("key: %q %v", id, err)
	}
	tr, _ := m.PrepareAbortOrCommit(PrepareAbort, 20)
	store(t, m, tr)
	got, err := Restore("app", RecordValue(tr))
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	if got.State != PrepareAbort || got.ProducerID != 1000 || got.ProducerEpoch != 0 || got.TimeoutMs != 60_000 ||
		got.StartMs != 10 || got.LastUpdateMs != 20 || !reflect.DeepEqual(got.SortedPartitions(), m.SortedPartitions()) {
		t.Errorf("restored %+v, want %+v", got, m)
	}
	empty := initialized(t)
	d, _ := empty.InitProducerID(limits, 30_000, -1, -1, -1, 5)
	got, err = Restore("app", RecordValue(d.Transit))
	if err != nil || got.State != Empty || got.ProducerEpoch != 1 || got.TimeoutMs != 30_000 || len(got.Partitions) != 0 || got.StartMs != -1 {
		t.Errorf("restored Empty: %+v %v", got, err)
	}
	if m, err := Restore("app", nil); m != nil || err != nil {
		t.Errorf("a tombstone: got %+v %v, want no metadata", m, err)
	}
	if _, err := Restore("app", []byte{0, 9}); err == nil {
		t.Error("a value of version 9: got no error")
	}
}

// TestPartitionFor maps transactional ids as Kafka does: the rule of
// __consumer_offsets, abs(hashCode) % partitions.
func TestPartitionFor(t *testing.T) {
	for _, c := range []struct {
		id   string
		want int32
	}{
		// "a".hashCode() is 97; "ab".hashCode() is 3105.
		{"a", 97 % 50},
		{"ab", 3105 % 50},
	} {
		if got := PartitionFor(c.id, 50); got != c.want {
			t.Errorf("PartitionFor(%q, 50): got %d, want %d", c.id, got, c.want)
		}
	}
}
