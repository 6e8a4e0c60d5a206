package logging

import (
	"io"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"k8s.io/klog/v2"
)

// isolateKlog keeps klog quiet and restores its global state after the test.
// Tests that touch klog must not run in parallel.
func isolateKlog(t *testing.T) {
	t.Helper()
	t.Cleanup(klog.CaptureState().Restore)
	klog.LogToStderr(false)
	klog.SetOutput(io.Discard)
}

func messages(logs *observer.ObservedLogs) map[string]observer.LoggedEntry {
	out := map[string]observer.LoggedEntry{}
	for _, e := range logs.All() {
		out[e.Message] = e
	}
	return out
}

func TestRouteKlogHonoursVerbosity(t *testing.T) {
	isolateKlog(t)
	for _, test := range []struct {
		desc      string
		verbosity int
		want      []string
		notWant   []string
	}{
		{desc: "v0 keeps only unconditional lines", verbosity: 0, want: []string{"info", "error"}, notWant: []string{"v1", "v2", "v5"}},
		{desc: "v2 adds V(1) and V(2)", verbosity: 2, want: []string{"info", "error", "v1", "v2"}, notWant: []string{"v5"}},
		{desc: "v5 adds V(5)", verbosity: 5, want: []string{"info", "error", "v1", "v2", "v5"}},
	} {
		t.Run(test.desc, func(t *testing.T) {
			// An Info-level logger, as New builds for -v < 4: klog's own
			// gating must decide, not the zap level.
			core, logs := observer.New(zapcore.InfoLevel)
			restore := RouteKlog(zap.New(core), test.verbosity)
			defer restore()

			klog.InfoS("info", "pod", "web-0")
			klog.ErrorS(io.ErrUnexpectedEOF, "error")
			klog.V(1).InfoS("v1")
			klog.V(2).Info("v2")
			klog.V(5).InfoS("v5")
			klog.Flush()

			got := messages(logs)
			for _, m := range test.want {
				if _, ok := got[m]; !ok {
					t.Errorf("klog line %q did not reach zap; got %v", m, logs.All())
				}
			}
			for _, m := range test.notWant {
				if _, ok := got[m]; ok {
					t.Errorf("klog line %q reached zap at -v=%d", m, test.verbosity)
				}
			}
			if e, ok := got["info"]; ok && e.ContextMap()["pod"] != "web-0" {
				t.Errorf("structured klog fields lost: %v", e.ContextMap())
			}
			if e, ok := got["error"]; ok && e.Level != zapcore.ErrorLevel {
				t.Errorf("klog.ErrorS level = %v, want error", e.Level)
			}
			if e, ok := got["v2"]; ok {
				if e.Level != zapcore.InfoLevel || e.ContextMap()[klogVerbosityKey] != int64(2) {
					t.Errorf("V(2) entry = level %v fields %v, want info with v=2", e.Level, e.ContextMap())
				}
			}
		})
	}
}

func TestRouteKlogRestore(t *testing.T) {
	isolateKlog(t)
	core, logs := observer.New(zapcore.DebugLevel)
	restore := RouteKlog(zap.New(core), 3)
	if !klog.V(3).Enabled() {
		t.Fatal("klog.V(3) disabled after RouteKlog(v=3)")
	}
	restore()
	if klog.V(1).Enabled() {
		t.Error("klog verbosity not restored")
	}
	klog.InfoS("after restore")
	klog.Flush()
	if n := logs.Len(); n != 0 {
		t.Errorf("zap received %d entries after restore: %v", n, logs.All())
	}
}
