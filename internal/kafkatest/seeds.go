package kafkatest

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ResponseSeed is one input of a fuzz target over the responses of
// other brokers: an API key, a version and a response body.
type ResponseSeed struct {
	Key, Version int16
	Body         []byte
}

// Seeds collects ResponseSeeds: each response added whole and cut in
// half.
type Seeds []ResponseSeed

// Add adds resp encoded at version, whole and cut in half.
func (s *Seeds) Add(resp kmsg.Response, version int16) {
	resp.SetVersion(version)
	body := resp.AppendTo(nil)
	*s = append(*s, ResponseSeed{Key: resp.Key(), Version: version, Body: body},
		ResponseSeed{Key: resp.Key(), Version: version, Body: body[:len(body)/2]})
}

// DefaultResponses returns the Seeds of kmsg's default response of each
// key, at its highest version.
func DefaultResponses(keys []int16) Seeds {
	var s Seeds
	for _, key := range keys {
		resp := kmsg.ResponseForKey(key)
		s.Add(resp, resp.MaxVersion())
	}
	return s
}

// KeyVersion maps a fuzzed key and version onto keys and the versions
// kmsg knows for the key; a key of the list and a known version are
// kept.
func KeyVersion(keys []int16, key, version int16) (int16, int16) {
	if !slices.Contains(keys, key) {
		key = keys[int(uint16(key))%len(keys)]
	}
	if maxVersion := kmsg.ResponseForKey(key).MaxVersion(); version < 0 || version > maxVersion {
		version = int16(int(uint16(version)) % (int(maxVersion) + 1))
	}
	return key, version
}

// FuzzResponses runs f over the responses peer gives: seeds first, then
// fuzzed inputs, each mapped onto keys (KeyVersion), set as peer's answer
// and read by apply, which must return within bound (twice it is an
// error).
func FuzzResponses(f *testing.F, peer *Peer, keys []int16, seeds Seeds, bound time.Duration, apply func(t *testing.T, key int16)) {
	for _, s := range seeds {
		f.Add(s.Key, s.Version, s.Body)
	}
	f.Fuzz(func(t *testing.T, key, version int16, body []byte) {
		key, version = KeyVersion(keys, key, version)
		peer.Set(key, version, body)
		start := time.Now()
		apply(t, key)
		if took := time.Since(start); took > 2*bound {
			t.Errorf("%s v%d response (%d bytes): got a return after %v, want one within %v",
				kmsg.NameForKey(key), version, len(body), took, 2*bound)
		}
	})
}
