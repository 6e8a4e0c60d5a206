//go:build linux

package nodecontainer

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/cmdtest"
)

// busybox is built by scripts/build-images.sh.
const busybox = "kubelet-dockershim/busybox:latest"

// TestIntegrationNodeContainer boots a node and checks what a kubelet with
// the systemd cgroup driver needs inside: systemd as PID 1 and running, a
// dockerd on the systemd cgroup driver whose containers get a scope under
// system.slice, and transient slices with resource limits.
func TestIntegrationNodeContainer(t *testing.T) {
	begin := time.Now()
	n := Start(t, Options{Name: "kds-nc-a"})
	booted := time.Since(begin)
	memCgroup := n.Cgroup(t, "memory")
	usage, rss := memoryOf(t, memCgroup)
	t.Logf("node memory when booted: usage %.1f MiB (rss %.1f MiB)", mib(usage), mib(rss))
	begin = time.Now()
	n.LoadImages(t, busybox)
	t.Logf("node %s (%s, IP %s): systemd running and dockerd answering %s after docker create; %s loaded in %s",
		n.Name, n.ContainerName, n.IP, booted.Round(time.Millisecond), busybox, time.Since(begin).Round(time.Millisecond))

	t.Run("systemd", func(t *testing.T) {
		if exe := mustExec(t, n, "readlink", "/proc/1/exe"); filepath.Base(exe) != "systemd" {
			t.Errorf("PID 1 runs %q, want systemd", exe)
		}
		if state, _ := n.Exec(t, "systemctl", "is-system-running"); strings.TrimSpace(state) != "running" {
			t.Errorf("systemctl is-system-running = %q, want running", state)
		}
		if failed := mustExec(t, n, "systemctl", "list-units", "--failed", "--no-legend", "--plain"); failed != "" {
			t.Errorf("failed units:\n%s", failed)
		}
		if id := mustExec(t, n, "cat", "/etc/machine-id"); len(id) != 32 {
			t.Errorf("/etc/machine-id = %q, want 32 hex digits", id)
		}
	})

	t.Run("dockerd", func(t *testing.T) {
		got := mustExec(t, n, "docker", "info", "--format", "{{.CgroupDriver}} {{.Driver}}")
		if got != "systemd overlay2" {
			t.Errorf("inner dockerd's cgroup driver and storage driver = %q, want \"systemd overlay2\"", got)
		}
	})

	t.Run("docker run", func(t *testing.T) {
		id := mustExec(t, n, "docker", "run", "-d", busybox, "sleep", "300")
		defer func() { _, _ = n.Exec(t, "docker", "rm", "-f", id) }()
		scope := "docker-" + id + ".scope"
		want := memCgroup + "/system.slice/" + scope
		if got := cgroupOf(t, mustExec(t, n, "docker", "exec", id, "cat", "/proc/self/cgroup"), "memory"); got != want {
			t.Errorf("busybox's memory cgroup = %q, want %q", got, want)
		}
		if state := mustExec(t, n, "systemctl", "is-active", scope); state != "active" {
			t.Errorf("systemctl is-active %s = %q", scope, state)
		}
		if out := mustExec(t, n, "docker", "run", "--rm", busybox, "echo", "hello"); out != "hello" {
			t.Errorf("docker run --rm busybox echo hello printed %q", out)
		}
	})

	t.Run("transient slice", func(t *testing.T) {
		const limit = 64 << 20
		// As a systemd cgroup driver creates one: StartTransientUnit
		// over D-Bus, with a cgroup v1 memory limit.
		mustExec(t, n, "busctl", "call", "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
			"org.freedesktop.systemd1.Manager", "StartTransientUnit", "ssa(sv)a(sa(sv))",
			"kdstest.slice", "fail", "2", "Description", "s", "kubelet-dockershim test slice",
			"MemoryLimit", "t", strconv.Itoa(limit), "0")
		defer func() { _, _ = n.Exec(t, "systemctl", "stop", "kdstest.slice") }()
		mustExec(t, n, "systemd-run", "--quiet", "--unit", "kdstest-sleep", "--slice", "kdstest.slice", "sleep", "300")
		pid := mustExec(t, n, "systemctl", "show", "-p", "MainPID", "--value", "kdstest-sleep.service")
		got := cgroupOf(t, mustExec(t, n, "cat", "/proc/"+pid+"/cgroup"), "memory")
		if want := memCgroup + "/kdstest.slice/kdstest-sleep.service"; got != want {
			t.Errorf("the transient service's memory cgroup = %q, want %q", got, want)
		}
		sliceDir := filepath.Join("/sys/fs/cgroup/memory", memCgroup, "kdstest.slice")
		if b, err := os.ReadFile(filepath.Join(sliceDir, "memory.limit_in_bytes")); err != nil {
			t.Error(err)
		} else if strings.TrimSpace(string(b)) != strconv.Itoa(limit) {
			t.Errorf("%s/memory.limit_in_bytes = %s, want %d", sliceDir, b, limit)
		}
		mustExec(t, n, "systemctl", "stop", "kdstest.slice")
		if _, err := os.Stat(sliceDir); !os.IsNotExist(err) {
			t.Errorf("%s after systemctl stop: %v, want it removed", sliceDir, err)
		}
	})

	usage, rss = memoryOf(t, memCgroup)
	t.Logf("node memory after the checks: usage %.1f MiB (rss %.1f MiB; busybox loaded, no container running)", mib(usage), mib(rss))

	// A second node, with files put in before it boots and after; its
	// cleanup must leave no cgroup behind.
	var second *Node
	var secondCgroups []string
	t.Run("second node", func(t *testing.T) {
		dir := t.TempDir()
		hello := filepath.Join(dir, "hello")
		if err := os.WriteFile(hello, []byte("#!/bin/sh\necho hello from $(hostname)\n"), 0o750); err != nil {
			t.Fatal(err)
		}
		second = Start(t, Options{Name: "kds-nc-b", Binaries: map[string]string{"/opt/kds/bin/hello": hello}})
		for _, c := range []string{"memory", "pids", "name=systemd"} {
			secondCgroups = append(secondCgroups, filepath.Join("/sys/fs/cgroup", strings.TrimPrefix(c, "name="), second.Cgroup(t, c)))
		}
		idA, idB := mustExec(t, n, "cat", "/etc/machine-id"), mustExec(t, second, "cat", "/etc/machine-id")
		if idA == idB {
			t.Errorf("both nodes have machine ID %s", idA)
		}
		if out := mustExec(t, second, "/opt/kds/bin/hello"); out != "hello from kds-nc-b" {
			t.Errorf("/opt/kds/bin/hello printed %q, want \"hello from kds-nc-b\"", out)
		}
		if mode := mustExec(t, second, "stat", "-c", "%a %U", "/opt/kds/bin/hello"); mode != "750 root" {
			t.Errorf("/opt/kds/bin/hello: mode and owner %q, want \"750 root\"", mode)
		}
		second.CopyIn(t, dir, "/etc/kds")
		if out := mustExec(t, second, "cat", "/etc/kds/hello"); !strings.HasPrefix(out, "#!/bin/sh") {
			t.Errorf("/etc/kds/hello after CopyIn: %q", out)
		}
	})
	if second == nil {
		return
	}
	if out, err := docker(context.Background(), "inspect", second.ID); err == nil {
		t.Errorf("node container %s still exists after its test's cleanup", second.ContainerName)
	} else if !strings.Contains(out, "No such object") {
		t.Errorf("docker inspect %s: %v: %s", second.ID, err, out)
	}
	for _, dir := range secondCgroups {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("cgroup %s after the node's removal: %v, want it gone", dir, err)
		}
	}
}

// TestIntegrationStartDegraded: a unit that fails at boot fails Start, which
// names it.
func TestIntegrationStartDegraded(t *testing.T) {
	dir := t.TempDir()
	unit, wants := filepath.Join(dir, "kds-fail.service"), filepath.Join(dir, "wants")
	if err := os.WriteFile(unit, []byte("[Service]\nType=oneshot\nExecStart=/bin/false\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// systemd reads only symbolic links in a .wants directory.
	if err := os.Symlink("/etc/systemd/system/kds-fail.service", wants); err != nil {
		t.Fatal(err)
	}
	msg := cmdtest.FatalOf(t, func(rec testing.TB) {
		Start(rec, Options{Name: "kds-nc-degraded", Binaries: map[string]string{
			"/etc/systemd/system/kds-fail.service":                         unit,
			"/etc/systemd/system/multi-user.target.wants/kds-fail.service": wants,
		}})
	})
	if !strings.Contains(msg, "degraded") || !strings.Contains(msg, "kds-fail.service") {
		t.Errorf("Start with a failing unit ended with %q, want systemd degraded and kds-fail.service named", msg)
	}
	t.Logf("Start failed with:\n%s", msg)
}

// TestIntegrationStartWithoutImage: a missing node image fails the test
// and names the script that builds it.
func TestIntegrationStartWithoutImage(t *testing.T) {
	msg := cmdtest.FatalOf(t, func(rec testing.TB) {
		Start(rec, Options{Image: "kubelet-dockershim/no-such-node:test"})
	})
	if !strings.Contains(msg, "scripts/node-image.sh") {
		t.Errorf("Start without the image failed with %q, want a message naming scripts/node-image.sh", msg)
	}
}

// mustExec runs a command in the node and returns its trimmed output; the
// test fails on an error.
func mustExec(t *testing.T, n *Node, args ...string) string {
	t.Helper()
	out, err := n.Exec(t, args...)
	if err != nil {
		t.Fatalf("%v (stdout %q)", err, out)
	}
	return strings.TrimSpace(out)
}

// cgroupOf returns the path of controller in the text of a /proc/<pid>/cgroup.
func cgroupOf(t *testing.T, procCgroup, controller string) string {
	t.Helper()
	for _, line := range strings.Split(procCgroup, "\n") {
		if parts := strings.SplitN(line, ":", 3); len(parts) == 3 && parts[1] == controller {
			return parts[2]
		}
	}
	t.Fatalf("no %s line in:\n%s", controller, procCgroup)
	return ""
}

// memoryOf returns the memory cgroup's usage and total_rss in bytes.
func memoryOf(t *testing.T, cgroup string) (usage, rss uint64) {
	t.Helper()
	dir := filepath.Join("/sys/fs/cgroup/memory", cgroup)
	b, err := os.ReadFile(filepath.Join(dir, "memory.usage_in_bytes"))
	if err != nil {
		t.Fatal(err)
	}
	if usage, err = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err != nil {
		t.Fatal(err)
	}
	if b, err = os.ReadFile(filepath.Join(dir, "memory.stat")); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "total_rss "); ok {
			rss, _ = strconv.ParseUint(v, 10, 64)
		}
	}
	return usage, rss
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }
