package app

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
)

// readyTimeout bounds the wait for a component to report ready.
const readyTimeout = time.Minute

// lifecycle runs the node's components: each is started when it is added,
// in dependency order (a component is added after everything it uses), and
// shutdown stops them in the reverse order, each stopped before the one it
// uses. Components have the one lifecycle shape (component); the servers
// of the app itself are started, then closed.
type lifecycle struct {
	logger *zap.Logger

	mu    sync.Mutex
	stops []stopStep
}

// stopStep stops one component.
type stopStep struct {
	name string
	stop func()
}

func newLifecycle(logger *zap.Logger) *lifecycle {
	return &lifecycle{logger: logger.Named("lifecycle")}
}

// component is the one lifecycle shape of the node's managers: built with
// everything it needs in its Options, Start(ctx) begins its work and returns
// (an error when it cannot begin); its loops end with ctx, and Wait returns
// once they have.
type component interface {
	Start(ctx context.Context) error
	Wait()
}

// startComponent starts c under a child of ctx; at shutdown the child is
// cancelled and c waited for.
func (l *lifecycle) startComponent(ctx context.Context, name string, c component) error {
	ctx, cancel := context.WithCancel(ctx)
	if err := c.Start(ctx); err != nil {
		cancel()
		return fmt.Errorf("start %s: %w", name, err)
	}
	l.push(name, func() { cancel(); c.Wait() })
	return nil
}

// start calls start (which must not block) and, when it succeeds, registers
// stop for shutdown (nil: nothing to stop).
func (l *lifecycle) start(name string, start func() error, stop func()) error {
	if err := start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	if stop != nil {
		l.push(name, stop)
	}
	return nil
}

// onStop registers a step that only runs at shutdown (closing a client).
func (l *lifecycle) onStop(name string, stop func()) { l.push(name, stop) }

// waitReady waits until ready is closed, for at most readyTimeout. A
// component that is ready counts as ready even when ctx has ended meanwhile.
func (l *lifecycle) waitReady(ctx context.Context, name string, ready <-chan struct{}) error {
	t := time.NewTimer(readyTimeout)
	defer t.Stop()
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		select {
		case <-ready:
			return nil
		default:
		}
		return fmt.Errorf("%s not ready: %w", name, context.Cause(ctx))
	case <-t.C:
		return fmt.Errorf("%s not ready after %s", name, readyTimeout)
	}
}

func (l *lifecycle) push(name string, stop func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stops = append(l.stops, stopStep{name: name, stop: stop})
}

// shutdown stops every component, the last started first. It may be called
// more than once; later calls stop what was added since.
func (l *lifecycle) shutdown() {
	l.mu.Lock()
	stops := l.stops
	l.stops = nil
	l.mu.Unlock()
	for i := len(stops) - 1; i >= 0; i-- {
		l.logger.Debug("stopping", zap.String("component", stops[i].name))
		stops[i].stop()
	}
}
