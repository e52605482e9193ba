package raft

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/tripodmq/tripod/coord"
)

// Security commands: every change to the security store is one log entry,
// applied through the leader (a follower forwards it, as Register), so the
// log serialises concurrent writers.
const (
	cmdSetScramCredential    cmdType = "set_scram_credential"
	cmdDeleteScramCredential cmdType = "delete_scram_credential"
	cmdCreateACLs            cmdType = "create_acls"
	cmdDeleteACLs            cmdType = "delete_acls"
)

// securityCommand holds the fields of a security command.
type securityCommand struct {
	// User is the user of set_ and delete_scram_credential.
	User string `json:"user,omitempty"`
	// Credential is the credential of set_scram_credential.
	Credential *coord.ScramCredential `json:"credential,omitempty"`
	// Mechanism is the mechanism of delete_scram_credential.
	Mechanism string `json:"mechanism,omitempty"`
	// ACLs are the ACLs of create_acls.
	ACLs []coord.ACL `json:"acls,omitempty"`
	// Filters are the filters of delete_acls.
	Filters []coord.ACLFilter `json:"filters,omitempty"`
}

// securityData is the security store in the state machine and its
// snapshots (snapshots written before it existed restore it empty). Apply
// replaces Users and ACLs rather than changing them inside, so that
// Snapshot's shallow copy of fsmData stays a point-in-time copy.
type securityData struct {
	// Users holds each user's credentials, sorted by mechanism.
	Users map[string][]coord.ScramCredential `json:"users,omitempty"`
	// ACLs holds every ACL once, sorted by coord.CompareACLs.
	ACLs []coord.ACL `json:"acls,omitempty"`
	// Version is the index of the last entry that changed the store.
	Version uint64 `json:"version,omitempty"`
}

// applySecurityLocked applies a security command at index; f.mu is held.
// It validates the command again (a forwarded entry comes from another
// node), so the outcome depends on the log alone.
func (f *fsm) applySecurityLocked(index uint64, cmd *command) applyResult {
	sc := cmd.Security
	if sc == nil {
		return applyResult{Err: fmt.Errorf("raft log entry %d: %s command without its fields", index, cmd.Type)}
	}
	d := &f.data.Security
	switch cmd.Type {
	case cmdSetScramCredential:
		if sc.Credential == nil {
			return applyResult{Err: fmt.Errorf("set scram credential of user %q: no credential", sc.User)}
		}
		if err := validateScram(sc.User, *sc.Credential); err != nil {
			return applyResult{Err: err}
		}
		users := maps.Clone(d.Users)
		if users == nil {
			users = map[string][]coord.ScramCredential{}
		}
		users[sc.User] = coord.SetCredential(users[sc.User], *sc.Credential)
		d.Users, d.Version = users, index
	case cmdDeleteScramCredential:
		creds := d.Users[sc.User]
		i := slices.IndexFunc(creds, func(c coord.ScramCredential) bool { return c.Mechanism == sc.Mechanism })
		if i < 0 {
			return applyResult{Err: fmt.Errorf("%w: scram credential %s of user %q", coord.ErrNotFound, sc.Mechanism, sc.User)}
		}
		users := maps.Clone(d.Users)
		if rest := slices.Delete(slices.Clone(creds), i, i+1); len(rest) > 0 {
			users[sc.User] = rest
		} else {
			delete(users, sc.User)
		}
		d.Users, d.Version = users, index
	case cmdCreateACLs:
		if err := coord.ValidateACLs(sc.ACLs); err != nil {
			return applyResult{Err: err}
		}
		merged := coord.SortACLs(append(slices.Clone(d.ACLs), sc.ACLs...))
		if len(merged) != len(d.ACLs) {
			d.ACLs, d.Version = merged, index
		}
	case cmdDeleteACLs:
		if err := coord.ValidateACLFilters(sc.Filters); err != nil {
			return applyResult{Err: err}
		}
		var kept, removed []coord.ACL
		for _, a := range d.ACLs {
			if coord.MatchesAny(sc.Filters, a) {
				removed = append(removed, a)
			} else {
				kept = append(kept, a)
			}
		}
		if len(removed) > 0 {
			d.ACLs, d.Version = kept, index
		}
		return applyResult{ACLs: removed}
	default:
		return applyResult{Err: fmt.Errorf("raft log entry %d: %q is not a security command", index, cmd.Type)}
	}
	return applyResult{}
}

// security returns a deep copy of the security store, its Version raised
// by the bases.
func (f *fsm) security() *coord.SecurityState {
	s, _ := f.securityAt()
	return s
}

// securityAt returns security and securityVersion, read together.
func (f *fsm) securityAt() (*coord.SecurityState, uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	d := f.data.Security
	s := &coord.SecurityState{Version: f.data.Migration.Bases.version(d.Version), Users: d.Users, ACLs: d.ACLs}
	return s.Clone(), max(d.Version, f.data.Migration.BasesVersion)
}

// securityVersion returns the index of the last change to the security
// store or the bases.
func (f *fsm) securityVersion() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return max(f.data.Security.Version, f.data.Migration.BasesVersion)
}

func validateScram(user string, cred coord.ScramCredential) error {
	if err := coord.ValidateScramUser(user); err != nil {
		return err
	}
	return cred.Validate()
}

// LoadSecurity implements coord.SecurityStore. It is linearizable, as
// Load.
func (b *Backend) LoadSecurity(ctx context.Context) (*coord.SecurityState, error) {
	if err := b.readable(ctx, "load security"); err != nil {
		return nil, err
	}
	return b.fsm.security(), nil
}

// WatchSecurity implements coord.SecurityStore.
func (b *Backend) WatchSecurity(ctx context.Context) (<-chan *coord.SecurityState, error) {
	return watch(ctx, b, "watch security", b.fsm.securityVersion, b.fsm.securityAt,
		func(x, y *coord.SecurityState) bool { return x.Version == y.Version })
}

// SetScramCredential implements coord.SecurityStore: one
// set_scram_credential entry.
func (b *Backend) SetScramCredential(ctx context.Context, user string, cred coord.ScramCredential) error {
	if err := validateScram(user, cred); err != nil {
		return err
	}
	what := fmt.Sprintf("set scram credential %s of user %q", cred.Mechanism, user)
	_, err := b.apply(ctx, what, &command{Type: cmdSetScramCredential, Security: &securityCommand{User: user, Credential: &cred}})
	return err
}

// DeleteScramCredential implements coord.SecurityStore: one
// delete_scram_credential entry.
func (b *Backend) DeleteScramCredential(ctx context.Context, user, mechanism string) error {
	if err := coord.ValidateScramUser(user); err != nil {
		return err
	}
	if err := coord.ValidateScramMechanism(mechanism); err != nil {
		return err
	}
	what := fmt.Sprintf("delete scram credential %s of user %q", mechanism, user)
	_, err := b.apply(ctx, what, &command{Type: cmdDeleteScramCredential, Security: &securityCommand{User: user, Mechanism: mechanism}})
	return err
}

// CreateACLs implements coord.SecurityStore: one create_acls entry, so all
// of acls are added at once.
func (b *Backend) CreateACLs(ctx context.Context, acls []coord.ACL) error {
	if err := coord.ValidateACLs(acls); err != nil {
		return err
	}
	if len(acls) == 0 {
		return b.closedErr("create acls")
	}
	_, err := b.apply(ctx, fmt.Sprintf("create %d acls", len(acls)), &command{Type: cmdCreateACLs, Security: &securityCommand{ACLs: acls}})
	return err
}

// DeleteACLs implements coord.SecurityStore: one delete_acls entry, which
// returns what it removed.
func (b *Backend) DeleteACLs(ctx context.Context, filters []coord.ACLFilter) ([]coord.ACL, error) {
	if err := coord.ValidateACLFilters(filters); err != nil {
		return nil, err
	}
	if len(filters) == 0 {
		return nil, b.closedErr("delete acls")
	}
	res, err := b.apply(ctx, fmt.Sprintf("delete acls matching %d filters", len(filters)), &command{Type: cmdDeleteACLs, Security: &securityCommand{Filters: filters}})
	if err != nil {
		return nil, err
	}
	return res.ACLs, nil
}

// closedErr returns ErrClosed for what once the backend is closed, nil
// before.
func (b *Backend) closedErr(what string) error {
	if b.isClosed() {
		return fmt.Errorf("%w: %s", coord.ErrClosed, what)
	}
	return nil
}
