package broker

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/kafkaerr"
	"github.com/tripodmq/tripod/broker/security"
	"github.com/tripodmq/tripod/coord"
)

// CreateAcls v0..v3 (v1 adds resource pattern types, KIP-290).
func init() { registerAPI(30, 0, 3, handleCreateACLs) }

// handleCreateACLs adds each creation's ACL to the security store, one
// result per creation in order, as Kafka's AclApis: SECURITY_DISABLED
// without an authorizer; INVALID_REQUEST for an ACL that cannot be stored
// (an Any or Match pattern, an unknown value, an empty name or principal,
// a CLUSTER resource not named kafka-cluster, a name the backend's layout
// cannot hold), with nothing written for it. An ACL that exists already
// is no error. Every broker applies the new ACLs when its watch delivers
// them. The authorizer asks for ALTER on the cluster first (security/rules.go).
func handleCreateACLs(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.CreateACLsRequest)
	resp := r.ResponseKind().(*kmsg.CreateACLsResponse)
	for range r.Creations {
		resp.Results = append(resp.Results, kmsg.NewCreateACLsResponseResult())
	}
	fail := func(i int, code *kerr.Error, msg string) {
		resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code.Code, &msg
	}
	if !b.cfg.Authorizer.Enabled() {
		for i := range r.Creations {
			fail(i, kerr.SecurityDisabled, noAuthorizerMessage)
		}
		return resp, nil, nil
	}
	acls := make([]coord.ACL, len(r.Creations))
	valid := make([]bool, len(r.Creations))
	for i, c := range r.Creations {
		a := coord.ACL{
			ResourceType: coord.ACLResourceType(c.ResourceType), ResourceName: c.ResourceName,
			PatternType: aclPatternOf(r.Version, c.ResourcePatternType), Principal: c.Principal, Host: c.Host,
			Operation: coord.ACLOperation(c.Operation), Permission: coord.ACLPermission(c.PermissionType),
		}
		err := a.Validate()
		if err == nil && a.ResourceType == coord.ACLResourceCluster && a.ResourceName != security.ClusterResource {
			err = fmt.Errorf("acl %v: the only valid name for the CLUSTER resource is %s", a, security.ClusterResource)
		}
		if err != nil {
			fail(i, kerr.InvalidRequest, err.Error())
			continue
		}
		acls[i], valid[i] = a, true
	}
	return nil, func(ctx context.Context) kmsg.Response {
		wctx, cancel := context.WithTimeout(ctx, securityTimeout)
		defer cancel()
		for i, a := range acls {
			if !valid[i] {
				continue
			}
			if err := b.backend.CreateACLs(wctx, []coord.ACL{a}); err != nil {
				fail(i, kafkaerr.ACLStore.Error(err), fmt.Sprintf("store acl %v: %v", a, err))
			}
		}
		return resp
	}, nil
}
