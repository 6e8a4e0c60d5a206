package dockershim

import (
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
	"github.com/kubelet-dockershim/kubelet/internal/dockershim/network"
)

// applySandboxLinux sets the pause container's namespaces, hostname, cgroup parent,
// security options, sysctls and OOM score.
func (s *Service) applySandboxLinux(cfg *runtimeapi.PodSandboxConfig, cc *libdocker.ContainerConfig, hc *libdocker.HostConfig) error {
	lin := cfg.GetLinux()
	sc := lin.GetSecurityContext()
	ns := sc.GetNamespaceOptions()
	hostNet := ns.GetNetwork() == runtimeapi.NamespaceMode_NODE
	if hostNet {
		hc.NetworkMode = "host"
	} else {
		hc.NetworkMode = "none"
		cc.Hostname = cfg.Hostname
	}
	hc.IpcMode = "shareable"
	if ns.GetIpc() == runtimeapi.NamespaceMode_NODE {
		hc.IpcMode = "host"
	}
	if ns.GetPid() == runtimeapi.NamespaceMode_NODE {
		hc.PidMode = "host"
	}
	hc.CgroupParent = s.dockerCgroupParent(lin.GetCgroupParent())
	sysctls, err := sysctlsFor("config.linux.sysctls", lin.GetSysctls(), hostNet)
	if err != nil {
		return err
	}
	hc.Sysctls = sysctls
	opts, err := securityOpts(securityInput{
		field: "config.linux.security_context", seccomp: sc.GetSeccomp(), seccompPath: sc.GetSeccompProfilePath(),
		apparmor: sc.GetApparmor(), selinux: sc.GetSelinuxOptions(), privileged: sc.GetPrivileged(),
	})
	if err != nil {
		return err
	}
	hc.SecurityOpt = opts
	hc.Privileged = sc.GetPrivileged()
	hc.ReadonlyRootfs = sc.GetReadonlyRootfs()
	user, err := dockerUser("config.linux.security_context", sc.GetRunAsUser(), "", sc.GetRunAsGroup())
	if err != nil {
		return err
	}
	cc.User = user
	hc.GroupAdd = groupAdd(sc.GetSupplementalGroups())
	hc.OomScoreAdj = clampOOMScoreAdj(sandboxOOMScoreAdj, s.host.minOOMScoreAdj)
	s.host.fitCaps(hc)
	if r := lin.GetResources(); r != nil {
		hc.CPUShares, hc.CPUQuota, hc.CPUPeriod = r.CpuShares, r.CpuQuota, r.CpuPeriod
		hc.Memory = r.MemoryLimitInBytes
	}
	return nil
}

// Pod bandwidth annotations, as the kubelet's CNI network plugin read them.
const (
	ingressBandwidthAnnotation = "kubernetes.io/ingress-bandwidth"
	egressBandwidthAnnotation  = "kubernetes.io/egress-bandwidth"
	// bandwidthBurst is the burst the kubelet used (unlimited burst is not allowed).
	bandwidthBurst = 2147483647
)

// bandwidthFromAnnotations returns the bandwidth capability from pod annotations, or nil.
// Bad values are ignored (the API server validates them for real pods).
func bandwidthFromAnnotations(a map[string]string) *network.Bandwidth {
	in, okIn := parseBandwidth(a[ingressBandwidthAnnotation])
	out, okOut := parseBandwidth(a[egressBandwidthAnnotation])
	if !okIn && !okOut {
		return nil
	}
	bw := &network.Bandwidth{}
	if okIn {
		bw.IngressRate, bw.IngressBurst = in, bandwidthBurst
	}
	if okOut {
		bw.EgressRate, bw.EgressBurst = out, bandwidthBurst
	}
	return bw
}

func parseBandwidth(v string) (int64, bool) {
	if v == "" {
		return 0, false
	}
	q, err := resource.ParseQuantity(v)
	if err != nil || q.Value() <= 0 {
		return 0, false
	}
	return q.Value(), true
}
