package raft

import (
	"context"
	"fmt"
	"slices"

	"github.com/tripodmq/tripod/coord"
)

// watch runs a watch goroutine owned by the backend. version returns the
// index of the watched part's last change (cheap); read returns its value
// with that index. The goroutine sends the current value first, then the
// value after every change that alters it; a value waiting to be sent is
// replaced by a newer one, so a slow reader sees only the latest. The
// channel is closed when ctx ends or on Close.
func watch[V any](ctx context.Context, b *Backend, what string, version func() uint64, read func() (V, uint64), same func(a, b V) bool) (<-chan V, error) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, fmt.Errorf("%w: %s", coord.ErrClosed, what)
	}
	if err := ctx.Err(); err != nil {
		b.mu.Unlock()
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	b.wg.Add(1)
	b.mu.Unlock()
	out := make(chan V)
	go func() {
		defer b.wg.Done()
		defer close(out)
		var last V
		var lastVersion uint64
		sent := false
		for {
			changes := b.fsm.changes()
			if !sent || version() > lastVersion {
				v, ver := read()
				if sent && same(last, v) {
					lastVersion = ver
					continue
				}
				select {
				case out <- v:
					last, lastVersion, sent = v, ver, true
					continue
				case <-changes:
					continue
				case <-ctx.Done():
					return
				case <-b.closing:
					return
				}
			}
			select {
			case <-changes:
			case <-ctx.Done():
				return
			case <-b.closing:
				return
			}
		}
	}()
	return out, nil
}

// WatchMembers implements coord.Registrar.
func (b *Backend) WatchMembers(ctx context.Context) (<-chan []coord.Broker, error) {
	return watch(ctx, b, "watch members", func() uint64 { return b.fsm.versions().members }, b.fsm.reportedMembers,
		func(x, y []coord.Broker) bool { return slices.EqualFunc(x, y, coord.Broker.Equal) })
}

// WatchController implements coord.Elector.
func (b *Backend) WatchController(ctx context.Context) (<-chan coord.ControllerInfo, error) {
	return watch(ctx, b, "watch controller", func() uint64 { return b.fsm.versions().controller }, b.fsm.reportedController,
		func(x, y coord.ControllerInfo) bool { return x == y })
}

// WatchMetadata implements coord.MetadataStore.
func (b *Backend) WatchMetadata(ctx context.Context) (<-chan *coord.Metadata, error) {
	return watch(ctx, b, "watch metadata", func() uint64 { return b.fsm.versions().meta }, b.fsm.metadataAt,
		func(x, y *coord.Metadata) bool { return x.Version == y.Version })
}
