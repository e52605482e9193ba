package broker

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/kafkaerr"
	"github.com/tripodmq/tripod/coord"
)

// DescribeAcls v0..v3 (v1 adds resource pattern types, KIP-290).
func init() { registerAPI(29, 0, 3, handleDescribeACLs) }

// noAuthorizerMessage is what the ACL APIs say without an authorizer, as
// Kafka does with SECURITY_DISABLED.
const noAuthorizerMessage = "No Authorizer is configured."

// handleDescribeACLs answers with the ACLs of the security store that
// the request's filter matches (coord.ACLFilter), grouped by resource
// pattern, as Kafka does: SECURITY_DISABLED without an authorizer,
// INVALID_REQUEST for a filter with an unknown value. The authorizer
// asks for DESCRIBE on the cluster first (security/rules.go).
func handleDescribeACLs(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.DescribeACLsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeACLsResponse)
	fail := func(code *kerr.Error, msg string) kmsg.Response {
		resp.ErrorCode, resp.ErrorMessage = code.Code, &msg
		return resp
	}
	if !b.cfg.Authorizer.Enabled() {
		return fail(kerr.SecurityDisabled, noAuthorizerMessage), nil, nil
	}
	f := coord.ACLFilter{
		ResourceType: coord.ACLResourceType(r.ResourceType), ResourceName: r.ResourceName,
		PatternType: aclPatternOf(r.Version, r.ResourcePatternType), Principal: r.Principal, Host: r.Host,
		Operation: coord.ACLOperation(r.Operation), Permission: coord.ACLPermission(r.PermissionType),
	}
	if err := f.Validate(); err != nil {
		return fail(kerr.InvalidRequest, err.Error()), nil, nil
	}
	return nil, func(ctx context.Context) kmsg.Response {
		lctx, cancel := context.WithTimeout(ctx, securityTimeout)
		defer cancel()
		st, err := b.backend.LoadSecurity(lctx)
		if err != nil {
			return fail(kafkaerr.SecurityStore.Error(err), fmt.Sprintf("read the ACLs: %v", err))
		}
		for _, a := range st.MatchingACLs(f) {
			n := len(resp.Resources)
			if n == 0 || !sameResourcePattern(resp.Resources[n-1], a) {
				res := kmsg.NewDescribeACLsResponseResource()
				res.ResourceType, res.ResourceName = kmsg.ACLResourceType(a.ResourceType), a.ResourceName
				res.ResourcePatternType = kmsg.ACLResourcePatternType(a.PatternType)
				resp.Resources = append(resp.Resources, res)
				n++
			}
			acl := kmsg.NewDescribeACLsResponseResourceACL()
			acl.Principal, acl.Host = a.Principal, a.Host
			acl.Operation, acl.PermissionType = kmsg.ACLOperation(a.Operation), kmsg.ACLPermissionType(a.Permission)
			resp.Resources[n-1].ACLs = append(resp.Resources[n-1].ACLs, acl)
		}
		return resp
	}, nil
}

// sameResourcePattern reports whether res is a's resource pattern.
func sameResourcePattern(res kmsg.DescribeACLsResponseResource, a coord.ACL) bool {
	return coord.ACLResourceType(res.ResourceType) == a.ResourceType && res.ResourceName == a.ResourceName &&
		coord.ACLPatternType(res.ResourcePatternType) == a.PatternType
}

// aclPatternOf is the pattern type of an ACL API request of version v:
// v0 has none and means Literal, as in Kafka.
func aclPatternOf(v int16, p kmsg.ACLResourcePatternType) coord.ACLPatternType {
	if v == 0 {
		return coord.ACLPatternLiteral
	}
	return coord.ACLPatternType(p)
}
