package verify

import (
	"fmt"
	"slices"
)

// txnOutcomes maps each transaction of h to its outcome.
func txnOutcomes(h History) map[string]TxnOutcome {
	out := make(map[string]TxnOutcome, len(h.Txns))
	for _, t := range h.Txns {
		out[t.ID] = t.Outcome
	}
	return out
}

// checkAbortedRead finds read_committed consumers reading a write of an
// aborted transaction.
func checkAbortedRead(ix *index, h History) CheckResult {
	rc := newRecorder(ix, AbortedRead)
	outcomes := txnOutcomes(h)
	for _, c := range h.Consumers {
		if !c.ReadCommitted {
			continue
		}
		for _, r := range c.Reads {
			w, ok := ix.writes[r.Value]
			if !ok || w.Txn == "" || outcomes[w.Txn] != Aborted {
				continue
			}
			rc.find(r.Value, Example{Partition: r.Partition, Offsets: []int64{r.Offset}, Consumer: c.Name,
				Detail: fmt.Sprintf("read at %d/%d, written in transaction %s, which aborted", r.Partition, r.Offset, w.Txn)})
		}
	}
	return rc.result()
}

// checkPartialRead finds transactions, committed or of unknown outcome,
// that the final read holds in part: one finding per transaction, about
// its first write missing. Without a final read there is nothing to
// check.
func checkPartialRead(ix *index, h History) CheckResult {
	rc := newRecorder(ix, PartialRead)
	if !ix.hasFinal {
		return rc.result()
	}
	outcomes := txnOutcomes(h)
	type tally struct {
		read, total int
		missing     *Write
	}
	tallies := map[string]*tally{}
	var order []string
	for i := range h.Writes {
		w := &h.Writes[i]
		if w.Txn == "" || outcomes[w.Txn] == Aborted {
			continue
		}
		t := tallies[w.Txn]
		if t == nil {
			t = &tally{}
			tallies[w.Txn] = t
			order = append(order, w.Txn)
		}
		t.total++
		if ix.inFinal[w.Value] {
			t.read++
		} else if t.missing == nil {
			t.missing = w
		}
	}
	for _, id := range order {
		t := tallies[id]
		if t.read == 0 || t.read == t.total {
			continue
		}
		rc.find(t.missing.Value, Example{Partition: t.missing.Partition,
			Detail: fmt.Sprintf("transaction %s: the final read holds %d of its %d writes, not this one", id, t.read, t.total)})
	}
	return rc.result()
}

// transformsOf maps each source value to the values the final read holds
// that transform it, in write order.
func transformsOf(ix *index, h History) map[string][]string {
	out := map[string][]string{}
	for _, w := range h.Writes {
		if w.Source != "" && ix.inFinal[w.Value] {
			out[w.Source] = append(out[w.Source], w.Value)
		}
	}
	return out
}

// checkTransformLost finds source values whose transformation the final
// read does not hold.
func checkTransformLost(ix *index, h History) CheckResult {
	rc := newRecorder(ix, TransformLost)
	if !ix.hasFinal {
		return rc.result()
	}
	transforms := transformsOf(ix, h)
	for _, src := range h.Sources {
		if len(transforms[src]) == 0 {
			rc.find(src, Example{Detail: "read and committed past by the transform, no transformation in the final read of its output"})
		}
	}
	return rc.result()
}

// checkTransformDuplicated finds source values transformed more than once
// in the final read: one finding per extra transformation.
func checkTransformDuplicated(ix *index, h History) CheckResult {
	rc := newRecorder(ix, TransformDuplicated)
	transforms := transformsOf(ix, h)
	sources := make([]string, 0, len(transforms))
	for src, vs := range transforms {
		if len(vs) > 1 {
			sources = append(sources, src)
		}
	}
	slices.Sort(sources)
	for _, src := range sources {
		vs := transforms[src]
		for _, v := range vs[1:] {
			ps := ix.positionsOf[v]
			ex := Example{Offsets: ix.offsetsOf(v), Detail: fmt.Sprintf("transforms %s, as %s does", src, vs[0])}
			if len(ps) > 0 {
				ex.Partition = ps[0].partition
			}
			rc.find(v, ex)
		}
	}
	return rc.result()
}
