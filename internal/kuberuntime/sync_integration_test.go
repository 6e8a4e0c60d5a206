//go:build linux

package kuberuntime

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/flowcontrol"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/cri"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/types"
)

const integrationImage = "kubelet-dockershim/busybox:latest"

// dirHelper is a RuntimeHelper that gives every container a directory for its
// termination message file.
type dirHelper struct{ podsDir string }

func (h *dirHelper) GenerateRunContainerOptions(_ context.Context, pod *v1.Pod, c *v1.Container, _ string, _ []string) (*RunContainerOptions, func(), error) {
	return &RunContainerOptions{
		Hostname:        pod.Name,
		PodContainerDir: filepath.Join(h.podsDir, string(pod.UID), "containers", c.Name),
		Envs:            []EnvVar{{Name: "GREETING", Value: "hello"}},
	}, nil, nil
}
func (h *dirHelper) GetPodDNS(*v1.Pod) (*runtimeapi.DNSConfig, error) {
	return &runtimeapi.DNSConfig{}, nil
}
func (h *dirHelper) GetPodCgroupParent(*v1.Pod) string { return "" }
func (h *dirHelper) GetPodDir(uid k8stypes.UID) string { return filepath.Join(h.podsDir, string(uid)) }
func (h *dirHelper) GeneratePodHostNameAndDomain(pod *v1.Pod) (string, string, error) {
	return pod.Name, "", nil
}
func (h *dirHelper) GetExtraSupplementalGroupsForPod(*v1.Pod) []int64 { return nil }

// TestIntegrationPodLifecycle runs a pod through a real shim and dockerd:
// SyncPod creates the sandbox, runs the init container to completion and
// starts the containers (postStart hook, termination messages, crash restarts
// with back-off), KillPod stops everything with the preStop hook, and
// GarbageCollect removes the containers, the sandbox and the pod's logs.
func TestIntegrationPodLifecycle(t *testing.T) {
	if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		t.Fatalf("dockerd is required: %v: %s", err, out)
	}
	if _, err := os.Stat("/usr/lib/cni/bridge"); err != nil {
		t.Fatalf("the CNI plugins are required in /usr/lib/cni: %v", err)
	}
	dir, err := os.MkdirTemp("", "krt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	bin := filepath.Join(dir, "kubelet")
	if out, err := exec.Command("go", "build", "-o", bin, "../..").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	bridge := writeTestConflist(t, filepath.Join(dir, "net.d"), filepath.Join(dir, "ipam"))
	t.Cleanup(func() {
		// The bridge plugin leaves its bridge behind; it is this test's own.
		if out, err := exec.Command("ip", "link", "del", bridge).CombinedOutput(); err != nil {
			t.Logf("cleanup: delete bridge %s: %v: %s", bridge, err, out)
		}
	})
	sock := filepath.Join(dir, "cri.sock")
	shimCtx := startTestShim(t, bin, dir, sock)

	ctx, cancel := context.WithTimeout(shimCtx, 2*time.Minute)
	defer cancel()
	copts := cri.Options{Endpoint: "unix://" + sock, Timeout: 30 * time.Second, Logger: zaptest.NewLogger(t)}
	rt, err := cri.NewRuntimeService(ctx, copts)
	if err != nil {
		t.Fatal(err)
	}
	images, err := cri.NewImageService(ctx, copts)
	if err != nil {
		t.Fatal(err)
	}
	logsDir := filepath.Join(dir, "logs")
	m, err := New(Options{Runtime: rt, Images: images, Helper: &dirHelper{podsDir: filepath.Join(dir, "pods")},
		Logger: zaptest.NewLogger(t), PodLogsDir: logsDir, RuntimeName: "docker", SerializeImagePulls: true, CPUCFSQuota: true})
	if err != nil {
		t.Fatal(err)
	}
	pod := integrationPod()
	t.Cleanup(func() { removePodSandboxes(t, rt, pod.UID) })

	backOff := flowcontrol.NewBackOff(10*time.Second, 300*time.Second)
	status := syncUntil(ctx, t, m, pod, backOff, func(s *types.PodStatus) bool {
		web, crash := s.FindContainerStatusByName("web"), s.FindContainerStatusByName("crash")
		return web != nil && web.State == types.StateRunning && crash != nil && crash.RestartCount >= 1 && crash.State == types.StateExited
	})
	checkRunningPod(ctx, t, m, pod, status, logsDir)

	// KillPod: the preStop hook runs, then everything stops.
	if err := m.KillPod(ctx, pod, nil, nil); err != nil {
		t.Fatalf("KillPod: %v", err)
	}
	status, err = m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range status.ContainerStatuses {
		if c.State == types.StateRunning {
			t.Errorf("container %s still running after KillPod", c.Name)
		}
	}
	if web := status.FindContainerStatusByName("web"); web == nil || !strings.Contains(web.Message, "prestop-ran") {
		t.Errorf("web after KillPod = %+v, want the preStop hook's termination message", web)
	}
	if len(status.SandboxStatuses) == 0 || status.SandboxStatuses[0].State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Errorf("sandbox still ready after KillPod: %v", status.SandboxStatuses)
	}

	// GarbageCollect for a deleted pod: nothing of it is left.
	gone := fakePodState{contentRemoved: map[k8stypes.UID]bool{pod.UID: true}}
	if err := m.GarbageCollect(ctx, DefaultGCPolicy(), true, false, gone); err != nil {
		t.Fatalf("GarbageCollect: %v", err)
	}
	pods, err := m.GetPods(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if p.ID == pod.UID {
			t.Errorf("pod still in the runtime after GC: %d containers, %d sandboxes", len(p.Containers), len(p.Sandboxes))
		}
	}
	if _, err := os.Stat(buildPodLogsDirectory(logsDir, pod.Namespace, pod.Name, pod.UID)); !os.IsNotExist(err) {
		t.Errorf("pod log directory still there after GC: %v", err)
	}
}

func integrationPod() *v1.Pod {
	grace := int64(5)
	c := func(name string, args ...string) v1.Container {
		return v1.Container{
			Name: name, Image: integrationImage, ImagePullPolicy: v1.PullIfNotPresent,
			Command: []string{"sh", "-c"}, Args: args,
			TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: v1.TerminationMessageReadFile,
		}
	}
	init := c("init", "echo init-done > /dev/termination-log")
	web := c("web", "echo $(GREETING) from web; exec sleep 3600")
	web.Lifecycle = &v1.Lifecycle{
		PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"sh", "-c", "echo started > /tmp/started"}}},
		PreStop:   &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"sh", "-c", "echo prestop-ran > /dev/termination-log"}}},
	}
	crash := c("crash", "echo oops >&2; exit 3")
	crash.TerminationMessagePolicy = v1.TerminationMessageFallbackToLogsOnError
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("krt-%d", os.Getpid()), Namespace: "default",
			UID: k8stypes.UID(fmt.Sprintf("krt-uid-%d-%d", os.Getpid(), time.Now().UnixNano())),
		},
		Spec: v1.PodSpec{
			RestartPolicy:                 v1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: &grace,
			InitContainers:                []v1.Container{init},
			Containers:                    []v1.Container{web, crash},
		},
	}
}

// syncUntil syncs the pod until done accepts its status.
func syncUntil(ctx context.Context, t *testing.T, m *Manager, pod *v1.Pod, backOff *flowcontrol.Backoff, done func(*types.PodStatus) bool) *types.PodStatus {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		status, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
		if err != nil {
			t.Fatalf("GetPodStatus: %v", err)
		}
		if done(status) {
			return status
		}
		if time.Now().After(deadline) {
			for _, c := range status.ContainerStatuses {
				t.Logf("container %s: %s exit %d restarts %d %s %s", c.Name, c.State, c.ExitCode, c.RestartCount, c.Reason, c.Message)
			}
			t.Fatalf("pod did not reach the wanted state")
		}
		result := m.SyncPod(ctx, pod, status, nil, backOff)
		for _, r := range result.SyncResults {
			if r.Error != nil && r.Error != types.ErrCrashLoopBackOff {
				t.Fatalf("SyncPod: %s %s: %v: %s", r.Action, r.Target, r.Error, r.Message)
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// checkRunningPod checks the running pod: IP, init container message,
// postStart hook, crash message from the logs, log files and labels.
func checkRunningPod(ctx context.Context, t *testing.T, m *Manager, pod *v1.Pod, status *types.PodStatus, logsDir string) {
	t.Helper()
	if len(status.IPs) == 0 || !strings.HasPrefix(status.IPs[0], "10.246.") {
		t.Errorf("pod IPs = %v, want one from the test network", status.IPs)
	}
	if init := status.FindContainerStatusByName("init"); init == nil || init.State != types.StateExited || init.ExitCode != 0 || init.Message != "init-done\n" {
		t.Errorf("init = %+v, want exited 0 with its termination message", init)
	}
	web := status.FindContainerStatusByName("web")
	if web.ID.Type != "docker" || web.Hash != hashContainer(&pod.Spec.Containers[0]) {
		t.Errorf("web = %+v", web)
	}
	out, err := m.RunInContainer(ctx, web.ID, []string{"cat", "/tmp/started"}, 10*time.Second)
	if err != nil || string(out) != "started\n" {
		t.Errorf("postStart hook output = %q, %v", out, err)
	}
	if _, err := m.RunInContainer(ctx, web.ID, []string{"sh", "-c", "exit 4"}, 10*time.Second); err == nil {
		t.Errorf("RunInContainer of a failing command succeeded")
	}
	crash := status.FindContainerStatusByName("crash")
	if crash.ExitCode != 3 || !strings.Contains(crash.Message, "oops") {
		t.Errorf("crash = %+v, want exit 3 and the log tail as message", crash)
	}
	webLog := filepath.Join(buildPodLogsDirectory(logsDir, pod.Namespace, pod.Name, pod.UID), "web", "0.log")
	if data, err := os.ReadFile(webLog); err != nil || !strings.Contains(string(data), "hello from web") {
		t.Errorf("web log %s = %q, %v", webLog, data, err)
	}
	pods, err := m.GetPods(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range pods {
		if p.ID == pod.UID {
			found = p.Name == pod.Name && p.Namespace == pod.Namespace && len(p.Sandboxes) == 1 && len(p.Containers) == 1
		}
	}
	if !found {
		t.Errorf("GetPods(running) lacks the pod with its sandbox and one running container")
	}
}

// removePodSandboxes removes every sandbox of the pod (and so its containers).
func removePodSandboxes(t *testing.T, rt internalapi.RuntimeService, uid k8stypes.UID) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sbs, err := rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{podUIDLabel: string(uid)}})
	if err != nil {
		t.Logf("cleanup: list sandboxes: %v", err)
		return
	}
	for _, sb := range sbs {
		_ = rt.StopPodSandbox(ctx, sb.Id)
		if err := rt.RemovePodSandbox(ctx, sb.Id); err != nil {
			t.Logf("cleanup: remove sandbox %s: %v", sb.Id, err)
		}
	}
}

// writeTestConflist writes a bridge + host-local network with its own bridge
// name and a private /24, and returns the bridge name.
func writeTestConflist(t *testing.T, confDir, ipamDir string) string {
	t.Helper()
	n := os.Getpid() % 250
	bridge := fmt.Sprintf("krt%d", n)
	conf := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"%s","plugins":[{"type":"bridge","bridge":"%s","isGateway":true,"ipMasq":false,`+
		`"ipam":{"type":"host-local","ranges":[[{"subnet":"10.246.%d.0/24"}]],"dataDir":%q}}]}`, bridge, bridge, n, ipamDir)
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(confDir, "10-krt.conflist"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	return bridge
}

// startTestShim starts the binary in shim-only mode; the returned ctx ends
// when the process exits. Cleanup stops it by PID (SIGTERM, then SIGKILL).
func startTestShim(t *testing.T, bin, dir, sock string) context.Context {
	t.Helper()
	var output bytes.Buffer
	cmd := exec.Command(bin, "--experimental-dockershim", "--container-runtime-endpoint=unix://"+sock,
		"--experimental-dockershim-root-directory="+filepath.Join(dir, "root"), "--cni-conf-dir="+filepath.Join(dir, "net.d"),
		"--cni-bin-dir=/usr/lib/cni", "--cni-cache-dir="+filepath.Join(dir, "cache"))
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
		cancel()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("shim output:\n%s", output.String())
		}
	})
	return ctx
}
