//go:build linux

package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/dockerd"
)

// Local images (scripts/build-images.sh builds them into the host's dockerd).
const (
	pauseImage   = "registry.k8s.io/pause:3.10"
	busyboxImage = "kubelet-dockershim/busybox:latest"
	// localImage is busyboxImage under a tag whose default pull policy is
	// IfNotPresent (what `kubectl create deployment --image` gives).
	localImage = "kubelet-dockershim/busybox:local"
	cniBinDir  = "/usr/lib/cni"
)

// suite is what TestMain prepares once for the package: the kubelet binary and a
// private dockerd holding copies of the local images.
type suite struct {
	dir    string // temp base of the suite
	bin    string // the built kubelet binary
	docker string // unix:// endpoint of the private dockerd
	dockrd *proc  // the private dockerd
	bridge string // the private dockerd's own bridge
	// dockerVersion is the private dockerd's ServerVersion.
	dockerVersion string
	err           error // set when the setup failed: every test fails with it
}

// theSuite is written once by TestMain before any test runs and only read after.
var theSuite = &suite{}

func TestMain(m *testing.M) {
	if invokedAsFaultPlugin() { // run by libcni as a test's CNI plugin
		os.Exit(runFaultPlugin())
	}
	s := setupSuite()
	theSuite = s
	code := m.Run()
	s.teardown()
	os.Exit(code)
}

// requireSuite fails the test (never skips) when the suite could not be set up.
func requireSuite(t testing.TB) *suite {
	t.Helper()
	if theSuite.err != nil {
		t.Fatalf("end-to-end setup failed: %v", theSuite.err)
	}
	return theSuite
}

// setupSuite builds the binary and starts the private dockerd. Errors are kept
// in suite.err so that each test reports them as a failure.
func setupSuite() *suite {
	s := &suite{}
	dir, err := os.MkdirTemp("", "e2e")
	if err != nil {
		s.err = err
		return s
	}
	s.dir = dir
	start := time.Now()
	if s.err = s.build(); s.err != nil {
		return s
	}
	if s.err = requireHost(); s.err != nil {
		return s
	}
	if s.err = fakeProcSys(filepath.Join(dir, "proc-sys")); s.err != nil {
		return s
	}
	if s.err = s.startDockerd(); s.err != nil {
		return s
	}
	if s.err = sweepStaleRules(); s.err != nil {
		return s
	}
	fmt.Fprintf(os.Stderr, "e2e: binary built and private dockerd (Docker %s) ready in %s\n", s.dockerVersion, time.Since(start).Round(time.Millisecond))
	return s
}

// build compiles the module root (../.. from this package) once.
func (s *suite) build() error {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return err
	}
	s.bin = filepath.Join(s.dir, "kubelet")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", s.bin, ".")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build in %s: %w\n%s", root, err, out)
	}
	return nil
}

// requireHost checks the host's dockerd (the source of the images), the dockerd
// binary, the images and the CNI plugins.
func requireHost() error {
	if _, err := exec.LookPath("dockerd"); err != nil {
		return fmt.Errorf("dockerd is required (scripts/prepare-host.sh installs it): %w", err)
	}
	if out, err := run(context.Background(), "docker", "info", "--format", "{{.ServerVersion}}"); err != nil {
		return fmt.Errorf("the host's dockerd is required (scripts/prepare-host.sh starts it): %w: %s", err, out)
	}
	for _, img := range []string{pauseImage, busyboxImage} {
		if out, err := run(context.Background(), "docker", "image", "inspect", img); err != nil {
			return fmt.Errorf("image %s is required (scripts/build-images.sh builds it): %w: %s", img, err, out)
		}
	}
	for _, p := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(cniBinDir, p)); err != nil {
			return fmt.Errorf("CNI plugin %s is required in %s: %w", p, cniBinDir, err)
		}
	}
	return nil
}

// startDockerd starts a dockerd on the suite's temp dirs (no iptables: pods get
// their network from CNI) and loads the local images into it. It gets a bridge of
// its own: with --bridge=none dockerd deletes the host's docker0, which belongs to
// the host's dockerd.
func (s *suite) startDockerd() error {
	d := filepath.Join(s.dir, "d")
	if err := os.MkdirAll(d, 0o755); err != nil {
		return err
	}
	s.bridge = fmt.Sprintf("e2edk%d", os.Getpid()%100000)
	for _, args := range [][]string{
		{"link", "add", s.bridge, "type", "bridge"},
		{"addr", "add", fmt.Sprintf("10.199.%d.1/24", os.Getpid()%250), "dev", s.bridge},
		{"link", "set", s.bridge, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %v: %w: %s", args, err, out)
		}
	}
	conf := filepath.Join(d, "daemon.json")
	if err := os.WriteFile(conf, []byte("{}\n"), 0o644); err != nil {
		return err
	}
	sock := filepath.Join(d, "docker.sock")
	s.docker = "unix://" + sock
	// $DOCKERSHIM_TEST_DOCKER=26 runs the suite on Docker Engine 26.
	program, checkVersion, err := dockerd.EngineFromEnv()
	if err != nil {
		return err
	}
	p, err := startProc("dockerd", filepath.Join(d, "dockerd.log"), program,
		"--config-file="+conf, "--data-root="+filepath.Join(d, "data"), "--exec-root="+filepath.Join(d, "x"),
		"--pidfile="+filepath.Join(d, "docker.pid"), "-H", s.docker, "--bridge="+s.bridge, "--iptables=false",
		"--ip-masq=false", "--userland-proxy=false")
	if err != nil {
		return err
	}
	s.dockrd = p
	deadline := time.Now().Add(60 * time.Second)
	for {
		if v, err := s.dockerCLI(context.Background(), "info", "--format", "{{.ServerVersion}}"); err == nil {
			s.dockerVersion = strings.TrimSpace(v)
			if err := checkVersion(s.dockerVersion); err != nil {
				return err
			}
			break
		}
		if p.exited() || time.Now().After(deadline) {
			return fmt.Errorf("private dockerd did not come up; its log:\n%s", tailFile(p.logPath, 30))
		}
		time.Sleep(100 * time.Millisecond)
	}
	return s.loadImages()
}

// loadImages copies the local images from the host's dockerd into the private one.
func (s *suite) loadImages() error {
	return dockerd.CopyImages(s.docker, pauseImage, busyboxImage, localImage)
}

// dockerCLI runs the docker CLI against the private dockerd.
func (s *suite) dockerCLI(ctx context.Context, args ...string) (string, error) {
	return run(ctx, "docker", append([]string{"-H", s.docker}, args...)...)
}

// teardown removes every container of the private dockerd, stops it and removes
// the suite's directory.
func (s *suite) teardown() {
	if s.dockrd != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if out, err := s.dockerCLI(ctx, "ps", "-aq"); err == nil && strings.TrimSpace(out) != "" {
			_, _ = s.dockerCLI(ctx, append([]string{"rm", "-f"}, strings.Fields(out)...)...)
		}
		cancel()
		if err := s.dockrd.stop(30 * time.Second); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: stopping the private dockerd: %v\n", err)
		}
	}
	if s.bridge != "" {
		_ = exec.Command("ip", "link", "del", s.bridge).Run()
	}
	if s.dir != "" {
		unmountUnder(s.dir)
		_ = os.RemoveAll(s.dir)
	}
}

// run runs a command with a one-minute cap (or ctx's) and returns its combined output.
func run(ctx context.Context, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return string(out), nil
}

// proc is a process a test started; it is stopped by its PID only.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error // Wait's result, valid once done is closed
}

// startProc starts bin with args, its stdout and stderr appended to logPath.
func startProc(name, logPath, bin string, args ...string) (*proc, error) {
	return startProcEnv(name, logPath, bin, nil, args...)
}

// startProcEnv is startProc with env added to the test's environment.
func startProcEnv(name, logPath, bin string, env []string, args ...string) (*proc, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fmt.Fprintf(f, "=== e2e: %s started at %s: %s %s\n", name, time.Now().Format(time.RFC3339Nano), bin, strings.Join(args, " "))
	cmd := exec.Command(bin, args...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout, cmd.Stderr = f, f
	// If the test binary dies, do not leave the daemon running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits up to timeout for the process to exit and reports whether it did.
func (p *proc) wait(timeout time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// exitCode is the exit status (-1 when killed by a signal or still running).
func (p *proc) exitCode() int {
	if !p.exited() {
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
}

// stop sends SIGTERM, waits up to grace, then SIGKILLs. It returns Wait's error
// (nil after a clean exit) or a timeout error.
func (p *proc) stop(grace time.Duration) error {
	if p.exited() {
		return p.err
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if p.wait(grace) {
		return p.err
	}
	_ = p.cmd.Process.Kill()
	p.wait(10 * time.Second)
	return fmt.Errorf("%s (pid %d) did not exit within %s of SIGTERM: killed", p.name, p.pid(), grace)
}

// kill sends SIGKILL and waits for the process to be reaped.
func (p *proc) kill() {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Kill()
	p.wait(10 * time.Second)
}

// tailFile returns the last n lines of path, each cut to 600 bytes.
func tailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if len(line) > 600 {
			line = line[:600] + "..."
		}
		lines = append(lines, line)
		if len(lines) > 2*n {
			lines = append(lines[:0], lines[len(lines)-n:]...)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// grepFile returns the lines of path that contain every one of subs.
func grepFile(path string, subs ...string) []string {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		ok := true
		for _, s := range subs {
			if !strings.Contains(line, s) {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}

// unmountUnder lazily unmounts every mount point below dir, deepest first.
func unmountUnder(dir string) {
	mps, err := mountsUnder(dir)
	if err != nil {
		return
	}
	for _, mp := range mps {
		if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			fmt.Fprintf(os.Stderr, "e2e: unmount %s: %v\n", mp, err)
		}
	}
}

// mountsUnder lists the mount points below dir (from /proc/self/mountinfo),
// deepest first.
func mountsUnder(dir string) ([]string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	prefix := strings.TrimSuffix(dir, "/") + "/"
	var mps []string
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		mp := strings.ReplaceAll(fields[4], `\040`, " ")
		if strings.HasPrefix(mp, prefix) {
			mps = append(mps, mp)
		}
	}
	sort.Slice(mps, func(i, j int) bool { return len(mps[i]) > len(mps[j]) })
	return mps, nil
}

// fakeProcSys copies the kernel tunables the kubelet sets at start into dir
// and points every kubelet the suite starts at it (the kubelet's test-only
// KUBELET_DOCKERSHIM_TEST_PROC_SYS): at protectKernelDefaults' default they
// set them, as upstream's do, and must not on this shared machine.
func fakeProcSys(dir string) error {
	for name := range upstreamTunables {
		b, err := os.ReadFile(filepath.Join("/proc/sys", name))
		if err != nil {
			return err
		}
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
	}
	return os.Setenv("KUBELET_DOCKERSHIM_TEST_PROC_SYS", dir)
}
