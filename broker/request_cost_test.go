package broker

import (
	"fmt"
	"reflect"
	"runtime"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/network"
)

// worstCaseTarget is the frame size the worst-case requests are built to:
// large enough that a request decoding into more than
// network.MaxDecodeExpansion × its frame + network.DecodeCostSlack is seen (the worst
// decode into 24 times their frame), small enough for the race detector.
const worstCaseTarget = 128 << 10

// decodeOverhead is what decodeRequest allocates beside the request's
// arrays and strings: the request struct, its header's client id.
const decodeOverhead = 16 << 10

// worstCaseFrame is a request built to decode into as much as its frame
// allows: one array (at path, every array before it holding one element)
// filled with zero elements.
type worstCaseFrame struct {
	name         string
	key, version int16
	frame        []byte // without the size prefix
	bodyOffset   int    // where the body starts in frame
}

// arrayPaths returns the paths (field indexes) of every array field
// reachable from struct type t, arrays of structs first along the way.
func arrayPaths(t reflect.Type, prefix []int) [][]int {
	var out [][]int
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Type.Kind() != reflect.Slice || f.Type.Elem().Kind() == reflect.Uint8 {
			continue
		}
		path := append(append([]int(nil), prefix...), i)
		out = append(out, path)
		if f.Type.Elem().Kind() == reflect.Struct {
			out = append(out, arrayPaths(f.Type.Elem(), path)...)
		}
	}
	return out
}

// fillNonNull gives every nullable string of v a value of "", which costs
// the same on the wire as null and allocates when decoded.
func fillNonNull(v reflect.Value) {
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		if f.Kind() == reflect.Pointer && f.Type().Elem().Kind() == reflect.String && f.CanSet() {
			s := ""
			f.Set(reflect.ValueOf(&s))
		}
	}
}

// buildWorstCase returns key's request at version with the array at path
// holding n zero elements (nullable strings set to ""), every array
// before it one, encoded without its size prefix.
func buildWorstCase(key, version int16, path []int, n int) []byte {
	kreq := kmsg.RequestForKey(key)
	kreq.SetVersion(version)
	v := reflect.ValueOf(kreq).Elem()
	for depth, i := range path {
		f := v.Field(i)
		count := 1
		if depth == len(path)-1 {
			count = n
		}
		f.Set(reflect.MakeSlice(f.Type(), count, count))
		if f.Type().Elem().Kind() == reflect.Struct {
			for j := range count {
				fillNonNull(f.Index(j))
			}
		}
		if count == 0 {
			break
		}
		v = f.Index(0)
	}
	return requestFrame(key, version, 1, kreq.AppendTo(nil))[4:]
}

// worstCaseFrames returns, for every registered API and version, one
// worst-case frame per array of the request.
func worstCaseFrames() []worstCaseFrame {
	var out []worstCaseFrame
	for _, key := range supportedKeys() {
		api := apis[key]
		for v := api.minVersion; v <= api.maxVersion; v++ {
			t := reflect.TypeOf(kmsg.RequestForKey(key)).Elem()
			for _, path := range arrayPaths(t, nil) {
				one := len(buildWorstCase(key, v, path, 1))
				zero := len(buildWorstCase(key, v, path, 0))
				per := one - zero
				if per <= 0 {
					continue // not at this version
				}
				frame := buildWorstCase(key, v, path, worstCaseTarget/per)
				kreq := kmsg.RequestForKey(key)
				kreq.SetVersion(v)
				offset := 14 // key, version, correlation id, client id "fuzz"
				if kreq.IsFlexible() {
					offset++
				}
				out = append(out, worstCaseFrame{name: fieldPathName(t, path), key: key, version: v, frame: frame, bodyOffset: offset})
			}
		}
	}
	return out
}

// fieldPathName names the array at path, as Topics.Partitions.
func fieldPathName(t reflect.Type, path []int) string {
	name := ""
	for _, i := range path {
		f := t.Field(i)
		if name != "" {
			name += "."
		}
		name += f.Name
		t = f.Type.Elem()
	}
	return name
}

// TestDecodeAllocationBounded builds, for every registered API and
// version, requests whose arrays are filled with the smallest elements
// the wire allows, and checks that decoding each one either is refused
// before decoding or allocates at most network.MaxDecodeExpansion × its frame +
// network.DecodeCostSlack, and that network.DecodeCost bounds what decoding allocates.
func TestDecodeAllocationBounded(t *testing.T) {
	b := &Broker{member: &membership{}}
	cs := &connState{authenticated: true}
	worst := map[string]float64{}
	for _, wc := range worstCaseFrames() {
		name := fmt.Sprintf("%s v%d %s", kmsg.NameForKey(wc.key), wc.version, wc.name)
		// TotalAlloc counts every goroutine's allocations, and a
		// goroutine of an earlier test may still be ending: the least of
		// three decodes is the decoder's own.
		var req *request
		var err error
		allocated := -1
		for range 3 {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			req, _, err = b.decodeRequest(wc.frame, cs)
			runtime.ReadMemStats(&after)
			if a := int(after.TotalAlloc-before.TotalAlloc) / raceAllocFactor; allocated < 0 || a < allocated {
				allocated = a
			}
		}
		ratio := float64(allocated) / float64(len(wc.frame))
		if ratio > worst[kmsg.NameForKey(wc.key)] {
			worst[kmsg.NameForKey(wc.key)] = ratio
		}
		if limit := network.MaxDecodeExpansion*len(wc.frame) + network.DecodeCostSlack + decodeOverhead; allocated > limit {
			t.Errorf("%s: got %d bytes allocated decoding a %d-byte frame (%.1f×, refused: %v), want at most %d",
				name, allocated, len(wc.frame), ratio, err != nil, limit)
		}
		if req == nil {
			continue
		}
		cost, cerr := network.DecodeCost(wc.key, wc.version, wc.frame[wc.bodyOffset:])
		if cerr != nil {
			t.Errorf("%s: decode cost: %v", name, cerr)
			continue
		}
		// Allocation size classes round the decoder's slices up a
		// little.
		if limit := cost + cost/64 + decodeOverhead; allocated > limit {
			t.Errorf("%s: got %d bytes allocated, want at most the decode cost %d + 1/64 + %d", name, allocated, cost, decodeOverhead)
		}
	}
	if testing.Verbose() {
		for _, key := range supportedKeys() {
			t.Logf("%s: worst decode allocation %.1f× the frame", kmsg.NameForKey(key), worst[kmsg.NameForKey(key)])
		}
	}
}
