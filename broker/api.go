package broker

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// apiHandler is one Kafka API: the versions the broker speaks and the
// function answering a decoded request.
type apiHandler struct {
	minVersion, maxVersion int16
	handle                 handleFunc
}

// handleFunc answers a request. It runs on the connection's reader, in
// request order, so work whose order matters (appends of pipelined
// produces) happens in the order the client sent it. It returns the
// response now, or a later function that the connection runs on a
// goroutine of its own to produce the response, for requests that wait
// (a long-poll fetch); later requests are read and answered meanwhile and
// responses still leave in request order. A nil response without later
// means no answer at all (acks=0 produce); an error closes the connection,
// after sending resp when it wraps network.ErrAnswerThenClose (a failed SASL
// exchange answers through refuseAuthentication instead, after
// connection.failed.authentication.delay.ms).
type handleFunc func(ctx context.Context, b *Broker, req *request) (resp kmsg.Response, later laterFunc, err error)

// laterFunc produces a delayed response; ctx ends when the connection or
// the broker closes.
type laterFunc func(ctx context.Context) kmsg.Response

// apis is the dispatch table, by API key. Each numbered file registers its
// API in init.
var apis = map[int16]apiHandler{}

// registerAPI adds an API to the dispatch table.
func registerAPI(key, minVersion, maxVersion int16, handle handleFunc) {
	if _, dup := apis[key]; dup {
		panic("broker: api key registered twice: " + kmsg.NameForKey(key))
	}
	apis[key] = apiHandler{minVersion: minVersion, maxVersion: maxVersion, handle: handle}
}

// supportedKeys returns the registered API keys in ascending order.
func supportedKeys() []int16 {
	keys := make([]int16, 0, len(apis))
	for k := range apis {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}
