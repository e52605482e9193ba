package etcd

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tripodmq/tripod/coord"
)

// convertError translates an error of the etcd client, met while working on
// what (a key or a broker), to the coord sentinel it means, wrapped with
// what. A call cut short by its context wraps both coord.ErrUnavailable and
// the context's error, so callers may test for either.
func (b *Backend) convertError(err error, what string) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return fmt.Errorf("%w: %s: lease not found", coord.ErrSessionExpired, what)
	case errors.Is(err, context.Canceled) && b.isClosed():
		return fmt.Errorf("%w: %s", coord.ErrClosed, what)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: %s: %w", coord.ErrUnavailable, what, err)
	case errors.Is(err, rpctypes.ErrNoLeader), errors.Is(err, rpctypes.ErrTimeout),
		errors.Is(err, rpctypes.ErrTimeoutDueToLeaderFail), errors.Is(err, rpctypes.ErrTimeoutDueToConnectionLost),
		errors.Is(err, rpctypes.ErrLeaderChanged), errors.Is(err, rpctypes.ErrNotCapable),
		errors.Is(err, rpctypes.ErrStopped), errors.Is(err, rpctypes.ErrTooManyRequests):
		return fmt.Errorf("%w: %s: %w", coord.ErrUnavailable, what, err)
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Aborted:
		if b.isClosed() {
			return fmt.Errorf("%w: %s", coord.ErrClosed, what)
		}
		return fmt.Errorf("%w: %s: %w", coord.ErrUnavailable, what, err)
	}
	return fmt.Errorf("etcd %s: %w", what, err)
}
