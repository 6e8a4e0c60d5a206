// Package nodecontainer runs node containers for tests: a Debian 12 root with
// systemd as PID 1 and its own dockerd (systemd cgroup driver) and containerd,
// on the host's dockerd, the way kind runs its nodes. A test puts this kubelet
// in (Options.Binaries), copies images into the node's dockerd
// (Options.Images) and runs commands in it (Exec).
//
// The image is kubelet-dockershim/node:bookworm, built by scripts/node-image.sh
// (scripts/prepare-host.sh runs it); a missing image fails the test. The
// container is created by scripts/node-container.sh, as scripts/cluster.sh's
// nodes are (its header says what a node gets: not --privileged, every
// capability but CAP_SYS_RESOURCE, the host's cgroup hierarchies, ...).
// Each container carries the label io.kubelet-dockershim.node-container
// (see Label); the test's cleanup removes it with its volumes.
//
// It is test support: only _test.go files (and other internal/testutil
// packages) may import it.
//
//	n := nodecontainer.Start(t, nodecontainer.Options{
//		Name:     "node-a",
//		Binaries: map[string]string{"/usr/bin/kubelet": kubeletPath},
//		Images:   []string{"registry.k8s.io/pause:3.10"},
//	})
//	out, err := n.Exec(t, "docker", "ps")
package nodecontainer

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/cmdtest"
)

const (
	// Image is the node image scripts/node-image.sh builds.
	Image = "kubelet-dockershim/node:bookworm"
	// Label marks every node container; its value is the node's name. By
	// hand, `docker rm -f -v $(docker ps -aq --filter label=io.kubelet-dockershim.node-container)`
	// removes the containers a killed test left (every user's: mind shared hosts).
	Label = "io.kubelet-dockershim.node-container"
	// TestLabel holds the name of the test that started the container.
	TestLabel = "io.kubelet-dockershim.test"

	// bootTimeout bounds the wait for systemd to reach a final state.
	bootTimeout = 2 * time.Minute
	// dockerTimeout bounds the wait for the inner dockerd to answer.
	dockerTimeout = time.Minute
	// execTimeout caps each Exec.
	execTimeout = 2 * time.Minute
	// cliTimeout caps each call of the host's docker CLI but image copies.
	cliTimeout = time.Minute
	// imagesTimeout caps one LoadImages.
	imagesTimeout = 5 * time.Minute
)

// Options configure a node container.
type Options struct {
	// Name is the node's hostname and the value of Label (default "node").
	// The container's name is kds-node-<Name>-<random>, so that tests on a
	// shared host never collide.
	Name string
	// Binaries are host files put into the container before it boots:
	// container path (absolute) -> host path. The mode is kept; the owner is
	// root; missing parent directories are created.
	Binaries map[string]string
	// Images are copied from the host's dockerd into the node's once it
	// answers (docker save | docker exec -i <node> docker load).
	Images []string
	// Image is the image to run (default Image).
	Image string
	// LoopbackPorts are TCP ports of the host's 127.0.0.1 (a control plane
	// bound to loopback) that the node reaches at its own 127.0.0.1, so that
	// a kubeconfig works unchanged inside: see loopback.go.
	LoopbackPorts []int
}

// Node is a running node container. Its methods are safe for concurrent use.
type Node struct {
	// Name is the node's hostname.
	Name string
	// ID is the container's full ID on the host's dockerd.
	ID string
	// ContainerName is the container's name on the host's dockerd.
	ContainerName string
	// IP is the node's address on the host's default bridge.
	IP string
	// PID is the host PID of the node's systemd.
	PID int
}

// Start runs a node container and returns once systemd is running with no
// failed unit, the inner dockerd answers and opts.Images are loaded. The test
// fails (never skips) when the image is missing, systemd ends degraded (the
// failed units and their journal are in the message) or anything does not
// come up in time. When the test ends the container is removed with its
// volumes; if the test failed, the tail of the node's journal is logged first.
func Start(t testing.TB, opts Options) *Node {
	t.Helper()
	if opts.Name == "" {
		opts.Name = "node"
	}
	if opts.Image == "" {
		opts.Image = Image
	}
	if out, err := docker(context.Background(), "image", "inspect", "-f", "{{.Id}}", opts.Image); err != nil {
		t.Fatalf("node image %s is missing: build it with scripts/node-image.sh (as root; scripts/prepare-host.sh runs it): %v: %s",
			opts.Image, err, out)
	}
	n := &Node{Name: opts.Name, ContainerName: "kds-node-" + opts.Name + "-" + cmdtest.Suffix(t)}
	var extra []string
	if len(opts.LoopbackPorts) > 0 {
		extra = append(extra, "-v", serveLoopback(t, opts.LoopbackPorts)+":"+loopbackDir)
	}
	n.ID = create(t, n, opts.Image, extra...)
	t.Cleanup(func() { n.remove(t) })
	if len(opts.Binaries) > 0 {
		if err := n.copyIn(opts.Binaries); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := docker(context.Background(), "start", n.ID); err != nil {
		t.Fatalf("start node container: %v: %s", err, out)
	}
	n.inspect(t)
	n.waitBooted(t)
	n.waitDocker(t)
	for _, p := range opts.LoopbackPorts {
		n.proxyLoopback(t, p)
	}
	if len(opts.Images) > 0 {
		n.LoadImages(t, opts.Images...)
	}
	return n
}

// create creates the node's container with scripts/node-container.sh, the
// one definition of a node container (scripts/cluster.sh's nodes are the
// same), extra being more `docker create` arguments; it returns the ID.
func create(t testing.TB, n *Node, image string, extra ...string) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("nodecontainer: cannot locate the source tree")
	}
	script := filepath.Join(filepath.Dir(file), "..", "..", "..", "scripts", "node-container.sh")
	args := append([]string{script, "create", n.ContainerName, image,
		"--hostname", n.Name, "--label", Label + "=" + n.Name, "--label", TestLabel + "=" + t.Name()}, extra...)
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("create node container: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String())
}

// inspect fills in the node's IP and PID.
func (n *Node) inspect(t testing.TB) {
	t.Helper()
	out, err := docker(context.Background(), "inspect", "-f",
		"{{.State.Pid}} {{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}", n.ID)
	if err != nil {
		t.Fatalf("inspect node container: %v: %s", err, out)
	}
	fields := strings.Fields(out)
	if len(fields) < 1 {
		t.Fatalf("inspect node container: unexpected output %q", out)
	}
	if n.PID, err = strconv.Atoi(fields[0]); err != nil || n.PID == 0 {
		t.Fatalf("node container has no PID (%q): is it running? %s", fields[0], n.dockerLogs())
	}
	if len(fields) > 1 {
		n.IP = fields[1]
	}
}

// waitBooted polls `systemctl is-system-running` until systemd reaches a
// final state; anything but "running" fails the test with the failed units.
func (n *Node) waitBooted(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bootTimeout)
	defer cancel()
	var state string
	for {
		// Before systemd listens on its bus this fails, then it prints
		// "initializing" or "starting" (and exits non-zero) until the boot
		// jobs are done.
		// Until node-entrypoint has exec'ed systemd, systemctl says
		// "offline": only systemd's answer counts.
		out, _ := n.exec(ctx, "sh", "-c", `read -r c </proc/1/comm && [ "$c" = systemd ] && systemctl is-system-running`)
		state = strings.TrimSpace(out)
		switch state {
		case "running":
			return
		case "degraded", "maintenance", "stopping", "offline":
			t.Fatalf("node %s: systemd is %s; failed units:\n%s", n.Name, state, n.failedUnits())
		}
		if !n.running() {
			t.Fatalf("node %s exited while booting: %s", n.Name, n.dockerLogs())
		}
		select {
		case <-ctx.Done():
			t.Fatalf("node %s: systemd is %q after %s; jobs:\n%s", n.Name, state, bootTimeout, n.jobs())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitDocker polls the inner dockerd until it answers.
func (n *Node) waitDocker(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), dockerTimeout)
	defer cancel()
	for {
		out, err := n.exec(ctx, "docker", "version", "--format", "{{.Server.Version}}")
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			status, _ := n.exec(context.Background(), "systemctl", "status", "--no-pager", "docker.service")
			t.Fatalf("node %s: the inner dockerd does not answer after %s: %v: %s\n%s", n.Name, dockerTimeout, err, out, status)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Exec runs a command in the node (docker exec, as root, within two minutes)
// and returns its standard output. The error holds the exit status and the
// standard error.
func (n *Node) Exec(t testing.TB, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), execTimeout)
	defer cancel()
	return n.exec(ctx, args...)
}

func (n *Node) exec(ctx context.Context, args ...string) (string, error) {
	return dockerStdout(ctx, append([]string{"exec", n.ID}, args...)...)
}

// Cgroup returns the node's cgroup in the host's hierarchy of controller
// ("memory", "cpu", "name=systemd", ... or "" for the unified one) as
// /proc/<pid>/cgroup gives it: the cgroup systemd manages, holding its
// init.scope, system.slice and the slices it creates.
func (n *Node) Cgroup(t testing.TB, controller string) string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", n.PID))
	if err != nil {
		t.Fatalf("node %s: %v", n.Name, err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == controller {
				return strings.TrimSuffix(parts[2], "/init.scope")
			}
		}
	}
	t.Fatalf("node %s: no %q hierarchy in /proc/%d/cgroup:\n%s", n.Name, controller, n.PID, data)
	return ""
}

// failedUnits lists the failed units, each with the tail of its journal.
func (n *Node) failedUnits() string {
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	out, err := n.exec(ctx, "systemctl", "list-units", "--failed", "--no-legend", "--plain", "--no-pager")
	if err != nil {
		return fmt.Sprintf("(systemctl --failed: %v)", err)
	}
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		journal, _ := n.exec(ctx, "journalctl", "-b", "--no-pager", "-n", "15", "-u", fields[0])
		fmt.Fprintf(&b, "%s\n%s\n", line, journal)
	}
	return b.String()
}

// jobs lists systemd's pending jobs (what a boot that does not end waits on).
func (n *Node) jobs() string {
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	out, err := n.exec(ctx, "systemctl", "list-jobs", "--no-pager")
	if err != nil {
		return fmt.Sprintf("(systemctl list-jobs: %v)", err)
	}
	return out
}

// running reports whether the container is running.
func (n *Node) running() bool {
	out, err := docker(context.Background(), "inspect", "-f", "{{.State.Running}}", n.ID)
	return err == nil && strings.TrimSpace(out) == "true"
}

// dockerLogs returns the container's state and its output's tail.
func (n *Node) dockerLogs() string {
	state, _ := docker(context.Background(), "inspect", "-f", "{{.State.Status}} exit={{.State.ExitCode}} {{.State.Error}}", n.ID)
	logs, _ := docker(context.Background(), "logs", "--tail", "30", n.ID)
	return fmt.Sprintf("state %s; docker logs:\n%s", strings.TrimSpace(state), logs)
}

// remove logs the journal's tail if the test failed, then removes the
// container with its anonymous volumes.
func (n *Node) remove(t testing.TB) {
	if t.Failed() && n.running() {
		ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
		journal, _ := n.exec(ctx, "journalctl", "-b", "--no-pager", "-n", "60")
		cancel()
		t.Logf("--- tail of node %s's journal:\n%s", n.Name, journal)
	}
	if out, err := docker(context.Background(), "rm", "-f", "-v", n.ID); err != nil {
		t.Errorf("remove node container %s: %v: %s", n.ContainerName, err, out)
	}
}

// docker runs the host's docker CLI (within cliTimeout unless ctx ends
// first) and returns its combined output.
func docker(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, cliTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("docker %s: %w", cmdtest.Summarize(args, 12), err)
	}
	return string(out), nil
}

// dockerStdout runs the host's docker CLI under ctx and returns its standard
// output; the error carries the standard error.
func dockerStdout(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "docker", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("docker %s: %w: %s", cmdtest.Summarize(args, 12), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}
