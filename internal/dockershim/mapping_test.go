package dockershim

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
	"github.com/kubelet-dockershim/kubelet/internal/dockershim/streaming"
)

func TestNames(t *testing.T) {
	t.Parallel()
	sb := &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "u1", Attempt: 2}
	c := &runtimeapi.ContainerMetadata{Name: "nginx", Attempt: 3}
	if got := sandboxName(sb); got != "k8s_POD_web_default_u1_2" {
		t.Errorf("sandboxName = %q", got)
	}
	if got := containerName(c, sb); got != "k8s_nginx_web_default_u1_3" {
		t.Errorf("containerName = %q", got)
	}
	for _, tc := range []struct {
		desc, in string
		want     parsedName
		wantErr  bool
	}{
		{"container", "/k8s_nginx_web_default_u1_3", parsedName{"nginx", "web", "default", "u1", 3}, false},
		{"sandbox", "k8s_POD_web_default_u1_0", parsedName{"POD", "web", "default", "u1", 0}, false},
		{"random suffix (cri-dockerd, 1.23)", "/k8s_nginx_web_default_u1_3_1a2b3c4d", parsedName{"nginx", "web", "default", "u1", 3}, false},
		{"too many fields", "k8s_nginx_web_default_u1_3_1a2b3c4d_x", parsedName{}, true},
		{"not k8s", "/happy_turing", parsedName{}, true},
		{"bad attempt", "k8s_a_b_c_d_x", parsedName{}, true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := parseName(tc.in)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("parseName(%q) = %+v, %v", tc.in, got, err)
			}
		})
	}
}

func TestValidateMetadata(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc  string
		m     *runtimeapi.PodSandboxMetadata
		field string
	}{
		{"nil", nil, "config.metadata"},
		{"no name", &runtimeapi.PodSandboxMetadata{Namespace: "n", Uid: "u"}, "config.metadata.name"},
		{"no namespace", &runtimeapi.PodSandboxMetadata{Name: "a", Uid: "u"}, "config.metadata.namespace"},
		{"slash in uid", &runtimeapi.PodSandboxMetadata{Name: "a", Namespace: "n", Uid: "u/1"}, "config.metadata.uid"},
		{"ok", &runtimeapi.PodSandboxMetadata{Name: "a", Namespace: "n", Uid: "u-1"}, ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			err := validateSandboxMetadata(tc.m)
			if tc.field == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), tc.field+":") {
				t.Fatalf("err = %v, want InvalidArgument naming %s", err, tc.field)
			}
		})
	}
}

func TestLabelsRoundTrip(t *testing.T) {
	t.Parallel()
	docker := makeLabels(map[string]string{"app": "x"}, map[string]string{"a/b": "1"}, map[string]string{labelType: typeSandbox, labelMetadata: "{}"})
	if docker["annotation.a/b"] != "1" || docker[labelManaged] != "true" {
		t.Fatalf("labels = %v", docker)
	}
	docker["from-image"] = "copied by docker"
	l, a := splitLabels(docker)
	if !reflect.DeepEqual(l, map[string]string{"app": "x"}) || !reflect.DeepEqual(a, map[string]string{"a/b": "1"}) {
		t.Fatalf("split = %v %v", l, a)
	}
	if l2, _ := splitLabels(map[string]string{"legacy": "1", labelType: typeContainer}); l2["legacy"] != "1" {
		t.Fatalf("labels of objects without a key list = %v", l2)
	}
	if !matchLabels(map[string]string{"app": "x"}, l) || matchLabels(map[string]string{"app": "y"}, l) || matchLabels(map[string]string{"z": ""}, l) {
		t.Fatal("matchLabels wrong")
	}
}

func TestFilters(t *testing.T) {
	t.Parallel()
	sb := &runtimeapi.PodSandbox{Id: "abcdef", State: runtimeapi.PodSandboxState_SANDBOX_READY, Labels: map[string]string{"a": "1"}}
	for _, tc := range []struct {
		desc string
		f    *runtimeapi.PodSandboxFilter
		want bool
	}{
		{"nil", nil, true},
		{"prefix", &runtimeapi.PodSandboxFilter{Id: "abc"}, true},
		{"other id", &runtimeapi.PodSandboxFilter{Id: "abd"}, false},
		{"state", &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY}}, false},
		{"label", &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"a": "1"}}, true},
	} {
		if got := sandboxMatches(sb, tc.f); got != tc.want {
			t.Errorf("%s: %v", tc.desc, got)
		}
	}
	c := &runtimeapi.Container{Id: "c1", PodSandboxId: "abcdef", State: runtimeapi.ContainerState_CONTAINER_EXITED}
	if !containerMatches(c, &runtimeapi.ContainerFilter{PodSandboxId: "abc"}) || containerMatches(c, &runtimeapi.ContainerFilter{PodSandboxId: "x"}) {
		t.Error("sandbox filter wrong")
	}
	if got := summaryState("dead"); got != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Errorf("summaryState(dead) = %v", got)
	}
	if got := chunks([]int{1, 2, 3, 4, 5}, 2); len(got) != 3 || len(got[2]) != 1 {
		t.Errorf("chunks = %v", got)
	}
}

func TestSecurityOpts(t *testing.T) {
	t.Parallel()
	rd := &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
	unc := &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}
	for _, tc := range []struct {
		desc    string
		in      securityInput
		want    []string
		wantErr bool
	}{
		{"unset seccomp is unconfined", securityInput{}, []string{"seccomp=unconfined"}, false},
		{"runtime default", securityInput{seccomp: rd}, nil, false},
		{"deprecated docker/default", securityInput{seccompPath: "docker/default"}, nil, false},
		{"apparmor localhost", securityInput{seccomp: rd, apparmor: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: "p1"}}, []string{"apparmor=p1"}, false},
		{"apparmor deprecated unconfined", securityInput{seccomp: rd, aaName: "unconfined"}, []string{"apparmor=unconfined"}, false},
		{"selinux + nnp", securityInput{seccomp: unc, selinux: &runtimeapi.SELinuxOption{User: "u", Level: "s0"}, noNewPrivs: true},
			[]string{"seccomp=unconfined", "label=user:u", "label=level:s0", "no-new-privileges"}, false},
		{"privileged skips profiles", securityInput{privileged: true}, nil, false},
		{"missing localhost seccomp", securityInput{seccomp: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: "/nonexistent/profile.json"}}, nil, true},
		{"bad deprecated", securityInput{seccompPath: "weird"}, nil, true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := securityOpts(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v", err)
			}
			if !tc.wantErr && !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestUserAndResources(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc     string
		uid, gid *runtimeapi.Int64Value
		name     string
		want     string
		wantErr  bool
	}{
		{"uid and gid", &runtimeapi.Int64Value{Value: 1000}, &runtimeapi.Int64Value{Value: 2000}, "", "1000:2000", false},
		{"username", nil, nil, "app", "app", false},
		{"username and gid", nil, &runtimeapi.Int64Value{Value: 5}, "app", "app:5", false},
		{"gid alone", nil, &runtimeapi.Int64Value{Value: 5}, "", "", true},
		{"nothing", nil, nil, "", "", false},
	} {
		got, err := dockerUser("sc", tc.uid, tc.name, tc.gid)
		if got != tc.want || (err != nil) != tc.wantErr || (err != nil && !strings.Contains(err.Error(), "sc.run_as_group")) {
			t.Errorf("%s: %q, %v", tc.desc, got, err)
		}
	}
	if got := capNames([]string{"net_admin", "CAP_SYS_TIME", "all"}); !reflect.DeepEqual(got, []string{"CAP_NET_ADMIN", "CAP_SYS_TIME", "ALL"}) {
		t.Errorf("caps = %v", got)
	}
	var hc libdocker.HostConfig
	applyResources(&runtimeapi.LinuxContainerResources{CpuShares: 2, CpuQuota: 50000, CpuPeriod: 100000, MemoryLimitInBytes: 64 << 20, OomScoreAdj: -997}, 0, &hc)
	if hc.CPUShares != 2 || hc.CPUQuota != 50000 || hc.Memory != 64<<20 || hc.MemorySwap != 64<<20 || hc.OomScoreAdj != 0 {
		t.Errorf("resources = %+v", hc.Resources)
	}
	for _, tc := range []struct {
		score int64
		floor int
		want  int
	}{{-998, 0, 0}, {-998, -1000, -998}, {500, 0, 500}, {2000, 0, 1000}} {
		if got := clampOOMScoreAdj(tc.score, tc.floor); got != tc.want {
			t.Errorf("clamp(%d, %d) = %d, want %d", tc.score, tc.floor, got, tc.want)
		}
	}
}

func TestBindsAndMounts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	colon, comma := filepath.Join(dir, "a:b"), filepath.Join(dir, "x,y")
	got, apiMounts, err := hostMounts([]*runtimeapi.Mount{
		{HostPath: "/h", ContainerPath: "/c"},
		{HostPath: "/h2", ContainerPath: "/c2", Readonly: true, SelinuxRelabel: true, Propagation: runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER},
		{HostPath: "/h3", ContainerPath: "/c3", Propagation: runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL},
		{HostPath: colon, ContainerPath: "/c4", Readonly: true, Propagation: runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER},
		{HostPath: comma, ContainerPath: "/c:5"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/h:/c", "/h2:/c2:ro,Z,rslave", "/h3:/c3:rshared"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("binds = %q", got)
	}
	wantMounts := []libdocker.Mount{
		{Type: libdocker.MountTypeBind, Source: colon, Target: "/c4", ReadOnly: true, BindOptions: &libdocker.BindOptions{Propagation: libdocker.PropagationRSlave}},
		{Type: libdocker.MountTypeBind, Source: comma, Target: "/c:5"},
	}
	if !reflect.DeepEqual(apiMounts, wantMounts) {
		t.Fatalf("mounts = %+v", apiMounts)
	}
	for _, p := range []string{colon, comma} {
		if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
			t.Errorf("missing mount source %s not created as a directory: %v", p, err)
		}
	}
	for _, tc := range []struct {
		desc string
		m    *runtimeapi.Mount
		want error
	}{
		{"image", &runtimeapi.Mount{ContainerPath: "/c", Image: &runtimeapi.ImageSpec{Image: "x"}}, ErrUnimplemented},
		{"rro", &runtimeapi.Mount{ContainerPath: "/c", HostPath: "/h", RecursiveReadOnly: true}, ErrUnimplemented},
		{"idmap", &runtimeapi.Mount{ContainerPath: "/c", HostPath: "/h", UidMappings: []*runtimeapi.IDMapping{{}}}, ErrUnimplemented},
		{"no path", &runtimeapi.Mount{HostPath: "/h"}, ErrInvalidArgument},
		{"relative host path (a named volume for Docker)", &runtimeapi.Mount{HostPath: "vol", ContainerPath: "/c"}, ErrInvalidArgument},
		{"relative container path", &runtimeapi.Mount{HostPath: "/h", ContainerPath: "c"}, ErrInvalidArgument},
	} {
		if err := validateMount("m", tc.m); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.desc, err, tc.want)
		}
	}
}

func TestResolvConfAndBandwidth(t *testing.T) {
	t.Parallel()
	got := resolvConf(&runtimeapi.DNSConfig{Servers: []string{"1.1.1.1", "8.8.8.8"}, Searches: []string{"a", "b"}, Options: []string{"ndots:5"}})
	if got != "nameserver 1.1.1.1\nnameserver 8.8.8.8\nsearch a b\noptions ndots:5\n" {
		t.Fatalf("resolv.conf = %q", got)
	}
	bw := bandwidthFromAnnotations(map[string]string{ingressBandwidthAnnotation: "1M", egressBandwidthAnnotation: "bogus"})
	if bw == nil || bw.IngressRate != 1000000 || bw.EgressRate != 0 {
		t.Fatalf("bandwidth = %+v", bw)
	}
	if bandwidthFromAnnotations(nil) != nil {
		t.Fatal("bandwidth without annotations")
	}
}

func TestFillState(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc   string
		ds     *libdocker.ContainerState
		state  runtimeapi.ContainerState
		reason string
	}{
		{"created", &libdocker.ContainerState{Status: "created", StartedAt: "0001-01-01T00:00:00Z", FinishedAt: "0001-01-01T00:00:00Z"}, runtimeapi.ContainerState_CONTAINER_CREATED, ""},
		{"running", &libdocker.ContainerState{Status: "running", Running: true, StartedAt: "2024-01-01T00:00:00Z"}, runtimeapi.ContainerState_CONTAINER_RUNNING, ""},
		{"completed", &libdocker.ContainerState{Status: "exited", StartedAt: "2024-01-01T00:00:00Z", FinishedAt: "2024-01-01T00:00:01Z"}, runtimeapi.ContainerState_CONTAINER_EXITED, "Completed"},
		{"error", &libdocker.ContainerState{Status: "exited", ExitCode: 2, StartedAt: "2024-01-01T00:00:00Z", FinishedAt: "2024-01-01T00:00:01Z"}, runtimeapi.ContainerState_CONTAINER_EXITED, "Error"},
		{"oom", &libdocker.ContainerState{Status: "exited", ExitCode: 137, OOMKilled: true, StartedAt: "2024-01-01T00:00:00Z", FinishedAt: "2024-01-01T00:00:01Z"}, runtimeapi.ContainerState_CONTAINER_EXITED, "OOMKilled"},
		{"cannot run", &libdocker.ContainerState{Status: "exited", ExitCode: 127, Error: "exec: not found", StartedAt: "0001-01-01T00:00:00Z", FinishedAt: "2024-01-01T00:00:01Z"}, runtimeapi.ContainerState_CONTAINER_EXITED, "ContainerCannotRun"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			st := &runtimeapi.ContainerStatus{}
			fillState(st, tc.ds)
			if st.State != tc.state || st.Reason != tc.reason {
				t.Fatalf("state %v reason %q", st.State, st.Reason)
			}
		})
	}
}

func TestToGRPC(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		code codes.Code
	}{
		{invalidArg("f", "bad"), codes.InvalidArgument},
		{fmt.Errorf("wrap: %w", libdocker.ErrNotFound), codes.NotFound},
		{fmt.Errorf("x: %w", streaming.ErrExecTimeout), codes.DeadlineExceeded},
		{unimplemented("no"), codes.Unimplemented},
		{context.Canceled, codes.Canceled},
		{status.Error(codes.Aborted, "kept"), codes.Aborted},
		{errors.New("other"), codes.Unknown},
	} {
		if got := status.Code(ToGRPC(tc.err)); got != tc.code {
			t.Errorf("ToGRPC(%v) = %s, want %s", tc.err, got, tc.code)
		}
	}
	if ToGRPC(nil) != nil {
		t.Error("ToGRPC(nil) != nil")
	}
}

// A client label named annotation.* stays a label when the shim's key list
// says it is one.
func TestSplitLabelsClientAnnotationPrefix(t *testing.T) {
	t.Parallel()
	docker := makeLabels(map[string]string{"annotation.example.com/foo": "l"}, map[string]string{"note": "a"}, nil)
	labels, annotations := splitLabels(docker)
	if labels["annotation.example.com/foo"] != "l" || len(labels) != 1 {
		t.Errorf("labels = %v", labels)
	}
	if annotations["note"] != "a" || len(annotations) != 1 {
		t.Errorf("annotations = %v", annotations)
	}
}
