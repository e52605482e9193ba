package statejson

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestDecodeAsEncodingJSON checks that Decode gives what json.Unmarshal
// gives, and fails where it fails, on the forms Kafka and tripod write
// and on the forms parse leaves to encoding/json.
func TestDecodeAsEncodingJSON(t *testing.T) {
	for _, in := range []string{
		`{"controller_epoch":3,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2,3]}`,
		`{"controller_epoch":12,"leader":-1,"version":1,"leader_epoch":7,"isr":[]}`,
		` { "isr" : [ 2 , 3 ] , "leader" : 2 , "leader_epoch" : 2147483647 , "controller_epoch" : -9223372036854775808 } `,
		`{"controller_epoch":1234567890123456789,"leader":0,"version":2,"leader_epoch":0,"isr":[0],"leader_recovery_state":0}`,
		`{}`,
		`{"leader":1,"leader":2,"isr":[1],"isr":[2,3]}`,
		`{"Leader":4,"ISR":[4]}`,
		`{"leader":null,"isr":null}`,
		`{"leader":1.0,"isr":[1]}`,
		`{"leader":1e0}`,
		`{"leader":2147483648}`,
		`{"leader_epoch":-2147483649}`,
		`{"controller_epoch":9223372036854775808}`,
		`{"leader":01}`,
		`{"leader":-}`,
		`{"le\u0061der":3}`,
		`{"leader":1,}`,
		`{"leader":1} x`,
		`{"leader":1`,
		`{"isr":[1,]}`,
		`{"isr":[1 2]}`,
		`[]`,
		``,
	} {
		got, gotErr := Decode([]byte(in))
		var want State
		wantErr := json.Unmarshal([]byte(in), &want)
		if (gotErr == nil) != (wantErr == nil) {
			t.Errorf("Decode(%s): error %v, want %v", in, gotErr, wantErr)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Decode(%s): got %#v, want %#v", in, got, want)
		}
		if _, ok := parse([]byte(in)); ok && wantErr != nil {
			t.Errorf("parse(%s): decoded what encoding/json refuses (%v)", in, wantErr)
		}
	}
}

// FuzzDecode checks Decode against json.Unmarshal on any input.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"controller_epoch":3,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2,3]}`))
	f.Add([]byte(`{"isr":[],"leader":-1}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		got, gotErr := Decode(in)
		var want State
		wantErr := json.Unmarshal(in, &want)
		if (gotErr == nil) != (wantErr == nil) || gotErr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("Decode(%q): got %#v, %v; want %#v, %v", in, got, gotErr, want, wantErr)
		}
	})
}

func BenchmarkDecode(b *testing.B) {
	in := []byte(`{"controller_epoch":3,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2,3]}`)
	b.Run("statejson", func(b *testing.B) {
		for b.Loop() {
			Decode(in)
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		for b.Loop() {
			var s State
			json.Unmarshal(in, &s)
		}
	})
}
