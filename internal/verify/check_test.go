package verify

import (
	"encoding/json"
	"reflect"
	"testing"
)

// producers are the producers of every test history: one of each kind.
var producers = []Producer{{"i", Idempotent}, {"p", Plain}, {"a", AcksOne}}

// acked is a write of value to partition acknowledged at offset.
func acked(producer, value string, partition int32, offset int64) Write {
	return Write{Producer: producer, Value: value, Partition: partition, Acked: true, Offset: offset}
}

// unacked is a write of value to partition that got no acknowledgement.
func unacked(producer, value string, partition int32) Write {
	return Write{Producer: producer, Value: value, Partition: partition}
}

// reads returns a consumer's reads of partition, one value per offset
// from first on; "" leaves an offset out.
func reads(partition int32, first int64, values ...string) []Read {
	var out []Read
	for i, v := range values {
		if v != "" {
			out = append(out, Read{Partition: partition, Offset: first + int64(i), Value: v})
		}
	}
	return out
}

// at is one read.
func at(partition int32, offset int64, value string) Read {
	return Read{Partition: partition, Offset: offset, Value: value}
}

func live(name string, rs ...[]Read) Consumer {
	c := Consumer{Name: name}
	for _, r := range rs {
		c.Reads = append(c.Reads, r...)
	}
	return c
}

func final(rs ...[]Read) Consumer {
	c := live("final", rs...)
	c.Final = true
	return c
}

// threeWrites are acknowledged writes of each kind at offsets 0, 1, 2 of
// partition 0 and offset 0 of partition 1.
var threeWrites = []Write{
	acked("i", "i-0", 0, 0), acked("p", "p-0", 0, 1), acked("a", "a-0", 0, 2), acked("i", "i-1", 1, 0),
}

func TestCheck(t *testing.T) {
	cases := []struct {
		name string
		h    History
		// want holds the checks expected to find something; every other
		// check must find nothing.
		want      map[string]Counts
		anomalies int
	}{
		{
			name: "clean: every acknowledged write read where acknowledged, by every consumer",
			h: History{Producers: producers, Writes: threeWrites, Consumers: []Consumer{
				live("c1", reads(0, 0, "i-0", "p-0", "a-0"), reads(1, 0, "i-1")),
				live("c2", reads(1, 0, "i-1"), reads(0, 0, "i-0", "p-0")),
				final(reads(0, 0, "i-0", "p-0", "a-0"), reads(1, 0, "i-1")),
			}},
		},
		{
			name: "clean: a write without acknowledgement may be read or not",
			h: History{Producers: producers, Writes: []Write{
				acked("i", "i-0", 0, 0), unacked("i", "i-1", 0), unacked("p", "p-0", 0), acked("p", "p-1", 0, 2),
			}, Consumers: []Consumer{
				live("c1", reads(0, 0, "i-0", "p-0")),
				final(reads(0, 0, "i-0", "p-0", "p-1")),
			}},
		},
		{
			name: "clean: an empty history",
			h:    History{Producers: producers},
		},
		{
			name: "clean: a gap nobody saw a value in is no skip",
			h: History{Producers: producers, Writes: []Write{acked("i", "i-0", 0, 0), acked("i", "i-1", 0, 2)},
				Consumers: []Consumer{live("c1", reads(0, 0, "i-0", "", "i-1"))}},
		},
		{
			name: "lost: idempotent write acknowledged, absent from the final read",
			h: History{Producers: producers, Writes: threeWrites, Consumers: []Consumer{
				final(reads(0, 0, "i-0", "p-0", "a-0")),
			}},
			want:      map[string]Counts{Lost: {Idempotent: 1}},
			anomalies: 1,
		},
		{
			name: "lost: plain write acknowledged, never read though a later offset was (no final read)",
			h: History{Producers: producers, Writes: threeWrites, Consumers: []Consumer{
				live("c1", reads(0, 0, "i-0", "", "a-0")),
			}},
			want:      map[string]Counts{Lost: {Plain: 1}},
			anomalies: 1,
		},
		{
			name: "lost: not without a final read when nothing later was read",
			h: History{Producers: producers, Writes: threeWrites, Consumers: []Consumer{
				live("c1", reads(0, 0, "i-0", "p-0")),
			}},
		},
		{
			name: "lost: acks=1 write missing is reported, not an anomaly",
			h: History{Producers: producers, Writes: threeWrites, Consumers: []Consumer{
				final(reads(0, 0, "i-0", "p-0"), reads(1, 0, "i-1")),
			}},
			want: map[string]Counts{Lost: {AcksOne: 1}},
		},
		{
			name: "lost: read by a live consumer, then replaced in the log",
			h: History{Producers: producers, Writes: append([]Write{unacked("p", "p-9", 0)}, threeWrites...), Consumers: []Consumer{
				live("c1", reads(0, 0, "i-0"), reads(1, 0, "i-1")),
				final(reads(0, 0, "p-9", "p-0", "a-0"), reads(1, 0, "i-1")),
			}},
			want:      map[string]Counts{Lost: {Idempotent: 1}, InconsistentOffsets: {Idempotent: 1, Plain: 1}},
			anomalies: 3,
		},
		{
			name: "duplicated: idempotent value at two offsets",
			h: History{Producers: producers, Writes: []Write{acked("i", "i-0", 0, 0), acked("i", "i-1", 0, 1)}, Consumers: []Consumer{
				final(reads(0, 0, "i-0", "i-1", "i-1")),
			}},
			want:      map[string]Counts{Duplicated: {Idempotent: 1}},
			anomalies: 1,
		},
		{
			name: "duplicated: a plain producer's retry is reported, not an anomaly, and its ack at the second copy is no wrong offset",
			h: History{Producers: producers, Writes: []Write{acked("p", "p-0", 0, 1), acked("p", "p-1", 0, 2)}, Consumers: []Consumer{
				final(reads(0, 0, "p-0", "p-0", "p-1")),
			}},
			want: map[string]Counts{Duplicated: {Plain: 1}},
		},
		{
			name: "duplicated: one value in two partitions",
			h: History{Producers: producers, Writes: []Write{acked("i", "i-0", 0, 0)}, Consumers: []Consumer{
				final(reads(0, 0, "i-0"), reads(1, 0, "i-0")),
			}},
			want:      map[string]Counts{Duplicated: {Idempotent: 1}},
			anomalies: 1,
		},
		{
			name: "inconsistent offsets: two consumers read different values at one offset",
			h: History{Producers: producers, Writes: []Write{unacked("a", "a-0", 0), unacked("a", "a-1", 0)}, Consumers: []Consumer{
				live("c1", reads(0, 0, "a-0")),
				live("c2", reads(0, 0, "a-1")),
			}},
			want:      map[string]Counts{InconsistentOffsets: {AcksOne: 1}},
			anomalies: 1,
		},
		{
			name: "non-monotonic: a consumer reads an offset again after a later one",
			h: History{Producers: producers, Writes: threeWrites, Consumers: []Consumer{
				live("c1", reads(0, 0, "i-0", "p-0", "a-0"), []Read{at(0, 1, "p-0"), at(0, 2, "a-0")}),
				final(reads(0, 0, "i-0", "p-0", "a-0"), reads(1, 0, "i-1")),
			}},
			want:      map[string]Counts{NonMonotonic: {Plain: 1}},
			anomalies: 1,
		},
		{
			name: "non-monotonic: partitions are tracked apart",
			h: History{Producers: producers, Writes: threeWrites, Consumers: []Consumer{
				live("c1", []Read{at(0, 0, "i-0"), at(1, 0, "i-1"), at(0, 1, "p-0")}),
			}},
		},
		{
			name: "skipped: a consumer steps over an offset another consumer read",
			h: History{Producers: producers, Writes: threeWrites, Consumers: []Consumer{
				live("c1", reads(0, 0, "i-0", "", "a-0")),
				final(reads(0, 0, "i-0", "p-0", "a-0"), reads(1, 0, "i-1")),
			}},
			want:      map[string]Counts{Skipped: {Plain: 1}},
			anomalies: 1,
		},
		{
			name: "skipped: a consumer's first read is above a known offset 0",
			h: History{Producers: producers, Writes: threeWrites, Consumers: []Consumer{
				live("c1", reads(0, 1, "p-0", "a-0")),
				final(reads(0, 0, "i-0", "p-0", "a-0"), reads(1, 0, "i-1")),
			}},
			want:      map[string]Counts{Skipped: {Idempotent: 1}},
			anomalies: 1,
		},
		{
			name: "wrong offset: acknowledged at one offset, read only at another",
			h: History{Producers: producers, Writes: []Write{acked("i", "i-0", 0, 0), acked("i", "i-1", 0, 5)}, Consumers: []Consumer{
				final(reads(0, 0, "i-0", "i-1")),
			}},
			want:      map[string]Counts{WrongOffset: {Idempotent: 1}},
			anomalies: 1,
		},
		{
			name: "wrong offset: an acks=1 write's is reported, not an anomaly",
			h: History{Producers: producers, Writes: []Write{acked("a", "a-0", 0, 3)}, Consumers: []Consumer{
				final(reads(0, 0, "a-0")),
			}},
			want: map[string]Counts{WrongOffset: {AcksOne: 1}},
		},
		{
			name: "values of no write are counted apart and are anomalies where found",
			h: History{Producers: producers, Writes: []Write{unacked("i", "i-0", 0)}, Consumers: []Consumer{
				live("c1", reads(0, 0, "x-0")),
				live("c2", reads(0, 0, "i-0")),
			}},
			want:      map[string]Counts{InconsistentOffsets: {Idempotent: 1, Other: 1}},
			anomalies: 2,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := Check(tc.h)
			if len(res.Checks) != len(Checks) {
				t.Fatalf("got %d check results, want %d", len(res.Checks), len(Checks))
			}
			for i, name := range Checks {
				cr := res.Checks[i]
				if cr.Name != name {
					t.Errorf("check %d: got %s, want %s", i, cr.Name, name)
				}
				if got, want := cr.Counts, tc.want[name]; got != want {
					t.Errorf("%s: got counts %+v, want %+v; examples %v", name, got, want, cr.Examples)
				}
				if cr.Counts.Total() > 0 && len(cr.Examples) == 0 {
					t.Errorf("%s: found %d, but no example", name, cr.Counts.Total())
				}
			}
			if res.Anomalies != tc.anomalies {
				t.Errorf("got %d anomalies, want %d", res.Anomalies, tc.anomalies)
			}
		})
	}
}

func TestCheckCountsAndExamples(t *testing.T) {
	h := History{Producers: producers, Writes: append([]Write{unacked("p", "p-9", 0), unacked("a", "a-9", 1)}, threeWrites...),
		Consumers: []Consumer{
			live("c1", reads(0, 0, "i-0", "p-0", "a-0"), reads(1, 0, "x-1")),
			final(reads(0, 0, "i-0", "p-0"), reads(1, 0, "i-1")),
		}}
	res := Check(h)
	if want := (Counts{Idempotent: 2, Plain: 2, AcksOne: 2}); res.Attempted != want {
		t.Errorf("attempted: got %+v, want %+v", res.Attempted, want)
	}
	if want := (Counts{Idempotent: 2, Plain: 1, AcksOne: 1}); res.Acked != want {
		t.Errorf("acked: got %+v, want %+v", res.Acked, want)
	}
	if want := (Counts{Idempotent: 2, Plain: 1, AcksOne: 1}); res.Read != want {
		t.Errorf("read: got %+v, want %+v", res.Read, want)
	}
	if res.Reads != 7 || res.Unknown != 1 {
		t.Errorf("got %d reads and %d unknown values, want 7 and 1", res.Reads, res.Unknown)
	}
	lost := res.Check(Lost)
	if lost.Counts != (Counts{AcksOne: 1}) || lost.Anomalies != 0 {
		t.Fatalf("lost: got %+v with %d anomalies, want one acks1, not an anomaly", lost.Counts, lost.Anomalies)
	}
	ex := lost.Examples[0]
	if ex.Value != "a-0" || ex.Producer != "a" || ex.Kind == nil || *ex.Kind != AcksOne || ex.Anomaly ||
		ex.Partition != 0 || ex.AckedOffset == nil || *ex.AckedOffset != 2 {
		t.Errorf("lost example: got %+v, want a-0 of producer a (acks1), partition 0 acked at 2, not an anomaly", ex)
	}
	if got, want := ex.String(), "a-0 partition 0 acked at 2: read at [2] before, absent from the final read"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	// The same history checks the same, examples included, and the
	// result survives JSON.
	again := Check(h)
	if !reflect.DeepEqual(res, again) {
		t.Errorf("two checks of one history differ:\n%+v\n%+v", res, again)
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var decoded Result
	if err := json.Unmarshal(b, &decoded); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	if !reflect.DeepEqual(res, decoded) {
		t.Errorf("JSON round trip: got %+v, want %+v", decoded, res)
	}
}

func TestExamplesAreBoundedAnomaliesFirst(t *testing.T) {
	h := History{Producers: producers}
	var final1 []Read
	for i := range 10 {
		v := "a-" + string(rune('0'+i))
		h.Writes = append(h.Writes, acked("a", v, 0, int64(i)))
	}
	h.Writes = append(h.Writes, acked("i", "i-0", 0, 10))
	final1 = append(final1, at(0, 11, "other"))
	h.Consumers = []Consumer{final(final1)}
	res := Check(h)
	lost := res.Check(Lost)
	if lost.Counts != (Counts{Idempotent: 1, AcksOne: 10}) || lost.Anomalies != 1 {
		t.Fatalf("got %+v with %d anomalies, want 1 idempotent and 10 acks1, 1 anomaly", lost.Counts, lost.Anomalies)
	}
	if len(lost.Examples) != MaxExamples {
		t.Errorf("got %d examples, want %d", len(lost.Examples), MaxExamples)
	}
	if !lost.Examples[0].Anomaly || lost.Examples[0].Value != "i-0" {
		t.Errorf("first example %+v, want the anomaly i-0", lost.Examples[0])
	}
}

func TestKindNames(t *testing.T) {
	for _, k := range Kinds {
		got, err := ParseKind(k.String())
		if err != nil || got != k {
			t.Errorf("ParseKind(%q): got %v, %v; want %v", k.String(), got, err, k)
		}
	}
	if _, err := ParseKind("exactly-once"); err == nil {
		t.Error("ParseKind(exactly-once): got no error, want one")
	}
}
