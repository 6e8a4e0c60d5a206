package logging

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"go.uber.org/zap/zapcore"
)

// VModule is one -vmodule pattern=N setting (logging.vmodule): the log
// calls of the files whose name (without the directory and ".go") matches
// Pattern (a filepath.Match pattern) get verbosity N, when it is above -v.
type VModule struct {
	Pattern string
	Level   int
}

// vmoduleFlag is the settings as klog's -vmodule flag value.
func vmoduleFlag(items []VModule) string {
	parts := make([]string, 0, len(items))
	for _, it := range items {
		parts = append(parts, it.Pattern+"="+strconv.Itoa(it.Level))
	}
	return strings.Join(parts, ",")
}

// fileLevel is klog's per-file verbosity: the level of the first setting
// (settings of level 0 are skipped, as klog drops them) whose pattern matches
// file's base name without ".go", else 0.
func fileLevel(items []VModule, file string) int {
	file = strings.TrimSuffix(filepath.Base(file), ".go")
	for _, it := range items {
		if it.Level == 0 {
			continue
		}
		if ok, _ := filepath.Match(it.Pattern, file); ok {
			return it.Level
		}
	}
	return 0
}

// validateVModule checks the settings as upstream's logging validation does
// (a malformed pattern, as in klog, matches nothing).
func validateVModule(items []VModule) error {
	for i, it := range items {
		switch {
		case it.Pattern == "":
			return fmt.Errorf("%w: logging.vmodule[%d]: File pattern must not be empty", ErrInvalidOptions, i)
		case strings.ContainsAny(it.Pattern, "=,"):
			return fmt.Errorf("%w: logging.vmodule[%d]: File pattern must not contain equal sign or comma", ErrInvalidOptions, i)
		case it.Level < 0:
			return fmt.Errorf("%w: logging.vmodule[%d]: verbosity must be >= 0", ErrInvalidOptions, i)
		}
	}
	return nil
}

// vmoduleCore lets the Debug entries (this kubelet's -v=4 lines) of the
// files vmodule raises to DebugVerbosity or more through a core whose level
// would drop them. Which file logged is only known once zap has checked the
// entry, so with vmodule set every Debug call is checked here and the file
// decided in Write; without vmodule this core is not used.
type vmoduleCore struct {
	zapcore.Core
	items []VModule
}

func (c vmoduleCore) Enabled(lvl zapcore.Level) bool {
	return lvl == zapcore.DebugLevel || c.Core.Enabled(lvl)
}

func (c vmoduleCore) With(fields []zapcore.Field) zapcore.Core {
	return vmoduleCore{Core: c.Core.With(fields), items: c.items}
}

func (c vmoduleCore) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Core.Enabled(ent.Level) {
		return c.Core.Check(ent, ce)
	}
	if ent.Level == zapcore.DebugLevel {
		return ce.AddCore(ent, c)
	}
	return ce
}

// Write writes an entry the wrapped core's level lets through, and a Debug
// entry of a file vmodule raises.
func (c vmoduleCore) Write(ent zapcore.Entry, fields []zapcore.Field) error {
	if c.Core.Enabled(ent.Level) || (ent.Caller.Defined && fileLevel(c.items, ent.Caller.File) >= DebugVerbosity) {
		return c.Core.Write(ent, fields)
	}
	return nil
}

// raisesDebug reports whether some setting raises a file to the Debug level.
func raisesDebug(items []VModule) bool {
	for _, it := range items {
		if it.Level >= DebugVerbosity {
			return true
		}
	}
	return false
}
