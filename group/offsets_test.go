package group

import (
	"reflect"
	"testing"
	"time"
)

func TestOffsetsApplyGetDelete(t *testing.T) {
	o := NewOffsets()
	if _, ok := o.Get("g", "t", 0); ok {
		t.Fatalf("Get on empty Offsets found an offset, want none")
	}
	k := OffsetKey{Group: "g", Topic: "t", Partition: 0}
	first := Offset{Offset: 10, LeaderEpoch: 1, Metadata: "a", CommitTimestamp: 100, ExpireTimestamp: -1}
	o.Apply(k, &first)
	if got, ok := o.Get("g", "t", 0); !ok || got != first {
		t.Errorf("Get = %+v, %v, want %+v, true", got, ok, first)
	}

	// The store keeps a copy, not the pointer.
	first.Offset = 11
	if got, _ := o.Get("g", "t", 0); got.Offset != 10 {
		t.Errorf("changing the applied Offset changed the stored one to %d, want 10", got.Offset)
	}

	second := Offset{Offset: 20, LeaderEpoch: 2, CommitTimestamp: 200, ExpireTimestamp: -1}
	o.Apply(k, &second)
	if got, _ := o.Get("g", "t", 0); got != second {
		t.Errorf("after a second commit Get = %+v, want %+v", got, second)
	}
	if _, ok := o.Get("g", "t", 1); ok {
		t.Errorf("Get of another partition found an offset, want none")
	}
	if _, ok := o.Get("other", "t", 0); ok {
		t.Errorf("Get of another group found an offset, want none")
	}

	o.Apply(k, nil)
	if _, ok := o.Get("g", "t", 0); ok {
		t.Errorf("Get after the tombstone found an offset, want none")
	}
	if groups := o.Groups(); len(groups) != 0 {
		t.Errorf("Groups after deleting the only offset = %v, want none", groups)
	}
	// Deleting what is not there is a no-op.
	o.Apply(OffsetKey{Group: "none", Topic: "t"}, nil)
	o.Apply(k, nil)
	if groups := o.Groups(); len(groups) != 0 {
		t.Errorf("Groups after deleting absent offsets = %v, want none", groups)
	}
}

func TestOffsetsGroupsAndKeys(t *testing.T) {
	o := NewOffsets()
	for _, k := range []OffsetKey{
		{"b", "t2", 1}, {"b", "t1", 3}, {"b", "t1", 0}, {"a", "t", 5}, {"c", "x", 0},
	} {
		o.Apply(k, &Offset{Offset: int64(k.Partition), LeaderEpoch: -1, ExpireTimestamp: -1})
	}
	o.Apply(OffsetKey{"c", "x", 0}, nil)

	if got, want := o.Groups(), []string{"a", "b"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Groups = %v, want %v", got, want)
	}
	want := []OffsetKey{{"b", "t1", 0}, {"b", "t1", 3}, {"b", "t2", 1}}
	if got := o.Keys("b"); !reflect.DeepEqual(got, want) {
		t.Errorf("Keys(b) = %v, want %v", got, want)
	}
	if got := o.Keys("c"); len(got) != 0 {
		t.Errorf("Keys of a group with no offsets = %v, want none", got)
	}
}

func TestOffsetsGroupIsACopy(t *testing.T) {
	o := NewOffsets()
	v := Offset{Offset: 1, LeaderEpoch: -1, ExpireTimestamp: -1}
	o.Apply(OffsetKey{"g", "t", 0}, &v)
	o.Apply(OffsetKey{"g", "t", 1}, &v)
	o.Apply(OffsetKey{"g", "u", 0}, &v)

	got := o.Group("g")
	want := map[string]map[int32]Offset{"t": {0: v, 1: v}, "u": {0: v}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Group(g) = %v, want %v", got, want)
	}

	got["t"][0] = Offset{Offset: 99}
	delete(got["t"], 1)
	delete(got, "u")
	got["new"] = map[int32]Offset{0: {}}
	if again := o.Group("g"); !reflect.DeepEqual(again, want) {
		t.Errorf("after changing the returned map, Group(g) = %v, want %v", again, want)
	}

	// A later commit does not show through a map returned before.
	o.Apply(OffsetKey{"g", "u", 0}, &Offset{Offset: 2})
	before := o.Group("g")
	o.Apply(OffsetKey{"g", "u", 0}, &Offset{Offset: 3})
	if before["u"][0].Offset != 2 {
		t.Errorf("a later commit changed a returned map to offset %d, want 2", before["u"][0].Offset)
	}

	if empty := o.Group("none"); empty == nil || len(empty) != 0 {
		t.Errorf("Group of an unknown group = %#v, want an empty map", empty)
	}
}

func TestOffsetsExpired(t *testing.T) {
	const retention = 7 * 24 * time.Hour
	now := time.UnixMilli(1_000_000_000_000)
	ms := func(d time.Duration) int64 { return now.Add(-d).UnixMilli() }

	// Each group holds an offset committed just over retention ago
	// ("old"), one committed exactly retention ago ("edge", which expires:
	// the comparison is inclusive), one committed recently ("new"), one
	// whose explicit expire timestamp has passed ("explicit-past") and one
	// whose explicit expire timestamp is still ahead though it was
	// committed long ago ("explicit-future").
	offsets := map[string]Offset{
		"old":             {Offset: 1, LeaderEpoch: -1, CommitTimestamp: ms(retention + time.Millisecond), ExpireTimestamp: -1},
		"edge":            {Offset: 2, LeaderEpoch: -1, CommitTimestamp: ms(retention), ExpireTimestamp: -1},
		"new":             {Offset: 3, LeaderEpoch: -1, CommitTimestamp: ms(time.Hour), ExpireTimestamp: -1},
		"explicit-past":   {Offset: 4, LeaderEpoch: -1, CommitTimestamp: ms(time.Hour), ExpireTimestamp: ms(time.Millisecond)},
		"explicit-now":    {Offset: 4, LeaderEpoch: -1, CommitTimestamp: ms(time.Hour), ExpireTimestamp: now.UnixMilli()},
		"explicit-future": {Offset: 5, LeaderEpoch: -1, CommitTimestamp: ms(30 * 24 * time.Hour), ExpireTimestamp: now.Add(time.Millisecond).UnixMilli()},
	}
	everything := []string{"edge", "explicit-now", "explicit-past", "new", "old"}
	byCommit := []string{"edge", "explicit-now", "explicit-past", "old"}

	for _, tc := range []struct {
		name     string
		activity Activity
		want     []string // topics expired
	}{
		{
			name:     "a group with members expires nothing, not even explicit expiries",
			activity: Activity{Known: true, HasMembers: true, ProtocolType: "consumer"},
			want:     nil,
		},
		{
			name:     "an Empty consumer group expires everything once retention passed since it became Empty",
			activity: Activity{Known: true, ProtocolType: "consumer", EmptySince: now.Add(-retention - time.Second)},
			want:     everything,
		},
		{
			name:     "an Empty consumer group expires everything exactly retention after it became Empty",
			activity: Activity{Known: true, ProtocolType: "consumer", EmptySince: now.Add(-retention)},
			want:     everything,
		},
		{
			name:     "an Empty consumer group keeps its offsets until retention passed, old commits included",
			activity: Activity{Known: true, ProtocolType: "consumer", EmptySince: now.Add(-retention + time.Millisecond)},
			want:     []string{"explicit-now", "explicit-past"},
		},
		{
			name:     "an Empty group whose metadata had no state timestamp expires by commit timestamp",
			activity: Activity{Known: true, ProtocolType: "consumer"},
			want:     byCommit,
		},
		{
			name:     "an offsets-only group expires each offset retention after its commit",
			activity: Activity{Known: true, EmptySince: now.Add(-retention - time.Hour)},
			want:     byCommit,
		},
		{
			name:     "a group unknown to the coordinator expires each offset retention after its commit",
			activity: Activity{},
			want:     byCommit,
		},
		{
			name:     "an unknown group's stale EmptySince is ignored",
			activity: Activity{ProtocolType: "consumer", EmptySince: now.Add(-retention - time.Hour)},
			want:     byCommit,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOffsets()
			for topic, v := range offsets {
				o.Apply(OffsetKey{Group: "g", Topic: topic, Partition: 0}, &v)
			}
			var asked []string
			got := o.Expired(now, retention, func(group string) Activity {
				asked = append(asked, group)
				return tc.activity
			})
			var want []OffsetKey
			for _, topic := range tc.want {
				want = append(want, OffsetKey{Group: "g", Topic: topic, Partition: 0})
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Expired = %v, want %v", got, want)
			}
			if !reflect.DeepEqual(asked, []string{"g"}) {
				t.Errorf("activity asked of %v, want [g]", asked)
			}
			if n := len(o.Keys("g")); n != len(offsets) {
				t.Errorf("Expired left %d offsets, want all %d: it changes nothing", n, len(offsets))
			}
		})
	}
}

func TestOffsetsExpiredAcrossGroups(t *testing.T) {
	const retention = 24 * time.Hour
	now := time.UnixMilli(2_000_000_000_000)
	old := Offset{Offset: 1, LeaderEpoch: -1, CommitTimestamp: now.Add(-2 * retention).UnixMilli(), ExpireTimestamp: -1}
	o := NewOffsets()
	for _, k := range []OffsetKey{
		{"active", "t", 0}, {"empty", "t", 1}, {"empty", "t", 0}, {"standalone", "b", 0}, {"standalone", "a", 2}, {"gone", "t", 0},
	} {
		o.Apply(k, &old)
	}
	activity := map[string]Activity{
		"active":     {Known: true, HasMembers: true, ProtocolType: "consumer"},
		"empty":      {Known: true, ProtocolType: "consumer", EmptySince: now.Add(-time.Hour)},
		"standalone": {Known: true},
	}
	got := o.Expired(now, retention, func(group string) Activity { return activity[group] })
	want := []OffsetKey{{"gone", "t", 0}, {"standalone", "a", 2}, {"standalone", "b", 0}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Expired = %v, want %v", got, want)
	}
}
