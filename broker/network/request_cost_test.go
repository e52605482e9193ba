package network

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// walkRequest walks the body of kreq, encoded by kmsg, along the shape
// DecodeCost derives for it, and returns the walker after the walk.
func walkRequest(t *testing.T, kreq kmsg.Request) costWalker {
	t.Helper()
	s, err := requestShape(kreq.Key(), kreq.GetVersion())
	if err != nil {
		t.Fatalf("%s v%d: shape: %v", kmsg.NameForKey(kreq.Key()), kreq.GetVersion(), err)
	}
	w := costWalker{src: kreq.AppendTo(nil)}
	w.walk(s)
	return w
}

// checkWalk fails the test unless the walk of kreq's body took every
// byte of it, no more and no fewer.
func checkWalk(t *testing.T, name string, kreq kmsg.Request) costWalker {
	t.Helper()
	w := walkRequest(t, kreq)
	if w.bad || len(w.src) != 0 {
		t.Errorf("%s: got a walk that ran out of bytes (%v) or left %d bytes, want one that takes the body exactly", name, w.bad, len(w.src))
	}
	return w
}

// TestDecodeCostFetchFromReplicaFetcher prices the Fetch v12 a replica
// fetcher sent in a `tripod verify --workload txn` run, which its leader
// refused as costing 268437016 bytes for 188: the walk read 24 bytes per
// partition that are not there (two tagged fields taken for fields in
// line) and took a string length from the next topic's bytes.
func TestDecodeCostFetchFromReplicaFetcher(t *testing.T) {
	kreq := kmsg.NewPtrFetchRequest()
	kreq.SetVersion(12)
	kreq.ReplicaID = 2
	kreq.MaxWaitMillis = 500
	kreq.MinBytes = 1
	kreq.MaxBytes = 10 << 20
	kreq.SessionID = 1769742654
	kreq.SessionEpoch = 17
	for _, tp := range []struct {
		topic      string
		partitions []int32
	}{
		{"__consumer_offsets", []int32{48}},
		{"verify-out", []int32{2, 1}},
	} {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = tp.topic
		for _, p := range tp.partitions {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition = p
			rp.FetchOffset = 10
			rp.LogStartOffset = 0
			rp.PartitionMaxBytes = 1 << 20
			rt.Partitions = append(rt.Partitions, rp)
		}
		kreq.Topics = append(kreq.Topics, rt)
	}
	body := kreq.AppendTo(nil)
	cost, err := DecodeCost(kreq.Key(), kreq.GetVersion(), body)
	if err != nil {
		t.Fatal(err)
	}
	if limit := MaxDecodeExpansion*len(body) + DecodeCostSlack; cost > limit {
		t.Errorf("got a decode cost of %d for a %d-byte body, want at most %d", cost, len(body), limit)
	}
	checkWalk(t, "replica fetcher", kreq)
}

// TestDecodeCostFetchWithPartitions walks Fetch v12 requests of every
// partition shape tripod receives: a franz-go consumer's (tagged fields
// at their defaults, not sent) and one whose partitions carry a tagged
// HighWatermark, several topics of several partitions, a session,
// forgotten topics and a rack.
func TestDecodeCostFetchWithPartitions(t *testing.T) {
	for _, tc := range []struct {
		name string
		// highWatermark is what a partition's tagged HighWatermark
		// holds: its default (not sent), or 0 as a partition built
		// as a Go literal holds it (sent as a tag).
		highWatermark int64
		replicaID     int32
	}{
		{"consumer", 1<<63 - 1, -1},
		{"tagged high watermark", 0, 2},
	} {
		kreq := kmsg.NewPtrFetchRequest()
		kreq.SetVersion(12)
		kreq.ReplicaID = tc.replicaID
		kreq.MaxWaitMillis = 500
		kreq.MinBytes = 1
		kreq.MaxBytes = 50 << 20
		kreq.SessionID = 1234567
		kreq.SessionEpoch = 3
		for _, topic := range []string{"verify", "__consumer_offsets", "__transaction_state"} {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = topic
			for p := range int32(6) {
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition = p
				rp.CurrentLeaderEpoch = 7
				rp.FetchOffset = 1<<32 + int64(p)
				rp.LastFetchedEpoch = 6
				rp.LogStartOffset = -1
				rp.PartitionMaxBytes = 1 << 20
				rp.HighWatermark = tc.highWatermark
				rt.Partitions = append(rt.Partitions, rp)
			}
			kreq.Topics = append(kreq.Topics, rt)
		}
		forgotten := kmsg.NewFetchRequestForgottenTopic()
		forgotten.Topic = "gone"
		forgotten.Partitions = []int32{0, 1}
		kreq.ForgottenTopics = append(kreq.ForgottenTopics, forgotten)
		kreq.Rack = "rack-a"

		w := checkWalk(t, tc.name, kreq)
		body := kreq.AppendTo(nil)
		cost, err := DecodeCost(kreq.Key(), kreq.GetVersion(), body)
		if err != nil {
			t.Fatalf("%s: decode cost: %v", tc.name, err)
		}
		if cost != w.cost {
			t.Errorf("%s: got a decode cost of %d, want the walk's %d", tc.name, cost, w.cost)
		}
		// The frame is longer than the body: the body alone is a
		// tighter bound than the one the broker enforces.
		if limit := MaxDecodeExpansion*len(body) + DecodeCostSlack; cost > limit {
			t.Errorf("%s: got a decode cost of %d for a %d-byte body, want at most %d", tc.name, cost, len(body), limit)
		}
	}
}

// TestDecodeCostUncountedPastEnd checks that a string whose length runs
// past the end of the body costs nothing: the decoder refuses it before
// allocating, and a length read from the wrong place once made a valid
// Fetch cost 34 GB.
func TestDecodeCostUncountedPastEnd(t *testing.T) {
	kreq := kmsg.NewPtrMetadataRequest()
	kreq.SetVersion(12)
	topic := kmsg.NewMetadataRequestTopic()
	name := "verify"
	topic.Topic = &name
	kreq.Topics = append(kreq.Topics, topic)
	body := kreq.AppendTo(nil)
	// The topic name's compact length is the byte after the topic's
	// 16-byte ID: make it claim 2^28 bytes.
	at := 1 + 16
	truncated := append(append(append([]byte(nil), body[:at]...), 0x81, 0x80, 0x80, 0x80, 0x01), body[at+1:]...)
	cost, err := DecodeCost(kreq.Key(), kreq.GetVersion(), truncated)
	if err != nil {
		t.Fatal(err)
	}
	if limit := MaxDecodeExpansion * len(truncated); cost > limit {
		t.Errorf("got a decode cost of %d for a %d-byte body whose topic name runs past its end, want at most %d", cost, len(truncated), limit)
	}
}

// fillRequest sets every field of the kmsg struct v, at every depth, to a
// value that is not its default, every array to one element: a request
// that carries every field its version knows, tagged ones too.
func fillRequest(v reflect.Value) {
	setDefaults(v)
	for i := 0; i < v.NumField(); i++ {
		sf := v.Type().Field(i)
		if !sf.IsExported() || sf.Name == "Version" || sf.Name == "UnknownTags" {
			continue
		}
		f := v.Field(i)
		switch {
		case f.Kind() == reflect.Struct:
			fillRequest(f)
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Struct:
			f.Set(reflect.MakeSlice(f.Type(), 1, 1))
			fillRequest(f.Index(0))
		default:
			_ = setProbe(f)
		}
	}
}

// TestDecodeCostWalksEveryRequest checks, for every request kmsg knows
// at every version, that the walk along the derived shape takes the body
// exactly, whether its arrays are empty, hold elements at their defaults
// (tagged fields not sent) or elements with every field set (every
// tagged field sent): a shape that takes a tagged field for one in line,
// or misses a field, misreads every request of that shape after it.
func TestDecodeCostWalksEveryRequest(t *testing.T) {
	for key := int16(0); key <= kmsg.MaxKey; key++ {
		kreq := kmsg.RequestForKey(key)
		if kreq == nil {
			continue
		}
		for version := int16(0); version <= kreq.MaxVersion(); version++ {
			if _, err := requestShape(key, version); err != nil {
				continue // a field the walk does not know: DecodeCost refuses the request
			}
			name := fmt.Sprintf("%s v%d", kmsg.NameForKey(key), version)

			empty := kmsg.RequestForKey(key)
			empty.SetVersion(version)
			checkWalk(t, name+" at its defaults", empty)

			defaults := kmsg.RequestForKey(key)
			v := reflect.ValueOf(defaults).Elem()
			fillArrays(v)
			defaults.SetVersion(version)
			checkWalk(t, name+" with arrays of default elements", defaults)

			full := kmsg.RequestForKey(key)
			fillRequest(reflect.ValueOf(full).Elem())
			full.SetVersion(version)
			checkWalk(t, name+" with every field set", full)
		}
	}
}

// fillArrays gives every array of structs in v, at every depth, one
// element at its defaults.
func fillArrays(v reflect.Value) {
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		if !v.Type().Field(i).IsExported() || f.Kind() != reflect.Slice || f.Type().Elem().Kind() != reflect.Struct {
			continue
		}
		f.Set(reflect.MakeSlice(f.Type(), 1, 1))
		setDefaults(f.Index(0))
		fillArrays(f.Index(0))
	}
}
