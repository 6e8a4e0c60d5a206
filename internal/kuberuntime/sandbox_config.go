package kuberuntime

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const (
	// defaultPodLogsDir is where pod log directories live unless configured otherwise.
	defaultPodLogsDir = "/var/log/pods"
	// maxHostnameLen is the kernel's limit on a hostname (HOST_NAME_MAX).
	maxHostnameLen = 64
)

// generatePodSandboxConfig builds the CRI sandbox config of a pod, as the upstream
// kubelet does: metadata, labels and annotations, hostname (unless the pod uses the
// host network), DNS, log directory, port mappings and the Linux part (cgroup parent,
// sysctls, namespaces and the pod-level security context).
func (m *Manager) generatePodSandboxConfig(pod *v1.Pod, attempt uint32) (*runtimeapi.PodSandboxConfig, error) {
	if pod.Spec.HostUsers != nil && !*pod.Spec.HostUsers {
		// Never run such a pod in the host's user namespace.
		return nil, errHostUsersFalse
	}
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name:      pod.Name,
			Namespace: pod.Namespace,
			Uid:       string(pod.UID),
			Attempt:   attempt,
		},
		Labels:       newPodLabels(pod),
		Annotations:  newPodAnnotations(pod),
		LogDirectory: buildPodLogsDirectory(m.logsRoot(), pod.Namespace, pod.Name, pod.UID),
	}

	dns, err := m.helper.GetPodDNS(pod)
	if err != nil {
		return nil, fmt.Errorf("pod DNS config: %w", err)
	}
	cfg.DnsConfig = dns

	if !pod.Spec.HostNetwork {
		hostname, err := m.podHostname(pod)
		if err != nil {
			return nil, err
		}
		cfg.Hostname = hostname
	}

	cfg.PortMappings = m.makePortMappings(pod)
	cfg.Linux = m.generatePodSandboxLinuxConfig(pod)
	return cfg, nil
}

// errHostUsersFalse refuses pods asking for a user namespace of their own:
// this kubelet sets up no user namespace mappings, and Docker Engine 20.10
// can only remap every container of the daemon at once.
var errHostUsersFalse = errors.New("can't set `spec.hostUsers: false`: user namespaces are not supported by this kubelet " +
	"(Docker Engine 20.10 cannot give a pod a user namespace of its own)")

// podHostname returns the hostname of a pod's sandbox: the pod's hostname, or its
// FQDN when spec.setHostnameAsFQDN is set and the pod has a domain.
func (m *Manager) podHostname(pod *v1.Pod) (string, error) {
	hostname, domain, err := m.helper.GeneratePodHostNameAndDomain(pod)
	if err != nil {
		return "", fmt.Errorf("pod hostname: %w", err)
	}
	if pod.Spec.SetHostnameAsFQDN == nil || !*pod.Spec.SetHostnameAsFQDN || domain == "" {
		return hostname, nil
	}
	fqdn := hostname + "." + domain
	if len(fqdn) > maxHostnameLen {
		return "", fmt.Errorf("failed to construct FQDN from pod hostname and cluster domain, FQDN %s is too long (%d characters is the max, %d characters requested)", fqdn, maxHostnameLen, len(fqdn))
	}
	return fqdn, nil
}

// makePortMappings lists the declared ports of the pod's containers (with or without a
// host port; the runtime publishes only those with one). A port whose name (or, when
// unnamed, whose family, protocol, host IP and ports) repeats within one container is
// listed once.
func (m *Manager) makePortMappings(pod *v1.Pod) []*runtimeapi.PortMapping {
	var out []*runtimeapi.PortMapping
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		seen := map[string]bool{}
		for _, p := range c.Ports {
			key := p.Name
			if key == "" {
				key = fmt.Sprintf("%s-%s-%s:%d:%d", ipFamily(p.HostIP), p.Protocol, p.HostIP, p.ContainerPort, p.HostPort)
			}
			if seen[key] {
				m.logger.Info("port defined more than once in a container, ignoring the repeat",
					zap.String("pod", pod.Namespace+"/"+pod.Name), zap.String("container", c.Name), zap.String("port", key))
				continue
			}
			seen[key] = true
			out = append(out, &runtimeapi.PortMapping{
				Protocol:      m.toRuntimeProtocol(p.Protocol),
				ContainerPort: p.ContainerPort,
				HostPort:      p.HostPort,
				HostIp:        p.HostIP,
			})
		}
	}
	return out
}

// ipFamily names the address family of a host IP ("any" when unset).
func ipFamily(hostIP string) string {
	if hostIP == "" {
		return "any"
	}
	if ip := net.ParseIP(hostIP); ip != nil && ip.To4() == nil {
		return "v6"
	}
	return "v4"
}

// toRuntimeProtocol maps an API protocol to CRI's; unknown ones become TCP.
func (m *Manager) toRuntimeProtocol(p v1.Protocol) runtimeapi.Protocol {
	switch p {
	case v1.ProtocolTCP, "":
		return runtimeapi.Protocol_TCP
	case v1.ProtocolUDP:
		return runtimeapi.Protocol_UDP
	case v1.ProtocolSCTP:
		return runtimeapi.Protocol_SCTP
	}
	m.logger.Warn("unknown port protocol, using TCP", zap.String("protocol", string(p)))
	return runtimeapi.Protocol_TCP
}

// generatePodSandboxLinuxConfig builds the Linux part of a sandbox config. As upstream,
// the sandbox runs with the runtime's default seccomp profile whatever the pod asks
// for (the pause process needs nothing more), and is privileged when any container of
// the pod is.
func (m *Manager) generatePodSandboxLinuxConfig(pod *v1.Pod) *runtimeapi.LinuxPodSandboxConfig {
	lc := &runtimeapi.LinuxPodSandboxConfig{
		CgroupParent: m.helper.GetPodCgroupParent(pod),
		SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: namespacesForPod(pod),
			Privileged:       hasPrivilegedContainer(pod),
			Seccomp:          &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault},
		},
		Sysctls: map[string]string{},
	}
	applyDefaultSysctls(lc.Sysctls, m.defaultSysctls, pod)
	sc := pod.Spec.SecurityContext
	if sc != nil {
		for _, s := range sc.Sysctls {
			lc.Sysctls[s.Name] = s.Value
		}
		if sc.RunAsUser != nil {
			lc.SecurityContext.RunAsUser = &runtimeapi.Int64Value{Value: *sc.RunAsUser}
		}
		if sc.RunAsGroup != nil {
			lc.SecurityContext.RunAsGroup = &runtimeapi.Int64Value{Value: *sc.RunAsGroup}
		}
		lc.SecurityContext.SelinuxOptions = toRuntimeSELinuxOption(sc.SELinuxOptions)
	}
	lc.SecurityContext.SupplementalGroups = m.podSupplementalGroups(pod)
	return lc
}

// podSupplementalGroups returns the pod's fsGroup, the kubelet's extra groups for the
// pod (e.g. volume GIDs) and the pod's supplementalGroups, in that order.
func (m *Manager) podSupplementalGroups(pod *v1.Pod) []int64 {
	var groups []int64
	sc := pod.Spec.SecurityContext
	if sc != nil && sc.FSGroup != nil {
		groups = append(groups, *sc.FSGroup)
	}
	groups = append(groups, m.helper.GetExtraSupplementalGroupsForPod(pod)...)
	if sc != nil {
		groups = append(groups, sc.SupplementalGroups...)
	}
	return groups
}

// namespacesForPod returns the namespace modes of a pod's sandbox and containers:
// network and IPC are the node's with hostNetwork/hostIPC and the pod's otherwise; the
// PID namespace is the node's with hostPID, the pod's with shareProcessNamespace, and
// each container's own otherwise.
func namespacesForPod(pod *v1.Pod) *runtimeapi.NamespaceOption {
	ns := &runtimeapi.NamespaceOption{
		Network: runtimeapi.NamespaceMode_POD,
		Ipc:     runtimeapi.NamespaceMode_POD,
		Pid:     runtimeapi.NamespaceMode_CONTAINER,
	}
	if pod.Spec.HostNetwork {
		ns.Network = runtimeapi.NamespaceMode_NODE
	}
	if pod.Spec.HostIPC {
		ns.Ipc = runtimeapi.NamespaceMode_NODE
	}
	switch {
	case pod.Spec.HostPID:
		ns.Pid = runtimeapi.NamespaceMode_NODE
	case pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace:
		ns.Pid = runtimeapi.NamespaceMode_POD
	}
	return ns
}

// hasPrivilegedContainer reports whether any (init, regular or ephemeral) container of
// the pod asks to be privileged.
func hasPrivilegedContainer(pod *v1.Pod) bool {
	privileged := func(sc *v1.SecurityContext) bool {
		return sc != nil && sc.Privileged != nil && *sc.Privileged
	}
	for i := range pod.Spec.InitContainers {
		if privileged(pod.Spec.InitContainers[i].SecurityContext) {
			return true
		}
	}
	for i := range pod.Spec.Containers {
		if privileged(pod.Spec.Containers[i].SecurityContext) {
			return true
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		if privileged(pod.Spec.EphemeralContainers[i].SecurityContext) {
			return true
		}
	}
	return false
}

// toRuntimeSELinuxOption converts API SELinux options (nil stays nil).
func toRuntimeSELinuxOption(o *v1.SELinuxOptions) *runtimeapi.SELinuxOption {
	if o == nil {
		return nil
	}
	return &runtimeapi.SELinuxOption{User: o.User, Role: o.Role, Type: o.Type, Level: o.Level}
}

// buildPodLogsDirectory returns the log directory of a pod:
// <podLogsDir>/<namespace>_<name>_<uid>.
func buildPodLogsDirectory(podLogsDir, namespace, name string, uid k8stypes.UID) string {
	return filepath.Join(podLogsDir, strings.Join([]string{namespace, name, string(uid)}, "_"))
}

// buildContainerLogsPath returns a container's log path relative to its pod's log
// directory: <container>/<restartCount>.log.
func buildContainerLogsPath(containerName string, restartCount int) string {
	return filepath.Join(containerName, strconv.Itoa(restartCount)+".log")
}

// logsRoot returns the configured pod logs directory, or the default.
func (m *Manager) logsRoot() string {
	if m.podLogsDir == "" {
		return defaultPodLogsDir
	}
	return m.podLogsDir
}
