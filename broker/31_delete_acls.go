package broker

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/kafkaerr"
	"github.com/tripodmq/tripod/coord"
)

// DeleteAcls v0..v3 (v1 adds resource pattern types, KIP-290).
func init() { registerAPI(31, 0, 3, handleDeleteACLs) }

// handleDeleteACLs removes from the security store every ACL that one of
// the request's filters matches, one result per filter listing the ACLs
// removed that it matches, as Kafka's AclApis: SECURITY_DISABLED without
// an authorizer; INVALID_REQUEST for a filter with an unknown value,
// which removes nothing. Every broker stops applying the removed ACLs
// when its watch delivers the change. The authorizer asks for ALTER on
// the cluster first (security/rules.go).
func handleDeleteACLs(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.DeleteACLsRequest)
	resp := r.ResponseKind().(*kmsg.DeleteACLsResponse)
	for range r.Filters {
		resp.Results = append(resp.Results, kmsg.NewDeleteACLsResponseResult())
	}
	fail := func(i int, code *kerr.Error, msg string) {
		resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code.Code, &msg
	}
	if !b.cfg.Authorizer.Enabled() {
		for i := range r.Filters {
			fail(i, kerr.SecurityDisabled, noAuthorizerMessage)
		}
		return resp, nil, nil
	}
	filters := make([]coord.ACLFilter, len(r.Filters))
	var valid []coord.ACLFilter
	for i, rf := range r.Filters {
		f := coord.ACLFilter{
			ResourceType: coord.ACLResourceType(rf.ResourceType), ResourceName: rf.ResourceName,
			PatternType: aclPatternOf(r.Version, rf.ResourcePatternType), Principal: rf.Principal, Host: rf.Host,
			Operation: coord.ACLOperation(rf.Operation), Permission: coord.ACLPermission(rf.PermissionType),
		}
		if err := f.Validate(); err != nil {
			fail(i, kerr.InvalidRequest, err.Error())
			continue
		}
		filters[i] = f
		valid = append(valid, f)
	}
	if len(valid) == 0 {
		return resp, nil, nil
	}
	return nil, func(ctx context.Context) kmsg.Response {
		wctx, cancel := context.WithTimeout(ctx, securityTimeout)
		defer cancel()
		removed, err := b.backend.DeleteACLs(wctx, valid)
		for i, f := range filters {
			if resp.Results[i].ErrorCode != 0 {
				continue
			}
			for _, a := range removed {
				if !f.Matches(a) {
					continue
				}
				m := kmsg.NewDeleteACLsResponseResultMatchingACL()
				m.ResourceType, m.ResourceName = kmsg.ACLResourceType(a.ResourceType), a.ResourceName
				m.ResourcePatternType = kmsg.ACLResourcePatternType(a.PatternType)
				m.Principal, m.Host = a.Principal, a.Host
				m.Operation, m.PermissionType = kmsg.ACLOperation(a.Operation), kmsg.ACLPermissionType(a.Permission)
				resp.Results[i].MatchingACLs = append(resp.Results[i].MatchingACLs, m)
			}
			if err != nil {
				fail(i, kafkaerr.ACLStore.Error(err), fmt.Sprintf("delete acls: %v", err))
			}
		}
		return resp
	}, nil
}
