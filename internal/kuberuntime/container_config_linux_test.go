package kuberuntime

import (
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestContainerSecurityContext(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc     string
		podSC    *v1.PodSecurityContext
		sc       *v1.SecurityContext
		mutate   func(*v1.Pod)
		uid      *int64
		username string
		check    func(*testing.T, *runtimeapi.LinuxContainerSecurityContext)
	}{
		{
			desc: "defaults: image user, unconfined seccomp, no AppArmor, default masked paths",
			uid:  rcPtr(int64(0)),
			check: func(t *testing.T, sc *runtimeapi.LinuxContainerSecurityContext) {
				if sc.GetRunAsUser().GetValue() != 0 || sc.GetRunAsUser() == nil {
					t.Errorf("runAsUser = %v, want 0 from the image", sc.GetRunAsUser())
				}
				if sc.GetSeccomp().GetProfileType() != runtimeapi.SecurityProfile_Unconfined {
					t.Errorf("seccomp = %v", sc.GetSeccomp())
				}
				if sc.GetApparmor() != nil || sc.GetApparmorProfile() != "" {
					t.Errorf("apparmor = %v %q", sc.GetApparmor(), sc.GetApparmorProfile())
				}
				if !reflect.DeepEqual(sc.GetMaskedPaths(), defaultMaskedPaths()) || !reflect.DeepEqual(sc.GetReadonlyPaths(), defaultReadonlyPaths()) {
					t.Errorf("masked %v readonly %v", sc.GetMaskedPaths(), sc.GetReadonlyPaths())
				}
				if len(sc.GetMaskedPaths()) != 11 || len(sc.GetReadonlyPaths()) != 5 {
					t.Errorf("want 11 masked and 5 read-only paths")
				}
				if sc.GetPrivileged() || sc.GetReadonlyRootfs() || sc.GetNoNewPrivs() {
					t.Errorf("privileged/readonly/nonewprivs set: %v", sc)
				}
				ns := sc.GetNamespaceOptions()
				if ns.GetNetwork() != runtimeapi.NamespaceMode_POD || ns.GetPid() != runtimeapi.NamespaceMode_CONTAINER || ns.GetIpc() != runtimeapi.NamespaceMode_POD {
					t.Errorf("namespaces = %v", ns)
				}
			},
		},
		{
			desc:     "non-numeric image user passed as a user name",
			username: "nobody",
			check: func(t *testing.T, sc *runtimeapi.LinuxContainerSecurityContext) {
				if sc.GetRunAsUser() != nil || sc.GetRunAsUsername() != "nobody" {
					t.Errorf("runAsUser %v username %q", sc.GetRunAsUser(), sc.GetRunAsUsername())
				}
			},
		},
		{
			desc:  "pod fields merged, container fields win",
			podSC: &v1.PodSecurityContext{RunAsUser: rcPtr(int64(1000)), RunAsGroup: rcPtr(int64(2000)), SELinuxOptions: &v1.SELinuxOptions{Type: "pod_t"}, FSGroup: rcPtr(int64(3000)), SupplementalGroups: []int64{4000}},
			sc:    &v1.SecurityContext{RunAsUser: rcPtr(int64(1001)), SELinuxOptions: &v1.SELinuxOptions{Type: "ctr_t"}},
			uid:   rcPtr(int64(0)),
			check: func(t *testing.T, sc *runtimeapi.LinuxContainerSecurityContext) {
				if sc.GetRunAsUser().GetValue() != 1001 || sc.GetRunAsGroup().GetValue() != 2000 {
					t.Errorf("runAs %v/%v", sc.GetRunAsUser(), sc.GetRunAsGroup())
				}
				if sc.GetSelinuxOptions().GetType() != "ctr_t" {
					t.Errorf("selinux = %v", sc.GetSelinuxOptions())
				}
				if !reflect.DeepEqual(sc.GetSupplementalGroups(), []int64{3000, 4000}) {
					t.Errorf("groups = %v", sc.GetSupplementalGroups())
				}
			},
		},
		{
			desc: "capabilities, read-only root, no privilege escalation",
			sc: &v1.SecurityContext{
				Capabilities:             &v1.Capabilities{Add: []v1.Capability{"NET_ADMIN"}, Drop: []v1.Capability{"ALL"}},
				ReadOnlyRootFilesystem:   rcPtr(true),
				AllowPrivilegeEscalation: rcPtr(false),
			},
			check: func(t *testing.T, sc *runtimeapi.LinuxContainerSecurityContext) {
				if !reflect.DeepEqual(sc.GetCapabilities().GetAddCapabilities(), []string{"NET_ADMIN"}) ||
					!reflect.DeepEqual(sc.GetCapabilities().GetDropCapabilities(), []string{"ALL"}) {
					t.Errorf("capabilities = %v", sc.GetCapabilities())
				}
				if !sc.GetReadonlyRootfs() || !sc.GetNoNewPrivs() {
					t.Errorf("readonly %v nonewprivs %v", sc.GetReadonlyRootfs(), sc.GetNoNewPrivs())
				}
			},
		},
		{
			desc: "allowPrivilegeEscalation true: no_new_privs off",
			sc:   &v1.SecurityContext{AllowPrivilegeEscalation: rcPtr(true)},
			check: func(t *testing.T, sc *runtimeapi.LinuxContainerSecurityContext) {
				if sc.GetNoNewPrivs() {
					t.Error("no_new_privs set")
				}
			},
		},
		{
			desc: "privileged: nothing masked",
			sc:   &v1.SecurityContext{Privileged: rcPtr(true)},
			check: func(t *testing.T, sc *runtimeapi.LinuxContainerSecurityContext) {
				if !sc.GetPrivileged() || sc.GetMaskedPaths() != nil || sc.GetReadonlyPaths() != nil {
					t.Errorf("privileged %v masked %v readonly %v", sc.GetPrivileged(), sc.GetMaskedPaths(), sc.GetReadonlyPaths())
				}
			},
		},
		{
			desc: "unmasked proc mount: explicitly empty lists",
			sc:   &v1.SecurityContext{ProcMount: rcPtr(v1.UnmaskedProcMount)},
			check: func(t *testing.T, sc *runtimeapi.LinuxContainerSecurityContext) {
				if sc.GetMaskedPaths() == nil || len(sc.GetMaskedPaths()) != 0 || sc.GetReadonlyPaths() == nil || len(sc.GetReadonlyPaths()) != 0 {
					t.Errorf("masked %#v readonly %#v", sc.GetMaskedPaths(), sc.GetReadonlyPaths())
				}
			},
		},
		{
			desc:  "pod seccomp profile, container overrides it",
			podSC: &v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}},
			sc:    &v1.SecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: rcPtr("audit.json")}},
			check: func(t *testing.T, sc *runtimeapi.LinuxContainerSecurityContext) {
				s := sc.GetSeccomp()
				if s.GetProfileType() != runtimeapi.SecurityProfile_Localhost || s.GetLocalhostRef() != "/var/lib/kubelet/seccomp/audit.json" {
					t.Errorf("seccomp = %v", s)
				}
			},
		},
		{
			desc:  "pod RuntimeDefault seccomp",
			podSC: &v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}},
			check: func(t *testing.T, sc *runtimeapi.LinuxContainerSecurityContext) {
				if sc.GetSeccomp().GetProfileType() != runtimeapi.SecurityProfile_RuntimeDefault {
					t.Errorf("seccomp = %v", sc.GetSeccomp())
				}
			},
		},
		{
			desc: "AppArmor field",
			sc:   &v1.SecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost, LocalhostProfile: rcPtr("k8s-deny")}},
			check: func(t *testing.T, sc *runtimeapi.LinuxContainerSecurityContext) {
				if sc.GetApparmor().GetProfileType() != runtimeapi.SecurityProfile_Localhost || sc.GetApparmor().GetLocalhostRef() != "k8s-deny" || sc.GetApparmorProfile() != "localhost/k8s-deny" {
					t.Errorf("apparmor = %v %q", sc.GetApparmor(), sc.GetApparmorProfile())
				}
			},
		},
		{
			desc: "AppArmor annotation",
			mutate: func(p *v1.Pod) {
				p.Annotations = map[string]string{"container.apparmor.security.beta.kubernetes.io/c": "runtime/default"}
			},
			check: func(t *testing.T, sc *runtimeapi.LinuxContainerSecurityContext) {
				if sc.GetApparmor().GetProfileType() != runtimeapi.SecurityProfile_RuntimeDefault || sc.GetApparmorProfile() != "runtime/default" {
					t.Errorf("apparmor = %v %q", sc.GetApparmor(), sc.GetApparmorProfile())
				}
			},
		},
		{
			desc:   "shareProcessNamespace and hostNetwork",
			mutate: func(p *v1.Pod) { p.Spec.ShareProcessNamespace = rcPtr(true); p.Spec.HostNetwork = true },
			check: func(t *testing.T, sc *runtimeapi.LinuxContainerSecurityContext) {
				ns := sc.GetNamespaceOptions()
				if ns.GetPid() != runtimeapi.NamespaceMode_POD || ns.GetNetwork() != runtimeapi.NamespaceMode_NODE {
					t.Errorf("namespaces = %v", ns)
				}
			},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			env := newRCEnv(t)
			pod := rcPod("c")
			pod.Spec.SecurityContext = tc.podSC
			pod.Spec.Containers[0].SecurityContext = tc.sc
			if tc.mutate != nil {
				tc.mutate(pod)
			}
			sc, err := env.m.containerSecurityContext(pod, &pod.Spec.Containers[0], tc.uid, tc.username)
			if err != nil {
				t.Fatalf("containerSecurityContext: %v", err)
			}
			tc.check(t, sc)
		})
	}
}

func TestContainerSecurityContextErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc   string
		sc     *v1.SecurityContext
		annots map[string]string
		want   string
	}{
		{desc: "localhost seccomp without profile", sc: &v1.SecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost}}, want: "localhostProfile must be set"},
		{desc: "unknown seccomp type", sc: &v1.SecurityContext{SeccompProfile: &v1.SeccompProfile{Type: "Bogus"}}, want: "unknown seccomp"},
		{desc: "localhost AppArmor without profile", sc: &v1.SecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost}}, want: "localhostProfile must be set"},
		{desc: "bad AppArmor annotation", annots: map[string]string{"container.apparmor.security.beta.kubernetes.io/c": "weird"}, want: "invalid AppArmor annotation"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			env := newRCEnv(t)
			pod := rcPod("c")
			pod.Annotations = tc.annots
			pod.Spec.Containers[0].SecurityContext = tc.sc
			if _, err := env.m.containerSecurityContext(pod, &pod.Spec.Containers[0], nil, ""); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestContainerResources(t *testing.T) {
	t.Parallel()
	podLevel := rcResources(map[v1.ResourceName]string{rcCPU: "80m", rcMem: "95Mi"}, map[v1.ResourceName]string{rcCPU: "80m", rcMem: "95Mi"})
	for _, tc := range []struct {
		desc               string
		quota              bool
		period             time.Duration
		res                v1.ResourceRequirements
		podLevel           *v1.ResourceRequirements
		shares, cfsQ, cfsP int64
		mem                int64
		oom                int64
	}{
		{desc: "best effort", quota: true, shares: 2, cfsP: 100000, oom: 1000},
		{
			desc: "cpu limit only: shares from the limit", quota: true,
			res:    rcResources(nil, map[v1.ResourceName]string{rcCPU: "2"}),
			shares: 2048, cfsQ: 200000, cfsP: 100000, oom: 999,
		},
		{
			desc: "request only: no quota", quota: true,
			res:    rcResources(map[v1.ResourceName]string{rcCPU: "100m"}, nil),
			shares: 102, cfsQ: 0, cfsP: 100000, oom: 999,
		},
		{
			desc: "guaranteed with a custom period", quota: true, period: 50 * time.Millisecond,
			res:    rcResources(map[v1.ResourceName]string{rcCPU: "1", rcMem: "256Mi"}, map[v1.ResourceName]string{rcCPU: "1", rcMem: "256Mi"}),
			shares: 1024, cfsQ: 50000, cfsP: 50000, mem: 256 << 20, oom: -997,
		},
		{
			desc: "CFS quota disabled", quota: false,
			res:    rcResources(nil, map[v1.ResourceName]string{rcCPU: "1", rcMem: "1Gi"}),
			shares: 1024, mem: 1 << 30, oom: 999,
		},
		{
			desc: "no resources of its own in a pod with pod-level limits: the pod's limits", quota: true,
			podLevel: &podLevel,
			shares:   81, cfsQ: 8000, cfsP: 100000, mem: 95 << 20, oom: -997,
		},
		{
			desc: "its own limits and request beside pod-level limits", quota: true,
			res:      rcResources(map[v1.ResourceName]string{rcCPU: "20m"}, map[v1.ResourceName]string{rcCPU: "30m"}),
			podLevel: &podLevel,
			shares:   20, cfsQ: 3000, cfsP: 100000, mem: 95 << 20, oom: -997,
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			env := newRCEnv(t, func(o *Options) { o.CPUCFSQuota = tc.quota; o.CPUCFSQuotaPeriod = tc.period })
			pod := rcPod("c")
			pod.Spec.Containers[0].Resources = tc.res
			pod.Spec.Resources = tc.podLevel
			r := env.m.containerResources(pod, &pod.Spec.Containers[0])
			if r.GetCpuShares() != tc.shares || r.GetCpuQuota() != tc.cfsQ || r.GetCpuPeriod() != tc.cfsP || r.GetMemoryLimitInBytes() != tc.mem || r.GetOomScoreAdj() != tc.oom {
				t.Errorf("resources = %v, want shares %d quota %d period %d mem %d oom %d", r, tc.shares, tc.cfsQ, tc.cfsP, tc.mem, tc.oom)
			}
		})
	}
}

// A Localhost profile is resolved under the kubelet's <root-dir>/seccomp, not a
// fixed /var/lib/kubelet.
func TestSeccompLocalhostUnderRootDir(t *testing.T) {
	t.Parallel()
	name := "profiles/audit.json"
	got, err := seccompProfile("/srv/kubelet/seccomp", &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: &name}, true)
	if err != nil || got.GetLocalhostRef() != "/srv/kubelet/seccomp/profiles/audit.json" {
		t.Fatalf("seccompProfile = %v, %v", got, err)
	}
}

// seccompDefault: a container that sets no profile gets RuntimeDefault, an
// explicit Unconfined stays.
func TestSeccompDefault(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		p    *v1.SeccompProfile
		def  bool
		want runtimeapi.SecurityProfile_ProfileType
	}{
		{nil, false, runtimeapi.SecurityProfile_Unconfined},
		{nil, true, runtimeapi.SecurityProfile_RuntimeDefault},
		{&v1.SeccompProfile{Type: v1.SeccompProfileTypeUnconfined}, true, runtimeapi.SecurityProfile_Unconfined},
	} {
		got, err := seccompProfile("/r", tc.p, tc.def)
		if err != nil || got.GetProfileType() != tc.want {
			t.Errorf("seccompProfile(%v, %v) = %v %v, want %v", tc.p, tc.def, got, err, tc.want)
		}
	}
}

// On cgroup v2 every container's processes are OOM-killed together
// (memory.oom.group 1, beside MemoryQoS's keys) unless singleProcessOOMKill;
// never on cgroup v1.
func TestContainerResourcesOOMGroup(t *testing.T) {
	t.Parallel()
	qos := MemoryQoS{CgroupV2: true, Enabled: true, ThrottlingFactor: 0.9, AllocatableMemory: 1 << 30}
	for _, tc := range []struct {
		desc  string
		opts  func(*Options)
		group string // "": no memory.oom.group key
		keys  int
	}{
		{"cgroup v2, singleProcessOOMKill false (the default there)", func(o *Options) { o.MemoryQoS = qos; o.OOMGroupKill = true }, "1", 4},
		{"cgroup v2, singleProcessOOMKill true", func(o *Options) { o.MemoryQoS = qos }, "", 3},
		{"cgroup v2 without MemoryQoS", func(o *Options) { o.MemoryQoS = MemoryQoS{CgroupV2: true}; o.OOMGroupKill = true }, "1", 2},
		{"cgroup v1", func(*Options) {}, "", 0},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			env := newRCEnv(t, tc.opts)
			pod := rcPod("c")
			pod.Spec.Containers[0].Resources = rcResources(map[v1.ResourceName]string{rcMem: "32Mi"}, map[v1.ResourceName]string{rcMem: "64Mi"})
			r := env.m.containerResources(pod, &pod.Spec.Containers[0])
			if got, ok := r.GetUnified()["memory.oom.group"]; got != tc.group || ok != (tc.group != "") || len(r.GetUnified()) != tc.keys {
				t.Errorf("unified = %v, want memory.oom.group %q among %d keys", r.GetUnified(), tc.group, tc.keys)
			}
		})
	}
}
