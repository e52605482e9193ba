package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// apiVersionsKey is ApiVersions' API key; its response always uses
// response header v0.
const apiVersionsKey = 18

func init() { registerAPI(apiVersionsKey, 0, 3, handleApiVersions) }

// handleApiVersions lists every API and version range the broker speaks.
func handleApiVersions(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.ApiKeys = b.apiVersionKeys()
	return resp, nil, nil
}

// apiVersionKeys returns the supported version range of every API b
// serves: an optional API its backend lacks (the Raft quorum's on
// ZooKeeper or etcd) is left out, so clients never send it.
func (b *Broker) apiVersionKeys() []kmsg.ApiVersionsResponseApiKey {
	var keys []kmsg.ApiVersionsResponseApiKey
	for _, k := range supportedKeys() {
		api, ok := b.api(k)
		if !ok {
			continue
		}
		keys = append(keys, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: api.minVersion, MaxVersion: api.maxVersion})
	}
	return keys
}

// unsupportedApiVersions answers an ApiVersions request newer than the
// broker knows with UNSUPPORTED_VERSION and the supported ranges, encoded
// as version 0 so that any client can read it and downgrade.
func (b *Broker) unsupportedApiVersions(correlationID int32) []byte {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(0)
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = b.apiVersionKeys()
	return encodeResponse(apiVersionsKey, correlationID, resp)
}
