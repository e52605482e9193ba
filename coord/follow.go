package coord

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Follow takes every state a backend watch sends (watch is one of
// a Backend's Watch* methods) and hands it to apply, until ctx ends or the
// backend closes. A watch that fails or ends (its channel closes when the
// backend's connection does) is started again after a backoff that
// doubles from 100 ms up to 5 s and is reset by every state.
func Follow[S any](ctx context.Context, log hclog.Logger, what string, watch func(context.Context) (<-chan S, error), apply func(S)) {
	backoff := 100 * time.Millisecond
	for {
		states, err := watch(ctx)
		if err == nil {
			for st := range states {
				apply(st)
				backoff = 100 * time.Millisecond
			}
			err = errors.New("the watch ended")
		}
		if ctx.Err() != nil || errors.Is(err, ErrClosed) {
			return
		}
		log.Warn("watching "+what+" failed, retrying", "error", err, "backoff", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}
