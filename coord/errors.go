package coord

import "errors"

// Sentinel errors of the coord contract. Backends translate their client's
// errors to these in one function each (error.go) and wrap them with the key
// or broker concerned, so callers test with errors.Is.
var (
	// ErrFenced: a Commit by a term that is no longer the current one.
	ErrFenced = errors.New("coord: fenced: controller term is no longer current")
	// ErrSessionExpired: the service expired the session.
	ErrSessionExpired = errors.New("coord: session expired")
	// ErrClosed: the session, term or backend was closed.
	ErrClosed = errors.New("coord: closed")
	// ErrNotFound: the topic or partition does not exist.
	ErrNotFound = errors.New("coord: not found")
	// ErrExists: the topic, or a live registration of the broker, exists.
	ErrExists = errors.New("coord: already exists")
	// ErrVersionMismatch: a partition epoch compare-and-set failed.
	ErrVersionMismatch = errors.New("coord: partition epoch mismatch")
	// ErrUnavailable: the coordination service could not be reached.
	ErrUnavailable = errors.New("coord: coordination service unavailable")
	// ErrTooLarge: a Commit would write a value larger than the backend
	// can store (ZooKeeper: a topic znode over jute.maxbuffer); nothing is
	// written.
	ErrTooLarge = errors.New("coord: value too large for the coordination service")
	// ErrNoController: no controller is elected.
	ErrNoController = errors.New("coord: no controller")
)
