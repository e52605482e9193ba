package broker

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/coord"
)

// AlterConfigs v0..v2, for topic and broker resources.
func init() { registerAPI(33, 0, 2, handleAlterConfigs) }

// handleAlterConfigs replaces a resource's whole set of dynamic configs
// with the request's (a config with a null value is left out, as Kafka
// does), as handleIncrementalAlterConfigs carries out its changes: a
// topic's through the controller, a broker's in the config store.
func handleAlterConfigs(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.AlterConfigsRequest)
	resp := r.ResponseKind().(*kmsg.AlterConfigsResponse)
	return nil, func(ctx context.Context) kmsg.Response {
		resources := make([]alterResource, len(r.Resources))
		for i, rr := range r.Resources {
			ar := alterResource{typ: rr.ResourceType, name: rr.ResourceName, replace: true}
			seen := map[string]bool{}
			for _, c := range rr.Configs {
				if seen[c.Name] && ar.err == nil {
					ar.kind, ar.err = kerr.InvalidRequest, fmt.Errorf("config %s is named more than once", c.Name)
				}
				seen[c.Name] = true
				if c.Value != nil {
					ar.alts = append(ar.alts, coord.ConfigAlteration{Op: coord.ConfigSet, Key: c.Name, Value: *c.Value})
				}
			}
			resources[i] = ar
		}
		forward := func(ctx context.Context, topics []int) ([]configOutcome, error) {
			fr := kmsg.NewPtrAlterConfigsRequest()
			fr.SetVersion(r.Version)
			fr.ValidateOnly = r.ValidateOnly
			for _, i := range topics {
				fr.Resources = append(fr.Resources, r.Resources[i])
			}
			return b.forwardConfigs(ctx, fr, len(topics), func(resp kmsg.Response, j int) (int16, *string, bool) {
				res := resp.(*kmsg.AlterConfigsResponse).Resources
				if j >= len(res) {
					return 0, nil, false
				}
				return res[j].ErrorCode, res[j].ErrorMessage, true
			})
		}
		for i, o := range b.alterConfigs(ctx, req, resources, r.ValidateOnly, forward) {
			sr := kmsg.NewAlterConfigsResponseResource()
			sr.ResourceType, sr.ResourceName = r.Resources[i].ResourceType, r.Resources[i].ResourceName
			if o.kind != nil {
				sr.ErrorCode = o.kind.Code
				msg := o.err.Error()
				sr.ErrorMessage = &msg
			}
			resp.Resources = append(resp.Resources, sr)
		}
		return resp
	}, nil
}
