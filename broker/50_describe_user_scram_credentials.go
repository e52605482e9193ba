package broker

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tripodmq/tripod/broker/kafkaerr"
	"github.com/tripodmq/tripod/coord"
)

// DescribeUserScramCredentials v0 (KIP-554): which SCRAM mechanisms each
// user has a credential of, with its iteration count.
func init() { registerAPI(50, 0, 0, handleDescribeUserScramCredentials) }

// scramMechanismTypes are the SCRAM mechanisms' ids in the SCRAM
// credential APIs (Kafka's ScramMechanism: 0 is UNKNOWN).
var scramMechanismTypes = map[int8]string{1: coord.ScramSHA256, 2: coord.ScramSHA512}

// scramMechanismType is a mechanism's id in the SCRAM credential APIs.
func scramMechanismType(mechanism string) int8 {
	for id, m := range scramMechanismTypes {
		if m == mechanism {
			return id
		}
	}
	return 0
}

// securityTimeout bounds the security store's reads and writes of one
// request.
const securityTimeout = 30 * time.Second

// handleDescribeUserScramCredentials answers from the security store,
// as Kafka does: with no users named, every user that has a credential,
// sorted by name; else each named user in turn, RESOURCE_NOT_FOUND for
// one without credentials (or with an empty name) and DUPLICATE_RESOURCE,
// once, for one named twice. Salts and keys are never shown. With an
// authorizer the request needs DESCRIBE on the cluster (security/rules.go);
// without one anyone who can reach a listener may describe, as in Kafka.
func handleDescribeUserScramCredentials(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	return nil, func(ctx context.Context) kmsg.Response {
		lctx, cancel := context.WithTimeout(ctx, securityTimeout)
		defer cancel()
		st, err := b.backend.LoadSecurity(lctx)
		if err != nil {
			resp.ErrorCode = kafkaerr.SecurityStore.Error(err).Code
			msg := fmt.Sprintf("read the SCRAM credentials: %v", err)
			resp.ErrorMessage = &msg
			return resp
		}
		result := func(user string, code *kerr.Error, format string) {
			res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
			res.User = user
			if code != nil {
				res.ErrorCode = code.Code
				msg := fmt.Sprintf(format, user)
				res.ErrorMessage = &msg
			} else {
				for _, c := range st.Users[user] {
					info := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
					info.Mechanism, info.Iterations = scramMechanismType(c.Mechanism), int32(c.Iterations)
					res.CredentialInfos = append(res.CredentialInfos, info)
				}
			}
			resp.Results = append(resp.Results, res)
		}
		if len(r.Users) == 0 {
			for _, user := range slices.Sorted(maps.Keys(st.Users)) {
				result(user, nil, "")
			}
			return resp
		}
		count := map[string]int{}
		for _, u := range r.Users {
			count[u.Name]++
		}
		reported := map[string]bool{}
		for _, u := range r.Users {
			switch {
			case reported[u.Name]:
			case u.Name == "":
				result(u.Name, kerr.ResourceNotFound, "Illegal User name: %s")
			case count[u.Name] > 1:
				result(u.Name, kerr.DuplicateResource, "Cannot describe SCRAM credentials for the same user twice in a single request: %s")
			case len(st.Users[u.Name]) == 0:
				result(u.Name, kerr.ResourceNotFound, "Attempt to describe a user credential that does not exist: %s")
			default:
				result(u.Name, nil, "")
			}
			reported[u.Name] = true
		}
		return resp
	}, nil
}
