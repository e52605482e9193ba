package verify

import "testing"

// txnProducers are the producers of the transaction histories: two
// transactional producers, t (input) and x (a transform stage).
var txnProducers = []Producer{{"t", Transactional}, {"x", Transactional}}

// inTxn is a write of value to partition in transaction txn, acknowledged
// at offset when the transaction committed (offset >= 0).
func inTxn(producer, txn, value string, partition int32, offset int64) Write {
	w := Write{Producer: producer, Value: value, Partition: partition, Txn: txn}
	if offset >= 0 {
		w.Acked, w.Offset = true, offset
	}
	return w
}

// from is w written by a transform stage for source value src.
func from(src string, w Write) Write {
	w.Source = src
	return w
}

// committedReader is a read_committed consumer.
func committedReader(name string, final bool, rs ...[]Read) Consumer {
	c := live(name, rs...)
	c.Final, c.ReadCommitted = final, true
	return c
}

func TestCheckTransactions(t *testing.T) {
	// Transaction 1 commits t-0 (0/0) and t-1 (1/0); transaction 2 aborts
	// t-2 (0/1) and t-3 (1/1); its marker and the aborted records sit at
	// offsets 1 and 2 of each partition; transaction 3 commits t-4 (0/3).
	txns := []Txn{{"t#1", Committed}, {"t#2", Aborted}, {"t#3", Committed}}
	writes := []Write{
		inTxn("t", "t#1", "t-0", 0, 0), inTxn("t", "t#1", "t-1", 1, 0),
		inTxn("t", "t#2", "t-2", 0, -1), inTxn("t", "t#2", "t-3", 1, -1),
		inTxn("t", "t#3", "t-4", 0, 3),
	}
	cases := []struct {
		name      string
		h         History
		want      map[string]Counts
		anomalies int
	}{
		{
			name: "clean: read_committed steps over the aborted writes and markers",
			h: History{Producers: txnProducers, Writes: writes, Txns: txns, Consumers: []Consumer{
				committedReader("c1", false, reads(0, 0, "t-0"), reads(1, 0, "t-1"), reads(0, 3, "t-4")),
				committedReader("final", true, reads(0, 0, "t-0", "", "", "t-4"), reads(1, 0, "t-1")),
			}},
		},
		{
			name: "clean: a read_uncommitted consumer may read the aborted writes",
			h: History{Producers: txnProducers, Writes: writes, Txns: txns, Consumers: []Consumer{
				live("c1", reads(0, 0, "t-0", "t-2", "", "t-4"), reads(1, 0, "t-1", "t-3")),
				committedReader("final", true, reads(0, 0, "t-0", "", "", "t-4"), reads(1, 0, "t-1")),
			}},
		},
		{
			name: "skipped: read_committed steps over a committed write, not over an aborted one",
			h: History{Producers: txnProducers, Writes: writes, Txns: txns, Consumers: []Consumer{
				live("c1", reads(0, 0, "t-0", "t-2", "", "t-4")),
				committedReader("c2", false, reads(0, 3, "t-4")),
				committedReader("final", true, reads(0, 0, "t-0", "", "", "t-4"), reads(1, 0, "t-1")),
			}},
			want:      map[string]Counts{Skipped: {Transactional: 1}},
			anomalies: 1,
		},
		{
			name: "clean: a resumed consumer starts where its group committed",
			h: History{Producers: txnProducers, Writes: writes, Txns: txns, Consumers: []Consumer{
				committedReader("c1", false, reads(0, 0, "t-0")),
				{Name: "c2", Resumed: true, ReadCommitted: true, Reads: reads(0, 3, "t-4")},
				committedReader("final", true, reads(0, 0, "t-0", "", "", "t-4"), reads(1, 0, "t-1")),
			}},
		},
		{
			name: "aborted read: read_committed reads an aborted write",
			h: History{Producers: txnProducers, Writes: writes, Txns: txns, Consumers: []Consumer{
				committedReader("final", true, reads(0, 0, "t-0", "t-2", "", "t-4"), reads(1, 0, "t-1")),
			}},
			want:      map[string]Counts{AbortedRead: {Transactional: 1}},
			anomalies: 1,
		},
		{
			name: "partial read and lost: the final read holds half a committed transaction",
			h: History{Producers: txnProducers, Writes: writes, Txns: txns, Consumers: []Consumer{
				committedReader("final", true, reads(0, 0, "t-0", "", "", "t-4")),
			}},
			want:      map[string]Counts{Lost: {Transactional: 1}, PartialRead: {Transactional: 1}},
			anomalies: 2,
		},
		{
			name: "partial read: a transaction of unknown outcome half visible",
			h: History{Producers: txnProducers, Txns: []Txn{{"t#9", Unknown}}, Writes: []Write{
				inTxn("t", "t#9", "t-0", 0, -1), inTxn("t", "t#9", "t-1", 1, -1),
			}, Consumers: []Consumer{committedReader("final", true, reads(0, 0, "t-0"))}},
			want:      map[string]Counts{PartialRead: {Transactional: 1}},
			anomalies: 1,
		},
		{
			name: "clean: a transaction of unknown outcome wholly visible, or wholly not",
			h: History{Producers: txnProducers, Txns: []Txn{{"t#8", Unknown}, {"t#9", Unknown}}, Writes: []Write{
				inTxn("t", "t#8", "t-0", 0, -1), inTxn("t", "t#8", "t-1", 1, -1),
				inTxn("t", "t#9", "t-2", 0, -1), inTxn("t", "t#9", "t-3", 1, -1),
			}, Consumers: []Consumer{committedReader("final", true, reads(0, 0, "t-0"), reads(1, 0, "t-1"))}},
		},
		{
			name: "duplicated: a committed transactional write at two offsets",
			h: History{Producers: txnProducers, Writes: writes, Txns: txns, Consumers: []Consumer{
				committedReader("final", true, reads(0, 0, "t-0", "", "", "t-4", "t-0"), reads(1, 0, "t-1")),
			}},
			want:      map[string]Counts{Duplicated: {Transactional: 1}},
			anomalies: 1,
		},
		{
			name: "transform: each source once is clean",
			h: History{Producers: txnProducers, Sources: []string{"t-0", "t-1"}, Txns: []Txn{{"x#1", Aborted}, {"x#2", Committed}},
				Writes: []Write{
					from("t-0", inTxn("x", "x#1", "x-0", 0, -1)),
					from("t-0", inTxn("x", "x#2", "x-1", 0, 2)), from("t-1", inTxn("x", "x#2", "x-2", 1, 0)),
				},
				Consumers: []Consumer{committedReader("final", true, reads(0, 2, "x-1"), reads(1, 0, "x-2"))}},
		},
		{
			name: "transform: a source lost and one transformed twice",
			h: History{Producers: txnProducers, Sources: []string{"t-0", "t-1", "t-4"}, Txns: []Txn{{"x#1", Committed}, {"x#2", Committed}},
				Writes: []Write{
					from("t-0", inTxn("x", "x#1", "x-0", 0, 0)), from("t-0", inTxn("x", "x#2", "x-1", 0, 1)),
					from("t-1", inTxn("x", "x#2", "x-2", 1, 0)),
				},
				Consumers: []Consumer{committedReader("final", true, reads(0, 0, "x-0", "x-1"), reads(1, 0, "x-2"))}},
			want:      map[string]Counts{TransformLost: {Other: 1}, TransformDuplicated: {Transactional: 1}},
			anomalies: 2,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := Check(tc.h)
			for _, cr := range res.Checks {
				if got, want := cr.Counts, tc.want[cr.Name]; got != want {
					t.Errorf("%s: got counts %+v, want %+v; examples %v", cr.Name, got, want, cr.Examples)
				}
			}
			if res.Anomalies != tc.anomalies {
				t.Errorf("got %d anomalies, want %d", res.Anomalies, tc.anomalies)
			}
		})
	}
}
