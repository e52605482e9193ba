package group

import "testing"

// The expected hashes are Java's String.hashCode, as printed by OpenJDK's
// "s".hashCode(); the comments show the UTF-16 arithmetic for the strings
// that are not plain ASCII.
var javaHashCodes = []struct {
	s    string
	want int32
}{
	{"", 0},
	{"a", 97},
	{"hello", 99162322},
	{"group-1", 293427299},
	{"my-consumer-group", 1513705513},
	{"console-consumer-12345", 158455506},
	// ü is U+00FC, one code unit (252); the sum overflows int32 to a
	// negative hash.
	{"grüppe", -1233264812},
	// 😀 is U+1F600, the surrogate pair 0xD83D 0xDE00:
	// 103 → 103*31+55357 = 58550 → 58550*31+56832 = 1871882.
	{"g😀", 1871882},
	// Seven BMP characters, seven code units.
	{"日本語グループ", -305235731},
	// The well-known string whose hash is Integer.MIN_VALUE.
	{"polygenelubricants", -2147483648},
}

func TestJavaHashCode(t *testing.T) {
	for _, tc := range javaHashCodes {
		if got := JavaHashCode(tc.s); got != tc.want {
			t.Errorf("JavaHashCode(%q) = %d, want %d", tc.s, got, tc.want)
		}
	}
}

func TestPartitionFor(t *testing.T) {
	for _, tc := range []struct {
		group      string
		partitions int
		want       int32
	}{
		{"", 50, 0},
		{"a", 50, 47},
		{"hello", 50, 22},
		{"group-1", 50, 49},
		{"group-1", 7, 4},
		{"g😀", 50, 32},
		{"g😀", 1, 0},
		// Negative hashes: Kafka masks the sign bit rather than negating,
		// so (-1233264812 & 0x7fffffff) % 50 = 914218836 % 50 = 36.
		{"grüppe", 50, 36},
		{"grüppe", 7, 6},
		{"日本語グループ", 50, 17},
		// Integer.MIN_VALUE & 0x7fffffff is 0: partition 0, where
		// Math.abs would have stayed negative.
		{"polygenelubricants", 50, 0},
		{"polygenelubricants", 7, 0},
	} {
		if got := PartitionFor(tc.group, tc.partitions); got != tc.want {
			t.Errorf("PartitionFor(%q, %d) = %d, want %d", tc.group, tc.partitions, got, tc.want)
		}
	}
}

func TestPartitionForIsMaskedHashModulo(t *testing.T) {
	for _, tc := range javaHashCodes {
		for _, n := range []int{1, 3, 50, 1000} {
			want := int32(int(tc.want&0x7fffffff) % n)
			if got := PartitionFor(tc.s, n); got != want || got < 0 || int(got) >= n {
				t.Errorf("PartitionFor(%q, %d) = %d, want %d", tc.s, n, got, want)
			}
		}
	}
}

func TestPartitionForPanicsOnNoPartitions(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Errorf("PartitionFor(\"g\", 0) did not panic, want a panic")
		}
	}()
	PartitionFor("g", 0)
}
