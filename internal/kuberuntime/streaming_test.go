package kuberuntime

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// streamRuntime answers the streaming RPCs with a URL and records the requests
// (the cri-api fake answers them with an empty response).
type streamRuntime struct {
	*critest.FakeRuntimeService
	url string

	mu       sync.Mutex
	execs    []*runtimeapi.ExecRequest
	attaches []*runtimeapi.AttachRequest
	forwards []*runtimeapi.PortForwardRequest
}

func (r *streamRuntime) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	if _, err := r.FakeRuntimeService.Exec(ctx, req); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.execs = append(r.execs, req)
	return &runtimeapi.ExecResponse{Url: r.url}, nil
}

func (r *streamRuntime) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	if _, err := r.FakeRuntimeService.Attach(ctx, req); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attaches = append(r.attaches, req)
	return &runtimeapi.AttachResponse{Url: r.url}, nil
}

func (r *streamRuntime) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	if _, err := r.FakeRuntimeService.PortForward(ctx, req); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forwards = append(r.forwards, req)
	return &runtimeapi.PortForwardResponse{Url: r.url}, nil
}

func newStreamEnv(t *testing.T, url string) (*Manager, *streamRuntime, string) {
	t.Helper()
	rt := &streamRuntime{FakeRuntimeService: critest.NewFakeRuntimeService(), url: url}
	var logsDir string
	env := newTestEnv(t, func(o *Options) { o.Runtime = rt; logsDir = o.PodLogsDir })
	return env.m, rt, logsDir
}

func TestGetExecAndAttach(t *testing.T) {
	t.Parallel()
	id := kubecontainer.ContainerID{Type: testRuntimeName, ID: "c1"}
	tests := []struct {
		desc    string
		url     string
		inject  error
		wantErr string
	}{
		{desc: "absolute URL", url: "http://127.0.0.1:4000/exec/tok"},
		{desc: "empty URL", url: "", wantErr: "no streaming URL"},
		{desc: "relative URL", url: "/exec/tok", wantErr: "not an absolute http(s) URL"},
		{desc: "runtime error", url: "http://x/y", inject: grpcstatus.Error(codes.NotFound, "no such container"), wantErr: "no such container"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			m, rt, _ := newStreamEnv(t, tc.url)
			if tc.inject != nil {
				rt.InjectError("Exec", tc.inject)
				rt.InjectError("Attach", tc.inject)
			}
			ctx := context.Background()
			u, err := m.GetExec(ctx, id, []string{"sh", "-c", "true"}, true, true, false, true)
			u2, err2 := m.GetAttach(ctx, id, false, true, true, false)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || err2 == nil || !strings.Contains(err2.Error(), tc.wantErr) {
					t.Fatalf("errors = %v, %v; want %q", err, err2, tc.wantErr)
				}
				if tc.inject != nil && grpcstatus.Code(err) != codes.NotFound {
					t.Fatalf("the gRPC code is lost: %v", err)
				}
				return
			}
			if err != nil || err2 != nil {
				t.Fatalf("GetExec/GetAttach: %v, %v", err, err2)
			}
			if u.String() != tc.url || u2.String() != tc.url {
				t.Fatalf("URLs %s, %s; want %s", u, u2, tc.url)
			}
			e, a := rt.execs[0], rt.attaches[0]
			if e.ContainerId != "c1" || strings.Join(e.Cmd, " ") != "sh -c true" || !e.Stdin || !e.Stdout || e.Stderr || !e.Tty {
				t.Fatalf("exec request %+v", e)
			}
			if a.ContainerId != "c1" || a.Stdin || !a.Stdout || !a.Stderr || a.Tty {
				t.Fatalf("attach request %+v", a)
			}
		})
	}
}

func TestGetPortForward(t *testing.T) {
	t.Parallel()
	sandbox := func(id string, state runtimeapi.PodSandboxState, created int64) *critest.FakePodSandbox {
		return &critest.FakePodSandbox{PodSandboxStatus: runtimeapi.PodSandboxStatus{
			Id: id, State: state, CreatedAt: created,
			Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "ns", Uid: "uid-1"},
			Labels:   map[string]string{podUIDLabel: "uid-1"},
		}}
	}
	tests := []struct {
		desc      string
		sandboxes []*critest.FakePodSandbox
		want      string // sandbox ID forwarded to
		wantErr   string
	}{
		{desc: "newest ready sandbox", sandboxes: []*critest.FakePodSandbox{
			sandbox("old", runtimeapi.PodSandboxState_SANDBOX_READY, 1),
			sandbox("new", runtimeapi.PodSandboxState_SANDBOX_READY, 2),
			sandbox("dead", runtimeapi.PodSandboxState_SANDBOX_NOTREADY, 3),
		}, want: "new"},
		{desc: "no ready sandbox", sandboxes: []*critest.FakePodSandbox{
			sandbox("dead", runtimeapi.PodSandboxState_SANDBOX_NOTREADY, 3),
		}, wantErr: "no ready sandbox"},
		{desc: "no sandbox at all", wantErr: "no ready sandbox"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			m, rt, _ := newStreamEnv(t, "http://127.0.0.1:4000/portforward/tok")
			rt.SetFakeSandboxes(tc.sandboxes)
			u, err := m.GetPortForward(context.Background(), "uid-1", []int32{8080})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v; want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if u.Path != "/portforward/tok" || len(rt.forwards) != 1 || rt.forwards[0].PodSandboxId != tc.want ||
				len(rt.forwards[0].Port) != 1 || rt.forwards[0].Port[0] != 8080 {
				t.Fatalf("url %s, requests %+v; want sandbox %s", u, rt.forwards, tc.want)
			}
		})
	}
}

func TestGetContainerLogs(t *testing.T) {
	t.Parallel()
	m, rt, logsDir := newStreamEnv(t, "")
	inside := filepath.Join(logsDir, "ns_web_uid-1", "app", "0.log")
	if err := os.MkdirAll(filepath.Dir(inside), 0o755); err != nil {
		t.Fatal(err)
	}
	content := "2025-01-01T00:00:00.000000001Z stdout F one\n" +
		"2025-01-01T00:00:01.000000001Z stderr F two\n" +
		"2025-01-01T00:00:02.000000001Z stdout F three\n"
	if err := os.WriteFile(inside, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "secret.log")
	if err := os.WriteFile(outside, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	container := func(id, path string) *critest.FakeContainer {
		return &critest.FakeContainer{ContainerStatus: runtimeapi.ContainerStatus{
			Id: id, LogPath: path, State: runtimeapi.ContainerState_CONTAINER_EXITED,
			Metadata: &runtimeapi.ContainerMetadata{Name: id},
		}}
	}
	rt.SetFakeContainers([]*critest.FakeContainer{
		container("inside", inside),
		container("outside", outside),
		container("escape", filepath.Join(logsDir, "..", filepath.Base(filepath.Dir(outside)), "secret.log")),
		container("dotdot", logsDir+"/ns_web_uid-1/../../etc/passwd"),
		container("dir", filepath.Join(logsDir, "ns_web_uid-1")),
		container("nolog", ""),
	})
	tail1 := int64(1)
	tests := []struct {
		desc       string
		id         string
		opts       *v1.PodLogOptions
		wantOut    string
		wantErr    string
		wantOutErr error
	}{
		{desc: "all", id: "inside", wantOut: "one\ntwo\nthree\n"},
		{desc: "tail", id: "inside", opts: &v1.PodLogOptions{TailLines: &tail1}, wantOut: "three\n"},
		{desc: "since time", id: "inside", opts: &v1.PodLogOptions{SinceTime: &metav1.Time{Time: time.Date(2025, 1, 1, 0, 0, 1, 0, time.UTC)}}, wantOut: "two\nthree\n"},
		{desc: "outside the logs dir", id: "outside", wantOutErr: ErrLogPathOutsideLogsDir},
		{desc: "escape through ..", id: "escape", wantOutErr: ErrLogPathOutsideLogsDir},
		{desc: "dot-dot inside the path", id: "dotdot", wantOutErr: ErrLogPathOutsideLogsDir},
		{desc: "a directory", id: "dir", wantOutErr: ErrLogPathOutsideLogsDir},
		{desc: "no log path", id: "nolog", wantErr: "no log path"},
		{desc: "unknown container", id: "gone", wantErr: "unable to retrieve container logs"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			var out bytes.Buffer
			err := m.GetContainerLogs(context.Background(), kubecontainer.ContainerID{Type: testRuntimeName, ID: tc.id}, tc.opts, &out, &out)
			switch {
			case tc.wantOutErr != nil:
				if !errors.Is(err, tc.wantOutErr) {
					t.Fatalf("error = %v; want %v", err, tc.wantOutErr)
				}
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v; want %q", err, tc.wantErr)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
			}
			if out.String() != tc.wantOut {
				t.Fatalf("output %q; want %q", out.String(), tc.wantOut)
			}
		})
	}
}

func TestLogOptionsFromPodLogOptions(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	i64 := func(v int64) *int64 { return &v }
	earlier := metav1.NewTime(now.Add(-time.Hour))
	later := metav1.NewTime(now.Add(-time.Minute))
	tests := []struct {
		desc string
		in   *v1.PodLogOptions
		want LogOptions
	}{
		{desc: "nil", in: nil, want: LogOptions{Tail: -1}},
		{desc: "empty", in: &v1.PodLogOptions{}, want: LogOptions{Tail: -1}},
		{desc: "tail zero", in: &v1.PodLogOptions{TailLines: i64(0)}, want: LogOptions{Tail: 0}},
		{desc: "everything", in: &v1.PodLogOptions{TailLines: i64(5), LimitBytes: i64(10), Follow: true, Timestamps: true, SinceSeconds: i64(30)},
			want: LogOptions{Tail: 5, LimitBytes: 10, Follow: true, Timestamps: true, Since: now.Add(-30 * time.Second)}},
		{desc: "sinceTime later than sinceSeconds", in: &v1.PodLogOptions{SinceSeconds: i64(7200), SinceTime: &later},
			want: LogOptions{Tail: -1, Since: later.Time}},
		{desc: "sinceSeconds later than sinceTime", in: &v1.PodLogOptions{SinceSeconds: i64(10), SinceTime: &earlier},
			want: LogOptions{Tail: -1, Since: now.Add(-10 * time.Second)}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			got := LogOptionsFromPodLogOptions(tc.in, now)
			if got.Tail != tc.want.Tail || got.LimitBytes != tc.want.LimitBytes || got.Follow != tc.want.Follow ||
				got.Timestamps != tc.want.Timestamps || !got.Since.Equal(tc.want.Since) {
				t.Fatalf("got %+v; want %+v", *got, tc.want)
			}
		})
	}
}

func TestCheckpointContainer(t *testing.T) {
	t.Parallel()
	m, rt, _ := newStreamEnv(t, "")
	req := &runtimeapi.CheckpointContainerRequest{ContainerId: "c1", Location: "/tmp/x.tar"}
	if err := m.CheckpointContainer(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	rt.InjectError("CheckpointContainer", grpcstatus.Error(codes.Unimplemented, "no CRIU"))
	err := m.CheckpointContainer(context.Background(), req)
	if grpcstatus.Code(err) != codes.Unimplemented || !strings.Contains(err.Error(), "c1") {
		t.Fatalf("error = %v; want a wrapped Unimplemented naming the container", err)
	}
}
