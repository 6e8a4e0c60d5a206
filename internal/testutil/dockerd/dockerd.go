// Package dockerd runs a private Docker daemon for integration tests that stop
// and restart dockerd: the host's dockerd is shared by every test and must never
// be stopped. A Daemon has its own unix socket, --data-root, --exec-root (where
// dockerd runs its own containerd), --pidfile, config file and log, and runs
// without iptables. It is stopped and started again by its PID only, on the
// same directories, so that its containers are restored (--live-restore) or
// found dead, as after a restart of the real daemon.
//
// It gets a Linux bridge of its own (on a free private /24) rather than
// --bridge=none: with the bridge disabled dockerd deletes the host's docker0,
// which belongs to the host's dockerd. Pods get their network from CNI anyway.
//
// Options.Engine picks the daemon's version: the host's dockerd (Debian 12's
// docker.io 20.10) or Debian 13's docker.io 26.1 that scripts/docker26.sh
// unpacks. RunMain runs a whole test package against a private daemon of the
// engine $DOCKERSHIM_TEST_DOCKER names.
//
// It is test support: only _test.go files (and other internal/testutil
// packages) may import it.
//
//	d := dockerd.Start(t, dockerd.Options{Images: []string{"registry.k8s.io/pause:3.10"}})
//	// point the code under test at d.Endpoint
//	d.Stop(t)  // SIGTERM to its PID, wait for the exit
//	d.Launch(t) // the same daemon again
package dockerd

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/fstest"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/netutil"
)

const (
	// readyTimeout bounds the wait for the daemon to answer after a start.
	readyTimeout = 90 * time.Second
	// stopTimeout bounds the wait for the daemon to exit after SIGTERM (it
	// stops its containers first unless live-restore is on: busybox as PID 1
	// ignores SIGTERM, so each one takes its stop timeout).
	stopTimeout = 90 * time.Second
)

// Options configure a Daemon.
type Options struct {
	// Images are copied from the host's dockerd (docker save | docker load)
	// after the first start.
	Images []string
	// LiveRestore keeps containers running while the daemon is down.
	LiveRestore bool
	// DiskMiB > 0 puts the data root on a fresh ext4 filesystem of that size
	// (a loop mount at Disk, the data root in Disk/docker), for tests that fill
	// the runtime's disk; the test may put more (a kubelet root dir) on Disk.
	DiskMiB int64
	// OCIRuntime, when set, is the path of the daemon's default OCI runtime
	// (a runc-compatible program), registered as "test-runtime".
	OCIRuntime string
	// Runtimes are more OCI runtimes, by name, path (the RuntimeClass
	// handlers a node offers besides the default).
	Runtimes map[string]string
	// Engine is the Docker Engine to run (HostEngine when empty).
	Engine Engine
	// CDISpecDirs, when set, turn on the engine's CDI (features.cdi, Docker
	// 25+) with these spec directories.
	CDISpecDirs []string
}

// Daemon is a private dockerd. Its methods are not safe for concurrent use.
type Daemon struct {
	// Endpoint is the daemon's address, unix://<Dir>/d.sock.
	Endpoint string
	// Dir holds all of the daemon's state; it is removed when the test ends.
	Dir string
	// Bridge is the daemon's default bridge, deleted when the test ends.
	Bridge string
	// Disk is the mount point of the loop filesystem of Options.DiskMiB ("" without).
	Disk string

	sock, logPath, confPath string
	liveRestore             bool
	ociRuntime              string
	runtimes                map[string]string
	cdiSpecDirs             []string
	engine                  Engine
	program                 string // dockerd of engine
	cmd                     *exec.Cmd
	exited                  chan struct{}
	waitErr                 error // set before exited closes
}

// Start checks the host, creates the daemon's directories and bridge, starts it,
// waits until it answers and loads opts.Images into it. When the test ends every
// container of the daemon is removed, the daemon stopped, its mounts, bridge and
// directory removed; its log's tail is logged if the test failed. A missing
// engine fails the test.
func Start(t testing.TB, opts Options) *Daemon {
	t.Helper()
	d, err := newDaemon(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.cleanup(t.Logf, t.Failed()) })
	if err := d.setUp(opts); err != nil {
		t.Fatal(err)
	}
	return d
}

// StartShared is Start for a TestMain, which has no testing.TB: the caller
// must Close the daemon. Nothing is left behind when it fails.
func StartShared(opts Options) (_ *Daemon, retErr error) {
	d, err := newDaemon(opts)
	if err != nil {
		return nil, err
	}
	defer func() {
		if retErr != nil {
			d.Close()
		}
	}()
	if err := d.setUp(opts); err != nil {
		return nil, err
	}
	return d, nil
}

// Close removes the containers of a daemon of StartShared, stops it and
// removes its mounts, bridge and directory, logging any trouble to stderr.
func (d *Daemon) Close() {
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "dockerd: "+format+"\n", args...) }
	d.cleanup(logf, false)
}

// newDaemon finds the engine's dockerd and makes the daemon's directory.
func newDaemon(opts Options) (*Daemon, error) {
	program, err := opts.Engine.dockerd()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "dkd") // short: a socket path has a length limit
	if err != nil {
		return nil, err
	}
	d := &Daemon{Dir: dir, sock: filepath.Join(dir, "d.sock"), logPath: filepath.Join(dir, "dockerd.log"),
		confPath: filepath.Join(dir, "daemon.json"), liveRestore: opts.LiveRestore, ociRuntime: opts.OCIRuntime, runtimes: opts.Runtimes,
		engine: opts.Engine, program: program, cdiSpecDirs: opts.CDISpecDirs}
	d.Endpoint = "unix://" + d.sock
	return d, nil
}

// setUp creates the bridge, configuration and disk, starts the daemon and
// copies the images into it.
func (d *Daemon) setUp(opts Options) error {
	if err := d.createBridge(); err != nil {
		return err
	}
	if err := d.writeConfig(); err != nil {
		return err
	}
	if opts.DiskMiB > 0 {
		if err := d.mountDisk(opts.DiskMiB); err != nil {
			return err
		}
	}
	if err := d.launch(); err != nil {
		return err
	}
	if len(opts.Images) > 0 {
		return CopyImages(d.Endpoint, opts.Images...)
	}
	return nil
}

// mountDisk makes an ext4 filesystem of sizeMiB (no blocks reserved for
// root) in an image file under Dir and loop-mounts it on Dir/disk; the
// cleanup's unmount detaches the loop device.
func (d *Daemon) mountDisk(sizeMiB int64) error {
	img := filepath.Join(d.Dir, "disk.img")
	f, err := os.Create(img)
	if err != nil {
		return err
	}
	err = f.Truncate(sizeMiB << 20)
	_ = f.Close()
	if err != nil {
		return err
	}
	d.Disk = filepath.Join(d.Dir, "disk")
	if err := os.MkdirAll(d.Disk, 0o755); err != nil {
		return err
	}
	for _, args := range [][]string{{"mkfs.ext4", "-q", "-F", "-m", "0", img}, {"mount", "-o", "loop", img, d.Disk}} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// dataRoot is dockerd's --data-root.
func (d *Daemon) dataRoot() string {
	if d.Disk != "" {
		return filepath.Join(d.Disk, "docker")
	}
	return filepath.Join(d.Dir, "data")
}

// createBridge creates the daemon's bridge on a free private /24.
func (d *Daemon) createBridge() error {
	subnet, err := netutil.FreeSubnet(170)
	if err != nil {
		return err
	}
	d.Bridge = fmt.Sprintf("kdd%dx%d", subnet.IP[1], subnet.IP[2])
	gw := net.IPv4(subnet.IP[0], subnet.IP[1], subnet.IP[2], 1)
	for _, args := range [][]string{
		{"link", "add", d.Bridge, "type", "bridge"},
		{"addr", "add", gw.String() + "/24", "dev", d.Bridge},
		{"link", "set", d.Bridge, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("dockerd: ip %v: %w: %s", args, err, out)
		}
	}
	return nil
}

// writeConfig writes daemon.json (the reloadable part of the configuration).
func (d *Daemon) writeConfig() error {
	conf := map[string]any{"live-restore": d.liveRestore}
	runtimes := map[string]any{}
	for name, path := range d.runtimes {
		runtimes[name] = map[string]string{"path": path}
	}
	if d.ociRuntime != "" {
		runtimes["test-runtime"] = map[string]string{"path": d.ociRuntime}
		conf["default-runtime"] = "test-runtime"
	}
	if len(runtimes) > 0 {
		conf["runtimes"] = runtimes
	}
	if len(d.cdiSpecDirs) > 0 {
		conf["features"] = map[string]bool{"cdi": true}
		conf["cdi-spec-dirs"] = d.cdiSpecDirs
	}
	b, err := json.Marshal(conf)
	if err != nil {
		return err
	}
	return os.WriteFile(d.confPath, append(b, '\n'), 0o644)
}

// args are dockerd's flags: everything in Dir, no iptables, no proxy.
func (d *Daemon) args() []string {
	return []string{"--config-file=" + d.confPath, "-H", d.Endpoint,
		"--data-root=" + d.dataRoot(), "--exec-root=" + filepath.Join(d.Dir, "x"),
		"--pidfile=" + filepath.Join(d.Dir, "d.pid"), "--bridge=" + d.Bridge,
		"--iptables=false", "--ip-masq=false", "--userland-proxy=false"}
}

// Launch starts the daemon (again, on the same directories) and waits until it
// answers. The test fails if it is running already or does not come up.
func (d *Daemon) Launch(t testing.TB) {
	t.Helper()
	if err := d.launch(); err != nil {
		t.Fatal(err)
	}
}

func (d *Daemon) launch() error {
	if d.Running() {
		return fmt.Errorf("dockerd (pid %d) is running already", d.PID())
	}
	f, err := os.OpenFile(d.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	fmt.Fprintf(f, "=== dockerd test helper: start of %s at %s\n", d.program, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(d.program, d.args()...)
	cmd.Stdout, cmd.Stderr = f, f
	// If the test binary dies, do not leave the daemon running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", d.program, err)
	}
	exited := make(chan struct{})
	d.cmd, d.exited = cmd, exited
	go func() {
		d.waitErr = cmd.Wait()
		close(exited)
	}()
	deadline := time.Now().Add(readyTimeout)
	for {
		if out, err := d.CLI(context.Background(), "info", "--format", "{{.ServerVersion}}"); err == nil {
			return d.engine.check(strings.TrimSpace(out))
		}
		if !d.Running() || time.Now().After(deadline) {
			return fmt.Errorf("private dockerd did not come up (exit %v); its log:\n%s", d.waitErr, d.LogTail(30))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Running reports whether the daemon process is running.
func (d *Daemon) Running() bool {
	if d.cmd == nil {
		return false
	}
	select {
	case <-d.exited:
		return false
	default:
		return true
	}
}

// PID is the daemon's process ID (of the last start).
func (d *Daemon) PID() int { return d.cmd.Process.Pid }

// Stop sends SIGTERM to the daemon's PID and waits for it to exit. The test
// fails if it is not running, does not exit within 90 s (it is then killed)
// or exits with an error.
func (d *Daemon) Stop(t testing.TB) {
	t.Helper()
	if !d.Running() {
		t.Fatal("dockerd is not running")
	}
	if err := d.stop(stopTimeout); err != nil {
		t.Fatal(err)
	}
}

func (d *Daemon) stop(grace time.Duration) error {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
		if d.waitErr != nil {
			return fmt.Errorf("dockerd exit after SIGTERM: %w", d.waitErr)
		}
		return nil
	case <-time.After(grace):
	}
	_ = d.cmd.Process.Kill()
	<-d.exited
	return fmt.Errorf("dockerd (pid %d) did not exit within %s of SIGTERM: killed", d.PID(), grace)
}

// SetLiveRestore rewrites the configuration file and makes the running daemon
// reload it (SIGHUP); live-restore is one of dockerd's reloadable options.
func (d *Daemon) SetLiveRestore(t testing.TB, on bool) {
	t.Helper()
	d.liveRestore = on
	if err := d.writeConfig(); err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatalf("reload dockerd: %v", err)
	}
	want := fmt.Sprint(on)
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := d.CLI(context.Background(), "info", "--format", "{{.LiveRestoreEnabled}}")
		if err == nil && strings.TrimSpace(out) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("dockerd live-restore is %q (err %v) 10s after the reload, want %s", out, err, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// CLI runs the docker CLI against the daemon (with a one-minute cap) and
// returns its combined output.
func (d *Daemon) CLI(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	args = append([]string{"-H", d.Endpoint}, args...)
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("docker %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}

// Containers returns the full IDs of the daemon's containers that carry every
// label (k=v), running ones only unless all.
func (d *Daemon) Containers(t testing.TB, all bool, labels ...string) []string {
	t.Helper()
	args := []string{"ps", "-q", "--no-trunc"}
	if all {
		args = append(args, "-a")
	}
	for _, l := range labels {
		args = append(args, "--filter", "label="+l)
	}
	out, err := d.CLI(context.Background(), args...)
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return strings.Fields(out)
}

// LogPath is the daemon's log file.
func (d *Daemon) LogPath() string { return d.logPath }

// LogTail returns the last n lines of the daemon's log.
func (d *Daemon) LogTail(n int) string {
	data, err := os.ReadFile(d.logPath)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", d.logPath, err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// CopyImages copies images from the host's dockerd (docker save) into the
// dockerd at endpoint (docker -H endpoint load), within two minutes.
func CopyImages(endpoint string, images ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	save := exec.CommandContext(ctx, "docker", append([]string{"-H", HostEndpoint, "save"}, images...)...)
	load := exec.CommandContext(ctx, "docker", "-H", endpoint, "load")
	pipe, err := save.StdoutPipe()
	if err != nil {
		return err
	}
	load.Stdin = pipe
	var saveErr, loadOut strings.Builder
	save.Stderr = &saveErr
	load.Stdout, load.Stderr = &loadOut, &loadOut
	if err := save.Start(); err != nil {
		return err
	}
	if err := load.Run(); err != nil {
		_ = save.Wait()
		return fmt.Errorf("docker load into the private dockerd: %w: %s", err, loadOut.String())
	}
	if err := save.Wait(); err != nil {
		return fmt.Errorf("docker save %v from the host's dockerd (scripts/build-images.sh builds them): %w: %s",
			images, err, saveErr.String())
	}
	return nil
}

// cleanup removes the daemon's containers, stops it, and removes its mounts,
// bridge and directory; with failed, it first logs the tail of the daemon's log.
func (d *Daemon) cleanup(logf func(format string, args ...any), failed bool) {
	if failed && d.cmd != nil {
		logf("--- tail of the private dockerd's log (%s):\n%s", d.logPath, d.LogTail(40))
	}
	if d.Running() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if out, err := d.CLI(ctx, "ps", "-aq"); err == nil && strings.TrimSpace(out) != "" {
			if out, err := d.CLI(ctx, append([]string{"rm", "-f"}, strings.Fields(out)...)...); err != nil {
				logf("cleanup: %v: %s", err, out)
			}
		}
		cancel()
		if err := d.stop(30 * time.Second); err != nil {
			logf("cleanup: %v", err)
		}
	}
	if d.Bridge != "" {
		if _, err := net.InterfaceByName(d.Bridge); err == nil {
			if out, err := exec.Command("ip", "link", "del", d.Bridge).CombinedOutput(); err != nil {
				logf("cleanup: delete bridge %s: %v: %s", d.Bridge, err, out)
			}
		}
	}
	if err := fstest.UnmountUnder(d.Dir); err != nil {
		logf("cleanup: %v", err)
	}
	if err := os.RemoveAll(d.Dir); err != nil {
		logf("cleanup: remove %s: %v", d.Dir, err)
	}
}
