// Package vm runs Debian 13 virtual machines for tests: systemd, cgroup v2
// only and Docker Engine 26.1 (systemd cgroup driver), under qemu's software
// emulation, so that a host with cgroup v1 and no KVM can test a node on
// cgroup v2. It drives scripts/vm.sh, which boots each VM on a copy-on-write
// overlay of a cached image and reaches it over ssh on a port of 127.0.0.1.
//
// The image is built by `scripts/vm.sh image` (as root; a few minutes, then
// cached under $KDS_CACHE_DIR/vm); a missing image fails the test. Emulation
// is slow: a boot takes one to two minutes and a `docker run` several
// seconds, so the timeouts here are generous and a test should boot one VM
// and check many things in it.
//
// Inside, the host's 127.0.0.1 is HostAddr: a listener on the host's
// 127.0.0.1:6443 is 10.0.2.2:6443 from the VM. Ports of the VM are reached
// from the host through Options.Forward and HostPort.
//
// It is test support: only _test.go files (and other internal/testutil
// packages) may import it.
//
//	v := vm.Start(t, vm.Options{
//		Name:  "cg2",
//		Files: map[string]string{"/usr/local/bin/kubelet": kubeletPath},
//	})
//	out, err := v.Exec(t, "stat", "-fc", "%T", "/sys/fs/cgroup")
package vm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/cmdtest"
)

const (
	// HostAddr is the host's loopback as the VM sees it (qemu's user
	// networking maps 10.0.2.2:PORT to the host's 127.0.0.1:PORT).
	HostAddr = "10.0.2.2"

	// upTimeout bounds a boot: systemd running and dockerd answering.
	upTimeout = 15 * time.Minute
	// execTimeout caps each Exec.
	execTimeout = 5 * time.Minute
	// copyTimeout caps each Copy and each image load.
	copyTimeout = 10 * time.Minute
	// cliTimeout caps the script's quick subcommands.
	cliTimeout = time.Minute
)

// Options configure a VM.
type Options struct {
	// Name is the VM's hostname (default "vm"). The VM's name for
	// scripts/vm.sh is kds-<Name>-<random>, so that tests on a shared host
	// never collide.
	Name string
	// MemoryMiB is the VM's memory (default 2048).
	MemoryMiB int
	// CPUs is the VM's CPU count (default 2).
	CPUs int
	// Files are host files or directories copied into the VM once it is
	// up: VM path (absolute) -> host path. A file keeps its mode; a
	// directory's contents go below the VM path.
	Files map[string]string
	// Images are copied from the host's dockerd into the VM's
	// (docker save | docker load).
	Images []string
	// Forward are TCP ports of the VM forwarded to free ports of the host's
	// 127.0.0.1 (see HostPort).
	Forward []int
}

// VM is a running virtual machine. Its methods are safe for concurrent use.
type VM struct {
	// Name is the VM's name for scripts/vm.sh (vm.sh exec <Name> ... by
	// hand while a test runs).
	Name string
	// Hostname is the VM's hostname (Options.Name).
	Hostname string
	// BootTime is how long `vm.sh up` took: qemu started, systemd running,
	// dockerd answering.
	BootTime time.Duration

	script string
	ports  map[int]int
}

// Start boots a VM and returns once systemd has finished booting, dockerd
// answers, opts.Files are in and opts.Images loaded. The test fails (never
// skips) when the image is missing or the VM does not come up; when the test
// ends the VM is stopped and its overlay removed, after the tail of its
// console and journal are logged if the test failed.
func Start(t testing.TB, opts Options) *VM {
	t.Helper()
	if opts.Name == "" {
		opts.Name = "vm"
	}
	if opts.MemoryMiB == 0 {
		opts.MemoryMiB = 2048
	}
	if opts.CPUs == 0 {
		opts.CPUs = 2
	}
	script, err := findScript()
	if err != nil {
		t.Fatal(err)
	}
	if err := checkImage(CacheDir()); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		t.Fatal("vm: needs root (the image's ssh key and the VMs' state are root's)")
	}
	v := &VM{Name: vmName(opts.Name, cmdtest.Suffix(t)), Hostname: opts.Name, script: script, ports: map[int]int{}}
	args := []string{"up", v.Name, "--hostname", opts.Name,
		"--mem", strconv.Itoa(opts.MemoryMiB), "--cpus", strconv.Itoa(opts.CPUs)}
	for _, p := range opts.Forward {
		args = append(args, "--forward", strconv.Itoa(p))
	}
	t.Cleanup(func() { v.down(t) })
	begin := time.Now()
	if out, err := v.run(context.Background(), upTimeout, nil, args...); err != nil {
		t.Fatalf("vm %s did not come up: %v\n%s\n--- console:\n%s", v.Name, err, out, v.Console(60))
	}
	v.BootTime = time.Since(begin)
	for _, p := range opts.Forward {
		out, err := v.run(context.Background(), cliTimeout, nil, "port", v.Name, strconv.Itoa(p))
		if err != nil {
			t.Fatalf("vm %s: port %d: %v", v.Name, p, err)
		}
		if v.ports[p], err = strconv.Atoi(strings.TrimSpace(out)); err != nil {
			t.Fatalf("vm %s: port %d: %q: %v", v.Name, p, out, err)
		}
	}
	vmPaths := make([]string, 0, len(opts.Files))
	for p := range opts.Files {
		vmPaths = append(vmPaths, p)
	}
	sort.Strings(vmPaths)
	for _, p := range vmPaths {
		v.Copy(t, opts.Files[p], p)
	}
	if len(opts.Images) > 0 {
		v.LoadImages(t, opts.Images...)
	}
	return v
}

// Exec runs a command as root in the VM (within five minutes) and returns
// its standard output. The error holds the exit status and the standard
// error.
func (v *VM) Exec(t testing.TB, args ...string) (string, error) {
	t.Helper()
	return v.ExecInput(t, nil, args...)
}

// ExecInput is Exec with stdin as the command's standard input.
func (v *VM) ExecInput(t testing.TB, stdin io.Reader, args ...string) (string, error) {
	t.Helper()
	if len(args) == 0 {
		t.Fatal("vm: Exec needs a command")
	}
	return v.run(context.Background(), execTimeout, stdin, append([]string{"exec", v.Name}, args...)...)
}

// Copy copies a host file (its mode kept) or a directory's contents to
// vmPath; the test fails on an error.
func (v *VM) Copy(t testing.TB, hostPath, vmPath string) {
	t.Helper()
	if out, err := v.run(context.Background(), copyTimeout, nil, "copy", v.Name, hostPath, vmPath); err != nil {
		t.Fatalf("vm %s: copy %s to %s: %v: %s", v.Name, hostPath, vmPath, err, out)
	}
}

// LoadImages copies images from the host's dockerd into the VM's, one
// `docker save | docker load` each; the test fails on an error.
func (v *VM) LoadImages(t testing.TB, images ...string) {
	t.Helper()
	for _, image := range images {
		if err := v.loadImage(image); err != nil {
			t.Fatalf("vm %s: %v", v.Name, err)
		}
	}
}

func (v *VM) loadImage(image string) error {
	ctx, cancel := context.WithTimeout(context.Background(), copyTimeout)
	defer cancel()
	save := exec.CommandContext(ctx, "docker", "save", image)
	var saveErr bytes.Buffer
	save.Stderr = &saveErr
	pipe, err := save.StdoutPipe()
	if err != nil {
		return err
	}
	if err := save.Start(); err != nil {
		return fmt.Errorf("docker save %s: %w", image, err)
	}
	_, loadErr := v.run(ctx, copyTimeout, pipe, "exec", v.Name, "docker", "load", "-q")
	if err := save.Wait(); err != nil {
		return fmt.Errorf("docker save %s: %w: %s", image, err, strings.TrimSpace(saveErr.String()))
	}
	if loadErr != nil {
		return fmt.Errorf("docker load of %s: %w", image, loadErr)
	}
	return nil
}

// HostPort returns the port of the host's 127.0.0.1 forwarded to the VM's
// TCP port guestPort (one of Options.Forward).
func (v *VM) HostPort(t testing.TB, guestPort int) int {
	t.Helper()
	p, ok := v.ports[guestPort]
	if !ok {
		t.Fatalf("vm %s forwards no port %d (Options.Forward)", v.Name, guestPort)
	}
	return p
}

// PID returns the PID of the VM's qemu process on the host.
func (v *VM) PID(t testing.TB) int {
	t.Helper()
	out, err := v.run(context.Background(), cliTimeout, nil, "pid", v.Name)
	if err != nil {
		t.Fatalf("vm %s: %v", v.Name, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("vm %s: pid %q: %v", v.Name, out, err)
	}
	return pid
}

// Console returns the last lines of the VM's serial console (kernel and
// systemd messages), or why it cannot.
func (v *VM) Console(lines int) string {
	out, err := v.run(context.Background(), cliTimeout, nil, "console", v.Name, strconv.Itoa(lines))
	if err != nil {
		return fmt.Sprintf("(console: %v)", err)
	}
	return out
}

// down logs the console's and journal's tails if the test failed, then
// stops the VM.
func (v *VM) down(t testing.TB) {
	if t.Failed() {
		journal, err := v.run(context.Background(), cliTimeout, nil, "exec", v.Name, "journalctl", "-b", "--no-pager", "-n", "80")
		if err != nil {
			journal = fmt.Sprintf("(journal: %v)", err)
		}
		t.Logf("--- vm %s: tail of the console:\n%s\n--- tail of the journal:\n%s", v.Name, v.Console(40), journal)
	}
	if out, err := v.run(context.Background(), cliTimeout, nil, "down", v.Name); err != nil &&
		!strings.Contains(out, "no VM "+v.Name) {
		t.Errorf("vm %s: down: %v: %s", v.Name, err, out)
	}
}

// run runs scripts/vm.sh ARGS within timeout (or until ctx ends) and returns
// its standard output; the error carries the standard error.
func (v *VM) run(ctx context.Context, timeout time.Duration, stdin io.Reader, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{v.script}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &stdout, &stderr
	// ssh's multiplexing master outlives the command and keeps its
	// inherited pipes open: stop waiting for them once vm.sh has exited.
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if errors.Is(err, exec.ErrWaitDelay) {
		err = nil
	}
	if err != nil {
		return stdout.String(), fmt.Errorf("vm.sh %s: %w: %s", cmdtest.Summarize(args, 10), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// CacheDir is where scripts/vm.sh keeps the image: $KDS_CACHE_DIR/vm
// (default /var/cache/kubelet-dockershim/vm).
func CacheDir() string {
	dir := os.Getenv("KDS_CACHE_DIR")
	if dir == "" {
		dir = "/var/cache/kubelet-dockershim"
	}
	return filepath.Join(dir, "vm")
}

// checkImage reports a missing image in cache, naming the command that
// builds it.
func checkImage(cache string) error {
	if _, err := os.Stat(filepath.Join(cache, "current", "hash")); err != nil {
		return fmt.Errorf("vm: no VM image in %s: build it with scripts/vm.sh image (as root; a few minutes): %w", cache, err)
	}
	return nil
}

// findScript returns the path of scripts/vm.sh, looked up from the working
// directory (a package's directory under go test) upwards.
func findScript() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "scripts", "vm.sh")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("vm: scripts/vm.sh not found above the working directory")
		}
		dir = parent
	}
}

// vmName is the VM's name for vm.sh: kds-<name>-<suffix>, name cut so that
// the whole stays within vm.sh's 40 characters.
func vmName(name, suffix string) string {
	const maxName = 40 - len("kds--") - 8
	if len(name) > maxName {
		name = name[:maxName]
	}
	return "kds-" + name + "-" + suffix
}
