package kubelet

import (
	"bytes"
	"context"
	"io"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8stypes "k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-streaming/pkg/streaming/portforward"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// fakeStreamingRuntime adds the streaming methods to fakeRuntime and records
// their calls as "<method> <args>".
type fakeStreamingRuntime struct {
	*fakeRuntime
	mu    sync.Mutex
	calls []string
	logs  string
}

func (r *fakeStreamingRuntime) record(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, s)
}

func (r *fakeStreamingRuntime) recorded() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

var testStreamURL = &url.URL{Scheme: "http", Host: "127.0.0.1:1", Path: "/stream"}

func (r *fakeStreamingRuntime) GetExec(_ context.Context, id kubecontainer.ContainerID, cmd []string, stdin, stdout, stderr, tty bool) (*url.URL, error) {
	r.record("exec " + id.ID + " " + strings.Join(cmd, ",") + " " + flags(stdin, stdout, stderr, tty))
	return testStreamURL, nil
}

func (r *fakeStreamingRuntime) GetAttach(_ context.Context, id kubecontainer.ContainerID, stdin, stdout, stderr, tty bool) (*url.URL, error) {
	r.record("attach " + id.ID + " " + flags(stdin, stdout, stderr, tty))
	return testStreamURL, nil
}

func (r *fakeStreamingRuntime) GetPortForward(_ context.Context, uid k8stypes.UID, ports []int32) (*url.URL, error) {
	r.record("portforward " + string(uid))
	return testStreamURL, nil
}

func (r *fakeStreamingRuntime) GetContainerLogs(_ context.Context, id kubecontainer.ContainerID, _ *v1.PodLogOptions, stdout, _ io.Writer) error {
	r.record("logs " + id.String())
	_, err := io.WriteString(stdout, r.logs)
	return err
}

func (r *fakeStreamingRuntime) RunInContainer(_ context.Context, id kubecontainer.ContainerID, cmd []string, _ time.Duration) ([]byte, error) {
	r.record("run " + id.ID + " " + strings.Join(cmd, ","))
	return []byte("output"), nil
}

func (r *fakeStreamingRuntime) CheckpointContainer(_ context.Context, req *runtimeapi.CheckpointContainerRequest) error {
	r.record("checkpoint " + req.ContainerId)
	return nil
}

// flags prints stream flags as e.g. "i-e-" (stdin, stdout, stderr, tty).
func flags(stdin, stdout, stderr, tty bool) string {
	b := []byte("----")
	for i, on := range []bool{stdin, stdout, stderr, tty} {
		if on {
			b[i] = "ioet"[i]
		}
	}
	return string(b)
}

// newServerAPIEnv is a Kubelet over a streaming fake runtime with a running
// pod "default/web" (uid-web; containers "c" and the tty container "t") known
// to both the pod store and the runtime, and its mirror pod (uid-mirror).
func newServerAPIEnv(t *testing.T) (*env, *fakeStreamingRuntime) {
	t.Helper()
	e := newEnv(t)
	rt := e.streaming
	pod := staticPod("web", "uid-web", func(p *v1.Pod) {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "t", Image: "busybox", TTY: true})
	})
	mirror := pod.DeepCopy()
	mirror.UID = "uid-mirror"
	mirror.Annotations = map[string]string{kubecontainer.ConfigMirrorAnnotationKey: "hash", kubecontainer.ConfigSourceAnnotationKey: kubecontainer.APISource}
	e.k.pods.Apply(kubecontainer.PodUpdate{Op: kubecontainer.ADD, Source: kubecontainer.FileSource, Pods: []*v1.Pod{pod}})
	e.k.pods.Apply(kubecontainer.PodUpdate{Op: kubecontainer.ADD, Source: kubecontainer.APISource, Pods: []*v1.Pod{mirror}})
	e.runtime.pods = []*kubecontainer.Pod{{
		ID: "uid-web", Name: "web", Namespace: "default",
		Containers: []*kubecontainer.Container{
			{ID: kubecontainer.ContainerID{Type: "docker", ID: "cid-c"}, Name: "c", Image: "busybox"},
			{ID: kubecontainer.ContainerID{Type: "docker", ID: "cid-t"}, Name: "t", Image: "busybox"},
		},
	}}
	return e, rt
}

func TestServerAPIStreaming(t *testing.T) {
	t.Parallel()
	e, rt := newServerAPIEnv(t)
	ctx := context.Background()
	opts := remotecommand.Options{Stdin: true, Stdout: true}
	tests := []struct {
		desc     string
		call     func() error
		want     string // the recorded runtime call
		notFound bool
	}{
		{desc: "exec", call: func() error {
			_, err := e.k.GetExec(ctx, "default", "web", "", "c", []string{"ls", "/"}, opts)
			return err
		}, want: "exec cid-c ls,/ io--"},
		{desc: "exec with the pod UID", call: func() error {
			_, err := e.k.GetExec(ctx, "default", "web", "uid-web", "c", []string{"true"}, opts)
			return err
		}, want: "exec cid-c true io--"},
		{desc: "exec with the mirror pod UID", call: func() error {
			_, err := e.k.GetExec(ctx, "default", "web", "uid-mirror", "c", []string{"true"}, opts)
			return err
		}, want: "exec cid-c true io--"},
		{desc: "exec with another UID", call: func() error {
			_, err := e.k.GetExec(ctx, "default", "web", "uid-other", "c", []string{"true"}, opts)
			return err
		}, notFound: true},
		{desc: "exec in an unknown pod", call: func() error {
			_, err := e.k.GetExec(ctx, "default", "nope", "", "c", nil, opts)
			return err
		}, notFound: true},
		{desc: "exec in an unknown container", call: func() error {
			_, err := e.k.GetExec(ctx, "default", "web", "", "x", nil, opts)
			return err
		}, notFound: true},
		{desc: "attach takes tty from the spec", call: func() error {
			_, err := e.k.GetAttach(ctx, "default", "web", "", "t", remotecommand.Options{Stdin: true, Stdout: true, TTY: false})
			return err
		}, want: "attach cid-t io-t"},
		{desc: "attach without tty", call: func() error {
			_, err := e.k.GetAttach(ctx, "default", "web", "", "c", remotecommand.Options{Stdout: true, Stderr: true, TTY: true})
			return err
		}, want: "attach cid-c -oe-"},
		{desc: "attach to a container not in the spec", call: func() error {
			_, err := e.k.GetAttach(ctx, "default", "web", "", "x", opts)
			return err
		}, notFound: true},
		{desc: "port-forward", call: func() error {
			_, err := e.k.GetPortForward(ctx, "default", "web", "", portforward.V4Options{Ports: []int32{80}})
			return err
		}, want: "portforward uid-web"},
		{desc: "port-forward to a pod not running", call: func() error {
			_, err := e.k.GetPortForward(ctx, "other", "web", "", portforward.V4Options{})
			return err
		}, notFound: true},
		{desc: "run", call: func() error {
			out, err := e.k.RunInContainer(ctx, "default", "web", "", "c", []string{"echo", "hi"})
			if string(out) != "output" {
				t.Errorf("run output %q", out)
			}
			return err
		}, want: "run cid-c echo,hi"},
		{desc: "checkpoint", call: func() error {
			req := &runtimeapi.CheckpointContainerRequest{}
			err := e.k.CheckpointContainer(ctx, "default", "web", "", "c", req)
			if !strings.HasPrefix(req.Location, e.root+"/checkpoints/checkpoint-web_default-c-") || !strings.HasSuffix(req.Location, ".tar") {
				t.Errorf("checkpoint location %q", req.Location)
			}
			return err
		}, want: "checkpoint cid-c"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			before := len(rt.recorded())
			err := tc.call()
			if tc.notFound {
				if !apierrors.IsNotFound(err) {
					t.Fatalf("error = %v; want NotFound", err)
				}
				if len(rt.recorded()) != before {
					t.Fatalf("the runtime was called: %v", rt.recorded()[before:])
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if calls := rt.recorded(); len(calls) != before+1 || calls[before] != tc.want {
				t.Fatalf("runtime calls %v; want %q last", calls[before:], tc.want)
			}
		})
	}
}

func TestServerAPIPodLookup(t *testing.T) {
	t.Parallel()
	e, _ := newServerAPIEnv(t)
	if p, ok := e.k.GetPodByName("default", "web"); !ok || p.UID != "uid-web" {
		t.Fatalf("GetPodByName = %v, %v; want the static pod", p, ok)
	}
	if _, ok := e.k.GetPodByName("default", "nope"); ok {
		t.Fatal("GetPodByName found an unknown pod")
	}
	pods, err := e.k.GetRunningPods(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 1 || pods[0].Name != "web" || pods[0].UID != "uid-web" || len(pods[0].Spec.Containers) != 2 ||
		pods[0].Spec.Containers[1].Name != "t" || pods[0].Spec.Containers[1].Image != "busybox" {
		t.Fatalf("running pods %+v", pods)
	}
}

func TestServerAPIContainerLogs(t *testing.T) {
	t.Parallel()
	e, rt := newServerAPIEnv(t)
	rt.logs = "hello\n"
	pod, _ := e.k.GetPodByName("default", "web")
	e.k.status.SetPodStatus(pod, v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{
		Name: "c", ContainerID: "docker://cid-c2",
		State:                v1.ContainerState{Running: &v1.ContainerStateRunning{}},
		LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ContainerID: "docker://cid-c1"}},
	}}})
	var out bytes.Buffer
	if err := e.k.GetContainerLogs(context.Background(), "default", "web", "c", &v1.PodLogOptions{}, &out, &out); err != nil {
		t.Fatal(err)
	}
	if err := e.k.GetContainerLogs(context.Background(), "default", "web", "c", &v1.PodLogOptions{Previous: true}, &out, &out); err != nil {
		t.Fatal(err)
	}
	if calls := rt.recorded(); strings.Join(calls, ";") != "logs docker://cid-c2;logs docker://cid-c1" || out.String() != "hello\nhello\n" {
		t.Fatalf("calls %v, output %q", calls, out.String())
	}
	err := e.k.GetContainerLogs(context.Background(), "default", "nope", "c", nil, &out, &out)
	if !apierrors.IsNotFound(err) {
		t.Fatalf("unknown pod: %v; want NotFound", err)
	}
	err = e.k.GetContainerLogs(context.Background(), "default", "web", "t", nil, &out, &out)
	if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "not available") {
		t.Fatalf("container without status: %v; want BadRequest", err)
	}
}

func TestLogContainerID(t *testing.T) {
	t.Parallel()
	running := v1.ContainerState{Running: &v1.ContainerStateRunning{}}
	term := func(id string) v1.ContainerState {
		return v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ContainerID: id}}
	}
	tests := []struct {
		desc     string
		status   v1.ContainerStatus
		init     bool
		previous bool
		want     string
		wantErr  string
	}{
		{desc: "running", status: v1.ContainerStatus{ContainerID: "docker://a", State: running}, want: "a"},
		{desc: "running init container", init: true, status: v1.ContainerStatus{ContainerID: "docker://a", State: running}, want: "a"},
		{desc: "previous", previous: true, status: v1.ContainerStatus{ContainerID: "docker://b", State: running, LastTerminationState: term("docker://a")}, want: "a"},
		{desc: "previous without one", previous: true, status: v1.ContainerStatus{ContainerID: "docker://b", State: running}, wantErr: "previous terminated container"},
		{desc: "terminated", status: v1.ContainerStatus{State: term("docker://a")}, want: "a"},
		{desc: "terminated without ID falls back to the last", status: v1.ContainerStatus{State: term(""), LastTerminationState: term("docker://z")}, want: "z"},
		{desc: "terminated without any ID", status: v1.ContainerStatus{State: term("")}, wantErr: "is terminated"},
		{desc: "waiting after a crash", status: v1.ContainerStatus{State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}, LastTerminationState: term("docker://a")}, want: "a"},
		{desc: "image pull", status: v1.ContainerStatus{State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}, wantErr: "trying and failing to pull image"},
		{desc: "creating", status: v1.ContainerStatus{State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}}, wantErr: "waiting to start: ContainerCreating"},
		{desc: "no state", status: v1.ContainerStatus{}, wantErr: "no logs yet"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			tc.status.Name = "c"
			st := &v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{tc.status}}
			if tc.init {
				st = &v1.PodStatus{InitContainerStatuses: []v1.ContainerStatus{tc.status}}
			}
			id, err := logContainerID("web", st, "c", tc.previous)
			if tc.wantErr != "" {
				if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v; want BadRequest %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || id.ID != tc.want || id.Type != "docker" {
				t.Fatalf("id %v, err %v; want %s", id, err, tc.want)
			}
		})
	}
}
