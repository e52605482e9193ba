package zk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/go-zookeeper/zk"

	"github.com/tripodmq/tripod/coord"
)

// convertError translates a go-zookeeper error about key (a znode path or
// what the call was doing) into the coord sentinel it means, wrapped with
// the key. It is the one place where ZooKeeper's errors become coord's.
func convertError(err error, key string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, coord.ErrClosed), errors.Is(err, coord.ErrUnavailable),
		errors.Is(err, coord.ErrSessionExpired), errors.Is(err, coord.ErrFenced), errors.Is(err, coord.ErrMigrated):
		return err
	case errors.Is(err, zk.ErrNoNode):
		return fmt.Errorf("%w: %s", coord.ErrNotFound, key)
	case errors.Is(err, zk.ErrNodeExists):
		return fmt.Errorf("%w: %s", coord.ErrExists, key)
	case errors.Is(err, zk.ErrBadVersion):
		return fmt.Errorf("%w: %s", coord.ErrVersionMismatch, key)
	case errors.Is(err, zk.ErrSessionExpired):
		return fmt.Errorf("%w: %s", coord.ErrSessionExpired, key)
	case isConnectionError(err):
		return fmt.Errorf("%w: %s: %v", coord.ErrUnavailable, key, err)
	default:
		return fmt.Errorf("zookeeper %s: %w", key, err)
	}
}

// isConnectionError reports whether err says the request may not have
// reached the service, so retrying later can succeed.
// go-zookeeper hands back the socket's own error (net.ErrClosed, an
// *net.OpError, io.EOF) when a request is written as its connection drops.
func isConnectionError(err error) bool {
	var opErr *net.OpError
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) ||
		errors.Is(err, zk.ErrClosing) || errors.Is(err, zk.ErrSessionMoved) ||
		errors.Is(err, coord.ErrUnavailable) || errors.Is(err, zk.ErrSessionExpired) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.As(err, &opErr)
}
