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
	// served, when not nil, says whether a broker serves the API at all:
	// an API of a capability only some coordination backends have. A
	// broker that does not serve it neither lists it in ApiVersions nor
	// accepts it (see Broker.api).
	served func(*Broker) bool
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

// registerOptionalAPI adds an API that a broker serves only when served
// says so (apiHandler.served).
func registerOptionalAPI(key, minVersion, maxVersion int16, served func(*Broker) bool, handle handleFunc) {
	registerAPI(key, minVersion, maxVersion, handle)
	api := apis[key]
	api.served = served
	apis[key] = api
}

// api returns the handler of key when b serves that API. An API b does
// not serve is treated as an unknown key, as Kafka treats an API its
// ApiVersions does not list: the request closes the connection.
func (b *Broker) api(key int16) (apiHandler, bool) {
	api, ok := apis[key]
	if !ok || api.served != nil && !api.served(b) {
		return apiHandler{}, false
	}
	return api, true
}

// supportedKeys returns the registered API keys in ascending order, the
// optional ones included.
func supportedKeys() []int16 {
	keys := make([]int16, 0, len(apis))
	for k := range apis {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}
