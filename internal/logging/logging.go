// Package logging builds the process's zap logger, routes klog (used by
// client-go and the CRI streaming library) into it, and provides the gRPC
// server interceptors that put a request id and method into every request's
// context.
//
// It is a leaf package: it imports no other internal package, and any
// internal package may import it.
package logging

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
)

// Log formats accepted by Options.Format.
const (
	// FormatText selects zap's console encoder (human-readable lines).
	FormatText = "text"
	// FormatJSON selects zap's JSON encoder (one object per line).
	FormatJSON = "json"
)

// DebugVerbosity is the lowest kubelet -v value that enables the Debug level.
const DebugVerbosity = 4

// ErrInvalidOptions is wrapped by every error Options.Validate returns.
var ErrInvalidOptions = errors.New("invalid logging options")

// Options configures the process logger.
type Options struct {
	// Verbosity is the kubelet -v value (0..10). Values >= DebugVerbosity
	// enable the Debug level; klog honours the exact value (see RouteKlog).
	Verbosity int
	// Format is FormatText or FormatJSON. Empty means FormatText.
	Format string
	// Output receives the log lines (with SplitStream, the errors only). Nil
	// means os.Stderr.
	Output io.Writer
	// Level, when set, is the logger's level, so SetVerbosity can change it
	// while the process runs (/debug/flags/v).
	Level *zap.AtomicLevel
	// VModule raises the verbosity of some files (logging.vmodule): the
	// Debug lines of a file raised to DebugVerbosity or more are written.
	VModule []VModule
	// SplitStream writes entries below the Error level to InfoOutput (nil:
	// os.Stdout) and the others to Output (logging.options.<format>.splitStream,
	// as upstream's); InfoBufferSize, when above 0, buffers InfoOutput by that
	// many bytes (at most 2 GiB), flushed every 30 s and by Sync.
	SplitStream    bool
	InfoOutput     io.Writer
	InfoBufferSize int64
}

// Validate reports the first problem with o, naming the command-line flag
// that set the bad value.
func (o Options) Validate() error {
	switch o.Format {
	case "", FormatText, FormatJSON:
	default:
		return fmt.Errorf("%w: --logging-format %q is not supported, allowed values are %q and %q",
			ErrInvalidOptions, o.Format, FormatText, FormatJSON)
	}
	if o.Verbosity < 0 {
		return fmt.Errorf("%w: -v must be >= 0, got %d", ErrInvalidOptions, o.Verbosity)
	}
	if o.InfoBufferSize < 0 {
		return fmt.Errorf("%w: the info buffer size must be >= 0, got %d", ErrInvalidOptions, o.InfoBufferSize)
	}
	return validateVModule(o.VModule)
}

// New validates opts and builds a logger writing to opts.Output. It starts
// no goroutines but, with an info buffer, zap's flusher; call Sync on the
// result before the process exits.
func New(opts Options) (*zap.Logger, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	out := opts.Output
	if out == nil {
		out = os.Stderr
	}
	sink := zapcore.Lock(zapcore.AddSync(out))
	var level zapcore.LevelEnabler = levelFor(opts.Verbosity)
	if opts.Level != nil {
		opts.Level.SetLevel(levelFor(opts.Verbosity))
		level = opts.Level
	}
	enc := newEncoder(opts.Format)
	var core zapcore.Core
	if opts.SplitStream {
		info := opts.InfoOutput
		if info == nil {
			info = os.Stdout
		}
		infoSink := zapcore.Lock(zapcore.AddSync(info))
		if n := opts.InfoBufferSize; n > 0 {
			infoSink = &zapcore.BufferedWriteSyncer{WS: infoSink, Size: int(min(n, 2<<30))}
		}
		errLevel := zap.LevelEnablerFunc(func(l zapcore.Level) bool { return l >= zapcore.ErrorLevel && level.Enabled(l) })
		infoLevel := zap.LevelEnablerFunc(func(l zapcore.Level) bool { return l < zapcore.ErrorLevel && level.Enabled(l) })
		core = zapcore.NewTee(zapcore.NewCore(enc, sink, errLevel), withVModule(zapcore.NewCore(enc.Clone(), infoSink, infoLevel), opts.VModule))
	} else {
		core = withVModule(zapcore.NewCore(enc, sink, level), opts.VModule)
	}
	return zap.New(core,
		zap.AddCaller(),
		zap.AddStacktrace(zapcore.DPanicLevel),
		zap.ErrorOutput(sink),
	), nil
}

// SetVerbosity is /debug/flags/v: it sets the -v of the running process
// from val (a non-negative integer), klog's and level's (the Level of New's
// Options), with the answers of upstream's handler.
func SetVerbosity(level *zap.AtomicLevel, val string) (string, error) {
	v, err := strconv.ParseUint(val, 10, 32)
	if err != nil {
		return "", err
	}
	var kl klog.Level
	if err := kl.Set(val); err != nil {
		return "", fmt.Errorf("failed set klog.logging.verbosity %s: %v", val, err)
	}
	if level != nil {
		level.SetLevel(levelFor(int(v)))
	}
	return fmt.Sprintf("successfully set klog.logging.verbosity to %s", val), nil
}

// withVModule wraps the core of the entries below the Error level when
// vmodule raises some file to the Debug level.
func withVModule(c zapcore.Core, items []VModule) zapcore.Core {
	if !raisesDebug(items) {
		return c
	}
	return vmoduleCore{Core: c, items: items}
}

// levelFor maps a kubelet -v value onto the zap level of the process logger.
func levelFor(verbosity int) zapcore.Level {
	if verbosity >= DebugVerbosity {
		return zapcore.DebugLevel
	}
	return zapcore.InfoLevel
}

func newEncoder(format string) zapcore.Encoder {
	cfg := zap.NewProductionEncoderConfig()
	cfg.EncodeTime = zapcore.ISO8601TimeEncoder
	cfg.EncodeDuration = zapcore.StringDurationEncoder
	if format == FormatJSON {
		return zapcore.NewJSONEncoder(cfg)
	}
	cfg.EncodeLevel = zapcore.CapitalLevelEncoder
	return zapcore.NewConsoleEncoder(cfg)
}
