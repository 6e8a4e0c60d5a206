package logging

import (
	"bytes"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"k8s.io/klog/v2"
)

// TestVModuleRaisesFiles: at -v=0 the Debug lines of a file vmodule raises
// to 4 or more are written, the others not; a raise below 4 or of another
// file changes nothing; -v=4 writes them all.
func TestVModuleRaisesFiles(t *testing.T) {
	t.Parallel()
	for _, test := range []struct {
		desc      string
		verbosity int
		vmodule   []VModule
		wantDebug bool
	}{
		{desc: "this file raised to 4", vmodule: []VModule{{Pattern: "vmodule_test", Level: 4}}, wantDebug: true},
		{desc: "a glob", vmodule: []VModule{{Pattern: "vmod*", Level: 5}}, wantDebug: true},
		{desc: "raised below the Debug level", vmodule: []VModule{{Pattern: "vmodule_test", Level: 3}}},
		{desc: "another file", vmodule: []VModule{{Pattern: "worker", Level: 9}}},
		{desc: "the first match wins", vmodule: []VModule{{Pattern: "vmodule_*", Level: 2}, {Pattern: "vmodule_test", Level: 6}}},
		{desc: "a level 0 setting is skipped, as klog's", vmodule: []VModule{{Pattern: "vmodule_*", Level: 0}, {Pattern: "vmodule_test", Level: 6}}, wantDebug: true},
		{desc: "-v=4 without vmodule", verbosity: 4, wantDebug: true},
		{desc: "a malformed pattern matches nothing", vmodule: []VModule{{Pattern: "[", Level: 9}}},
	} {
		t.Run(test.desc, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			l, err := New(Options{Verbosity: test.verbosity, Output: &out, VModule: test.vmodule})
			if err != nil {
				t.Fatal(err)
			}
			l.Debug("a debug line")
			l.Info("an info line")
			l.Named("child").With(zap.String("k", "v")).Debug("a child's debug line")
			_ = l.Sync()
			got := out.String()
			if !strings.Contains(got, "an info line") {
				t.Errorf("the info line is missing: %q", got)
			}
			for _, line := range []string{"a debug line", "a child's debug line"} {
				if strings.Contains(got, line) != test.wantDebug {
					t.Errorf("%q written: %v, want %v; output %q", line, !test.wantDebug, test.wantDebug, got)
				}
			}
		})
	}
}

// TestSplitStream: entries below Error go to the info stream, the others to
// Output; with a buffer the info stream is written at Sync.
func TestSplitStream(t *testing.T) {
	t.Parallel()
	for _, format := range []string{FormatText, FormatJSON} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			var errOut, infoOut bytes.Buffer
			l, err := New(Options{Format: format, Output: &errOut, InfoOutput: &infoOut, SplitStream: true, InfoBufferSize: 1 << 20})
			if err != nil {
				t.Fatal(err)
			}
			l.Info("info-line")
			l.Warn("warn-line")
			l.Error("error-line")
			if infoOut.Len() != 0 {
				t.Errorf("the buffered info stream was written before Sync: %q", infoOut.String())
			}
			if !strings.Contains(errOut.String(), "error-line") || strings.Contains(errOut.String(), "info-line") || strings.Contains(errOut.String(), "warn-line") {
				t.Errorf("error stream %q: want the error line only", errOut.String())
			}
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			if got := infoOut.String(); !strings.Contains(got, "info-line") || !strings.Contains(got, "warn-line") || strings.Contains(got, "error-line") {
				t.Errorf("info stream %q: want the info and warning lines only", got)
			}
		})
	}
}

// TestRouteKlogVModule: klog's lines of a file vmodule raises pass at -v=0.
func TestRouteKlogVModule(t *testing.T) {
	isolateKlog(t)
	core, logs := observer.New(zapcore.InfoLevel)
	restore := RouteKlog(zap.New(core), 0, VModule{Pattern: "vmodule_test", Level: 3})
	defer restore()
	klog.V(3).InfoS("v3-here")
	klog.V(4).InfoS("v4-here")
	klog.Flush()
	got := messages(logs)
	if _, ok := got["v3-here"]; !ok {
		t.Errorf("klog V(3) of a file raised to 3 did not reach zap: %v", logs.All())
	}
	if _, ok := got["v4-here"]; ok {
		t.Error("klog V(4) of a file raised to 3 reached zap")
	}
}

func TestVModuleValidate(t *testing.T) {
	t.Parallel()
	for _, items := range [][]VModule{{{Pattern: "", Level: 1}}, {{Pattern: "a=b", Level: 1}}, {{Pattern: "a", Level: -1}}} {
		if err := (Options{VModule: items}).Validate(); err == nil {
			t.Errorf("vmodule %v accepted", items)
		}
	}
}
