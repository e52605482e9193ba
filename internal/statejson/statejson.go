// Package statejson decodes the JSON of a partition state as Kafka writes
// it in /brokers/topics/T/partitions/P/state (and tripod's etcd backend
// stores it), {"controller_epoch":3,"leader":1,"version":1,
// "leader_epoch":0,"isr":[1,2,3]}, without reflection: a controller
// reads one per partition when it loads the metadata. Anything else
// (another key, a null, a float, a string escape, a number out of range,
// bad syntax) is left to encoding/json, so what is decoded is always what
// encoding/json would decode.
package statejson

import (
	"encoding/json"
	"math"
	"strconv"
)

// State is a partition state's JSON.
type State struct {
	ControllerEpoch int64   `json:"controller_epoch"`
	Leader          int32   `json:"leader"`
	Version         int     `json:"version"`
	LeaderEpoch     int32   `json:"leader_epoch"`
	ISR             []int32 `json:"isr"`
}

// Decode decodes data as json.Unmarshal does into a State.
func Decode(data []byte) (State, error) {
	if s, ok := parse(data); ok {
		return s, nil
	}
	var s State
	err := json.Unmarshal(data, &s)
	return s, err
}

// parse decodes the form Kafka and tripod write; ok is false when data
// is in any other form.
func parse(data []byte) (s State, ok bool) {
	p := parser{b: data}
	if !p.consume('{') {
		return State{}, false
	}
	if p.consume('}') {
		return s, p.end()
	}
	for {
		key, ok := p.key()
		if !ok || !p.consume(':') {
			return State{}, false
		}
		switch string(key) {
		case "controller_epoch":
			v, ok := p.int(math.MinInt64, math.MaxInt64)
			if !ok {
				return State{}, false
			}
			s.ControllerEpoch = v
		case "leader":
			v, ok := p.int(math.MinInt32, math.MaxInt32)
			if !ok {
				return State{}, false
			}
			s.Leader = int32(v)
		case "version":
			v, ok := p.int(math.MinInt, math.MaxInt)
			if !ok {
				return State{}, false
			}
			s.Version = int(v)
		case "leader_epoch":
			v, ok := p.int(math.MinInt32, math.MaxInt32)
			if !ok {
				return State{}, false
			}
			s.LeaderEpoch = int32(v)
		case "isr":
			isr, ok := p.int32s()
			if !ok {
				return State{}, false
			}
			s.ISR = isr
		default:
			return State{}, false
		}
		if p.consume('}') {
			return s, p.end()
		}
		if !p.consume(',') {
			return State{}, false
		}
	}
}

type parser struct {
	b []byte
	i int
}

func (p *parser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// consume skips white space and c, reporting whether c was there.
func (p *parser) consume(c byte) bool {
	p.space()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// end reports whether only white space is left.
func (p *parser) end() bool {
	p.space()
	return p.i == len(p.b)
}

// key reads a string without escapes. encoding/json matches keys to
// fields case-insensitively: a key that is not exactly one of State's
// makes parse give up.
func (p *parser) key() ([]byte, bool) {
	if !p.consume('"') {
		return nil, false
	}
	start := p.i
	for p.i < len(p.b) {
		switch c := p.b[p.i]; {
		case c == '"':
			k := p.b[start:p.i]
			p.i++
			return k, true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return nil, false
		}
		p.i++
	}
	return nil, false
}

// int reads an integer in min..max written as JSON writes integers.
func (p *parser) int(lo, hi int64) (int64, bool) {
	p.space()
	start := p.i
	if p.i < len(p.b) && p.b[p.i] == '-' {
		p.i++
	}
	digits := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	n := p.i - digits
	if n == 0 || n > 1 && p.b[digits] == '0' {
		return 0, false
	}
	if p.i < len(p.b) {
		if c := p.b[p.i]; c == '.' || c == 'e' || c == 'E' {
			return 0, false
		}
	}
	var v int64
	if n <= 18 {
		for _, c := range p.b[digits:p.i] {
			v = v*10 + int64(c-'0')
		}
		if digits > start {
			v = -v
		}
	} else {
		var err error
		if v, err = strconv.ParseInt(string(p.b[start:p.i]), 10, 64); err != nil {
			return 0, false
		}
	}
	if v < lo || v > hi {
		return 0, false
	}
	return v, true
}

// int32s reads an array of int32s; an empty array is an empty slice, as
// encoding/json makes it.
func (p *parser) int32s() ([]int32, bool) {
	if !p.consume('[') {
		return nil, false
	}
	out := make([]int32, 0, 4)
	if p.consume(']') {
		return out, true
	}
	for {
		v, ok := p.int(math.MinInt32, math.MaxInt32)
		if !ok {
			return nil, false
		}
		out = append(out, int32(v))
		if p.consume(']') {
			return out, true
		}
		if !p.consume(',') {
			return nil, false
		}
	}
}
