package logging

import (
	"fmt"

	"go.uber.org/zap"
)

// PanicMessage is the message of the log entry HandleCrash writes.
const PanicMessage = "panic in a background loop; the process exits"

// HandleCrash is the process's crash handler for goroutines that are not one gRPC
// call or HTTP request (those recover at their edge and keep serving). Defer it
// first thing in every goroutine the product starts, last among that function's
// defers so that it runs before them:
//
//	go func() {
//		defer logging.HandleCrash(logger, "event broker")
//		b.run(ctx)
//	}()
//
// On a panic it logs the value and the panicking goroutine's stack through logger
// (at Error, with the loop's name), flushes the logger and panics again with the
// same value, as upstream's runtime.HandleCrash does with ReallyCrash set: the
// process ends with exit status 2, and systemd restarts it. A background loop that
// panicked cannot be trusted to go on, so nothing is swallowed. A nil logger
// means the process logger (zap.L, which the binary's start-up installs), for
// the leaf packages that hold no logger of their own.
func HandleCrash(logger *zap.Logger, loop string) {
	r := recover()
	if r == nil {
		return
	}
	if logger == nil {
		logger = zap.L()
	}
	if logger != nil {
		logger.Error(PanicMessage, zap.String("loop", loop), zap.String("panic", fmt.Sprint(r)),
			zap.StackSkip("stack", 1))
		_ = logger.Sync()
	}
	panic(r)
}
