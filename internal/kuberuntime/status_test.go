package kuberuntime

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

func fakeSandbox(id, uid string, attempt uint32, state runtimeapi.PodSandboxState, created int64, ips ...string) *critest.FakePodSandbox {
	sb := &critest.FakePodSandbox{PodSandboxStatus: runtimeapi.PodSandboxStatus{
		Id:        id,
		Metadata:  &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: uid, Attempt: attempt},
		State:     state,
		CreatedAt: created,
		Labels:    map[string]string{podUIDLabel: uid, podNameLabel: "web", podNamespaceLabel: "default"},
	}}
	if len(ips) > 0 {
		sb.Network = &runtimeapi.PodSandboxNetworkStatus{Ip: ips[0]}
		for _, ip := range ips[1:] {
			sb.Network.AdditionalIps = append(sb.Network.AdditionalIps, &runtimeapi.PodIP{Ip: ip})
		}
	}
	return sb
}

type fakeCtr struct {
	id, uid, name, sandbox string
	state                  runtimeapi.ContainerState
	created, started, done int64
	exitCode               int32
	reason, message        string
	annotations            map[string]string
	mounts                 []*runtimeapi.Mount
	logPath                string
	attempt                uint32
}

func (c fakeCtr) build() *critest.FakeContainer {
	return &critest.FakeContainer{
		SandboxID: c.sandbox,
		ContainerStatus: runtimeapi.ContainerStatus{
			Id:          c.id,
			Metadata:    &runtimeapi.ContainerMetadata{Name: c.name, Attempt: c.attempt},
			State:       c.state,
			CreatedAt:   c.created,
			StartedAt:   c.started,
			FinishedAt:  c.done,
			ExitCode:    c.exitCode,
			Reason:      c.reason,
			Message:     c.message,
			Image:       &runtimeapi.ImageSpec{Image: "busybox:1.36"},
			ImageRef:    "sha256:abc",
			Labels:      map[string]string{podUIDLabel: c.uid, containerNameLabel: c.name, podNameLabel: "web", podNamespaceLabel: "default"},
			Annotations: c.annotations,
			Mounts:      c.mounts,
			LogPath:     c.logPath,
		},
	}
}

func TestGetPodStatus(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	dir := t.TempDir()
	termFile := filepath.Join(dir, "termination-log")
	if err := os.WriteFile(termFile, []byte("boom"), 0o644); err != nil {
		t.Fatal(err)
	}
	logFile := filepath.Join(dir, "0.log")
	logData := "2024-01-01T00:00:00.000000000Z stdout F starting\n2024-01-01T00:00:01.000000000Z stderr F panic: last words\n"
	if err := os.WriteFile(logFile, []byte(logData), 0o644); err != nil {
		t.Fatal(err)
	}
	readFile := map[string]string{
		containerHashAnnotation: "1f", containerRestartCountAnnotation: "2",
		containerTerminationMessagePathAnnotation: "/dev/termination-log", containerTerminationMessagePolicyAnno: "File",
	}
	fallback := map[string]string{
		containerTerminationMessagePathAnnotation: "/dev/termination-log", containerTerminationMessagePolicyAnno: "FallbackToLogsOnError",
	}
	e.runtime.SetFakeSandboxes([]*critest.FakePodSandbox{
		fakeSandbox("sb-old", "uid-1", 0, runtimeapi.PodSandboxState_SANDBOX_NOTREADY, 100, "10.1.0.4"),
		fakeSandbox("sb-new", "uid-1", 1, runtimeapi.PodSandboxState_SANDBOX_READY, 200, "10.1.0.5", "fd00::5", "bogus"),
		fakeSandbox("sb-other", "uid-2", 0, runtimeapi.PodSandboxState_SANDBOX_READY, 300, "10.1.0.6"),
	})
	e.runtime.SetFakeContainers([]*critest.FakeContainer{
		fakeCtr{id: "app-old", uid: "uid-1", name: "app", sandbox: "sb-old", state: runtimeapi.ContainerState_CONTAINER_EXITED,
			created: 100, started: 110, done: 120, exitCode: 1, reason: "Error", annotations: readFile,
			mounts: []*runtimeapi.Mount{{ContainerPath: "/dev/termination-log", HostPath: termFile}}}.build(),
		fakeCtr{id: "app-new", uid: "uid-1", name: "app", sandbox: "sb-new", state: runtimeapi.ContainerState_CONTAINER_RUNNING,
			created: 200, started: 210, annotations: map[string]string{containerRestartCountAnnotation: "3"}}.build(),
		fakeCtr{id: "logger", uid: "uid-1", name: "logger", sandbox: "sb-new", state: runtimeapi.ContainerState_CONTAINER_EXITED,
			created: 150, started: 160, done: 170, exitCode: 2, reason: "Error", message: "oops", annotations: fallback, logPath: logFile}.build(),
		fakeCtr{id: "fresh", uid: "uid-1", name: "fresh", sandbox: "sb-new", state: runtimeapi.ContainerState_CONTAINER_CREATED, created: 250}.build(),
		fakeCtr{id: "elsewhere", uid: "uid-2", name: "app", sandbox: "sb-other", state: runtimeapi.ContainerState_CONTAINER_RUNNING, created: 300}.build(),
	})

	st, err := e.m.GetPodStatus(context.Background(), "uid-1", "web", "default")
	if err != nil {
		t.Fatalf("GetPodStatus: %v", err)
	}
	if st.ID != "uid-1" || st.Name != "web" || st.Namespace != "default" || st.TimeStamp.IsZero() {
		t.Errorf("identity = %+v", st)
	}
	if want := []string{"10.1.0.5", "fd00::5"}; !reflect.DeepEqual(st.IPs, want) {
		t.Errorf("IPs = %v, want %v", st.IPs, want)
	}
	var sbIDs []string
	for _, s := range st.SandboxStatuses {
		sbIDs = append(sbIDs, s.Id)
	}
	if want := []string{"sb-new", "sb-old"}; !reflect.DeepEqual(sbIDs, want) {
		t.Errorf("sandboxes = %v, want %v (newest first)", sbIDs, want)
	}
	var ids []string
	for _, c := range st.ContainerStatuses {
		ids = append(ids, c.ID.ID)
	}
	if want := []string{"fresh", "app-new", "logger", "app-old"}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("containers = %v, want %v (newest first)", ids, want)
	}
	byID := map[string]*kubecontainer.ContainerStatus{}
	for _, c := range st.ContainerStatuses {
		byID[c.ID.ID] = c
	}
	old := byID["app-old"]
	want := &kubecontainer.ContainerStatus{
		ID: kubecontainer.ContainerID{Type: testRuntimeName, ID: "app-old"}, Name: "app", State: kubecontainer.StateExited,
		CreatedAt: time.Unix(0, 100), StartedAt: time.Unix(0, 110), FinishedAt: time.Unix(0, 120), ExitCode: 1,
		Image: "busybox:1.36", ImageID: "sha256:abc", ImageRef: "sha256:abc", Hash: 0x1f, RestartCount: 2,
		Reason: "Error", Message: "boom", SandboxID: "sb-old", TerminationMessagePath: "/dev/termination-log",
	}
	if !reflect.DeepEqual(old, want) {
		t.Errorf("app-old =\n%+v\nwant\n%+v", old, want)
	}
	if c := byID["app-new"]; c.State != kubecontainer.StateRunning || c.RestartCount != 3 || c.StartedAt != time.Unix(0, 210) || !c.FinishedAt.IsZero() {
		t.Errorf("app-new = %+v", c)
	}
	if c := byID["logger"]; c.Message != "oops: starting\npanic: last words\n" {
		t.Errorf("logger message = %q, want the status message and the log tail", c.Message)
	}
	if c := byID["fresh"]; c.State != kubecontainer.StateCreated || !c.StartedAt.IsZero() {
		t.Errorf("fresh = %+v, want created with no start time", c)
	}
	if got := st.FindContainerStatusByName("app"); got == nil || got.ID.ID != "app-new" {
		t.Errorf("FindContainerStatusByName(app) = %+v, want the newest", got)
	}
}

func TestGetPodStatusRaces(t *testing.T) {
	t.Parallel()
	notFound := status.Error(codes.NotFound, "gone")
	tests := []struct {
		desc       string
		call       string
		err        error
		wantErr    bool
		containers int
		sandboxes  int
	}{
		{desc: "container removed after the list", call: "ContainerStatus", err: notFound, containers: 1, sandboxes: 1},
		{desc: "sandbox removed after the list", call: "PodSandboxStatus", err: notFound, containers: 2, sandboxes: 0},
		{desc: "container status fails", call: "ContainerStatus", err: errors.New("timeout"), wantErr: true},
		{desc: "sandbox list fails", call: "ListPodSandbox", err: errors.New("timeout"), wantErr: true},
		{desc: "container list fails", call: "ListContainers", err: errors.New("timeout"), wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			e := newTestEnv(t)
			e.runtime.SetFakeSandboxes([]*critest.FakePodSandbox{fakeSandbox("sb", "uid-1", 0, runtimeapi.PodSandboxState_SANDBOX_READY, 1, "10.1.0.2")})
			e.runtime.SetFakeContainers([]*critest.FakeContainer{
				fakeCtr{id: "c1", uid: "uid-1", name: "a", sandbox: "sb", state: runtimeapi.ContainerState_CONTAINER_RUNNING, created: 1}.build(),
				fakeCtr{id: "c2", uid: "uid-1", name: "b", sandbox: "sb", state: runtimeapi.ContainerState_CONTAINER_RUNNING, created: 2}.build(),
			})
			e.runtime.InjectError(tc.call, tc.err)
			st, err := e.m.GetPodStatus(context.Background(), "uid-1", "web", "default")
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), "timeout") {
					t.Fatalf("GetPodStatus error = %v, want the runtime's", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("GetPodStatus: %v", err)
			}
			if len(st.ContainerStatuses) != tc.containers || len(st.SandboxStatuses) != tc.sandboxes {
				t.Errorf("got %d containers, %d sandboxes; want %d, %d", len(st.ContainerStatuses), len(st.SandboxStatuses), tc.containers, tc.sandboxes)
			}
		})
	}
}

func TestGetPods(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	e.runtime.SetFakeSandboxes([]*critest.FakePodSandbox{
		fakeSandbox("sb1-old", "uid-1", 0, runtimeapi.PodSandboxState_SANDBOX_NOTREADY, 100),
		fakeSandbox("sb1", "uid-1", 1, runtimeapi.PodSandboxState_SANDBOX_READY, 200),
		fakeSandbox("sb2", "uid-2", 0, runtimeapi.PodSandboxState_SANDBOX_NOTREADY, 300),
	})
	e.runtime.SetFakeContainers([]*critest.FakeContainer{
		fakeCtr{id: "a1", uid: "uid-1", name: "a", sandbox: "sb1", state: runtimeapi.ContainerState_CONTAINER_RUNNING, created: 210,
			annotations: map[string]string{containerHashAnnotation: "ff"}}.build(),
		fakeCtr{id: "a0", uid: "uid-1", name: "a", sandbox: "sb1-old", state: runtimeapi.ContainerState_CONTAINER_EXITED, created: 110}.build(),
		fakeCtr{id: "b2", uid: "uid-2", name: "b", sandbox: "sb2", state: runtimeapi.ContainerState_CONTAINER_EXITED, created: 310}.build(),
	})
	summary := func(pods []*kubecontainer.Pod) map[string][]string {
		out := map[string][]string{}
		for _, p := range pods {
			var ids []string
			for _, s := range p.Sandboxes {
				ids = append(ids, "sb:"+s.ID.ID+":"+string(s.State))
			}
			for _, c := range p.Containers {
				ids = append(ids, c.Name+":"+c.ID.ID+":"+string(c.State))
			}
			sort.Strings(ids)
			out[string(p.ID)+"/"+p.Name+"/"+p.Namespace] = ids
		}
		return out
	}
	tests := []struct {
		desc string
		all  bool
		want map[string][]string
	}{
		{desc: "running only", all: false, want: map[string][]string{
			"uid-1/web/default": {"a:a1:running", "sb:sb1:running"},
		}},
		{desc: "all", all: true, want: map[string][]string{
			"uid-1/web/default": {"a:a0:exited", "a:a1:running", "sb:sb1-old:exited", "sb:sb1:running"},
			"uid-2/web/default": {"b:b2:exited", "sb:sb2:exited"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			pods, err := e.m.GetPods(context.Background(), tc.all)
			if err != nil {
				t.Fatalf("GetPods: %v", err)
			}
			if got := summary(pods); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("GetPods = %v, want %v", got, tc.want)
			}
			for _, p := range pods {
				for _, c := range p.Containers {
					if c.ID.Type != testRuntimeName || c.Image != "busybox:1.36" || c.ImageID != "sha256:abc" {
						t.Errorf("container %+v", c)
					}
					if c.ID.ID == "a1" && c.Hash != 0xff {
						t.Errorf("hash of a1 = %x, want ff", c.Hash)
					}
				}
				if p.ID == "uid-1" && p.CreatedAt != 200 && tc.all {
					t.Errorf("CreatedAt = %d, want the newest sandbox's", p.CreatedAt)
				}
			}
		})
	}
}

func TestReadTerminationMessageFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	long := strings.Repeat("x", maxTerminationMessageLength) + "END"
	files := map[string]string{"empty": "", "short": "bye", "long": long}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mount := func(name string) *runtimeapi.ContainerStatus {
		return &runtimeapi.ContainerStatus{Mounts: []*runtimeapi.Mount{{ContainerPath: "/dev/termination-log", HostPath: filepath.Join(dir, name)}}}
	}
	tests := []struct {
		desc      string
		status    *runtimeapi.ContainerStatus
		path      string
		fallback  bool
		want      string
		wantLogs  bool
		wantError bool
	}{
		{desc: "message", status: mount("short"), path: "/dev/termination-log", want: "bye"},
		{desc: "the end of a long message", status: mount("long"), path: "/dev/termination-log", want: long[len(long)-maxTerminationMessageLength:]},
		{desc: "empty with fallback: read the logs", status: mount("empty"), path: "/dev/termination-log", fallback: true, wantLogs: true},
		{desc: "message with fallback: no logs", status: mount("short"), path: "/dev/termination-log", fallback: true, want: "bye"},
		{desc: "missing file with fallback", status: mount("missing"), path: "/dev/termination-log", fallback: true, wantLogs: true},
		{desc: "no such mount", status: mount("short"), path: "/other", want: ""},
		{desc: "no path", status: mount("short"), path: "", want: ""},
		{desc: "unreadable", status: mount(""), path: "/dev/termination-log", wantError: true},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			got, logs := readTerminationMessageFile(tc.status, tc.path, tc.fallback)
			if tc.wantError {
				if !strings.HasPrefix(got, "Error on reading termination log") {
					t.Errorf("message = %q, want an error message", got)
				}
				return
			}
			if got != tc.want || logs != tc.wantLogs {
				t.Errorf("readTerminationMessageFile = %q, %v; want %q, %v", got, logs, tc.want, tc.wantLogs)
			}
		})
	}
}

// TestReadTerminationMessageFileRefusesWhatIsNotAFile (issue 27 item 1): a
// pod can mount a FIFO, a device node or a symlink of its own volume at its
// termination message path (a subPath). None is read: the FIFO would block
// the relist forever, a device node would copy a host disk into the status,
// a symlink would read any host file. Each gives an error message at once.
func TestReadTerminationMessageFileRefusesWhatIsNotAFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(secret, link); err != nil {
		t.Fatal(err)
	}
	for name, hostPath := range map[string]string{"fifo": fifo, "device": "/dev/zero", "symlink": link, "directory": dir} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st := &runtimeapi.ContainerStatus{Mounts: []*runtimeapi.Mount{{ContainerPath: "/dev/termination-log", HostPath: hostPath}}}
			done := make(chan string, 1)
			go func() {
				msg, _ := readTerminationMessageFile(st, "/dev/termination-log", true)
				done <- msg
			}()
			select {
			case msg := <-done:
				if !strings.HasPrefix(msg, "Error on reading termination log") || strings.Contains(msg, "host secret") {
					t.Errorf("message %.80q, want the error message and nothing read", msg)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("reading the termination message blocked")
			}
		})
	}
}
