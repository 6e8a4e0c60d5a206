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
	// Output receives the log lines. Nil means os.Stderr.
	Output io.Writer
	// Level, when set, is the logger's level, so SetVerbosity can change it
	// while the process runs (/debug/flags/v).
	Level *zap.AtomicLevel
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
	return nil
}

// New validates opts and builds a logger writing to opts.Output. It starts
// no goroutines; call Sync on the result before the process exits.
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
	core := zapcore.NewCore(newEncoder(opts.Format), sink, level)
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
