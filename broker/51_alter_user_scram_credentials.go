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

// AlterUserScramCredentials v0 (KIP-554): delete users' SCRAM credentials
// and add or replace them.
func init() { registerAPI(51, 0, 0, handleAlterUserScramCredentials) }

// handleAlterUserScramCredentials applies the deletions and upsertions
// to the security store, checked as Kafka checks them, one result per
// user:
//   - a user with an empty name, an unknown mechanism (UNSUPPORTED_SASL_MECHANISM),
//     an iteration count out of bounds, or an empty salt or salted
//     password (UNACCEPTABLE_CREDENTIAL) is refused with nothing changed;
//   - so is a user named twice for one mechanism (DUPLICATE_RESOURCE),
//     and one whose deletion names a credential that does not exist
//     (RESOURCE_NOT_FOUND);
//   - every other user has its deletions, then its upsertions, written.
//
// An upsertion carries the salted password the client computed (PBKDF2
// of the password); the stored credential is its StoredKey and ServerKey
// (RFC 5802), never the salted password. A user's changes are written one
// credential at a time: a store failure part way reports that user's
// error with some of its changes made. Credentials take effect on every
// broker without a restart (security.Server holds the watched state).
// With an authorizer the request needs ALTER on the cluster
// (security/rules.go); without one anyone who can reach a listener may
// alter credentials, as in Kafka.
func handleAlterUserScramCredentials(_ context.Context, b *Broker, req *request) (kmsg.Response, laterFunc, error) {
	r := req.kreq.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := r.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	return nil, func(ctx context.Context) kmsg.Response {
		result := func(user string, code *kerr.Error, msg string) {
			res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			res.User = user
			if code != nil {
				res.ErrorCode = code.Code
				res.ErrorMessage = &msg
			}
			resp.Results = append(resp.Results, res)
		}
		plan := planScramAlterations(r)
		for _, f := range plan.refused {
			result(f.user, f.code, f.msg)
		}
		if len(plan.users) == 0 {
			return resp
		}
		wctx, cancel := context.WithTimeout(ctx, securityTimeout)
		defer cancel()
		st, err := b.backend.LoadSecurity(wctx)
		if err != nil {
			for _, u := range plan.users {
				result(u, kafkaerr.SecurityStore.Error(err), fmt.Sprintf("read the SCRAM credentials: %v", err))
			}
			return resp
		}
	users:
		for _, u := range plan.users {
			for _, m := range plan.deletions[u] {
				if _, ok := st.Credential(u, m); !ok {
					result(u, kerr.ResourceNotFound, "Attempt to delete a user credential that does not exist")
					continue users
				}
			}
			for _, m := range plan.deletions[u] {
				if err := b.backend.DeleteScramCredential(wctx, u, m); err != nil {
					result(u, kafkaerr.SecurityStore.Error(err), fmt.Sprintf("delete the %s credential: %v", m, err))
					continue users
				}
			}
			for _, c := range plan.upsertions[u] {
				if err := b.backend.SetScramCredential(wctx, u, c); err != nil {
					result(u, kafkaerr.SecurityStore.Error(err), fmt.Sprintf("set the %s credential: %v", c.Mechanism, err))
					continue users
				}
			}
			result(u, nil, "")
		}
		return resp
	}, nil
}

// scramAlterations is an AlterUserScramCredentials request checked: the
// users refused, and the changes of the others.
type scramAlterations struct {
	refused []refusedUser
	// users are the users to change, in the order the request first
	// names them; deletions are their mechanisms to delete, upsertions
	// their credentials to set.
	users      []string
	deletions  map[string][]string
	upsertions map[string][]coord.ScramCredential
}

// refusedUser is a user whose changes are refused, with the result's
// error.
type refusedUser struct {
	user string
	code *kerr.Error
	msg  string
}

// planScramAlterations checks a request as Kafka's ZkAdminManager does,
// without I/O but for the deletions of credentials that do not exist,
// which the handler checks against the store.
func planScramAlterations(r *kmsg.AlterUserSCRAMCredentialsRequest) scramAlterations {
	p := scramAlterations{deletions: map[string][]string{}, upsertions: map[string][]coord.ScramCredential{}}
	refused := map[string]bool{}
	refuse := func(user string, code *kerr.Error, msg string) {
		if !refused[user] {
			refused[user] = true
			p.refused = append(p.refused, refusedUser{user, code, msg})
		}
	}
	// The first error of a user is its result.
	for _, d := range r.Deletions {
		switch {
		case d.Name == "":
			refuse(d.Name, kerr.UnacceptableCredential, "Username must not be empty")
		case scramMechanismTypes[d.Mechanism] == "":
			refuse(d.Name, kerr.UnsupportedSaslMechanism, "Unknown SCRAM mechanism")
		}
	}
	for _, u := range r.Upsertions {
		switch {
		case u.Name == "":
			refuse(u.Name, kerr.UnacceptableCredential, "Username must not be empty")
		case scramMechanismTypes[u.Mechanism] == "":
			refuse(u.Name, kerr.UnsupportedSaslMechanism, "Unknown SCRAM mechanism")
		case u.Iterations < security.ScramMinIterations:
			refuse(u.Name, kerr.UnacceptableCredential, "Too few iterations")
		case u.Iterations > security.ScramMaxIterations:
			refuse(u.Name, kerr.UnacceptableCredential, "Too many iterations")
		case len(u.Salt) == 0:
			refuse(u.Name, kerr.UnacceptableCredential, "Salt must not be empty")
		case len(u.SaltedPassword) == 0:
			refuse(u.Name, kerr.UnacceptableCredential, "Salted password must not be empty")
		}
	}
	type pair struct {
		user      string
		mechanism int8
	}
	seen := map[pair]bool{}
	var order []string
	note := func(user string, mechanism int8) {
		if refused[user] {
			return
		}
		if seen[pair{user, mechanism}] {
			refuse(user, kerr.DuplicateResource, "A user credential cannot be altered twice in the same request")
			return
		}
		seen[pair{user, mechanism}] = true
		if _, listed := p.deletions[user]; !listed {
			if _, listed := p.upsertions[user]; !listed {
				order = append(order, user)
			}
		}
	}
	for _, d := range r.Deletions {
		note(d.Name, d.Mechanism)
		if !refused[d.Name] {
			p.deletions[d.Name] = append(p.deletions[d.Name], scramMechanismTypes[d.Mechanism])
		}
	}
	for _, u := range r.Upsertions {
		note(u.Name, u.Mechanism)
		if !refused[u.Name] {
			p.upsertions[u.Name] = append(p.upsertions[u.Name], security.ScramCredential(scramMechanismTypes[u.Mechanism], u.Salt, u.SaltedPassword, int(u.Iterations)))
		}
	}
	for _, u := range order {
		if !refused[u] {
			p.users = append(p.users, u)
		}
	}
	return p
}
