//go:build linux && vm

package vm

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// busybox is built by scripts/build-images.sh.
const busybox = "kubelet-dockershim/busybox:latest"

// TestIntegrationVM boots a Debian 13 VM and checks what a kubelet on
// cgroup v2 needs in it: systemd running, cgroup2 alone on /sys/fs/cgroup,
// Docker 26.1 on cgroup v2 with the systemd driver, a container with a
// memory limit in its scope's memory.max, this project's kubelet binary
// running, the host's loopback reachable at HostAddr and a forwarded port.
func TestIntegrationVM(t *testing.T) {
	begin := time.Now()
	kubelet := filepath.Join(t.TempDir(), "kubelet")
	if out, err := exec.Command("go", "build", "-trimpath", "-o", kubelet, "../../..").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	built := time.Since(begin)
	begin = time.Now()
	v := Start(t, Options{
		Name:    "cg2",
		Files:   map[string]string{"/usr/local/bin/kubelet": kubelet},
		Images:  []string{busybox},
		Forward: []int{8080},
	})
	t.Logf("vm %s: kubelet built in %s; up (systemd running, dockerd answering) in %s; kubelet copied and %s loaded %s later",
		v.Name, built.Round(time.Second), v.BootTime.Round(time.Second), busybox,
		(time.Since(begin) - v.BootTime).Round(time.Second))
	logMemory(t, v, "booted")

	t.Run("systemd", func(t *testing.T) {
		if state, _ := v.Exec(t, "systemctl", "is-system-running"); strings.TrimSpace(state) != "running" {
			failed, _ := v.Exec(t, "systemctl", "list-units", "--failed", "--no-legend", "--plain")
			t.Errorf("systemctl is-system-running = %q, want running; failed units:\n%s", state, failed)
		}
		if exe := mustExec(t, v, "readlink", "/proc/1/exe"); filepath.Base(exe) != "systemd" {
			t.Errorf("PID 1 runs %q, want systemd", exe)
		}
		if host := mustExec(t, v, "hostname"); host != "cg2" {
			t.Errorf("hostname = %q, want cg2", host)
		}
	})

	t.Run("cgroup v2", func(t *testing.T) {
		if fs := mustExec(t, v, "stat", "-fc", "%T", "/sys/fs/cgroup"); fs != "cgroup2fs" {
			t.Errorf("/sys/fs/cgroup is %q, want cgroup2fs", fs)
		}
		controllers := strings.Fields(mustExec(t, v, "cat", "/sys/fs/cgroup/cgroup.subtree_control"))
		for _, c := range []string{"cpu", "memory", "pids", "io"} {
			if !contains(controllers, c) {
				t.Errorf("root cgroup.subtree_control %v lacks %s", controllers, c)
			}
		}
		if cmdline := mustExec(t, v, "cat", "/proc/cmdline"); strings.Contains(cmdline, "cgroup") {
			t.Errorf("the kernel command line touches cgroups: %s", cmdline)
		}
	})

	t.Run("docker", func(t *testing.T) {
		if ver := mustExec(t, v, "docker", "version", "--format", "{{.Server.Version}}"); !strings.HasPrefix(ver, "26.1.") {
			t.Errorf("dockerd version %q, want 26.1.x", ver)
		}
		if got := mustExec(t, v, "docker", "info", "--format", "{{.CgroupVersion}} {{.CgroupDriver}} {{.Driver}}"); got != "2 systemd overlay2" {
			t.Errorf("docker info: cgroup version, cgroup driver and storage driver %q, want \"2 systemd overlay2\"", got)
		}
		if out := mustExec(t, v, "docker", "run", "--rm", busybox, "echo", "hello"); out != "hello" {
			t.Errorf("docker run --rm busybox echo hello printed %q", out)
		}
	})

	t.Run("memory limit", func(t *testing.T) {
		const limit = 64 << 20
		id := mustExec(t, v, "docker", "run", "-d", "--memory", strconv.Itoa(limit), "--cpus", "0.5", busybox, "sleep", "600")
		defer func() { _, _ = v.Exec(t, "docker", "rm", "-f", id) }()
		pid := mustExec(t, v, "docker", "inspect", "-f", "{{.State.Pid}}", id)
		cg := strings.TrimPrefix(mustExec(t, v, "cat", "/proc/"+pid+"/cgroup"), "0::")
		if want := "/system.slice/docker-" + id + ".scope"; cg != want {
			t.Fatalf("the container's cgroup = %q, want %q", cg, want)
		}
		dir := "/sys/fs/cgroup" + cg
		if got := mustExec(t, v, "cat", dir+"/memory.max"); got != strconv.Itoa(limit) {
			t.Errorf("%s/memory.max = %s, want %d", dir, got, limit)
		}
		if got := mustExec(t, v, "cat", dir+"/cpu.max"); got != "50000 100000" {
			t.Errorf("%s/cpu.max = %q, want \"50000 100000\"", dir, got)
		}
		if got := mustExec(t, v, "systemctl", "show", "-p", "MemoryMax", "--value", "docker-"+id+".scope"); got != strconv.Itoa(limit) {
			t.Errorf("the scope's MemoryMax = %s, want %d", got, limit)
		}
	})

	t.Run("binary copied in", func(t *testing.T) {
		if out := mustExec(t, v, "/usr/local/bin/kubelet", "--version"); !strings.HasPrefix(out, "Kubernetes v1.37") {
			t.Errorf("kubelet --version in the VM printed %q, want Kubernetes v1.37.x", out)
		}
		if mode := mustExec(t, v, "stat", "-c", "%a %U", "/usr/local/bin/kubelet"); mode != "755 root" {
			t.Errorf("/usr/local/bin/kubelet: mode and owner %q, want \"755 root\"", mode)
		}
	})

	t.Run("host loopback", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			fmt.Fprintf(c, "hello from the host\n")
		}()
		port := ln.Addr().(*net.TCPAddr).Port
		addr := fmt.Sprintf("%s/%d", HostAddr, port)
		out := mustExec(t, v, "bash", "-c", "exec 3<>/dev/tcp/"+addr+" && head -n 1 <&3")
		if out != "hello from the host" {
			t.Errorf("from the VM, %s:%d (the host's 127.0.0.1:%d) said %q", HostAddr, port, port, out)
		}
	})

	t.Run("forwarded port", func(t *testing.T) {
		id := mustExec(t, v, "docker", "run", "-d", "-p", "8080:80", busybox, "httpd", "-f", "-p", "80", "-h", "/etc")
		defer func() { _, _ = v.Exec(t, "docker", "rm", "-f", id) }()
		url := fmt.Sprintf("http://127.0.0.1:%d/hostname", v.HostPort(t, 8080))
		var body string
		deadline := time.Now().Add(time.Minute)
		for {
			resp, err := http.Get(url)
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				body = strings.TrimSpace(string(b))
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("GET %s: %v (body %q)", url, err, body)
			}
			time.Sleep(time.Second)
		}
		if !strings.HasPrefix(id, body) || body == "" {
			t.Errorf("GET %s = %q, want the container's hostname (a prefix of %s)", url, body, id)
		}
	})

	logMemory(t, v, "after the checks")
	t.Logf("whole test: %s", time.Since(begin).Round(time.Second))
}

// logMemory logs the qemu process's resident memory and the VM's own view.
func logMemory(t *testing.T, v *VM, when string) {
	t.Helper()
	pid := v.PID(t)
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rss := "?"
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			rss = strings.TrimSpace(v)
		}
	}
	used, _ := v.Exec(t, "sh", "-c", "free -m | awk '/^Mem:/ {print $3}'")
	t.Logf("memory %s: qemu (pid %d) rss %s; used in the VM %s MiB", when, pid, rss, strings.TrimSpace(used))
}

// mustExec runs a command in the VM and returns its trimmed output; the
// test fails on an error.
func mustExec(t *testing.T, v *VM, args ...string) string {
	t.Helper()
	out, err := v.Exec(t, args...)
	if err != nil {
		t.Fatalf("%v (stdout %q)", err, out)
	}
	return strings.TrimSpace(out)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
