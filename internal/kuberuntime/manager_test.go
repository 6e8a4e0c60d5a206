package kuberuntime

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/eventtest"
)

const testRuntimeName = "fake"

// fakeHelper is a RuntimeHelper with nothing to resolve.
type fakeHelper struct{ podsDir string }

func (h *fakeHelper) GenerateRunContainerOptions(_ context.Context, pod *v1.Pod, c *v1.Container, _ string, _ []string) (*kubecontainer.RunContainerOptions, func(), error) {
	return &kubecontainer.RunContainerOptions{Hostname: pod.Name}, nil, nil
}
func (h *fakeHelper) GetPodDNS(*v1.Pod) (*runtimeapi.DNSConfig, error) {
	return &runtimeapi.DNSConfig{}, nil
}
func (h *fakeHelper) GetPodCgroupParent(*v1.Pod) string { return "" }
func (h *fakeHelper) GetPodDir(uid k8stypes.UID) string { return filepath.Join(h.podsDir, string(uid)) }
func (h *fakeHelper) GeneratePodHostNameAndDomain(pod *v1.Pod) (string, string, error) {
	return pod.Name, "", nil
}
func (h *fakeHelper) GetExtraSupplementalGroupsForPod(*v1.Pod) []int64 { return nil }

// fakeRecorder keeps the events; events renders them "reason: message".
type fakeRecorder struct{ eventtest.Recorder }

func (r *fakeRecorder) events() []string {
	var out []string
	for _, e := range r.Events() {
		out = append(out, e.Reason+": "+e.Message)
	}
	return out
}

func (r *fakeRecorder) has(reason string) bool {
	return slices.ContainsFunc(r.Events(), func(e eventtest.Event) bool { return e.Reason == reason })
}

func (r *fakeRecorder) reasons() []string {
	var out []string
	for _, e := range r.Events() {
		out = append(out, e.Reason)
	}
	return out
}

// fakeProbes reports probe failures by container ID.
type fakeProbes struct {
	liveness, startup map[string]bool
	// started, when not nil, makes the fake implement StartupSucceeded.
	started map[string]bool
}

func (p *fakeProbes) LivenessFailed(id kubecontainer.ContainerID) bool { return p.liveness[id.ID] }
func (p *fakeProbes) StartupFailed(id kubecontainer.ContainerID) bool  { return p.startup[id.ID] }

type fakeProbesWithStarted struct{ *fakeProbes }

func (p fakeProbesWithStarted) StartupSucceeded(id kubecontainer.ContainerID) bool {
	return p.started[id.ID]
}

// recordingRuntime records the StopContainer timeouts and ExecSync commands
// the fake runtime does not keep.
type recordingRuntime struct {
	*critest.FakeRuntimeService
	mu    sync.Mutex
	stops []stopCall
	execs [][]string
}

type stopCall struct {
	id      string
	timeout int64
}

func (r *recordingRuntime) StopContainer(ctx context.Context, id string, timeout int64) error {
	r.mu.Lock()
	r.stops = append(r.stops, stopCall{id: id, timeout: timeout})
	r.mu.Unlock()
	return r.FakeRuntimeService.StopContainer(ctx, id, timeout)
}

func (r *recordingRuntime) ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) ([]byte, []byte, error) {
	r.mu.Lock()
	r.execs = append(r.execs, cmd)
	r.mu.Unlock()
	return r.FakeRuntimeService.ExecSync(ctx, id, cmd, timeout)
}

func (r *recordingRuntime) stopCalls() []stopCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]stopCall(nil), r.stops...)
}

// testEnv is a Manager over the cri-api fakes.
type testEnv struct {
	m        *Manager
	runtime  *recordingRuntime
	images   *critest.FakeImageService
	recorder *fakeRecorder
	logsDir  string
}

func newTestEnv(t *testing.T, mutate ...func(*Options)) *testEnv {
	t.Helper()
	env := &testEnv{
		runtime:  &recordingRuntime{FakeRuntimeService: critest.NewFakeRuntimeService()},
		images:   critest.NewFakeImageService(),
		recorder: &fakeRecorder{},
		logsDir:  t.TempDir(),
	}
	opts := Options{
		Runtime:     env.runtime,
		Images:      env.images,
		Helper:      &fakeHelper{podsDir: t.TempDir()},
		Logger:      zaptest.NewLogger(t),
		Recorder:    env.recorder,
		PodLogsDir:  env.logsDir,
		RuntimeName: testRuntimeName,
		// A fixed node memory: no /proc/meminfo read in unit tests.
		MachineMemoryBytes: 8 << 30,
	}
	for _, f := range mutate {
		f(&opts)
	}
	m, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	env.m = m
	return env
}

func TestNew(t *testing.T) {
	t.Parallel()
	fr, fi := critest.NewFakeRuntimeService(), critest.NewFakeImageService()
	tests := []struct {
		desc    string
		opts    Options
		wantErr string
	}{
		{desc: "no runtime", opts: Options{Images: fi, RuntimeName: "docker", MachineMemoryBytes: 1 << 30}, wantErr: "Runtime is required"},
		{desc: "no images", opts: Options{Runtime: fr, RuntimeName: "docker", MachineMemoryBytes: 1 << 30}, wantErr: "Images is required"},
		{desc: "no runtime name", opts: Options{Runtime: fr, Images: fi, MachineMemoryBytes: 1 << 30}, wantErr: "RuntimeName is required"},
		{desc: "no machine memory", opts: Options{Runtime: fr, Images: fi, RuntimeName: "docker"}, wantErr: "MachineMemoryBytes is required"},
		{desc: "defaults", opts: Options{Runtime: fr, Images: fi, RuntimeName: "docker", MachineMemoryBytes: 1 << 30}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			m, err := New(tc.opts)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("New error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if m.podLogsDir != DefaultPodLogsDir || m.logMaxSize != DefaultContainerLogMaxSize ||
				m.logMaxFiles != DefaultContainerLogMaxFiles || m.cpuCFSQuotaPeriod != DefaultCPUCFSQuotaPeriod ||
				m.imagePullBackOff == nil || m.logger == nil || m.recorder == nil || m.RuntimeName() != "docker" {
				t.Errorf("defaults not applied: %+v", m)
			}
		})
	}
}

func TestStatus(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	want := &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{{Type: runtimeapi.RuntimeReady, Status: true}}}
	env.runtime.FakeStatus = want
	got, err := env.m.Status(context.Background())
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	if len(got.GetStatus().GetConditions()) != 1 || !got.GetStatus().GetConditions()[0].GetStatus() {
		t.Errorf("Status = %v, want %v", got, want)
	}
	env.runtime.InjectError("Status", fmt.Errorf("down"))
	if _, err := env.m.Status(context.Background()); err == nil || !strings.Contains(err.Error(), "down") {
		t.Errorf("Status error = %v, want the runtime's", err)
	}
}

// testPod builds a pod with the named containers (image busybox).
func testPod(names ...string) *v1.Pod {
	grace := int64(30)
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-1"},
		Spec: v1.PodSpec{
			RestartPolicy:                 v1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: &grace,
		},
	}
	for _, n := range names {
		pod.Spec.Containers = append(pod.Spec.Containers, testContainer(n))
	}
	return pod
}

func testContainer(name string) v1.Container {
	return v1.Container{
		Name: name, Image: "busybox:1.36", ImagePullPolicy: v1.PullIfNotPresent,
		TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: v1.TerminationMessageReadFile,
	}
}
