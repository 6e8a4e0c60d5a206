package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
	"k8s.io/utils/ptr"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// Test helpers of the runtime-config files (prefixed rc to keep them apart from the
// other tests of the package).

// rcHelper is a RuntimeHelper returning canned answers.
type rcHelper struct {
	opts        *kubecontainer.RunContainerOptions
	optsErr     error
	cleanups    int
	dns         *runtimeapi.DNSConfig
	dnsErr      error
	cgroup      string
	hostname    string
	domain      string
	extraGroups []int64
	mu          sync.Mutex
}

func (h *rcHelper) GenerateRunContainerOptions(context.Context, *v1.Pod, *v1.Container, string, []string) (*kubecontainer.RunContainerOptions, func(), error) {
	cleanup := func() {
		h.mu.Lock()
		h.cleanups++
		h.mu.Unlock()
	}
	if h.optsErr != nil {
		return nil, cleanup, h.optsErr
	}
	if h.opts == nil {
		return &kubecontainer.RunContainerOptions{}, cleanup, nil
	}
	return h.opts, cleanup, nil
}

func (h *rcHelper) GetPodDNS(*v1.Pod) (*runtimeapi.DNSConfig, error) { return h.dns, h.dnsErr }
func (h *rcHelper) GetPodCgroupParent(*v1.Pod) string                { return h.cgroup }
func (h *rcHelper) GetPodDir(uid k8stypes.UID) string                { return "/pods/" + string(uid) }
func (h *rcHelper) GeneratePodHostNameAndDomain(pod *v1.Pod) (string, string, error) {
	if h.hostname == "" {
		return pod.Name, h.domain, nil
	}
	return h.hostname, h.domain, nil
}
func (h *rcHelper) GetExtraSupplementalGroupsForPod(*v1.Pod) []int64 { return h.extraGroups }

// rcEnv is a Manager over the cri-api fakes and an rcHelper.
type rcEnv struct {
	m        *Manager
	runtime  *critest.FakeRuntimeService
	images   *critest.FakeImageService
	helper   *rcHelper
	recorder *fakeRecorder
	logsDir  string
}

func newRCEnv(t *testing.T, mutate ...func(*Options)) *rcEnv {
	t.Helper()
	env := &rcEnv{
		runtime:  critest.NewFakeRuntimeService(),
		images:   critest.NewFakeImageService(),
		helper:   &rcHelper{dns: &runtimeapi.DNSConfig{Servers: []string{"10.0.0.10"}}},
		recorder: &fakeRecorder{},
		logsDir:  t.TempDir(),
	}
	opts := Options{
		Runtime:             env.runtime,
		Images:              env.images,
		Helper:              env.helper,
		Logger:              zaptest.NewLogger(t),
		Recorder:            env.recorder,
		PodLogsDir:          env.logsDir,
		RuntimeName:         "fake",
		SerializeImagePulls: true,
		CPUCFSQuota:         true,
		MachineMemoryBytes:  8 << 30,
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

// rcPod returns a pod with one container per name.
func rcPod(names ...string) *v1.Pod {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "uid-1",
			Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"note": "x"}},
		Spec: v1.PodSpec{SecurityContext: &v1.PodSecurityContext{}},
	}
	for _, n := range names {
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: n, Image: "busybox:1.36",
			TerminationMessagePath: "/dev/termination-log"})
	}
	return pod
}

func rcPtr[T any](v T) *T { return &v }

func TestGeneratePodSandboxConfigBasics(t *testing.T) {
	t.Parallel()
	env := newRCEnv(t)
	env.helper.cgroup = "/kubepods/besteffort/poduid-1"
	cfg, err := env.m.generatePodSandboxConfig(rcPod("c"), 2)
	if err != nil {
		t.Fatalf("generatePodSandboxConfig: %v", err)
	}
	md := cfg.GetMetadata()
	if md.GetName() != "web" || md.GetNamespace() != "ns" || md.GetUid() != "uid-1" || md.GetAttempt() != 2 {
		t.Errorf("metadata = %v", md)
	}
	if want := filepath.Join(env.logsDir, "ns_web_uid-1"); cfg.GetLogDirectory() != want {
		t.Errorf("log directory = %q, want %q", cfg.GetLogDirectory(), want)
	}
	if cfg.GetHostname() != "web" {
		t.Errorf("hostname = %q", cfg.GetHostname())
	}
	if got := cfg.GetDnsConfig().GetServers(); !reflect.DeepEqual(got, []string{"10.0.0.10"}) {
		t.Errorf("dns servers = %v", got)
	}
	if cfg.Labels["app"] != "web" || cfg.Labels["io.kubernetes.pod.uid"] != "uid-1" || cfg.Annotations["note"] != "x" {
		t.Errorf("labels %v annotations %v", cfg.Labels, cfg.Annotations)
	}
	lc := cfg.GetLinux()
	if lc.GetCgroupParent() != "/kubepods/besteffort/poduid-1" {
		t.Errorf("cgroup parent = %q", lc.GetCgroupParent())
	}
	ns := lc.GetSecurityContext().GetNamespaceOptions()
	if ns.GetNetwork() != runtimeapi.NamespaceMode_POD || ns.GetIpc() != runtimeapi.NamespaceMode_POD || ns.GetPid() != runtimeapi.NamespaceMode_CONTAINER {
		t.Errorf("namespaces = %v", ns)
	}
	if lc.GetSecurityContext().GetSeccomp().GetProfileType() != runtimeapi.SecurityProfile_RuntimeDefault {
		t.Errorf("sandbox seccomp = %v, want RuntimeDefault", lc.GetSecurityContext().GetSeccomp())
	}
	if len(cfg.GetPortMappings()) != 0 {
		t.Errorf("port mappings = %v", cfg.GetPortMappings())
	}
}

func TestGeneratePodSandboxConfigVariants(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc   string
		mutate func(*v1.Pod, *rcHelper)
		check  func(*testing.T, *runtimeapi.PodSandboxConfig)
	}{
		{
			desc: "hostNetwork: no hostname, node network; DNS still set",
			mutate: func(p *v1.Pod, _ *rcHelper) {
				p.Spec.HostNetwork, p.Spec.HostIPC, p.Spec.HostPID = true, true, true
			},
			check: func(t *testing.T, c *runtimeapi.PodSandboxConfig) {
				if c.GetHostname() != "" {
					t.Errorf("hostname = %q, want none", c.GetHostname())
				}
				ns := c.GetLinux().GetSecurityContext().GetNamespaceOptions()
				if ns.GetNetwork() != runtimeapi.NamespaceMode_NODE || ns.GetIpc() != runtimeapi.NamespaceMode_NODE || ns.GetPid() != runtimeapi.NamespaceMode_NODE {
					t.Errorf("namespaces = %v", ns)
				}
				if c.GetDnsConfig() == nil {
					t.Error("no DNS config")
				}
			},
		},
		{
			desc: "shareProcessNamespace: pod pid namespace",
			mutate: func(p *v1.Pod, _ *rcHelper) {
				p.Spec.ShareProcessNamespace = rcPtr(true)
			},
			check: func(t *testing.T, c *runtimeapi.PodSandboxConfig) {
				if pid := c.GetLinux().GetSecurityContext().GetNamespaceOptions().GetPid(); pid != runtimeapi.NamespaceMode_POD {
					t.Errorf("pid = %v", pid)
				}
			},
		},
		{
			desc: "ports: every declared port, repeats dropped, protocols mapped",
			mutate: func(p *v1.Pod, _ *rcHelper) {
				p.Spec.Containers[0].Ports = []v1.ContainerPort{
					{Name: "http", ContainerPort: 80, HostPort: 8080, Protocol: v1.ProtocolTCP, HostIP: "127.0.0.1"},
					{Name: "http", ContainerPort: 81, Protocol: v1.ProtocolTCP}, // same name: dropped
					{ContainerPort: 53, Protocol: v1.ProtocolUDP},
					{ContainerPort: 53, Protocol: v1.ProtocolUDP}, // same tuple: dropped
					{ContainerPort: 9, Protocol: v1.ProtocolSCTP, HostPort: 9},
				}
				p.Spec.Containers[1].Ports = []v1.ContainerPort{{ContainerPort: 53, Protocol: v1.ProtocolUDP}}
			},
			check: func(t *testing.T, c *runtimeapi.PodSandboxConfig) {
				var got []string
				for _, pm := range c.GetPortMappings() {
					got = append(got, fmt.Sprintf("%s %s:%d->%d", pm.Protocol, pm.HostIp, pm.HostPort, pm.ContainerPort))
				}
				want := []string{"TCP 127.0.0.1:8080->80", "UDP :0->53", "SCTP :9->9", "UDP :0->53"}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("port mappings = %v, want %v", got, want)
				}
			},
		},
		{
			desc: "sysctls and pod security context",
			mutate: func(p *v1.Pod, h *rcHelper) {
				p.Spec.SecurityContext = &v1.PodSecurityContext{
					Sysctls:            []v1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "0"}, {Name: "kernel.shm_rmid_forced", Value: "1"}},
					RunAsUser:          rcPtr(int64(1000)),
					RunAsGroup:         rcPtr(int64(2000)),
					FSGroup:            rcPtr(int64(3000)),
					SupplementalGroups: []int64{4000, 4001},
					SELinuxOptions:     &v1.SELinuxOptions{Level: "s0:c1,c2"},
				}
				h.extraGroups = []int64{5000}
			},
			check: func(t *testing.T, c *runtimeapi.PodSandboxConfig) {
				lc := c.GetLinux()
				want := map[string]string{"net.ipv4.ip_unprivileged_port_start": "0", "kernel.shm_rmid_forced": "1"}
				if !reflect.DeepEqual(lc.GetSysctls(), want) {
					t.Errorf("sysctls = %v", lc.GetSysctls())
				}
				sc := lc.GetSecurityContext()
				if sc.GetRunAsUser().GetValue() != 1000 || sc.GetRunAsGroup().GetValue() != 2000 {
					t.Errorf("runAs = %v/%v", sc.GetRunAsUser(), sc.GetRunAsGroup())
				}
				if got := sc.GetSupplementalGroups(); !reflect.DeepEqual(got, []int64{3000, 5000, 4000, 4001}) {
					t.Errorf("supplemental groups = %v", got)
				}
				if sc.GetSelinuxOptions().GetLevel() != "s0:c1,c2" {
					t.Errorf("selinux = %v", sc.GetSelinuxOptions())
				}
				if sc.GetPrivileged() {
					t.Error("privileged without a privileged container")
				}
			},
		},
		{
			desc: "a privileged init container makes the sandbox privileged",
			mutate: func(p *v1.Pod, _ *rcHelper) {
				p.Spec.InitContainers = []v1.Container{{Name: "init", SecurityContext: &v1.SecurityContext{Privileged: rcPtr(true)}}}
			},
			check: func(t *testing.T, c *runtimeapi.PodSandboxConfig) {
				if !c.GetLinux().GetSecurityContext().GetPrivileged() {
					t.Error("sandbox not privileged")
				}
			},
		},
		{
			desc: "setHostnameAsFQDN with a domain",
			mutate: func(p *v1.Pod, h *rcHelper) {
				p.Spec.SetHostnameAsFQDN = rcPtr(true)
				h.hostname, h.domain = "db-0", "db.ns.svc.cluster.local"
			},
			check: func(t *testing.T, c *runtimeapi.PodSandboxConfig) {
				if c.GetHostname() != "db-0.db.ns.svc.cluster.local" {
					t.Errorf("hostname = %q", c.GetHostname())
				}
			},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			env := newRCEnv(t)
			pod := rcPod("a", "b")
			tc.mutate(pod, env.helper)
			cfg, err := env.m.generatePodSandboxConfig(pod, 0)
			if err != nil {
				t.Fatalf("generatePodSandboxConfig: %v", err)
			}
			tc.check(t, cfg)
		})
	}
}

func TestGeneratePodSandboxConfigErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc   string
		mutate func(*v1.Pod, *rcHelper)
		want   string
	}{
		{
			desc:   "DNS error",
			mutate: func(_ *v1.Pod, h *rcHelper) { h.dnsErr = errors.New("bad resolv.conf") },
			want:   "bad resolv.conf",
		},
		{
			desc:   "hostUsers false",
			mutate: func(p *v1.Pod, _ *rcHelper) { p.Spec.HostUsers = ptr.To(false) },
			want:   "can't set `spec.hostUsers: false`: user namespaces are not supported by this kubelet",
		},
		{
			desc: "FQDN too long",
			mutate: func(p *v1.Pod, h *rcHelper) {
				p.Spec.SetHostnameAsFQDN = rcPtr(true)
				h.hostname, h.domain = strings.Repeat("a", 40), strings.Repeat("b", 30)
			},
			want: "too long",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			env := newRCEnv(t)
			pod := rcPod("a")
			tc.mutate(pod, env.helper)
			if _, err := env.m.generatePodSandboxConfig(pod, 0); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestLogPaths(t *testing.T) {
	t.Parallel()
	if got := buildPodLogsDirectory("/var/log/pods", "kube-system", "etcd-node1", "abc"); got != "/var/log/pods/kube-system_etcd-node1_abc" {
		t.Errorf("buildPodLogsDirectory = %q", got)
	}
	if got := buildContainerLogsPath("etcd", 3); got != "etcd/3.log" {
		t.Errorf("buildContainerLogsPath = %q", got)
	}
}
