// Package lifecycle holds the background loops of a component with the
// node's one lifecycle shape: built with everything it needs in its Options,
// Start(ctx) error begins its loops and returns, the loops end with ctx, and
// Wait returns once they have. A component embeds Loops for the last two.
package lifecycle

import (
	"sync"

	"go.uber.org/zap"

	"github.com/kubelet-dockershim/kubelet/internal/logging"
)

// Loops tracks a component's background loops. The zero value is ready.
type Loops struct{ wg sync.WaitGroup }

// Go runs loop in its own goroutine, under the process's crash handler
// (logging.HandleCrash with name and logger).
func (l *Loops) Go(logger *zap.Logger, name string, loop func()) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer logging.HandleCrash(logger, name)
		loop()
	}()
}

// Wait returns once every loop begun by Go has returned.
func (l *Loops) Wait() { l.wg.Wait() }
