package prober

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilexec "k8s.io/utils/exec"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/eventtest"
)

func TestExecProbe(t *testing.T) {
	t.Parallel()
	id := kubecontainer.ContainerID{Type: "docker", ID: "abc"}
	for _, tc := range []struct {
		desc       string
		runner     *fakeRunner
		want       Result
		wantErr    bool
		wantCalls  int
		wantEvent  string // substring of the only event; "" = no event
		wantCmd    []string
		probeTypes ProbeType
	}{
		{
			desc:      "exit 0 is success",
			runner:    &fakeRunner{out: []byte("fine")},
			want:      Success,
			wantCalls: 1,
		},
		{
			desc:      "non-zero exit is failure with the output in the event",
			runner:    &fakeRunner{out: []byte("boom"), err: utilexec.CodeExitError{Err: errors.New("exit 1"), Code: 1}},
			want:      Failure,
			wantCalls: 1,
			wantEvent: "Warning Unhealthy Liveness probe failed: boom",
		},
		{
			desc:      "wrapped exit error is failure",
			runner:    &fakeRunner{out: []byte("x"), err: errors.Join(errors.New("exec"), utilexec.CodeExitError{Err: errors.New("exit 2"), Code: 2})},
			want:      Failure,
			wantCalls: 1,
			wantEvent: "Liveness probe failed: x",
		},
		{
			desc:      "runtime reports a timeout",
			runner:    &fakeRunner{err: errors.New(`command "sleep 9" timed out after 1s`)},
			want:      Failure,
			wantCalls: 1,
			wantEvent: "timed out",
		},
		{
			desc:      "runner does not return before the deadline",
			runner:    &fakeRunner{block: true},
			want:      Failure,
			wantCalls: 1,
			wantEvent: "timed out",
		},
		{
			desc:      "other runner errors are retried and reported as errors",
			runner:    &fakeRunner{err: errors.New("container not found")},
			want:      Failure,
			wantErr:   true,
			wantCalls: maxProbeRetries,
			wantEvent: "Liveness probe errored: exec probe in docker://abc: container not found",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			ev := &eventtest.Recorder{}
			p := newProber(tc.runner, ev, zaptest.NewLogger(t))
			p.timeoutUnit = 200 * time.Millisecond
			c := &v1.Container{Name: "c", LivenessProbe: execProbe(nil)}
			got, err := p.probe(context.Background(), Liveness, testPod("u"), &v1.PodStatus{}, c, id)
			if got != tc.want || (err != nil) != tc.wantErr {
				t.Fatalf("probe = %v, %v; want %v, err %v", got, err, tc.want, tc.wantErr)
			}
			if tc.runner.calls != tc.wantCalls {
				t.Errorf("runner calls = %d, want %d", tc.runner.calls, tc.wantCalls)
			}
			if tc.runner.id != id || tc.runner.tmo != 200*time.Millisecond || !tc.runner.hasDDL {
				t.Errorf("runner got id %v timeout %v deadline %v", tc.runner.id, tc.runner.tmo, tc.runner.hasDDL)
			}
			checkEvents(t, ev.Strings(), tc.wantEvent)
		})
	}
}

func checkEvents(t *testing.T, got []string, want string) {
	t.Helper()
	if want == "" {
		if len(got) != 0 {
			t.Errorf("events = %q, want none", got)
		}
		return
	}
	if len(got) != 1 || !strings.Contains(got[0], want) {
		t.Errorf("events = %q, want one containing %q", got, want)
	}
}

func TestExecProbeExpandsStaticEnv(t *testing.T) {
	t.Parallel()
	r := &fakeRunner{}
	p := newProber(r, nil, zaptest.NewLogger(t))
	c := &v1.Container{
		Name: "c",
		Env: []v1.EnvVar{
			{Name: "FILE", Value: "/tmp/healthy"},
			{Name: "FROM", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		},
		ReadinessProbe: execProbe(func(pr *v1.Probe) {
			pr.Exec.Command = []string{"cat", "$(FILE)", "$(FROM)", "$$(FILE)", "$(MISSING)"}
		}),
	}
	if got, err := p.probe(context.Background(), Readiness, testPod("u"), &v1.PodStatus{}, c, kubecontainer.ContainerID{Type: "docker", ID: "x"}); got != Success || err != nil {
		t.Fatalf("probe = %v, %v", got, err)
	}
	want := []string{"cat", "/tmp/healthy", "$(FROM)", "$(FILE)", "$(MISSING)"}
	if !reflect.DeepEqual(r.cmd, want) {
		t.Errorf("cmd = %q, want %q", r.cmd, want)
	}
}

func TestExecProbeWithoutRunner(t *testing.T) {
	t.Parallel()
	p := newProber(nil, nil, zaptest.NewLogger(t))
	c := &v1.Container{Name: "c", LivenessProbe: execProbe(nil)}
	_, err := p.probe(context.Background(), Liveness, testPod("u"), &v1.PodStatus{}, c, kubecontainer.ContainerID{Type: "docker", ID: "x"})
	if !errors.Is(err, ErrNoRunner) {
		t.Fatalf("err = %v, want ErrNoRunner", err)
	}
}

func TestProbeWithoutHandler(t *testing.T) {
	t.Parallel()
	p := newProber(&fakeRunner{}, nil, zaptest.NewLogger(t))
	c := &v1.Container{Name: "c", LivenessProbe: &v1.Probe{}}
	_, err := p.probe(context.Background(), Liveness, testPod("u"), &v1.PodStatus{}, c, kubecontainer.ContainerID{Type: "docker", ID: "x"})
	if !errors.Is(err, ErrNoHandler) {
		t.Fatalf("err = %v, want ErrNoHandler", err)
	}
	// A container without the probe type at all passes.
	if got, err := p.probe(context.Background(), Readiness, testPod("u"), &v1.PodStatus{}, c, kubecontainer.ContainerID{}); got != Success || err != nil {
		t.Fatalf("missing probe = %v, %v; want Success", got, err)
	}
}

func TestResolvePort(t *testing.T) {
	t.Parallel()
	c := &v1.Container{Name: "c", Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "zero"}}}
	for _, tc := range []struct {
		desc    string
		port    intstr.IntOrString
		want    int
		wantErr bool
	}{
		{desc: "number", port: intstr.FromInt32(80), want: 80},
		{desc: "name", port: intstr.FromString("http"), want: 8080},
		{desc: "unknown name", port: intstr.FromString("grpc"), wantErr: true},
		{desc: "zero", port: intstr.FromInt32(0), wantErr: true},
		{desc: "named zero", port: intstr.FromString("zero"), wantErr: true},
		{desc: "too large", port: intstr.FromInt32(70000), wantErr: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			got, err := resolvePort(tc.port, c)
			if tc.wantErr {
				if !errors.Is(err, ErrBadPort) {
					t.Fatalf("err = %v, want ErrBadPort", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("resolvePort = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

func TestExpand(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"A": "1", "B": "two"}
	for _, tc := range []struct{ desc, in, want string }{
		{desc: "plain", in: "abc", want: "abc"},
		{desc: "one var", in: "$(A)", want: "1"},
		{desc: "vars inside text", in: "x$(A)y$(B)z", want: "x1ytwoz"},
		{desc: "escaped", in: "$$(A)", want: "$(A)"},
		{desc: "unknown stays", in: "$(C)", want: "$(C)"},
		{desc: "empty name stays", in: "$()", want: "$()"},
		{desc: "unterminated", in: "a$(A", want: "a$(A"},
		{desc: "lone dollar", in: "a$b$", want: "a$b$"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			if got := kubecontainer.Expand(tc.in, func(n string) (string, bool) { v, ok := vars[n]; return v, ok }); got != tc.want {
				t.Errorf("Expand(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
