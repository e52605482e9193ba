package group

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/replication/log"
)

// kstr returns a pointer to s, for kmsg's nullable strings.
func kstr(s string) *string { return &s }

func TestOffsetRecordKeyRoundTrip(t *testing.T) {
	k := OffsetKey{Group: "grüppe", Topic: "orders", Partition: 7}
	key := OffsetRecordKey(k)

	var decoded kmsg.OffsetCommitKey
	if err := decoded.ReadFrom(key); err != nil {
		t.Fatalf("kmsg OffsetCommitKey.ReadFrom: %v", err)
	}
	if want := (kmsg.OffsetCommitKey{Version: 1, Group: k.Group, Topic: k.Topic, Partition: k.Partition}); decoded != want {
		t.Errorf("kmsg decodes the key as %+v, want %+v", decoded, want)
	}

	rec, err := DecodeRecord(key, OffsetRecordValue(Offset{Offset: 42, LeaderEpoch: 3, CommitTimestamp: 1000, ExpireTimestamp: -1}))
	if err != nil {
		t.Fatalf("DecodeRecord: %v", err)
	}
	if rec.OffsetKey == nil || *rec.OffsetKey != k {
		t.Errorf("OffsetKey = %v, want %+v", rec.OffsetKey, k)
	}
	if rec.Group != "" || rec.GroupValue != nil {
		t.Errorf("an offset record decodes with Group %q and GroupValue %v, want neither", rec.Group, rec.GroupValue)
	}
}

func TestOffsetRecordValueVersions(t *testing.T) {
	for _, tc := range []struct {
		name        string
		in          Offset
		wantVersion int16
		want        Offset
	}{
		{
			name:        "no expire timestamp is version 3 with the leader epoch",
			in:          Offset{Offset: 42, LeaderEpoch: 5, Metadata: "meta", CommitTimestamp: 1_700_000_000_000, ExpireTimestamp: -1},
			wantVersion: 3,
			want:        Offset{Offset: 42, LeaderEpoch: 5, Metadata: "meta", CommitTimestamp: 1_700_000_000_000, ExpireTimestamp: -1},
		},
		{
			name:        "unknown leader epoch",
			in:          Offset{Offset: 0, LeaderEpoch: -1, CommitTimestamp: 1, ExpireTimestamp: -1},
			wantVersion: 3,
			want:        Offset{Offset: 0, LeaderEpoch: -1, CommitTimestamp: 1, ExpireTimestamp: -1},
		},
		{
			name:        "an expire timestamp is version 1, which drops the leader epoch",
			in:          Offset{Offset: 9, LeaderEpoch: 5, Metadata: "m", CommitTimestamp: 1000, ExpireTimestamp: 61000},
			wantVersion: 1,
			want:        Offset{Offset: 9, LeaderEpoch: -1, Metadata: "m", CommitTimestamp: 1000, ExpireTimestamp: 61000},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			value := OffsetRecordValue(tc.in)
			var decoded kmsg.OffsetCommitValue
			if err := decoded.ReadFrom(value); err != nil {
				t.Fatalf("kmsg OffsetCommitValue.ReadFrom: %v", err)
			}
			if decoded.Version != tc.wantVersion {
				t.Errorf("value version %d, want %d", decoded.Version, tc.wantVersion)
			}
			rec, err := DecodeRecord(OffsetRecordKey(OffsetKey{Group: "g", Topic: "t"}), value)
			if err != nil {
				t.Fatalf("DecodeRecord: %v", err)
			}
			if rec.OffsetValue == nil || *rec.OffsetValue != tc.want {
				t.Errorf("decoded %+v, want %+v", rec.OffsetValue, tc.want)
			}
		})
	}
}

func TestGroupRecordRoundTrip(t *testing.T) {
	key := GroupRecordKey("payments")
	var decodedKey kmsg.GroupMetadataKey
	if err := decodedKey.ReadFrom(key); err != nil {
		t.Fatalf("kmsg GroupMetadataKey.ReadFrom: %v", err)
	}
	if want := (kmsg.GroupMetadataKey{Version: 2, Group: "payments"}); decodedKey != want {
		t.Errorf("kmsg decodes the key as %+v, want %+v", decodedKey, want)
	}

	v := &kmsg.GroupMetadataValue{
		Version:               0, // GroupRecordValue sets 3
		ProtocolType:          "consumer",
		Generation:            12,
		Protocol:              kstr("cooperative-sticky"),
		Leader:                kstr("member-1"),
		CurrentStateTimestamp: 1_700_000_000_123,
		Members: []kmsg.GroupMetadataValueMember{
			{
				MemberID: "member-1", InstanceID: kstr("instance-a"), ClientID: "client", ClientHost: "/10.0.0.1",
				RebalanceTimeoutMillis: 60000, SessionTimeoutMillis: 45000,
				Subscription: []byte{0, 1, 2}, Assignment: []byte{3, 4},
			},
			{
				MemberID: "member-2", ClientID: "client", ClientHost: "/10.0.0.2",
				RebalanceTimeoutMillis: 30000, SessionTimeoutMillis: 10000,
				Subscription: []byte{5}, Assignment: []byte{},
			},
		},
	}
	value := GroupRecordValue(v)
	if v.Version != 3 {
		t.Errorf("GroupRecordValue left Version %d, want 3", v.Version)
	}
	if version := int16(binary.BigEndian.Uint16(value)); version != 3 {
		t.Errorf("encoded value version %d, want 3", version)
	}

	rec, err := DecodeRecord(key, value)
	if err != nil {
		t.Fatalf("DecodeRecord: %v", err)
	}
	if rec.Group != "payments" {
		t.Errorf("Group = %q, want %q", rec.Group, "payments")
	}
	if rec.OffsetKey != nil || rec.OffsetValue != nil {
		t.Errorf("a group record decodes with OffsetKey %v and OffsetValue %v, want neither", rec.OffsetKey, rec.OffsetValue)
	}
	if !reflect.DeepEqual(rec.GroupValue, v) {
		t.Errorf("decoded\n%+v\nwant\n%+v", rec.GroupValue, v)
	}
}

func TestDecodeOffsetValueOlderVersions(t *testing.T) {
	for _, tc := range []struct {
		name  string
		value kmsg.OffsetCommitValue
		want  Offset
	}{
		{
			name:  "v0: offset, metadata, commit timestamp",
			value: kmsg.OffsetCommitValue{Version: 0, Offset: 10, Metadata: "zero", CommitTimestamp: 100},
			want:  Offset{Offset: 10, LeaderEpoch: -1, Metadata: "zero", CommitTimestamp: 100, ExpireTimestamp: -1},
		},
		{
			name:  "v1: with an expire timestamp",
			value: kmsg.OffsetCommitValue{Version: 1, Offset: 11, Metadata: "one", CommitTimestamp: 100, ExpireTimestamp: 200},
			want:  Offset{Offset: 11, LeaderEpoch: -1, Metadata: "one", CommitTimestamp: 100, ExpireTimestamp: 200},
		},
		{
			name:  "v1: an expire timestamp of -1 is none",
			value: kmsg.OffsetCommitValue{Version: 1, Offset: 11, CommitTimestamp: 100, ExpireTimestamp: -1},
			want:  Offset{Offset: 11, LeaderEpoch: -1, CommitTimestamp: 100, ExpireTimestamp: -1},
		},
		{
			name:  "v2: KIP-211 drops the expire timestamp",
			value: kmsg.OffsetCommitValue{Version: 2, Offset: 12, Metadata: "two", CommitTimestamp: 100, ExpireTimestamp: 999},
			want:  Offset{Offset: 12, LeaderEpoch: -1, Metadata: "two", CommitTimestamp: 100, ExpireTimestamp: -1},
		},
		{
			name:  "v3: KIP-320 adds the leader epoch",
			value: kmsg.OffsetCommitValue{Version: 3, Offset: 13, LeaderEpoch: 4, Metadata: "three", CommitTimestamp: 100},
			want:  Offset{Offset: 13, LeaderEpoch: 4, Metadata: "three", CommitTimestamp: 100, ExpireTimestamp: -1},
		},
		{
			name:  "v4: flexible, with a topic id tag",
			value: kmsg.OffsetCommitValue{Version: 4, Offset: 14, LeaderEpoch: 5, Metadata: "four", CommitTimestamp: 100, TopicID: [16]byte{1, 2, 3}},
			want:  Offset{Offset: 14, LeaderEpoch: 5, Metadata: "four", CommitTimestamp: 100, ExpireTimestamp: -1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, keyVersion := range []int16{0, 1} {
				key := (&kmsg.OffsetCommitKey{Version: keyVersion, Group: "g", Topic: "t", Partition: 2}).AppendTo(nil)
				rec, err := DecodeRecord(key, tc.value.AppendTo(nil))
				if err != nil {
					t.Fatalf("key v%d: DecodeRecord: %v", keyVersion, err)
				}
				if want := (OffsetKey{Group: "g", Topic: "t", Partition: 2}); rec.OffsetKey == nil || *rec.OffsetKey != want {
					t.Errorf("key v%d: OffsetKey = %v, want %+v", keyVersion, rec.OffsetKey, want)
				}
				if rec.OffsetValue == nil || *rec.OffsetValue != tc.want {
					t.Errorf("key v%d: OffsetValue = %+v, want %+v", keyVersion, rec.OffsetValue, tc.want)
				}
			}
		})
	}
}

func TestDecodeGroupValueOlderVersions(t *testing.T) {
	member := func(version int16) kmsg.GroupMetadataValueMember {
		m := kmsg.GroupMetadataValueMember{
			MemberID: "m-1", ClientID: "c", ClientHost: "/h", RebalanceTimeoutMillis: 60000,
			SessionTimeoutMillis: 10000, Subscription: []byte("sub"), Assignment: []byte("assign"),
		}
		if version >= 3 {
			m.InstanceID = kstr("static-1")
		}
		return m
	}
	value := func(version int16) kmsg.GroupMetadataValue {
		return kmsg.GroupMetadataValue{
			Version: version, ProtocolType: "consumer", Generation: 3, Protocol: kstr("range"), Leader: kstr("m-1"),
			CurrentStateTimestamp: 5000, Members: []kmsg.GroupMetadataValueMember{member(version)},
		}
	}
	for _, tc := range []struct {
		name string
		in   kmsg.GroupMetadataValue
		want func(*kmsg.GroupMetadataValue)
	}{
		{
			name: "v0: no rebalance timeout (it reads as the session timeout), no state timestamp",
			in:   value(0),
			want: func(v *kmsg.GroupMetadataValue) {
				v.CurrentStateTimestamp = -1
				v.Members[0].RebalanceTimeoutMillis = 10000
			},
		},
		{
			name: "v1: KIP-62 adds the rebalance timeout",
			in:   value(1),
			want: func(v *kmsg.GroupMetadataValue) { v.CurrentStateTimestamp = -1 },
		},
		{
			name: "v2: KIP-211 adds the state timestamp",
			in:   value(2),
			want: func(*kmsg.GroupMetadataValue) {},
		},
		{
			name: "v3: KIP-345 adds instance ids",
			in:   value(3),
			want: func(*kmsg.GroupMetadataValue) {},
		},
		{
			name: "v4: flexible",
			in:   value(4),
			want: func(*kmsg.GroupMetadataValue) {},
		},
		{
			name: "no protocol, leader or members (an Empty group)",
			in:   kmsg.GroupMetadataValue{Version: 2, ProtocolType: "consumer", Generation: 4, CurrentStateTimestamp: 7000},
			want: func(*kmsg.GroupMetadataValue) {},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			encoded := tc.in.AppendTo(nil)
			want := tc.in
			want.Members = append([]kmsg.GroupMetadataValueMember(nil), tc.in.Members...)
			tc.want(&want)

			rec, err := DecodeRecord(GroupRecordKey("g"), encoded)
			if err != nil {
				t.Fatalf("DecodeRecord: %v", err)
			}
			if rec.Group != "g" {
				t.Errorf("Group = %q, want %q", rec.Group, "g")
			}
			if rec.GroupValue == nil {
				t.Fatalf("GroupValue = nil, want %+v", want)
			}
			// kmsg decodes an empty array as an empty, non-nil slice.
			if len(want.Members) == 0 && len(rec.GroupValue.Members) == 0 {
				want.Members = rec.GroupValue.Members
			}
			if !reflect.DeepEqual(*rec.GroupValue, want) {
				t.Errorf("GroupValue =\n%+v\nwant\n%+v", *rec.GroupValue, want)
			}
		})
	}
}

func TestDecodeRecordTombstones(t *testing.T) {
	k := OffsetKey{Group: "g", Topic: "t", Partition: 1}
	for _, value := range [][]byte{nil, {}} {
		rec, err := DecodeRecord(OffsetRecordKey(k), value)
		if err != nil {
			t.Fatalf("offset tombstone %v: DecodeRecord: %v", value, err)
		}
		if rec.OffsetKey == nil || *rec.OffsetKey != k || rec.OffsetValue != nil {
			t.Errorf("offset tombstone %v: got key %v value %v, want key %+v and no value", value, rec.OffsetKey, rec.OffsetValue, k)
		}

		rec, err = DecodeRecord(GroupRecordKey("g"), value)
		if err != nil {
			t.Fatalf("group tombstone %v: DecodeRecord: %v", value, err)
		}
		if rec.Group != "g" || rec.GroupValue != nil || rec.OffsetKey != nil {
			t.Errorf("group tombstone %v: got %+v, want group \"g\" and no value", value, rec)
		}
	}
}

func TestDecodeRecordErrors(t *testing.T) {
	offsetKey := OffsetRecordKey(OffsetKey{Group: "g", Topic: "t"})
	for _, tc := range []struct {
		name        string
		key, value  []byte
		wantUnknown bool
		wantIn      string
	}{
		{
			name: "key version 3 (a KIP-848 consumer group record)", key: []byte{0, 3, 0, 1, 'g'},
			wantUnknown: true, wantIn: "key: version 3",
		},
		{
			name: "negative key version", key: []byte{0xff, 0xff},
			wantUnknown: true, wantIn: "key: version -1",
		},
		{
			name: "offset value version 5", key: offsetKey, value: []byte{0, 5, 0, 0, 0, 0, 0, 0, 0, 1},
			wantUnknown: true, wantIn: "version 5",
		},
		{
			name: "group value version 9", key: GroupRecordKey("g"), value: []byte{0, 9},
			wantUnknown: true, wantIn: `group "g": version 9`,
		},
		{name: "empty key", key: nil, wantIn: "key: 0 bytes"},
		{name: "truncated offset key", key: offsetKey[:len(offsetKey)-1], wantIn: "offset key"},
		{name: "truncated group key", key: GroupRecordKey("group")[:5], wantIn: "group key"},
		{
			name: "truncated offset value", key: offsetKey,
			value:  OffsetRecordValue(Offset{Offset: 1, ExpireTimestamp: -1})[:5],
			wantIn: "offset value",
		},
		{name: "one-byte offset value", key: offsetKey, value: []byte{0}, wantIn: "too short for a version"},
		{
			name: "truncated group value", key: GroupRecordKey("g"),
			value:  GroupRecordValue(&kmsg.GroupMetadataValue{ProtocolType: "consumer"})[:6],
			wantIn: `group value of group "g"`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeRecord(tc.key, tc.value)
			if err == nil {
				t.Fatalf("DecodeRecord returned no error, want one containing %q", tc.wantIn)
			}
			if got := errors.Is(err, ErrUnknownVersion); got != tc.wantUnknown {
				t.Errorf("errors.Is(%q, ErrUnknownVersion) = %v, want %v", err, got, tc.wantUnknown)
			}
			if !strings.Contains(err.Error(), tc.wantIn) || !strings.Contains(err.Error(), OffsetsTopic) {
				t.Errorf("error %q, want it to name %s and contain %q", err, OffsetsTopic, tc.wantIn)
			}
		})
	}
}

func TestDecodeRecordOwnsItsMemory(t *testing.T) {
	key := GroupRecordKey("g")
	value := GroupRecordValue(&kmsg.GroupMetadataValue{
		ProtocolType: "consumer", Protocol: kstr("range"), Leader: kstr("m"),
		Members: []kmsg.GroupMetadataValueMember{{MemberID: "m", Subscription: []byte("subscription"), Assignment: []byte("assignment")}},
	})
	rec, err := DecodeRecord(key, value)
	if err != nil {
		t.Fatalf("DecodeRecord: %v", err)
	}
	for i := range value {
		value[i] = 0xee
	}
	for i := range key {
		key[i] = 0xee
	}
	m := rec.GroupValue.Members[0]
	if string(m.Subscription) != "subscription" || string(m.Assignment) != "assignment" || rec.Group != "g" {
		t.Errorf("after overwriting the input, got group %q subscription %q assignment %q, want %q %q %q",
			rec.Group, m.Subscription, m.Assignment, "g", "subscription", "assignment")
	}
}

// kmsgBatch builds a v2 batch of records with kmsg, independently of
// EncodeBatch, at baseOffset with the given attributes and producer.
func kmsgBatch(baseOffset int64, attributes int16, producerID int64, records []kmsg.Record) []byte {
	var raw []byte
	for i := range records {
		r := records[i]
		r.Length = 0
		r.Length = int32(len(r.AppendTo(nil)) - 1) // a one-byte varint of 0 counted
		raw = r.AppendTo(raw)
	}
	batch := kmsg.RecordBatch{
		FirstOffset:          baseOffset,
		Length:               int32(49 + len(raw)),
		PartitionLeaderEpoch: 3,
		Magic:                2,
		Attributes:           attributes,
		LastOffsetDelta:      records[len(records)-1].OffsetDelta,
		FirstTimestamp:       1000,
		MaxTimestamp:         1000,
		ProducerID:           producerID,
		ProducerEpoch:        0,
		FirstSequence:        0,
		NumRecords:           int32(len(records)),
		Records:              raw,
	}
	b := batch.AppendTo(nil)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// setBaseOffset writes offset into the base offset field of the batch b
// starts with, as the log does on append (the CRC does not cover it).
func setBaseOffset(b []byte, offset int64) {
	binary.BigEndian.PutUint64(b, uint64(offset))
}

// readRecord is one record EachRecord passed its fn.
type readRecord struct {
	offset     int64
	key, value []byte
}

// readRecords returns every record EachRecord passes its fn, copied.
func readRecords(t *testing.T, records []byte) []readRecord {
	t.Helper()
	var got []readRecord
	err := EachRecord(records, func(offset int64, key, value []byte) error {
		got = append(got, readRecord{offset, bytes.Clone(key), bytes.Clone(value)})
		return nil
	})
	if err != nil {
		t.Fatalf("EachRecord: %v", err)
	}
	return got
}

func TestEncodeBatchParsesAsKafkaBatch(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_123)
	kvs := []KV{
		{Key: OffsetRecordKey(OffsetKey{Group: "g", Topic: "t", Partition: 0}), Value: OffsetRecordValue(Offset{Offset: 5, LeaderEpoch: 1, CommitTimestamp: 1, ExpireTimestamp: -1})},
		{Key: GroupRecordKey("g"), Value: nil},
		{Key: []byte("k"), Value: []byte{}},
	}
	b := EncodeBatch(kvs, now)

	var batch kmsg.RecordBatch
	if err := batch.ReadFrom(b); err != nil {
		t.Fatalf("kmsg RecordBatch.ReadFrom: %v", err)
	}
	for _, f := range []struct {
		name      string
		got, want int64
	}{
		{"FirstOffset", batch.FirstOffset, 0},
		{"Length", int64(batch.Length), int64(len(b) - 12)},
		{"PartitionLeaderEpoch", int64(batch.PartitionLeaderEpoch), 0},
		{"Magic", int64(batch.Magic), 2},
		{"Attributes", int64(batch.Attributes), 0},
		{"LastOffsetDelta", int64(batch.LastOffsetDelta), 2},
		{"FirstTimestamp", batch.FirstTimestamp, now.UnixMilli()},
		{"MaxTimestamp", batch.MaxTimestamp, now.UnixMilli()},
		{"ProducerID", batch.ProducerID, -1},
		{"ProducerEpoch", int64(batch.ProducerEpoch), -1},
		{"FirstSequence", int64(batch.FirstSequence), -1},
		{"NumRecords", int64(batch.NumRecords), 3},
	} {
		if f.got != f.want {
			t.Errorf("%s = %d, want %d", f.name, f.got, f.want)
		}
	}
	if crc := crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)); uint32(batch.CRC) != crc {
		t.Errorf("CRC %#08x, want the CRC-32C of attributes..end %#08x", uint32(batch.CRC), crc)
	}
	if err := log.EachBatch(b, true, func(log.BatchInfo) {}); err != nil {
		t.Errorf("replication/log rejects the batch: %v", err)
	}

	rest := batch.Records
	for i, kv := range kvs {
		var r kmsg.Record
		length, n := binary.Varint(rest)
		if n <= 0 || int(length) > len(rest)-n {
			t.Fatalf("record %d: bad length varint", i)
		}
		if err := r.ReadFrom(rest[:n+int(length)]); err != nil {
			t.Fatalf("record %d: kmsg Record.ReadFrom: %v", i, err)
		}
		rest = rest[n+int(length):]
		if r.Attributes != 0 || r.TimestampDelta64 != 0 || r.OffsetDelta != int32(i) || len(r.Headers) != 0 {
			t.Errorf("record %d: attributes %d timestamp delta %d offset delta %d headers %d, want 0 0 %d 0",
				i, r.Attributes, r.TimestampDelta64, r.OffsetDelta, len(r.Headers), i)
		}
		if !bytes.Equal(r.Key, kv.Key) || !bytes.Equal(r.Value, kv.Value) {
			t.Errorf("record %d: key %q value %q, want %q %q", i, r.Key, r.Value, kv.Key, kv.Value)
		}
	}
	if len(rest) != 0 {
		t.Errorf("%d bytes after the records, want 0", len(rest))
	}
	// The tombstone's value length is -1, the empty value's 0.
	tombstone := (&kmsg.Record{Key: kvs[1].Key, Value: nil, OffsetDelta: 1}).AppendTo(nil)
	if !bytes.Contains(b, tombstone[1:]) {
		t.Errorf("the tombstone is not encoded with value length -1")
	}

	setBaseOffset(b, 100)
	got := readRecords(t, b)
	want := []readRecord{{100, kvs[0].Key, kvs[0].Value}, {101, kvs[1].Key, nil}, {102, kvs[2].Key, []byte{}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("EachRecord read %v, want %v", got, want)
	}
	if got[1].value != nil {
		t.Errorf("the tombstone's value is %v, want nil", got[1].value)
	}
}

func TestEncodeBatchOfNothing(t *testing.T) {
	if b := EncodeBatch(nil, time.UnixMilli(1)); b != nil {
		t.Errorf("EncodeBatch(nil) = %v, want nil", b)
	}
}

func TestEachRecordConcatenatedBatchesAndTruncatedTail(t *testing.T) {
	now := time.UnixMilli(5000)
	first := EncodeBatch([]KV{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("b"), Value: nil}}, now)
	second := EncodeBatch([]KV{{Key: []byte("c"), Value: []byte("3")}}, now)
	third := EncodeBatch([]KV{{Key: []byte("d"), Value: []byte("4")}, {Key: []byte("e"), Value: []byte("5")}}, now)
	setBaseOffset(first, 10)
	setBaseOffset(second, 12)
	setBaseOffset(third, 13)
	segment := append(append(append([]byte(nil), first...), second...), third...)

	want := []readRecord{{10, []byte("a"), []byte("1")}, {11, []byte("b"), nil}, {12, []byte("c"), []byte("3")}}
	for _, cut := range []int{1, 11, 12, 61, len(third) - 1} {
		records := segment[:len(first)+len(second)+cut]
		if got := readRecords(t, records); !reflect.DeepEqual(got, want) {
			t.Errorf("tail cut to %d bytes: read %v, want %v", cut, got, want)
		}
		if next, ok := NextOffset(records); !ok || next != 13 {
			t.Errorf("tail cut to %d bytes: NextOffset = %d, %v, want 13, true", cut, next, ok)
		}
	}

	all := append(want, readRecord{13, []byte("d"), []byte("4")}, readRecord{14, []byte("e"), []byte("5")})
	if got := readRecords(t, segment); !reflect.DeepEqual(got, all) {
		t.Errorf("whole log: read %v, want %v", got, all)
	}
	if next, ok := NextOffset(segment); !ok || next != 15 {
		t.Errorf("whole log: NextOffset = %d, %v, want 15, true", next, ok)
	}
}

func TestEachRecordOfNoCompleteBatch(t *testing.T) {
	b := EncodeBatch([]KV{{Key: []byte("a"), Value: []byte("1")}}, time.UnixMilli(1))
	for _, records := range [][]byte{nil, {}, b[:5], b[:len(b)-1]} {
		if got := readRecords(t, records); len(got) != 0 {
			t.Errorf("%d bytes: read %v, want nothing", len(records), got)
		}
		if next, ok := NextOffset(records); ok {
			t.Errorf("%d bytes: NextOffset = %d, true, want false", len(records), next)
		}
	}
}

func TestEachRecordSkipsControlBatches(t *testing.T) {
	before := EncodeBatch([]KV{{Key: []byte("a"), Value: []byte("1")}}, time.UnixMilli(1))
	setBaseOffset(before, 0)
	marker := kmsgBatch(1, 0x30, 77, []kmsg.Record{{
		Key:   (&kmsg.ControlRecordKey{Version: 0, Type: 1}).AppendTo(nil), // COMMIT
		Value: (&kmsg.EndTxnMarker{Version: 0, CoordinatorEpoch: 4}).AppendTo(nil),
	}})
	after := EncodeBatch([]KV{{Key: []byte("b"), Value: []byte("2")}}, time.UnixMilli(1))
	setBaseOffset(after, 2)

	records := append(append(append([]byte(nil), before...), marker...), after...)
	want := []readRecord{{0, []byte("a"), []byte("1")}, {2, []byte("b"), []byte("2")}}
	if got := readRecords(t, records); !reflect.DeepEqual(got, want) {
		t.Errorf("read %v, want %v", got, want)
	}
	if got := readRecords(t, marker); len(got) != 0 {
		t.Errorf("a control batch alone: read %v, want nothing", got)
	}
	if next, ok := NextOffset(marker); !ok || next != 2 {
		t.Errorf("a control batch alone: NextOffset = %d, %v, want 2, true", next, ok)
	}
}

func TestEachRecordReadsRecordsWithHeadersAndGaps(t *testing.T) {
	// A batch compaction left with offset deltas 0 and 3 of 0..4, written
	// by another encoder, with headers and timestamp deltas.
	b := kmsgBatch(50, 0, -1, []kmsg.Record{
		{TimestampDelta64: 7, OffsetDelta: 0, Key: []byte("k0"), Value: []byte("v0"), Headers: []kmsg.Header{{Key: "h", Value: []byte("x")}}},
		{TimestampDelta64: 9, OffsetDelta: 3, Key: []byte("k3"), Value: nil, Headers: []kmsg.Header{{Key: "h1", Value: nil}, {Key: "h2", Value: []byte("yy")}}},
	})
	binary.BigEndian.PutUint32(b[23:], 4) // lastOffsetDelta
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))

	want := []readRecord{{50, []byte("k0"), []byte("v0")}, {53, []byte("k3"), nil}}
	if got := readRecords(t, b); !reflect.DeepEqual(got, want) {
		t.Errorf("read %v, want %v", got, want)
	}
	if next, ok := NextOffset(b); !ok || next != 55 {
		t.Errorf("NextOffset = %d, %v, want 55, true", next, ok)
	}
}

func TestEachRecordErrors(t *testing.T) {
	good := EncodeBatch([]KV{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("b"), Value: []byte("2")}}, time.UnixMilli(1))
	recrc := func(b []byte) []byte {
		binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
		return b
	}
	for _, tc := range []struct {
		name   string
		batch  func() []byte
		wantIs error
		wantIn string
	}{
		{
			name:   "bad crc",
			batch:  func() []byte { b := bytes.Clone(good); b[len(b)-1] ^= 0xff; return b },
			wantIs: log.ErrCorruptMessage, wantIn: "crc",
		},
		{
			name:   "magic 1",
			batch:  func() []byte { b := bytes.Clone(good); b[16] = 1; return b },
			wantIs: log.ErrUnsupportedMagic, wantIn: "magic 1",
		},
		{
			name:   "batch length below a header",
			batch:  func() []byte { b := bytes.Clone(good); binary.BigEndian.PutUint32(b[8:], 10); return b },
			wantIs: log.ErrCorruptMessage, wantIn: "batchLength",
		},
		{
			name: "uncompressed records marked gzip",
			batch: func() []byte {
				b := bytes.Clone(good)
				binary.BigEndian.PutUint16(b[21:], 1)
				return recrc(b)
			},
			wantIs: log.ErrCorruptMessage,
		},
		{
			name: "uncompressed records marked zstd",
			batch: func() []byte {
				b := bytes.Clone(good)
				binary.BigEndian.PutUint16(b[21:], 4)
				return recrc(b)
			},
			wantIs: log.ErrCorruptMessage,
		},
		{
			name: "a record count above the records",
			batch: func() []byte {
				b := bytes.Clone(good)
				binary.BigEndian.PutUint32(b[23:], 2) // lastOffsetDelta, for the log's framing check
				binary.BigEndian.PutUint32(b[57:], 3)
				return recrc(b)
			},
			wantIs: log.ErrCorruptMessage, wantIn: "record 2",
		},
		{
			name: "a record count below the records",
			batch: func() []byte {
				b := bytes.Clone(good)
				binary.BigEndian.PutUint32(b[57:], 1)
				return recrc(b)
			},
			wantIs: log.ErrCorruptMessage, wantIn: "after its 1 records",
		},
		{
			name: "a key running past its record",
			batch: func() []byte {
				b := bytes.Clone(good)
				// Record 0: length, attributes, timestamp delta, offset
				// delta, then the key length (varint 1 = 0x02).
				b[61+4] = 0x7e // 63
				return recrc(b)
			},
			wantIs: log.ErrCorruptMessage, wantIn: "record 0",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls int
			err := EachRecord(tc.batch(), func(int64, []byte, []byte) error { calls++; return nil })
			if err == nil {
				t.Fatalf("EachRecord returned no error after %d records, want one containing %q", calls, tc.wantIn)
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("error %q does not wrap %q", err, tc.wantIs)
			}
			if !strings.Contains(err.Error(), tc.wantIn) {
				t.Errorf("error %q, want it to contain %q", err, tc.wantIn)
			}
		})
	}
}

func TestEachRecordStopsAtFnError(t *testing.T) {
	first := EncodeBatch([]KV{{Key: []byte("a")}, {Key: []byte("b")}, {Key: []byte("c")}}, time.UnixMilli(1))
	second := EncodeBatch([]KV{{Key: []byte("d")}}, time.UnixMilli(1))
	setBaseOffset(second, 3)
	stop := errors.New("stop")
	var offsets []int64
	err := EachRecord(append(first, second...), func(offset int64, _, _ []byte) error {
		offsets = append(offsets, offset)
		if offset == 1 {
			return stop
		}
		return nil
	})
	if err != stop {
		t.Errorf("EachRecord returned %v, want fn's error %v unwrapped", err, stop)
	}
	if want := []int64{0, 1}; !reflect.DeepEqual(offsets, want) {
		t.Errorf("fn saw offsets %v, want %v", offsets, want)
	}
}

func TestEncodeDecodeThroughBatch(t *testing.T) {
	k := OffsetKey{Group: "g", Topic: "t", Partition: 3}
	o := Offset{Offset: 99, LeaderEpoch: 2, Metadata: "md", CommitTimestamp: 1234, ExpireTimestamp: -1}
	group := &kmsg.GroupMetadataValue{ProtocolType: "consumer", Generation: 1, CurrentStateTimestamp: 1234}
	b := EncodeBatch([]KV{
		{Key: OffsetRecordKey(k), Value: OffsetRecordValue(o)},
		{Key: GroupRecordKey("g"), Value: GroupRecordValue(group)},
		{Key: OffsetRecordKey(k), Value: nil},
	}, time.UnixMilli(1234))
	var recs []Record
	err := EachRecord(b, func(_ int64, key, value []byte) error {
		rec, err := DecodeRecord(key, value)
		recs = append(recs, rec)
		return err
	})
	if err != nil {
		t.Fatalf("EachRecord: %v", err)
	}
	want := []Record{{OffsetKey: &k, OffsetValue: &o}, {Group: "g", GroupValue: group}, {OffsetKey: &k}}
	if !reflect.DeepEqual(recs, want) {
		t.Errorf("decoded %+v, want %+v", recs, want)
	}
}
