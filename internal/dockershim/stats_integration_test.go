//go:build linux

package dockershim

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/dockerd"

	"go.uber.org/zap/zaptest"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/checkpoint"
	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
)

const (
	// fixtureImage is a busybox-static image these tests build when missing.
	fixtureImage = "dockershim-test-busybox:latest"
	// fixtureLabel marks every Docker object these tests create.
	fixtureLabel = "io.kubelet-dockershim.test=fixture"
	// fixtureBurn keeps one CPU busy.
	fixtureBurn = "while :; do :; done"
)

// fixtureDocker runs the docker CLI and returns its trimmed output; failures are fatal.
func fixtureDocker(t testing.TB, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func fixtureRand() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// fixtureImportImage imports a busybox-static rootfs as ref; extra files (path ->
// content) make the image unique; changes are Dockerfile instructions (USER 1000).
func fixtureImportImage(t testing.TB, ref string, extra map[string]string, changes ...string) string {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "rootfs")
	for _, d := range []string{"bin", "tmp", "proc", "sys", "dev", "etc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatalf("busybox-static is required at /bin/busybox: %v", err)
	}
	if err := os.WriteFile(filepath.Join(root, "bin/busybox"), bb, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{"sh", "sleep", "cat", "ls", "echo", "true"} {
		if err := os.Symlink("busybox", filepath.Join(root, "bin", l)); err != nil {
			t.Fatal(err)
		}
	}
	for p, c := range extra {
		if err := os.WriteFile(filepath.Join(root, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tarball := filepath.Join(dir, "rootfs.tar")
	if out, err := exec.Command("tar", "-C", root, "-cf", tarball, ".").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v: %s", err, out)
	}
	args := []string{"import", "--change", "LABEL " + fixtureLabel}
	for _, c := range changes {
		args = append(args, "--change", c)
	}
	return fixtureDocker(t, append(args, tarball, ref)...)
}

// fixtureEnsureImage builds fixtureImage unless it exists. It is shared and kept.
func fixtureEnsureImage(t testing.TB) {
	t.Helper()
	fixtureDocker(t, "version", "--format", "{{.Server.Version}}")
	if exec.Command("docker", "image", "inspect", fixtureImage).Run() == nil {
		return
	}
	fixtureImportImage(t, fixtureImage, nil)
}

// fixtureRun starts a container and removes it (by ID) when the test ends.
func fixtureRun(t testing.TB, args ...string) string {
	t.Helper()
	name := "dockershim-fixture-" + fixtureRand()
	// Registered before the run: a run that fails after creating the container must
	// not leave it behind.
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", name).Run() })
	return fixtureDocker(t, append([]string{"run", "-d", "--name", name, "--label", fixtureLabel}, args...)...)
}

func fixturePid(t testing.TB, id string) int {
	t.Helper()
	pid, err := strconv.Atoi(fixtureDocker(t, "inspect", "-f", "{{.State.Pid}}", id))
	if err != nil || pid == 0 {
		t.Fatalf("pid of %s: %d, %v", id, pid, err)
	}
	return pid
}

// fixtureService is a Service over the real Docker daemon (no CNI, no streaming).
func fixtureService(t testing.TB) *Service {
	t.Helper()
	dc, err := libdocker.New(libdocker.Options{Endpoint: dockerd.Endpoint()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dc.Close() })
	cps, err := checkpoint.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return newService(serviceParts{docker: dc, checkpoints: cps}, Options{}, zaptest.NewLogger(t))
}

// TestIntegrationCgroupStats reads the cgroup of a real CPU-burning container, then
// serves the stats RPCs for a real sandbox + container pair under a pod cgroup parent.
func TestIntegrationCgroupStats(t *testing.T) {
	fixtureEnsureImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	parent := "/fixture-" + fixtureRand()
	t.Cleanup(func() { fixtureRemoveCgroupParent(parent) })
	sbLabels := []string{"--label", labelType + "=" + typeSandbox, "--label", labelManaged + "=true", "--label", "app=dockershim-fixture"}
	sb := fixtureRun(t, append(sbLabels, "--cgroup-parent", parent, fixtureImage, "sleep", "600")...)
	ctrLabels := []string{"--label", labelType + "=" + typeContainer, "--label", labelManaged + "=true", "--label", labelSandboxID + "=" + sb}
	ctr := fixtureRun(t, append(ctrLabels, "--cgroup-parent", parent, "--network", "container:"+sb, fixtureImage, "sh", "-c", fixtureBurn)...)

	r := newCgroupReader("/proc")
	cg, err := r.lookup(fixturePid(t, ctr))
	if err != nil {
		t.Fatal(err)
	}
	first, err := r.read(cg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	second, err := r.read(cg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !second.hasCPU || second.cpuNanos <= first.cpuNanos {
		t.Errorf("cpu usage did not grow: %d then %d", first.cpuNanos, second.cpuNanos)
	}
	if !second.hasMemory || second.memUsage == 0 || second.workingSet == 0 {
		t.Errorf("memory = %+v, want non-zero usage and working set", second)
	}
	if !second.hasPids || second.pids < 1 {
		t.Errorf("pids = %d, want at least 1", second.pids)
	}

	s := fixtureService(t)
	cs, err := s.ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: ctr})
	if err != nil {
		t.Fatal(err)
	}
	if cs.Stats.Cpu.GetUsageCoreNanoSeconds().GetValue() == 0 || cs.Stats.Memory.GetWorkingSetBytes().GetValue() == 0 ||
		cs.Stats.WritableLayer.GetFsId().GetMountpoint() == "" {
		t.Errorf("ContainerStats = %v", cs.Stats)
	}
	time.Sleep(200 * time.Millisecond)
	list, err := s.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{Filter: &runtimeapi.ContainerStatsFilter{PodSandboxId: sb}})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Stats) != 1 || list.Stats[0].Cpu.GetUsageNanoCores().GetValue() == 0 {
		t.Errorf("ListContainerStats = %v, want one container with a CPU rate", list.Stats)
	}

	pod, err := s.PodSandboxStats(ctx, &runtimeapi.PodSandboxStatsRequest{PodSandboxId: sb})
	if err != nil {
		t.Fatal(err)
	}
	lx := pod.Stats.GetLinux()
	if lx.GetCpu().GetUsageCoreNanoSeconds().GetValue() < second.cpuNanos || lx.GetProcess().GetProcessCount().GetValue() < 2 ||
		lx.GetMemory().GetUsageBytes().GetValue() == 0 {
		t.Errorf("pod totals: cpu %v, process %v, memory %v", lx.GetCpu(), lx.GetProcess(), lx.GetMemory())
	}
	if lx.GetNetwork().GetDefaultInterface().GetName() != "eth0" || len(lx.GetContainers()) != 1 || pod.Stats.Attributes.Labels["app"] != "dockershim-fixture" {
		t.Errorf("pod stats = %v", pod.Stats)
	}
}

// fixtureRemoveCgroupParent removes the (empty) pod cgroups Docker leaves behind.
func fixtureRemoveCgroupParent(parent string) {
	dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", parent))
	for _, d := range dirs {
		_ = os.Remove(d)
	}
	_ = os.Remove(filepath.Join("/sys/fs/cgroup", parent))
}

// BenchmarkCgroupRead measures one cgroup sample of a running container.
func BenchmarkCgroupRead(b *testing.B) {
	fixtureEnsureImage(b)
	id := fixtureRun(b, fixtureImage, "sleep", "600")
	r := newCgroupReader("/proc")
	cg, err := r.lookup(fixturePid(b, id))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := r.read(cg, time.Now()); err != nil {
			b.Fatal(err)
		}
	}
}
