package dockershim

import (
	"fmt"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
)

// applyContainerLinux sets a container's namespaces (joined from its sandbox), security
// context, resources and devices.
func (s *Service) applyContainerLinux(cfg *runtimeapi.ContainerConfig, sbCfg *runtimeapi.PodSandboxConfig, sb *libdocker.ContainerJSON, cc *libdocker.ContainerConfig, hc *libdocker.HostConfig) error {
	lin := cfg.GetLinux()
	sc := lin.GetSecurityContext()
	if err := joinSandboxNamespaces(sc.GetNamespaceOptions(), sb, hc); err != nil {
		return err
	}
	// The sandbox's own parent (as Docker has it): a container runs in its
	// pod's cgroup whatever the request's sandbox config says.
	hc.CgroupParent = sb.HostConfig.CgroupParent
	opts, err := securityOpts(securityInput{
		field: "config.linux.security_context", seccomp: sc.GetSeccomp(), seccompPath: sc.GetSeccompProfilePath(),
		apparmor: sc.GetApparmor(), aaName: sc.GetApparmorProfile(), selinux: sc.GetSelinuxOptions(),
		noNewPrivs: sc.GetNoNewPrivs(), privileged: sc.GetPrivileged(),
	})
	if err != nil {
		return err
	}
	hc.SecurityOpt = opts
	hc.Privileged = sc.GetPrivileged()
	hc.ReadonlyRootfs = sc.GetReadonlyRootfs()
	hc.CapAdd = capNames(sc.GetCapabilities().GetAddCapabilities())
	hc.CapDrop = capNames(sc.GetCapabilities().GetDropCapabilities())
	if len(sc.GetCapabilities().GetAddAmbientCapabilities()) > 0 {
		return unimplemented("config.linux.security_context.capabilities.add_ambient_capabilities: ambient capabilities are not supported by the Docker engine")
	}
	user, err := dockerUser("config.linux.security_context", sc.GetRunAsUser(), sc.GetRunAsUsername(), sc.GetRunAsGroup())
	if err != nil {
		return err
	}
	cc.User = user
	hc.GroupAdd = groupAdd(sc.GetSupplementalGroups())
	if !sc.GetPrivileged() {
		hc.MaskedPaths = sc.GetMaskedPaths()
		hc.ReadonlyPaths = sc.GetReadonlyPaths()
	}
	applyResources(lin.GetResources(), s.host.minOOMScoreAdj, hc)
	s.host.fitCaps(hc)
	for _, d := range cfg.Devices {
		perms := d.Permissions
		if perms == "" {
			perms = "rwm"
		}
		hc.Devices = append(hc.Devices, libdocker.DeviceMapping{PathOnHost: d.HostPath, PathInContainer: d.ContainerPath, CgroupPermissions: perms})
	}
	return s.cdiDevices(cfg.GetCDIDevices(), hc)
}

// cdiDevices asks Docker for the container's CDI devices (a device
// request of driver "cdi", Docker 25+ with features.cdi: the engine applies
// the specs of its CDI spec directories). An engine without CDI refuses
// them, naming the first.
func (s *Service) cdiDevices(devices []*runtimeapi.CDIDevice, hc *libdocker.HostConfig) error {
	if len(devices) == 0 {
		return nil
	}
	names := make([]string, 0, len(devices))
	for i, d := range devices {
		if !validCDIName(d.GetName()) {
			return invalidArg(fmt.Sprintf("config.cdi_devices[%d].name", i), "%q is not a fully qualified CDI device name (vendor.com/class=name)", d.GetName())
		}
		names = append(names, d.GetName())
	}
	if len(s.host.cdiSpecDirs) == 0 {
		return invalidArg("config.cdi_devices[0].name", "%q: Docker Engine %s has no CDI (Docker 25 or later, with \"features\": {\"cdi\": true} in daemon.json)",
			names[0], s.host.dockerVersion)
	}
	hc.DeviceRequests = append(hc.DeviceRequests, libdocker.DeviceRequest{Driver: "cdi", DeviceIDs: names})
	return nil
}

// joinSandboxNamespaces points the container's network, IPC, UTS and PID namespaces at
// its sandbox (or the host, as the sandbox does).
func joinSandboxNamespaces(ns *runtimeapi.NamespaceOption, sb *libdocker.ContainerJSON, hc *libdocker.HostConfig) error {
	sbNet := sb.HostConfig.NetworkMode
	if sbNet == "host" {
		hc.NetworkMode = "host"
		hc.UTSMode = "host"
	} else {
		hc.NetworkMode = libdocker.NetworkMode("container:" + sb.ID)
	}
	if sb.HostConfig.IpcMode == "host" {
		hc.IpcMode = "host"
	} else {
		hc.IpcMode = libdocker.IpcMode("container:" + sb.ID)
	}
	switch ns.GetPid() {
	case runtimeapi.NamespaceMode_NODE:
		hc.PidMode = "host"
	case runtimeapi.NamespaceMode_POD:
		hc.PidMode = libdocker.PidMode("container:" + sb.ID)
	case runtimeapi.NamespaceMode_TARGET:
		if ns.GetTargetId() == "" {
			return invalidArg("config.linux.security_context.namespace_options.target_id", "must be set with pid mode TARGET")
		}
		hc.PidMode = libdocker.PidMode("container:" + ns.GetTargetId())
	}
	return nil
}

// capNames normalises capability names for Docker ("CAP_X" or "ALL").
func capNames(caps []string) []string {
	out := make([]string, 0, len(caps))
	for _, c := range caps {
		c = strings.ToUpper(c)
		if c != "ALL" && !strings.HasPrefix(c, "CAP_") {
			c = "CAP_" + c
		}
		out = append(out, c)
	}
	return out
}

// applyResources maps CRI resources onto Docker's, clamping the OOM score to what the
// host allows. Without a swap limit, swap is disabled (memory+swap = memory).
func applyResources(r *runtimeapi.LinuxContainerResources, minOOM int, hc *libdocker.HostConfig) {
	if r == nil {
		return
	}
	hc.CPUShares = r.CpuShares
	hc.CPUQuota = r.CpuQuota
	hc.CPUPeriod = r.CpuPeriod
	hc.CpusetCpus = r.CpusetCpus
	hc.CpusetMems = r.CpusetMems
	hc.Memory = r.MemoryLimitInBytes
	if r.MemoryLimitInBytes > 0 {
		hc.MemorySwap = r.MemoryLimitInBytes
		if r.MemorySwapLimitInBytes > r.MemoryLimitInBytes {
			hc.MemorySwap = r.MemorySwapLimitInBytes
		}
	}
	hc.OomScoreAdj = clampOOMScoreAdj(r.OomScoreAdj, minOOM)
}

// updateConfigFor maps CRI resources onto a Docker update.
func updateConfigFor(r *runtimeapi.LinuxContainerResources) libdocker.UpdateConfig {
	var hc libdocker.HostConfig
	applyResources(r, -1000, &hc)
	return libdocker.UpdateConfig{Resources: libdocker.Resources{
		CPUShares: hc.CPUShares, CPUQuota: hc.CPUQuota, CPUPeriod: hc.CPUPeriod,
		CpusetCpus: hc.CpusetCpus, CpusetMems: hc.CpusetMems, Memory: hc.Memory, MemorySwap: hc.MemorySwap,
	}}
}
