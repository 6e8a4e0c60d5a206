package logging

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"go.uber.org/zap"
	"k8s.io/klog/v2"
)

func TestOptionsValidate(t *testing.T) {
	t.Parallel()
	for _, test := range []struct {
		desc    string
		opts    Options
		wantErr string // substring; empty means valid
	}{
		{desc: "zero value is valid", opts: Options{}},
		{desc: "text", opts: Options{Format: FormatText, Verbosity: 2}},
		{desc: "json at v10", opts: Options{Format: FormatJSON, Verbosity: 10}},
		{desc: "unknown format", opts: Options{Format: "xml"}, wantErr: `--logging-format "xml" is not supported, allowed values are "text" and "json"`},
		{desc: "format is case sensitive", opts: Options{Format: "JSON"}, wantErr: "--logging-format"},
		{desc: "negative verbosity", opts: Options{Verbosity: -1}, wantErr: "-v must be >= 0"},
	} {
		t.Run(test.desc, func(t *testing.T) {
			t.Parallel()
			err := test.opts.Validate()
			if test.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), test.wantErr) {
				t.Fatalf("Validate() = %v, want error containing %q", err, test.wantErr)
			}
			if !errors.Is(err, ErrInvalidOptions) {
				t.Fatalf("Validate() = %v, want errors.Is ErrInvalidOptions", err)
			}
		})
	}
}

func TestNewRejectsInvalidOptions(t *testing.T) {
	t.Parallel()
	if _, err := New(Options{Format: "yaml"}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("New() error = %v, want ErrInvalidOptions", err)
	}
}

func TestNewJSONWritesParseableLines(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger, err := New(Options{Format: FormatJSON, Output: &buf})
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	logger.Info("hello", zap.String("pod", "web-0"))
	logger.Warn("careful", zap.Int("attempt", 3))
	if err := logger.Sync(); err != nil {
		t.Fatalf("Sync() error = %v", err)
	}

	var got []map[string]any
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q is not JSON: %v", sc.Text(), err)
		}
		got = append(got, m)
	}
	if len(got) != 2 {
		t.Fatalf("got %d lines, want 2: %q", len(got), buf.String())
	}
	if got[0]["msg"] != "hello" || got[0]["level"] != "info" || got[0]["pod"] != "web-0" {
		t.Errorf("first line = %v, want msg=hello level=info pod=web-0", got[0])
	}
	if got[1]["level"] != "warn" || got[1]["attempt"] != float64(3) {
		t.Errorf("second line = %v, want level=warn attempt=3", got[1])
	}
	for _, key := range []string{"ts", "caller"} {
		if _, ok := got[0][key]; !ok {
			t.Errorf("first line has no %q field: %v", key, got[0])
		}
	}
}

func TestNewVerbosityGatesDebug(t *testing.T) {
	t.Parallel()
	for _, test := range []struct {
		desc      string
		verbosity int
		format    string
		wantDebug bool
	}{
		{desc: "v0 text", verbosity: 0, format: FormatText},
		{desc: "v3 json", verbosity: 3, format: FormatJSON},
		{desc: "v4 text", verbosity: 4, format: FormatText, wantDebug: true},
		{desc: "v10 json", verbosity: 10, format: FormatJSON, wantDebug: true},
		{desc: "empty format is text", verbosity: 4, wantDebug: true},
	} {
		t.Run(test.desc, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			logger, err := New(Options{Verbosity: test.verbosity, Format: test.format, Output: &buf})
			if err != nil {
				t.Fatalf("New() error = %v", err)
			}
			logger.Debug("debug-line")
			logger.Info("info-line")
			out := buf.String()
			if !strings.Contains(out, "info-line") {
				t.Errorf("output %q lacks the info line", out)
			}
			if got := strings.Contains(out, "debug-line"); got != test.wantDebug {
				t.Errorf("debug line written = %v, want %v; output %q", got, test.wantDebug, out)
			}
			if test.format != FormatJSON && strings.HasPrefix(strings.TrimSpace(out), "{") {
				t.Errorf("text output looks like JSON: %q", out)
			}
			if test.format != FormatJSON && !strings.Contains(out, "\tINFO\t") {
				t.Errorf("text output %q lacks the console level column", out)
			}
		})
	}
}

// SetVerbosity changes a running logger's level (Debug from 4) and klog's V,
// with upstream's answers.
func TestSetVerbosity(t *testing.T) {
	level := zap.NewAtomicLevel()
	var buf bytes.Buffer
	logger, err := New(Options{Verbosity: 1, Output: &buf, Level: &level})
	if err != nil {
		t.Fatal(err)
	}
	logger.Debug("hidden")
	msg, err := SetVerbosity(&level, "5")
	if err != nil || msg != "successfully set klog.logging.verbosity to 5" {
		t.Fatalf("SetVerbosity = %q %v", msg, err)
	}
	logger.Debug("shown")
	if strings.Contains(buf.String(), "hidden") || !strings.Contains(buf.String(), "shown") {
		t.Fatalf("log %q", buf.String())
	}
	if !klog.V(5).Enabled() {
		t.Error("klog V(5) off after -v 5")
	}
	if _, err := SetVerbosity(&level, "-1"); err == nil {
		t.Error("a negative verbosity was taken")
	}
	_, _ = SetVerbosity(&level, "0")
}
