package logging

import (
	"flag"
	"strconv"

	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
)

// klogVerbosityKey is the field that carries a klog V level in routed entries.
const klogVerbosityKey = "v"

// RouteKlog sends everything logged through klog (client-go, the CRI
// streaming library) into logger and sets klog's verbosity to verbosity, so
// klog.V(n) lines appear exactly when n <= verbosity, as with kubelet -v.
//
// Routed V(n) lines are written at zap's Info level with a "v" field holding
// n, so they are not filtered a second time by the logger's own level.
//
// vmodule, as klog's -vmodule, raises the verbosity of the klog calls of
// some files (logging.vmodule).
//
// klog is process-global state: call RouteKlog once during start-up, before
// other goroutines log. The returned restore func puts back every klog
// setting captured before the call; it exists for tests.
func RouteKlog(logger *zap.Logger, verbosity int, vmodule ...VModule) (restore func()) {
	if logger == nil {
		logger = zap.NewNop()
	}
	if verbosity < 0 {
		verbosity = 0
	}
	saved := klog.CaptureState()

	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	// The flag value is an integer we formatted ourselves; Set cannot fail.
	_ = fs.Set("v", strconv.Itoa(verbosity))
	// Patterns Options.Validate accepted; a level is a formatted integer.
	_ = fs.Set("vmodule", vmoduleFlag(vmodule))

	routed := logger.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return infoFloorCore{Core: c}
	}))
	klog.SetLoggerWithOptions(
		zapr.NewLoggerWithOptions(routed, zapr.LogInfoLevel(klogVerbosityKey)),
		klog.FlushLogger(func() { _ = routed.Sync() }),
	)
	return saved.Restore
}

// infoFloorCore raises entries below Info to Info. klog already decided
// whether a V(n) line is wanted; zapr maps V(n) to zap level -n, which the
// process logger would otherwise drop.
type infoFloorCore struct {
	zapcore.Core
}

func (c infoFloorCore) Enabled(lvl zapcore.Level) bool {
	return c.Core.Enabled(max(lvl, zapcore.InfoLevel))
}

func (c infoFloorCore) With(fields []zapcore.Field) zapcore.Core {
	return infoFloorCore{Core: c.Core.With(fields)}
}

func (c infoFloorCore) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	ent.Level = max(ent.Level, zapcore.InfoLevel)
	return c.Core.Check(ent, ce)
}
