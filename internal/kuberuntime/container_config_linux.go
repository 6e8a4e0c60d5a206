package kuberuntime

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/cgroups"
	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

const (
	// appArmorAnnotationPrefix is the deprecated per-container AppArmor annotation.
	appArmorAnnotationPrefix = "container.apparmor.security.beta.kubernetes.io/"
	// selinuxMagic is the filesystem type of a mounted selinuxfs.
	selinuxMagic = 0xf97cff8c
)

// defaultMaskedPaths returns the /proc and /sys paths hidden in unprivileged
// containers with the Default proc mount.
func defaultMaskedPaths() []string {
	return []string{
		"/proc/asound", "/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
		"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi",
		"/sys/firmware", "/sys/devices/virtual/powercap",
	}
}

// defaultReadonlyPaths returns the /proc paths made read-only in unprivileged
// containers with the Default proc mount.
func defaultReadonlyPaths() []string {
	return []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
}

// generateLinuxContainerConfig builds the Linux part of a container config: resources
// and the effective security context. uid and username are the image's user.
func (m *Manager) generateLinuxContainerConfig(container *v1.Container, pod *v1.Pod, uid *int64, username string) (*runtimeapi.LinuxContainerConfig, error) {
	sc, err := m.containerSecurityContext(pod, container, uid, username)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.LinuxContainerConfig{
		Resources:       m.containerResources(pod, container),
		SecurityContext: sc,
	}, nil
}

// containerResources computes cpu shares (from the cpu request, or from the limit
// without a request), the CFS quota and period (when enabled), the memory limit and
// the OOM score adjustment of a container, and on cgroup v2 its MemoryQoS
// keys (MemoryQoS.unified) and, unless singleProcessOOMKill, memory.oom.group
// (OOMGroupKill); its swap (configureSwap). The limits are the effective ones: a
// container without a cpu or memory limit of its own gets its pod's pod-level
// limit (kubecontainer.EffectiveResources).
func (m *Manager) containerResources(pod *v1.Pod, container *v1.Container) *runtimeapi.LinuxContainerResources {
	r := &runtimeapi.LinuxContainerResources{}
	res := kubecontainer.EffectiveResources(pod.Spec.Resources, container.Resources)
	cpuLimit := res.Limits.Cpu().MilliValue()
	if req, ok := res.Requests[v1.ResourceCPU]; ok {
		r.CpuShares = int64(cgroups.MilliCPUToShares(milliValue(&req)))
	} else {
		r.CpuShares = int64(cgroups.MilliCPUToShares(cpuLimit))
	}
	if mem := res.Limits.Memory().Value(); mem != 0 {
		r.MemoryLimitInBytes = mem
	}
	if m.cpuCFSQuota {
		period := int64(m.cpuCFSQuotaPeriod / time.Microsecond)
		if period <= 0 {
			period = cgroups.QuotaPeriod
		}
		r.CpuPeriod = period
		r.CpuQuota = cgroups.MilliCPUToQuota(cpuLimit, period)
	}
	r.OomScoreAdj = int64(GetContainerOOMScoreAdjust(pod, container, m.machineMemory))
	r.Unified = m.memoryQoS.unified(pod, container)
	if m.oomGroupKill {
		if r.Unified == nil {
			r.Unified = map[string]string{}
		}
		r.Unified[cgroups.MemoryOOMGroup] = "1"
	}
	m.configureSwap(pod, container, r)
	return r
}

// containerSecurityContext converts the container's effective security context (see
// effectiveSecurityContext) to CRI's and adds what the kubelet decides: the image's
// user when none is set, seccomp and AppArmor profiles, namespaces, supplemental
// groups, no_new_privs and the masked and read-only /proc paths.
func (m *Manager) containerSecurityContext(pod *v1.Pod, container *v1.Container, uid *int64, username string) (*runtimeapi.LinuxContainerSecurityContext, error) {
	eff := effectiveSecurityContext(pod, container)
	sc := &runtimeapi.LinuxContainerSecurityContext{
		Capabilities:       toRuntimeCapabilities(eff.Capabilities),
		SelinuxOptions:     toRuntimeSELinuxOption(eff.SELinuxOptions),
		Privileged:         eff.Privileged != nil && *eff.Privileged,
		ReadonlyRootfs:     eff.ReadOnlyRootFilesystem != nil && *eff.ReadOnlyRootFilesystem,
		NamespaceOptions:   namespacesForPod(pod),
		SupplementalGroups: m.podSupplementalGroups(pod),
		NoNewPrivs:         eff.AllowPrivilegeEscalation != nil && !*eff.AllowPrivilegeEscalation,
	}
	switch {
	case eff.RunAsUser != nil:
		sc.RunAsUser = &runtimeapi.Int64Value{Value: *eff.RunAsUser}
	case uid != nil:
		sc.RunAsUser = &runtimeapi.Int64Value{Value: *uid}
	default:
		sc.RunAsUsername = username
	}
	if eff.RunAsGroup != nil {
		sc.RunAsGroup = &runtimeapi.Int64Value{Value: *eff.RunAsGroup}
	}

	seccomp, err := seccompProfile(m.seccompRoot, eff.SeccompProfile, m.seccompDefault)
	if err != nil {
		return nil, err
	}
	sc.Seccomp = seccomp
	apparmor, apparmorName, err := appArmorProfile(pod, container.Name, eff.AppArmorProfile)
	if err != nil {
		return nil, err
	}
	sc.Apparmor, sc.ApparmorProfile = apparmor, apparmorName

	switch {
	case sc.Privileged:
		// The runtime masks nothing in a privileged container.
	case eff.ProcMount != nil && *eff.ProcMount == v1.UnmaskedProcMount:
		sc.MaskedPaths, sc.ReadonlyPaths = []string{}, []string{}
	default:
		sc.MaskedPaths = defaultMaskedPaths()
		sc.ReadonlyPaths = defaultReadonlyPaths()
	}
	return sc, nil
}

// toRuntimeCapabilities converts added and dropped capabilities (nil stays nil).
func toRuntimeCapabilities(c *v1.Capabilities) *runtimeapi.Capability {
	if c == nil {
		return nil
	}
	out := &runtimeapi.Capability{
		AddCapabilities:  make([]string, 0, len(c.Add)),
		DropCapabilities: make([]string, 0, len(c.Drop)),
	}
	for _, a := range c.Add {
		out.AddCapabilities = append(out.AddCapabilities, string(a))
	}
	for _, d := range c.Drop {
		out.DropCapabilities = append(out.DropCapabilities, string(d))
	}
	return out
}

// seccompProfile maps the effective seccomp profile; a Localhost profile is
// relative to root (<root-dir>/seccomp). Without one the container is
// Unconfined, or RuntimeDefault with seccompDefault, as upstream.
func seccompProfile(root string, p *v1.SeccompProfile, fallbackRuntimeDefault bool) (*runtimeapi.SecurityProfile, error) {
	if p == nil {
		if fallbackRuntimeDefault {
			return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, nil
		}
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, nil
	}
	switch p.Type {
	case v1.SeccompProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, nil
	case v1.SeccompProfileTypeUnconfined:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, nil
	case v1.SeccompProfileTypeLocalhost:
		if p.LocalhostProfile == nil || *p.LocalhostProfile == "" {
			return nil, errors.New("localhostProfile must be set if seccompProfile type is Localhost")
		}
		return &runtimeapi.SecurityProfile{
			ProfileType:  runtimeapi.SecurityProfile_Localhost,
			LocalhostRef: filepath.Join(root, *p.LocalhostProfile),
		}, nil
	}
	return nil, fmt.Errorf("unknown seccomp profile type %q", p.Type)
}

// appArmorProfile maps the effective AppArmor profile, or else the deprecated
// per-container annotation, to CRI's profile and deprecated profile name. Neither set:
// nil, so the runtime applies its default.
func appArmorProfile(pod *v1.Pod, containerName string, p *v1.AppArmorProfile) (*runtimeapi.SecurityProfile, string, error) {
	if p == nil {
		ann, ok := pod.Annotations[appArmorAnnotationPrefix+containerName]
		if !ok {
			return nil, "", nil
		}
		switch {
		case ann == "runtime/default":
			p = &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}
		case ann == "unconfined":
			p = &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeUnconfined}
		case strings.HasPrefix(ann, "localhost/"):
			name := strings.TrimPrefix(ann, "localhost/")
			p = &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost, LocalhostProfile: &name}
		default:
			return nil, "", fmt.Errorf("invalid AppArmor annotation %q", ann)
		}
	}
	switch p.Type {
	case v1.AppArmorProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, "runtime/default", nil
	case v1.AppArmorProfileTypeUnconfined:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, "unconfined", nil
	case v1.AppArmorProfileTypeLocalhost:
		if p.LocalhostProfile == nil || *p.LocalhostProfile == "" {
			return nil, "", errors.New("localhostProfile must be set if appArmorProfile type is Localhost")
		}
		name := *p.LocalhostProfile
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: name}, "localhost/" + name, nil
	}
	return nil, "", fmt.Errorf("unknown AppArmor profile type %q", p.Type)
}

// selinuxEnabled reports whether SELinux is enabled on the host (selinuxfs is mounted),
// so that volume relabelling is requested only where it means something.
func selinuxEnabled() bool {
	var st unix.Statfs_t
	if err := unix.Statfs("/sys/fs/selinux", &st); err != nil {
		return false
	}
	return uint32(st.Type) == selinuxMagic
}
