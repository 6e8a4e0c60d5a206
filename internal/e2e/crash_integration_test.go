//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubelet-dockershim/kubelet/internal/faultinject"
	"github.com/kubelet-dockershim/kubelet/internal/logging"
)

// The crash test (issue 11 item 5): a panic in a background loop of the real
// binary (not in a gRPC call or HTTP request, which recover at their edge) is
// logged through the process logger with its stack, and the process exits
// non-zero, promptly, so that systemd restarts it. The panic is injected by a
// build of the binary with -tags faultinject (package faultinject); the
// product build has no such hook, which the test checks too.

// crashExitTimeout bounds the wait for the process to exit after the panic.
const crashExitTimeout = 60 * time.Second

// faultBinary is the -tags faultinject build of the module, made once per run
// of the package into the suite's temp dir.
var faultBinary struct {
	once sync.Once
	path string
	err  error
}

func faultInjectBinary(t *testing.T, s *suite) string {
	t.Helper()
	faultBinary.once.Do(func() {
		dir := filepath.Join(s.dir, "faultinject")
		if faultBinary.err = os.MkdirAll(dir, 0o755); faultBinary.err != nil {
			return
		}
		root, err := filepath.Abs(filepath.Join("..", ".."))
		if err != nil {
			faultBinary.err = err
			return
		}
		faultBinary.path = filepath.Join(dir, "kubelet")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-tags", "faultinject", "-o", faultBinary.path, ".")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			faultBinary.err = fmt.Errorf("go build -tags faultinject: %w\n%s", err, out)
		}
	})
	if faultBinary.err != nil {
		t.Fatal(faultBinary.err)
	}
	return faultBinary.path
}

func TestIntegrationCrashInBackgroundLoop(t *testing.T) {
	s := requireSuite(t)
	bin := faultInjectBinary(t, s)
	for _, tc := range []struct {
		desc  string
		point string // the faultinject point that panics
		loop  string // the crash handler's loop name in the log
		frame string // a function of the panicking loop, in the logged stack
		pod   bool   // needs a pod (the point is in a pod worker)
	}{
		{desc: "dockershim event broker", point: "dockershim.events", loop: "docker event broker", frame: "dockershim.(*eventBroker).run"},
		{desc: "container log rotation", point: "kuberuntime.rotateLogs", loop: "container log rotation", frame: "kuberuntime.(*Manager).rotateLogsLoop"},
		{desc: "pod worker", point: "podworkers.sync", loop: "pod worker", frame: "podworkers.(*PodWorkers).workerLoop", pod: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			n := newNode(t)
			if tc.pod {
				n.writeManifest("one.yaml", oneSleeperManifest("one"))
			}
			p := startWithFault(t, n, bin, tc.point)
			if !p.wait(crashExitTimeout) {
				t.Fatalf("the process did not exit within %s of a panic in %s (a hang, or the panic was swallowed)", crashExitTimeout, tc.loop)
			}
			if code := p.exitCode(); code == 0 {
				t.Fatalf("exit status 0 after a panic in %s (%v), want non-zero", tc.loop, p.err)
			}
			entry := findPanicEntry(t, p.logPath)
			if entry == nil {
				t.Fatalf("no %q entry in the log (%s)", logging.PanicMessage, p.logPath)
			}
			stack, _ := entry["stack"].(string)
			if entry["loop"] != tc.loop || !strings.Contains(stack, "faultinject.Point") || !strings.Contains(stack, tc.frame) {
				t.Fatalf("the panic entry has loop %v and a stack without faultinject.Point or %s:\n%v", entry["loop"], tc.frame, entry)
			}
			t.Logf("exit status %d; logged: %s, panic %v", p.exitCode(), entry["msg"], entry["panic"])
		})
	}
}

// linkFaultBinary hard-links bin into a dir of the node's own and writes
// point into the fault file next to it (faultinject.TriggerFile or
// KillFile); it returns the link and the fault file.
func linkFaultBinary(t *testing.T, n *node, bin, faultFile, point string) (linked, fault string) {
	t.Helper()
	dir := filepath.Join(n.dir, "bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	linked, fault = filepath.Join(dir, "kubelet"), filepath.Join(dir, faultFile)
	if err := os.Link(bin, linked); err != nil {
		t.Fatalf("link the faultinject binary: %v", err)
	}
	if err := os.WriteFile(fault, []byte(point+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return linked, fault
}

// startWithFault runs a hard link of bin in a dir of the node's own, whose
// trigger file names point, with the node's flags in docker mode.
func startWithFault(t *testing.T, n *node, bin, point string) *proc {
	t.Helper()
	linked, _ := linkFaultBinary(t, n, bin, faultinject.TriggerFile, point)
	p, err := startProc("kubelet", filepath.Join(n.dir, "kubelet.log"), linked, n.args()...)
	if err != nil {
		t.Fatal(err)
	}
	n.kubelet = p
	n.procs = append(n.procs, p)
	return p
}

// findPanicEntry returns the crash handler's JSON log entry, if any.
func findPanicEntry(t *testing.T, path string) map[string]any {
	t.Helper()
	for _, line := range grepFile(path, logging.PanicMessage) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err == nil && m["msg"] == logging.PanicMessage {
			return m
		}
	}
	return nil
}

// TestIntegrationProductBinaryHasNoFaultHook: the binary every other test runs
// (the product build) carries no fault-injection code.
func TestIntegrationProductBinaryHasNoFaultHook(t *testing.T) {
	s := requireSuite(t)
	out, err := exec.Command("go", "tool", "nm", s.bin).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool nm: %v\n%.500s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "faultinject") {
			t.Errorf("the product binary has a fault-injection symbol: %s", strings.TrimSpace(line))
		}
	}
}
