// Package shim runs shim-only instances of the kubelet binary
// (--experimental-dockershim) against the host's dockerd for integration tests
// of the kubelet side. The binary is built once per test package (Binary);
// every instance serves the CRI on a socket in a temp dir of its own, with a
// bridge + host-local network of its own on a free private /24, and is stopped
// by its PID when the test ends. Tests fail (never skip) without dockerd or
// the CNI plugins in /usr/lib/cni.
//
// It is test support: only _test.go files (and other internal/testutil
// packages) may import it. It imports neither the dockershim nor the kubelet
// side, so tests on both sides of the CRI may use it.
//
//	var kubelet shim.Binary
//
//	func TestMain(m *testing.M) { os.Exit(kubelet.Run(m)) }
//
//	func TestIntegrationX(t *testing.T) {
//		s := kubelet.Start(t, shim.Options{})
//		rt, images := s.Dial(t, 30*time.Second)
//		...
//	}
package shim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/netutil"
)

// CNIBinDir is where the instances look for the CNI plugins.
const CNIBinDir = "/usr/lib/cni"

const (
	buildTimeout = 5 * time.Minute
	// stopGrace is how long Stop waits after SIGTERM before SIGKILL.
	stopGrace = 15 * time.Second
)

// Binary is the kubelet binary of a test package: built on first use, removed
// by Run (or Remove) from TestMain. Its zero value is ready to use; it must
// not be copied.
type Binary struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// Path returns the binary, building the module's main package on first use;
// the test fails when it cannot be built (and so do the later ones).
func (b *Binary) Path(t testing.TB) string {
	t.Helper()
	b.once.Do(func() { b.dir, b.path, b.err = build() })
	if b.err != nil {
		t.Fatalf("kubelet binary: %v", b.err)
	}
	return b.path
}

// Remove deletes the built binary, if any.
func (b *Binary) Remove() error {
	if b.dir == "" {
		return nil
	}
	err := os.RemoveAll(b.dir)
	b.dir, b.path = "", ""
	return err
}

// Run runs the tests and then Remove, for TestMain: os.Exit(bin.Run(m)).
func (b *Binary) Run(m *testing.M) int {
	code := m.Run()
	if err := b.Remove(); err != nil {
		fmt.Fprintln(os.Stderr, "remove the kubelet binary:", err)
	}
	return code
}

// build compiles the module root into a new temp dir.
func build() (dir, path string, err error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", "", errors.New("shim: cannot locate the source tree")
	}
	root := filepath.Join(filepath.Dir(file), "..", "..", "..")
	prefix := strings.TrimSuffix(filepath.Base(os.Args[0]), ".test") + "-kubelet-"
	if dir, err = os.MkdirTemp("", prefix); err != nil {
		return "", "", fmt.Errorf("shim: %w", err)
	}
	path = filepath.Join(dir, "kubelet")
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", path, ".")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		return "", "", fmt.Errorf("go build in %s: %w\n%s", root, err, out)
	}
	return dir, path, nil
}

// Options tune an instance.
type Options struct {
	// Args are extra flags for the binary, e.g. "--v=4".
	Args []string
}

// Instance is a running shim-only kubelet.
type Instance struct {
	// Endpoint is the CRI endpoint, unix://<Dir>/cri.sock.
	Endpoint string
	// Dir holds all of the instance's state (socket, shim root, CNI conf,
	// cache and IPAM data); tests may keep their own files in it. It is
	// removed when the test ends.
	Dir string
	// Subnet is the pod network, a private /24.
	Subnet *net.IPNet
	// Bridge is the Linux bridge of the pod network, deleted when the test ends.
	Bridge string

	sock     string
	cmd      *exec.Cmd
	output   *syncBuffer
	ctx      context.Context
	exited   chan struct{}
	waitErr  error // set before exited closes
	stopOnce sync.Once
	stopErr  error
}

// Start checks dockerd and the CNI plugins, builds the binary if needed and
// starts an instance; it does not wait for the socket (see WaitReady). When
// the test ends the instance is stopped (a shim that does not exit cleanly
// on SIGTERM fails the test), its bridge deleted and its dir removed; its
// output is logged if the test failed.
func (b *Binary) Start(t testing.TB, opts Options) *Instance {
	t.Helper()
	requireHost(t)
	bin := b.Path(t)
	dir, err := os.MkdirTemp("", "shim") // short: a socket path has a length limit
	if err != nil {
		t.Fatal(err)
	}
	i := &Instance{Dir: dir, sock: filepath.Join(dir, "cri.sock"), output: &syncBuffer{}, exited: make(chan struct{})}
	i.Endpoint = "unix://" + i.sock
	t.Cleanup(func() { i.cleanup(t) })
	if i.Subnet, err = netutil.FreeSubnet(180); err != nil {
		t.Fatal(err)
	}
	i.Bridge = fmt.Sprintf("ksh%dx%d", i.Subnet.IP[1], i.Subnet.IP[2])
	if err := i.writeConflist(); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--experimental-dockershim", "--container-runtime-endpoint=" + i.Endpoint,
		"--experimental-dockershim-root-directory=" + filepath.Join(dir, "root"),
		"--cni-conf-dir=" + filepath.Join(dir, "net.d"), "--cni-bin-dir=" + CNIBinDir,
		"--cni-cache-dir=" + filepath.Join(dir, "cache"), "--streaming-address=127.0.0.1"}, opts.Args...)
	i.cmd = exec.Command(bin, args...)
	i.cmd.Stdout, i.cmd.Stderr = i.output, i.output
	if err := i.cmd.Start(); err != nil {
		t.Fatalf("start the shim: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	i.ctx = ctx
	go func() {
		i.waitErr = i.cmd.Wait()
		close(i.exited)
		cancel()
	}()
	return i
}

// requireHost fails the test without dockerd or the CNI plugins.
func requireHost(t testing.TB) {
	t.Helper()
	if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		t.Fatalf("dockerd is required: %v: %s", err, out)
	}
	for _, p := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(CNIBinDir, p)); err != nil {
			t.Fatalf("the CNI plugins are required in %s: %v", CNIBinDir, err)
		}
	}
}

// writeConflist writes the instance's network: a bridge of its own with a
// host-local range of Subnet whose state stays in Dir.
func (i *Instance) writeConflist() error {
	confDir := filepath.Join(i.Dir, "net.d")
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		return err
	}
	conf := fmt.Sprintf(`{"cniVersion":"1.0.0","name":%q,"plugins":[{"type":"bridge","bridge":%q,"isGateway":true,"ipMasq":false,`+
		`"ipam":{"type":"host-local","ranges":[[{"subnet":%q}]],"dataDir":%q}}]}`,
		i.Bridge, i.Bridge, i.Subnet.String(), filepath.Join(i.Dir, "ipam"))
	return os.WriteFile(filepath.Join(confDir, "10-shim.conflist"), []byte(conf), 0o644)
}

// Context ends when the process exits: calls that wait for the shim (a
// client waiting for its socket) give up when it dies.
func (i *Instance) Context() context.Context { return i.ctx }

// WaitReady waits until the socket is there; it fails when ctx ends or the
// process exits first.
func (i *Instance) WaitReady(ctx context.Context) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if fi, err := os.Stat(i.sock); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("shim socket %s: %w", i.sock, ctx.Err())
		case <-i.exited:
			return fmt.Errorf("the shim exited before serving: %v", i.waitErr)
		case <-tick.C:
		}
	}
}

// Output is what the process has written to stdout and stderr so far.
func (i *Instance) Output() string { return i.output.String() }

// Stop stops the process by its PID: SIGTERM, then SIGKILL after 15 s. It
// fails when the process had already exited, did not exit by itself or
// exited with an error. Later calls return the first result.
func (i *Instance) Stop() error {
	i.stopOnce.Do(func() {
		select {
		case <-i.exited:
			i.stopErr = fmt.Errorf("the shim exited before it was stopped: %v", i.waitErr)
			return
		default:
		}
		_ = i.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-i.exited:
			if i.waitErr != nil {
				i.stopErr = fmt.Errorf("shim exit after SIGTERM: %w", i.waitErr)
			}
		case <-time.After(stopGrace):
			_ = i.cmd.Process.Kill()
			<-i.exited
			i.stopErr = fmt.Errorf("the shim (pid %d) did not stop %v after SIGTERM", i.cmd.Process.Pid, stopGrace)
		}
	})
	return i.stopErr
}

// cleanup stops the process, deletes the bridge the bridge plugin leaves
// behind and removes Dir.
func (i *Instance) cleanup(t testing.TB) {
	if i.cmd != nil && i.cmd.Process != nil {
		if err := i.Stop(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("shim output:\n%s", i.Output())
		}
	}
	if i.Bridge != "" {
		if _, err := net.InterfaceByName(i.Bridge); err == nil {
			if out, err := exec.Command("ip", "link", "del", i.Bridge).CombinedOutput(); err != nil {
				t.Logf("cleanup: delete bridge %s: %v: %s", i.Bridge, err, out)
			}
		}
	}
	_ = os.RemoveAll(i.Dir)
}

// syncBuffer is a bytes.Buffer safe for the process's output and readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
