//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const (
	containerdBin = "/usr/bin/containerd"
	ctrBin        = "/usr/bin/ctr"
)

// containerd is a private containerd instance (own root, state, socket, CNI
// conf dir) with the local images imported into its k8s.io namespace.
type containerd struct {
	dir  string
	sock string
	p    *proc
	conn *grpc.ClientConn
	rt   runtimeapi.RuntimeServiceClient
}

// containerdConfig is containerd 1.6's config (version 2) for one test: the
// CRI plugin with the test's CNI dir, the local pause image, runc with cgroupfs,
// and no negative OOM scores (this host lacks CAP_SYS_RESOURCE).
const containerdConfig = `version = 2
root = "{{DIR}}/root"
state = "{{DIR}}/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]

[grpc]
  address = "{{DIR}}/c.sock"

[ttrpc]
  address = "{{DIR}}/c.sock.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "{{DIR}}/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{{PAUSE}}"
  restrict_oom_score_adj = true
  enable_unprivileged_ports = false
  enable_unprivileged_icmp = false
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{{CNIBIN}}"
    conf_dir = "{{CNICONF}}"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
`

// startContainerd starts containerd for n (stopped in n's teardown, after the
// kubelet), imports the images and waits until its CRI runtime and network are ready.
func startContainerd(t testing.TB, n *node) *containerd {
	t.Helper()
	for _, bin := range []string{containerdBin, ctrBin} {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("containerd is required (apt-get install containerd): %v", err)
		}
	}
	c := &containerd{dir: filepath.Join(n.dir, "ctd")}
	c.sock = filepath.Join(c.dir, "c.sock")
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	conf := strings.NewReplacer("{{DIR}}", c.dir, "{{PAUSE}}", pauseImage, "{{CNIBIN}}", cniBinDir, "{{CNICONF}}", n.cniConf).Replace(containerdConfig)
	confPath := filepath.Join(c.dir, "config.toml")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := startProc("containerd", filepath.Join(n.dir, "containerd.log"), containerdBin, "--config", confPath)
	if err != nil {
		t.Fatal(err)
	}
	c.p = p
	n.procs = append(n.procs, p)
	n.teardown = append(n.teardown, func() { c.stop(t) })
	waitSocket(t, c.sock, p, 30*time.Second)
	c.importImages(t, n.s)
	conn, err := grpc.NewClient("unix://"+c.sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	c.conn = conn
	c.rt = runtimeapi.NewRuntimeServiceClient(conn)
	c.waitReady(t)
	return c
}

// importImages pipes `docker save` of the local images into `ctr images import`.
func (c *containerd) importImages(t testing.TB, s *suite) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	save := exec.CommandContext(ctx, "docker", "-H", s.docker, "save", pauseImage, busyboxImage)
	imp := exec.CommandContext(ctx, ctrBin, "--address", c.sock, "-n", "k8s.io", "images", "import", "--all-platforms", "-")
	pipe, err := save.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	imp.Stdin = pipe
	var saveErr strings.Builder
	save.Stderr = &saveErr
	if err := save.Start(); err != nil {
		t.Fatal(err)
	}
	out, err := imp.CombinedOutput()
	if werr := save.Wait(); werr != nil {
		t.Fatalf("docker save: %v: %s", werr, saveErr.String())
	}
	if err != nil {
		t.Fatalf("ctr images import: %v: %s", err, out)
	}
	list, err := run(ctx, ctrBin, "--address", c.sock, "-n", "k8s.io", "images", "ls", "-q")
	if err != nil || !strings.Contains(list, "docker.io/"+busyboxImage) || !strings.Contains(list, pauseImage) {
		t.Fatalf("images in containerd after the import: %v\n%s", err, list)
	}
}

// waitReady waits until the CRI Status reports the runtime and network ready.
func (c *containerd) waitReady(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := c.rt.Status(ctx, &runtimeapi.StatusRequest{})
		cancel()
		ready := 0
		if err == nil {
			for _, cond := range st.GetStatus().GetConditions() {
				if (cond.Type == runtimeapi.RuntimeReady || cond.Type == runtimeapi.NetworkReady) && cond.Status {
					ready++
				}
			}
		}
		if ready == 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("containerd's CRI not ready within 30s: %v %v", st, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// containers lists sandboxes and containers by CRI label selector.
func (c *containerd) containers(t testing.TB, all bool, labels ...string) []string {
	t.Helper()
	sel := map[string]string{}
	for _, l := range labels {
		k, v, _ := strings.Cut(l, "=")
		sel[k] = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sbs, err := c.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{LabelSelector: sel}})
	if err != nil {
		t.Fatalf("ListPodSandbox: %v", err)
	}
	ctrs, err := c.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{LabelSelector: sel}})
	if err != nil {
		t.Fatalf("ListContainers: %v", err)
	}
	var ids []string
	for _, s := range sbs.Items {
		if all || s.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			ids = append(ids, s.Id)
		}
	}
	for _, ct := range ctrs.Containers {
		if all || ct.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			ids = append(ids, ct.Id)
		}
	}
	return ids
}

// stop removes every pod sandbox through the CRI (containers stopped, CNI torn
// down), stops containerd by PID, kills any shim of this instance left behind
// (found by its -address argument) with its children, and unmounts its dirs.
func (c *containerd) stop(t testing.TB) {
	if c.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if sbs, err := c.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{}); err == nil {
			for _, s := range sbs.Items {
				if _, err := c.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: s.Id}); err != nil {
					t.Logf("containerd StopPodSandbox %s: %v", s.Id, err)
				}
				if _, err := c.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: s.Id}); err != nil {
					t.Logf("containerd RemovePodSandbox %s: %v", s.Id, err)
				}
			}
		}
		cancel()
		_ = c.conn.Close()
	}
	if err := c.p.stop(20 * time.Second); err != nil {
		t.Logf("containerd: %v", err)
	}
	for _, pid := range shimsOf(c.sock) {
		for _, child := range childrenOf(pid) {
			_ = syscall.Kill(child, syscall.SIGKILL)
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Logf("killed a leftover containerd shim, pid %d", pid)
	}
	unmountUnder(c.dir)
}

// shimsOf finds containerd-shim-runc-v2 processes started by the containerd at
// address sock.
func shimsOf(sock string) []int {
	var pids []int
	for _, pid := range allPIDs() {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
		if len(args) == 0 || !strings.Contains(filepath.Base(args[0]), "containerd-shim") {
			continue
		}
		for i, a := range args {
			if (a == "-address" || a == "--address") && i+1 < len(args) && args[i+1] == sock {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// childrenOf returns the PIDs whose parent is ppid.
func childrenOf(ppid int) []int {
	var out []int
	for _, pid := range allPIDs() {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after the last ')'.
		s := string(data)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 1 && fields[1] == strconv.Itoa(ppid) {
			out = append(out, pid)
		}
	}
	return out
}

func allPIDs() []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}
