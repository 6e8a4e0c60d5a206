package logging

import (
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// crashIn runs f under HandleCrash the way a goroutine does and returns what
// HandleCrash panicked with (nil if it did not).
func crashIn(logger *zap.Logger, f func()) (repanicked any) {
	defer func() { repanicked = recover() }()
	func() {
		defer HandleCrash(logger, "test loop")
		f()
	}()
	return nil
}

func TestHandleCrashLogsAndPanicsAgain(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zap.DebugLevel)
	got := crashIn(zap.New(core), func() { panicInLoop() })
	if got != "boom" {
		t.Fatalf("HandleCrash re-panicked with %v, want the original value %q", got, "boom")
	}
	entries := logs.AllUntimed()
	if len(entries) != 1 {
		t.Fatalf("log entries: %d, want 1: %+v", len(entries), entries)
	}
	e := entries[0]
	fields := e.ContextMap()
	if e.Level != zap.ErrorLevel || e.Message != PanicMessage || fields["loop"] != "test loop" || fields["panic"] != "boom" {
		t.Fatalf("log entry %v %q %v", e.Level, e.Message, fields)
	}
	stack, _ := fields["stack"].(string)
	if !strings.Contains(stack, "logging.panicInLoop") {
		t.Fatalf("the stack does not show where the loop panicked:\n%s", stack)
	}
}

func panicInLoop() { panic("boom") }

func TestHandleCrashWithoutPanic(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zap.DebugLevel)
	if got := crashIn(zap.New(core), func() {}); got != nil {
		t.Fatalf("HandleCrash panicked with %v without a panic", got)
	}
	if n := logs.Len(); n != 0 {
		t.Fatalf("log entries without a panic: %d", n)
	}
}

// TestHandleCrashNilLogger: a goroutine of a package without a logger of its
// own (nil) logs through the process logger the binary installs (zap.L). Not
// parallel: it replaces zap's global logger.
func TestHandleCrashNilLogger(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	defer zap.ReplaceGlobals(zap.New(core))()
	if got := crashIn(nil, func() { panic("boom") }); got != "boom" {
		t.Fatalf("HandleCrash with a nil logger re-panicked with %v, want %q", got, "boom")
	}
	if entries := logs.AllUntimed(); len(entries) != 1 || entries[0].Message != PanicMessage {
		t.Fatalf("process logger entries %+v, want the panic", entries)
	}
}
