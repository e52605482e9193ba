package kafkaerr

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tripodmq/tripod/controller"
	"github.com/tripodmq/tripod/coord"
	"github.com/tripodmq/tripod/replication"
	tlog "github.com/tripodmq/tripod/replication/log"
)

// name is e's Kafka name, or NONE for nil.
func name(e *kerr.Error) string {
	if e == nil {
		return "NONE"
	}
	return e.Message
}

// TestTableRows checks that every row answers its Kafka error, bare and
// wrapped, through a mapping of its source; a sentinel is in one row.
func TestTableRows(t *testing.T) {
	seen := map[error]bool{}
	for _, r := range table {
		if seen[r.sentinel] {
			t.Errorf("%v: got two rows, want one", r.sentinel)
		}
		seen[r.sentinel] = true
		m := Mapping{from: r.from}
		for _, err := range []error{r.sentinel, fmt.Errorf("context: %w", r.sentinel)} {
			if got := m.Error(err); got != r.kafka {
				t.Errorf("%v: got %s, want %s", err, name(got), name(r.kafka))
			}
		}
	}
}

func TestMappings(t *testing.T) {
	storage := errors.New("storage offline")
	appended := Append.With(storage, kerr.KafkaStorageError)
	cases := []struct {
		name    string
		mapping Mapping
		err     error
		want    *kerr.Error
	}{
		{"nil is no error", Append, nil, nil},
		{"no sentinel", Append, errors.New("x"), kerr.UnknownServerError},
		{"a source the mapping does not read", Log, replication.ErrNotLeader, kerr.UnknownServerError},
		{"a source the mapping reads", Append, replication.ErrNotLeader, kerr.NotLeaderForPartition},
		{"a caller's sentinel", appended, fmt.Errorf("%w: dir d", storage), kerr.KafkaStorageError},
		{"the caller's sentinel does not reach the base", Append, storage, kerr.UnknownServerError},
		{"log closed on produce", Log, tlog.ErrClosed, kerr.UnknownTopicOrPartition},
		{"the earlier row of two wins", Controller, fmt.Errorf("%w: %w", coord.ErrUnavailable, coord.ErrNotFound), kerr.UnknownTopicOrPartition},
		{"a timeout of the store", Controller, fmt.Errorf("%w: load: %w", coord.ErrUnavailable, context.Canceled), kerr.RequestTimedOut},
		{"an override wins over the table", SecurityStore, coord.ErrNotFound, kerr.ResourceNotFound},
		{"an override of one API only", Controller, controller.ErrFencedLeaderEpoch, kerr.UnknownServerError},
		{"AlterPartition's override", AlterPartition, controller.ErrFencedLeaderEpoch, kerr.FencedLeaderEpoch},
		{"AlterPartition reads Controller", AlterPartition, coord.ErrFenced, kerr.NotController},
		{"a closed store", ACLStore, coord.ErrClosed, kerr.UnknownServerError},
		{"ACLStore's otherwise", ACLStore, errors.New("bad acl"), kerr.InvalidRequest},
		{"a remapped answer", OffsetStore(appended), storage, kerr.NotCoordinator},
		{"a remapped timeout", OffsetStore(appended), replication.ErrRequestTimedOut, kerr.CoordinatorNotAvailable},
		{"an answer the remap does not list", OffsetStore(appended), replication.ErrOutOfOrderSequence, kerr.UnknownServerError},
		{"a remap without otherwise keeps the rest", Append.Then(map[*kerr.Error]*kerr.Error{kerr.NotLeaderForPartition: kerr.NotCoordinator}, nil), replication.ErrOffsetOutOfRange, kerr.OffsetOutOfRange},
		{"nil stays no error through a remap", OffsetStore(appended), nil, nil},
		{"a voter twice", Quorum, fmt.Errorf("add voter 4: %w", coord.ErrDuplicateVoter), kerr.DuplicateVoter},
		{"no such voter", Quorum, coord.ErrVoterNotFound, kerr.VoterNotFound},
		{"a lagging voter", Quorum, coord.ErrNotCaughtUp, kerr.RequestTimedOut},
		{"a change in progress", Quorum, coord.ErrQuorumChangeInProgress, kerr.RequestTimedOut},
		{"no quorum leader", Quorum, coord.ErrUnavailable, kerr.NotLeaderForPartition},
		{"a closing broker", Quorum, coord.ErrClosed, kerr.NotLeaderForPartition},
		{"a voter change out of time", Quorum, context.DeadlineExceeded, kerr.RequestTimedOut},
		{"the last voter", Quorum, fmt.Errorf("remove voter 1: %w", coord.ErrNoLiveMajority), kerr.InvalidRequest},
		{"an unknown refusal", Quorum, errors.New("coord: something else"), kerr.UnknownServerError},
		{"the quorum's rows are the quorum's", Controller, coord.ErrDuplicateVoter, kerr.UnknownServerError},
	}
	for _, c := range cases {
		if got := c.mapping.Error(c.err); got != c.want {
			t.Errorf("%s: got %s, want %s", c.name, name(got), name(c.want))
		}
		want := int16(0)
		if c.want != nil {
			want = c.want.Code
		}
		if got := c.mapping.Code(c.err); got != want {
			t.Errorf("%s: got code %d, want %d", c.name, got, want)
		}
	}
}

// TestWithLeavesTheReceiver checks that two overrides of one mapping do
// not see each other.
func TestWithLeavesTheReceiver(t *testing.T) {
	a, b := errors.New("a"), errors.New("b")
	base := Log.With(a, kerr.NotCoordinator)
	withB := base.With(b, kerr.NotController)
	withA := base.With(a, kerr.NotController)
	if got := base.Error(b); got != kerr.UnknownServerError {
		t.Errorf("base after With: got %s, want %s", name(got), name(kerr.UnknownServerError))
	}
	if got := withB.Error(a); got != kerr.NotCoordinator {
		t.Errorf("withB: got %s, want %s", name(got), name(kerr.NotCoordinator))
	}
	if got := withA.Error(b); got != kerr.UnknownServerError {
		t.Errorf("withA: got %s, want %s", name(got), name(kerr.UnknownServerError))
	}
}
