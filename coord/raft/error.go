package raft

import (
	"context"
	"errors"
	"fmt"
	"strings"

	hraft "github.com/hashicorp/raft"

	"github.com/tripodmq/tripod/coord"
)

// errNotLeader is the forward RPC's answer from a node that is no longer
// the leader; the caller finds the leader again and retries.
var errNotLeader = errors.New("not the raft leader")

// errChangeOutcomeUnknown is a quorum change whose leader lost the
// leadership before the change committed: it may have committed or not,
// and asking the next leader tells.
var errChangeOutcomeUnknown = errors.New("the leader lost the leadership before the quorum change committed")

// wireCodes names the errors that cross the forward RPC, in the order
// errorCode tries them.
var wireCodes = []struct {
	code string
	err  error
}{
	{"fenced", coord.ErrFenced},
	{"session_expired", coord.ErrSessionExpired},
	{"closed", coord.ErrClosed},
	{"not_found", coord.ErrNotFound},
	{"exists", coord.ErrExists},
	{"version_mismatch", coord.ErrVersionMismatch},
	{"no_controller", coord.ErrNoController},
	{"migrated", coord.ErrMigrated},
	{"duplicate_voter", coord.ErrDuplicateVoter},
	{"voter_not_found", coord.ErrVoterNotFound},
	{"not_caught_up", coord.ErrNotCaughtUp},
	{"quorum_change_in_progress", coord.ErrQuorumChangeInProgress},
	{"no_live_majority", coord.ErrNoLiveMajority},
	{"change_outcome_unknown", errChangeOutcomeUnknown},
	{"not_leader", errNotLeader},
	{"unavailable", coord.ErrUnavailable},
}

// wireError returns the sentinel of code, nil if unknown.
func wireError(code string) error {
	for _, w := range wireCodes {
		if w.code == code {
			return w.err
		}
	}
	return nil
}

// remoteError is an error returned by the leader over the forward RPC.
type remoteError struct {
	Code string
	Msg  string
}

func (e *remoteError) Error() string { return e.Msg }

// errorCode returns err's wire code, "" when it has none.
func errorCode(err error) string {
	for _, w := range wireCodes {
		if errors.Is(err, w.err) {
			return w.code
		}
	}
	return ""
}

// translate is the one place where errors of hashicorp/raft, the network
// and the forward RPC become coord sentinels; what says what failed with
// which key. Errors that already wrap a coord sentinel or a context error
// pass through with what prefixed.
func translate(what string, err error) error {
	if err == nil {
		return nil
	}
	var re *remoteError
	switch {
	case errors.As(err, &re):
		if re.Code == "not_leader" {
			return fmt.Errorf("%w: %s: %w", coord.ErrUnavailable, what, errNotLeader)
		}
		if sentinel := wireError(re.Code); sentinel != nil {
			return fmt.Errorf("%w: %s: %s", sentinel, what, strings.TrimPrefix(re.Msg, sentinel.Error()+": "))
		}
		return fmt.Errorf("%s: %s", what, re.Msg)
	case errors.Is(err, errNotLeader),
		errors.Is(err, hraft.ErrNotLeader),
		errors.Is(err, hraft.ErrLeadershipLost),
		errors.Is(err, hraft.ErrLeadershipTransferInProgress),
		errors.Is(err, hraft.ErrAbortedByRestore),
		errors.Is(err, hraft.ErrEnqueueTimeout):
		return fmt.Errorf("%w: %s: %w", coord.ErrUnavailable, what, err)
	case errors.Is(err, hraft.ErrRaftShutdown):
		return fmt.Errorf("%w: %s: raft is shut down", coord.ErrClosed, what)
	case strings.Contains(err.Error(), "configuration changed since"):
		// A configuration change with our prevIndex met a newer one
		// (hashicorp/raft's nextConfiguration has no sentinel for it).
		return fmt.Errorf("%w: %s: %w", coord.ErrQuorumChangeInProgress, what, err)
	case strings.Contains(err.Error(), "need at least one voter"):
		return fmt.Errorf("%w: %s: %w", coord.ErrNoLiveMajority, what, err)
	case strings.Contains(err.Error(), "found duplicate"), strings.Contains(err.Error(), "found empty"):
		// A configuration hashicorp/raft refuses: two servers with one
		// ID or address, or a server without one.
		return fmt.Errorf("%s: %w", what, err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: %s: %w", coord.ErrUnavailable, what, err)
	case errorCode(err) != "":
		return fmt.Errorf("%s: %w", what, err)
	}
	// Anything else is the network: a refused or cut connection, a
	// timeout, a broken frame.
	return fmt.Errorf("%w: %s: %w", coord.ErrUnavailable, what, err)
}
