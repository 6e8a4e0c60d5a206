//go:build linux

package kuberuntime

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/flowcontrol"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/shim"
)

const integrationImage = "kubelet-dockershim/busybox:latest"

// dirHelper is a RuntimeHelper that gives every container a directory for its
// termination message file.
type dirHelper struct{ podsDir string }

func (h *dirHelper) GenerateRunContainerOptions(_ context.Context, pod *v1.Pod, c *v1.Container, _ string, _ []string) (*kubecontainer.RunContainerOptions, func(), error) {
	return &kubecontainer.RunContainerOptions{
		Hostname:        pod.Name,
		PodContainerDir: filepath.Join(h.podsDir, string(pod.UID), "containers", c.Name),
		Envs:            []kubecontainer.EnvVar{{Name: "GREETING", Value: "hello"}},
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
	s := kubelet.Start(t, shim.Options{})
	rt, images := s.Dial(t, 30*time.Second)
	ctx, cancel := context.WithTimeout(s.Context(), 2*time.Minute)
	defer cancel()
	logsDir := filepath.Join(s.Dir, "logs")
	m, err := New(Options{Runtime: rt, Images: images, Helper: &dirHelper{podsDir: filepath.Join(s.Dir, "pods")},
		Logger: zaptest.NewLogger(t), PodLogsDir: logsDir, RuntimeName: "docker", SerializeImagePulls: true, CPUCFSQuota: true, MachineMemoryBytes: 8 << 30})
	if err != nil {
		t.Fatal(err)
	}
	pod := integrationPod()
	t.Cleanup(func() { shim.RemovePodSandboxes(t, rt, string(pod.UID)) })

	backOff := flowcontrol.NewBackOff(10*time.Second, 300*time.Second)
	status := syncUntil(ctx, t, m, pod, backOff, func(s *kubecontainer.PodStatus) bool {
		web, crash := s.FindContainerStatusByName("web"), s.FindContainerStatusByName("crash")
		return web != nil && web.State == kubecontainer.StateRunning && crash != nil && crash.RestartCount >= 1 && crash.State == kubecontainer.StateExited
	})
	checkRunningPod(ctx, t, m, pod, status, logsDir, s.Subnet)

	// KillPod: the preStop hook runs, then everything stops.
	if err := m.KillPod(ctx, pod, nil, nil); err != nil {
		t.Fatalf("KillPod: %v", err)
	}
	status, err = m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range status.ContainerStatuses {
		if c.State == kubecontainer.StateRunning {
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
	if err := m.GarbageCollect(ctx, kubecontainer.DefaultGCPolicy(), true, false, gone); err != nil {
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
func syncUntil(ctx context.Context, t *testing.T, m *Manager, pod *v1.Pod, backOff *flowcontrol.Backoff, done func(*kubecontainer.PodStatus) bool) *kubecontainer.PodStatus {
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
		result := m.SyncPod(ctx, pod, status, nil, backOff, false)
		for _, r := range result.SyncResults {
			if r.Error != nil && r.Error != kubecontainer.ErrCrashLoopBackOff {
				t.Fatalf("SyncPod: %s %s: %v: %s", r.Action, r.Target, r.Error, r.Message)
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// checkRunningPod checks the running pod: IP, init container message,
// postStart hook, crash message from the logs, log files and labels.
func checkRunningPod(ctx context.Context, t *testing.T, m *Manager, pod *v1.Pod, status *kubecontainer.PodStatus, logsDir string, subnet *net.IPNet) {
	t.Helper()
	if len(status.IPs) == 0 || !subnet.Contains(net.ParseIP(status.IPs[0])) {
		t.Errorf("pod IPs = %v, want one from the test network %s", status.IPs, subnet)
	}
	if init := status.FindContainerStatusByName("init"); init == nil || init.State != kubecontainer.StateExited || init.ExitCode != 0 || init.Message != "init-done\n" {
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
	// web runs: its log copier writes the line when it gets to it.
	webLog := filepath.Join(buildPodLogsDirectory(logsDir, pod.Namespace, pod.Name, pod.UID), "web", "0.log")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		data, err := os.ReadFile(webLog)
		if err == nil && strings.Contains(string(data), "hello from web") {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("web log %s = %q, %v", webLog, data, err)
			break
		}
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
