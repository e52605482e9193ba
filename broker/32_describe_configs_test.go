package broker

import (
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDescribeConfigsDocumentation: DescribeConfigs answers a broker
// property's documentation from the property table when the request
// includes documentation, and none when it does not.
func TestDescribeConfigsDocumentation(t *testing.T) {
	b := startBroker(t, testConfig(t))
	cl := newClient(t, b)
	describe := func(include bool) map[string]*string {
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.IncludeDocumentation = include
		res := kmsg.NewDescribeConfigsRequestResource()
		res.ResourceType = kmsg.ConfigResourceTypeBroker
		res.ResourceName = strconv.Itoa(int(b.ID()))
		res.ConfigNames = []string{"log.segment.bytes", "ssl.keystore.location", "leader.replication.throttled.rate"}
		req.Resources = append(req.Resources, res)
		dc := issue[*kmsg.DescribeConfigsResponse](t, cl, req)
		if len(dc.Resources) != 1 || len(dc.Resources[0].Configs) != 3 {
			t.Fatalf("DescribeConfigs: got %+v, want the 3 configs", dc.Resources)
		}
		docs := map[string]*string{}
		for _, c := range dc.Resources[0].Configs {
			docs[c.Name] = c.Documentation
		}
		return docs
	}
	want := map[string]string{
		"log.segment.bytes":     "bytes of a segment before it rolls; allowed: 14 .. 2147483647",
		"ssl.keystore.location": "explained in Listeners and TLS (docs/security.md#listeners-and-tls)",
	}
	docs := describe(true)
	for name, w := range want {
		if got := docs[name]; got == nil || *got != w {
			t.Errorf("%s: got documentation %v, want %q", name, got, w)
		}
	}
	if got := docs["leader.replication.throttled.rate"]; got != nil {
		t.Errorf("leader.replication.throttled.rate: got documentation %q, want none (not in the property table)", *got)
	}
	for name, got := range describe(false) {
		if got != nil {
			t.Errorf("%s without IncludeDocumentation: got documentation %q, want none", name, *got)
		}
	}
}
